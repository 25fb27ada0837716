"""Unit tests for tools/python/epochfs: the admin client's order registration and
ShuffleAwareSampler, against a fake admin server (a Unix socket thread) and a fake mount (a
temporary directory carrying the admin xattr, or a patched xattr lookup where the file system
has no user xattrs). No daemon, no FUSE.

Run: cd tests/unit/python && /usr/bin/python3 -m unittest -v
Sampler tests skip where torch is missing; admin tests need only the standard library.
"""

import base64
import errno
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import unittest
import warnings

import checkout_paths  # noqa: F401,E402  (this checkout's tools/python and tools/bench/python)

from epochfs import admin  # noqa: E402

try:
    import torch  # noqa: F401
    from torch.utils.data import DataLoader, DistributedSampler

    from epochfs.torch import EpochfsWarning, ShuffleAwareSampler

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

CAP = 64 * 1024


class FakeAdminServer:
    """Serves the admin framing on a Unix socket; records every message per connection.

    Replies {"ok": true} to everything, {"ok": true, "entries": N} to order_commit (N = entries
    appended on that connection), and {"ok": false, "error": ...} to `fail_cmd` and to unknown
    commands. Records a frame over the cap in `oversize` and drops that connection.
    """

    KNOWN = {"status", "order_begin", "order_append", "order_commit", "order_clear"}

    def __init__(self, path, fail_cmd=None):
        self.path = path
        self.fail_cmd = fail_cmd
        self.connections = []  # one list of (message dict, payload length) per connection
        self.oversize = []
        self.errors = []
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._sock.listen(8)
        self._sock.settimeout(0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def messages(self, conn=-1):
        with self._lock:
            return [m for m, _ in self.connections[conn]]

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self._handle(conn)
                except Exception as e:  # recorded, asserted empty by the tests
                    self.errors.append(repr(e))

    @staticmethod
    def _recv(conn, n):
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def _handle(self, conn):
        with self._lock:
            self.connections.append([])
            record = self.connections[-1]
        appended = 0
        while True:
            hdr = self._recv(conn, 4)
            if hdr is None:
                return
            (n,) = struct.unpack("<I", hdr)
            if n > CAP:
                self.oversize.append(n)
                return
            payload = self._recv(conn, n)
            msg = json.loads(payload.decode("utf-8"))  # strict UTF-8, like the daemon
            with self._lock:
                record.append((msg, n))
            cmd = msg.get("cmd")
            if cmd == self.fail_cmd:
                reply = {"ok": False, "error": "injected failure on %s" % cmd}
            elif cmd not in self.KNOWN:
                reply = {"ok": False, "error": "unknown command '%s'" % cmd}
            elif cmd == "order_append":
                appended += len(msg["entries"])
                reply = {"ok": True}
            elif cmd == "order_commit":
                reply = {"ok": True, "entries": appended}
            else:
                reply = {"ok": True}
            data = json.dumps(reply).encode()
            conn.sendall(struct.pack("<I", len(data)) + data)


class FakeMountTestCase(unittest.TestCase):
    """A temp dir `self.mount` advertising `self.server`'s socket in the admin xattr."""

    fail_cmd = None
    force_patched_lookup = False  # exercise the no-user-xattr fallback even where they work

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="epochfs-pytest-")
        self.mount = os.path.join(self.tmp, "mnt")
        os.mkdir(self.mount)
        self.server = FakeAdminServer(os.path.join(self.tmp, "admin.sock"), self.fail_cmd)
        self._patched = None
        try:
            if self.force_patched_lookup:
                raise OSError(errno.ENOTSUP, "forced")
            os.setxattr(self.mount, admin.ADMIN_XATTR, os.fsencode(self.server.path))
        except OSError as e:
            if e.errno not in (errno.ENOTSUP, errno.EPERM, errno.EOPNOTSUPP):
                raise
            # No user xattrs here: answer the lookup for the fake mount only.
            self._patched = admin._get_admin_xattr
            mount, sock = os.path.abspath(self.mount), os.fsencode(self.server.path)

            def fake(path):
                if os.path.abspath(os.fsdecode(path)) == mount:
                    return sock
                raise OSError(errno.ENODATA, "No data available")

            admin._get_admin_xattr = fake

    def tearDown(self):
        if self._patched is not None:
            admin._get_admin_xattr = self._patched
        self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.assertEqual(self.server.errors, [])
        self.assertEqual(self.server.oversize, [])

    def assertOrderStream(self, msgs, epoch, rank, start, entries):
        """begin, appends (each within the cap), commit; the appends carry `entries`."""
        self.assertEqual(msgs[0], {"cmd": "order_begin", "epoch": epoch, "rank": rank, "start": start})
        self.assertEqual(msgs[-1], {"cmd": "order_commit"})
        got = []
        for m in msgs[1:-1]:
            self.assertEqual(set(m), {"cmd", "entries"})
            self.assertEqual(m["cmd"], "order_append")
            got.extend(m["entries"])
        self.assertEqual(got, entries)


class AdminTest(FakeMountTestCase):
    def test_call_returns_reply_and_raises_on_error(self):
        with admin.AdminClient(self.mount) as c:
            self.assertEqual(c.call({"cmd": "status"}), {"ok": True})
            with self.assertRaisesRegex(admin.EpochfsError, "unknown command 'nope'"):
                c.call({"cmd": "nope"})
            self.assertEqual(c.call({"cmd": "status"}), {"ok": True})  # connection still usable

    def test_not_a_mount(self):
        with self.assertRaisesRegex(admin.EpochfsError, "not an epochfs mount"):
            admin.AdminClient(self.tmp)
        with self.assertRaisesRegex(admin.EpochfsError, "no such directory"):
            admin.AdminClient(os.path.join(self.tmp, "missing"))

    def test_register_order_sequence_on_one_connection(self):
        paths = ["cat/1.jpg", "dog/2.png", "caf\u00e9/\u732b.jpg"]
        reply = admin.register_order(self.mount, paths, epoch=4, rank=2, start=7)
        self.assertEqual(reply, {"ok": True, "entries": 3})
        self.assertEqual(len(self.server.connections), 1)
        msgs = self.server.messages()
        self.assertEqual(len(msgs), 3)
        self.assertOrderStream(msgs, 4, 2, 7, paths)

    def test_empty_order(self):
        self.assertEqual(admin.register_order(self.mount, [], epoch=0)["entries"], 0)
        self.assertEqual(self.server.messages(), [
            {"cmd": "order_begin", "epoch": 0, "rank": 0, "start": 0}, {"cmd": "order_commit"}])

    def test_200k_entries_are_split_under_the_cap(self):
        paths = ["n%05d/n%05d_%07d.JPEG" % (i % 1000, i % 1000, i) for i in range(200000)]
        reply = admin.register_order(self.mount, paths, epoch=1)
        self.assertEqual(reply["entries"], 200000)
        self.assertEqual(len(self.server.connections), 1)
        sizes = [n for _, n in self.server.connections[0]]
        self.assertTrue(all(n <= CAP for n in sizes), max(sizes))
        appends = sizes[1:-1]
        self.assertGreater(len(appends), 50)
        # Batches are packed: every append but the last is within one entry of the cap.
        self.assertTrue(all(n > CAP - 64 for n in appends[:-1]), min(appends[:-1]))
        self.assertOrderStream(self.server.messages(), 1, 0, 0, paths)

    def test_non_utf8_names_travel_as_b64(self):
        raw = b"cls/\xff\xfe name.jpg"
        paths = [raw, os.fsdecode(raw), "ok.jpg", b"caf\xc3\xa9.jpg"]
        admin.register_order(self.mount, paths, epoch=0)
        b64 = {"b64": base64.b64encode(raw).decode()}
        self.assertOrderStream(self.server.messages(), 0, 0, 0, [b64, b64, "ok.jpg", "caf\u00e9.jpg"])

    def test_entry_too_large_raises(self):
        with self.assertRaisesRegex(admin.EpochfsError, "does not fit"):
            admin.register_order(self.mount, ["x" * CAP], epoch=0)

    def test_error_reply_raises_with_message(self):
        self.server.fail_cmd = "order_append"
        with self.assertRaisesRegex(admin.EpochfsError, "injected failure on order_append"):
            admin.register_order(self.mount, ["a.jpg"], epoch=0)
        self.assertNotIn({"cmd": "order_commit"}, self.server.messages())

    def test_clear_order(self):
        admin.clear_order(self.mount)
        self.assertEqual(self.server.messages(), [{"cmd": "order_clear"}])


class FakeFolder:
    """What the sampler sees of an ImageFolder: .samples of (path, class)."""

    def __init__(self, paths, attr="samples"):
        setattr(self, attr, [(p, 0) for p in paths])
        self._n = len(paths)

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        return i


@unittest.skipUnless(HAVE_TORCH, "torch is not importable by this interpreter")
class SamplerIndicesTest(unittest.TestCase):
    def test_indices_identical_to_distributed_sampler(self):
        cases = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EpochfsWarning)  # range has no paths to register
            for n in (0, 1, 2, 5, 17, 100, 1001):
                for world in (1, 2, 3, 4, 7, 13):
                    for seed in (0, 1, 12345, 2**32 + 1):
                        for drop_last in (False, True):
                            for shuffle in (True, False):
                                for rank in range(world):
                                    ref = DistributedSampler(range(n), world, rank, shuffle, seed, drop_last)
                                    ours = ShuffleAwareSampler(range(n), world, rank, shuffle, seed, drop_last)
                                    self.assertEqual(len(ours), len(ref))
                                    for epoch in (0, 1, 7):
                                        ref.set_epoch(epoch)
                                        ours.set_epoch(epoch)
                                        self.assertEqual(list(ours), list(ref), (n, world, rank, seed, epoch))
                                        cases += 1
        self.assertGreater(cases, 5000)

    def test_defaults_to_one_replica_without_process_group(self):
        import torch.distributed as dist

        self.assertFalse(dist.is_available() and dist.is_initialized())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EpochfsWarning)
            s = ShuffleAwareSampler(range(10))
            self.assertEqual((s.num_replicas, s.rank), (1, 0))
            self.assertEqual(sorted(s), list(range(10)))
            s = ShuffleAwareSampler(range(10), num_replicas=4)
            self.assertEqual((s.num_replicas, s.rank), (4, 0))
        with self.assertRaises(ValueError):
            ShuffleAwareSampler(range(10), num_replicas=2, rank=2)

    def test_no_paths_warns_once(self):
        s = ShuffleAwareSampler(range(10), 2, 1)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for epoch in range(3):
                s.set_epoch(epoch)
                list(s)
        self.assertEqual([x.category for x in w], [EpochfsWarning])
        self.assertIn("path_of", str(w[0].message))


@unittest.skipUnless(HAVE_TORCH, "torch is not importable by this interpreter")
class SamplerRegistrationTest(FakeMountTestCase):
    def paths(self, n, sub="train"):
        return [os.path.join(self.mount, sub, "c%d" % (i % 3), "img%04d.jpg" % i) for i in range(n)]

    def assertRegistered(self, conn, ds_paths, world, rank, seed, epoch, drop_last=False):
        ref = DistributedSampler(range(len(ds_paths)), world, rank, True, seed, drop_last)
        ref.set_epoch(epoch)
        rel = [os.path.relpath(ds_paths[i], self.mount) for i in ref]
        msgs = [m for m, _ in self.server.connections[conn]]
        self.assertOrderStream(msgs, epoch, rank, 0, rel)
        return list(ref)

    def test_each_epoch_registers_this_ranks_paths_in_order(self):
        ds_paths = self.paths(101)
        s = ShuffleAwareSampler(FakeFolder(ds_paths), num_replicas=3, rank=1, seed=5)
        with warnings.catch_warnings():
            warnings.simplefilter("error", EpochfsWarning)
            for epoch in (0, 1, 2):
                s.set_epoch(epoch)
                got = list(s)
                self.assertEqual(len(self.server.connections), epoch + 1)
                self.assertEqual(got, self.assertRegistered(epoch, ds_paths, 3, 1, 5, epoch))
                self.assertEqual(s.last_registration, {"ok": True, "entries": 34})

    def test_mountpoint_found_above_dataset_root_and_paths_are_relative_to_it(self):
        ds_paths = self.paths(20, sub="deep/er/train")
        s = ShuffleAwareSampler(FakeFolder(ds_paths), seed=3)
        list(s)
        msgs = self.server.messages()
        self.assertTrue(all(e.startswith("deep/er/train/c") for e in msgs[1]["entries"]))
        self.assertRegistered(0, ds_paths, 1, 0, 3, 0)

    def test_explicit_mountpoint_imgs_and_path_of(self):
        ds_paths = self.paths(30)
        list(ShuffleAwareSampler(FakeFolder(ds_paths, attr="imgs"), seed=1, mountpoint=self.mount))
        self.assertRegistered(0, ds_paths, 1, 0, 1, 0)
        list(ShuffleAwareSampler(range(30), seed=1, path_of=lambda i: ds_paths[i]))
        self.assertRegistered(1, ds_paths, 1, 0, 1, 0)

    # Pass: LocalityAwareSampler with a mountpoint registers, every epoch, exactly the indices
    # it yields (this rank's locality-aware share, in its order), as paths relative to the
    # mount; without a mountpoint (nor a mount_placement placement) it registers nothing.
    # Fail: no registration, another rank's share, or DistributedSampler's share registered.
    def test_locality_sampler_registers_its_own_assignment(self):
        from epochfs.locality import LocalityAwareSampler
        ds_paths = self.paths(64)
        owners = [i % 2 for i in range(64)]  # two nodes, one rank each
        s = LocalityAwareSampler(FakeFolder(ds_paths), 2, 1, seed=4, global_batch_size=8,
                                 placement=owners, node_of_rank=[0, 1], mountpoint=self.mount)
        with warnings.catch_warnings():
            warnings.simplefilter("error", EpochfsWarning)
            for epoch in (0, 1):
                s.set_epoch(epoch)
                got = list(s)
                self.assertEqual(got, s.plan()[0][1])
                self.assertGreater(sum(owners[i] == 1 for i in got), 24)  # mostly its node's own
                rel = [os.path.relpath(ds_paths[i], self.mount) for i in got]
                self.assertOrderStream([m for m, _ in self.server.connections[epoch]], epoch, 1, 0, rel)
                self.assertEqual(s.last_registration, {"ok": True, "entries": 32})
        quiet = LocalityAwareSampler(FakeFolder(ds_paths), 2, 1, seed=4, global_batch_size=8,
                                     placement=owners, node_of_rank=[0, 1])
        list(quiet)
        self.assertEqual(len(self.server.connections), 2)
        self.assertIsNone(quiet.last_registration)

    def test_relative_and_unnormalized_dataset_paths(self):
        cwd = os.getcwd()
        try:
            os.chdir(self.tmp)
            ds_paths = [os.path.join("mnt", "x", "..", "train", ".hidden", "%d.jpg" % i) for i in range(8)]
            list(ShuffleAwareSampler(FakeFolder(ds_paths), seed=9))
            ref = DistributedSampler(range(8), 1, 0, True, 9)
            self.assertOrderStream(self.server.messages(), 0, 0, 0,
                                   ["train/.hidden/%d.jpg" % i for i in ref])
        finally:
            os.chdir(cwd)

    def test_non_utf8_path_travels_as_b64(self):
        name = b"cls/\xe9t\xe9.jpg"
        ds_paths = [os.fsdecode(os.fsencode(self.mount) + b"/" + name)]
        list(ShuffleAwareSampler(FakeFolder(ds_paths)))
        self.assertOrderStream(self.server.messages(), 0, 0, 0, [{"b64": base64.b64encode(name).decode()}])

    def test_works_under_a_dataloader(self):
        ds_paths = self.paths(50)
        s = ShuffleAwareSampler(FakeFolder(ds_paths), num_replicas=2, rank=0, seed=11)
        loader = DataLoader(FakeFolder(ds_paths), sampler=s, batch_size=None)
        for epoch in (0, 1):
            s.set_epoch(epoch)
            got = [int(x) for x in loader]
            self.assertEqual(got, self.assertRegistered(epoch, ds_paths, 2, 0, 11, epoch))
        self.assertEqual(len(self.server.connections), 2)


@unittest.skipUnless(HAVE_TORCH, "torch is not importable by this interpreter")
class PatchedLookupTest(FakeMountTestCase):
    force_patched_lookup = True

    def test_registration_through_patched_lookup(self):
        ds_paths = [os.path.join(self.mount, "train", "c", "%d.jpg" % i) for i in range(12)]
        s = ShuffleAwareSampler(FakeFolder(ds_paths), num_replicas=2, rank=1, seed=4)
        ref = DistributedSampler(range(12), 2, 1, True, 4)
        self.assertEqual(list(s), list(ref))
        self.assertOrderStream(self.server.messages(), 0, 1, 0, ["train/c/%d.jpg" % i for i in ref])


@unittest.skipUnless(HAVE_TORCH, "torch is not importable by this interpreter")
class SamplerFailureTest(FakeMountTestCase):
    fail_cmd = "order_commit"

    def test_registration_failure_warns_once_and_training_goes_on(self):
        ds_paths = [os.path.join(self.mount, "c", "%d.jpg" % i) for i in range(40)]
        s = ShuffleAwareSampler(FakeFolder(ds_paths), num_replicas=2, rank=1, seed=2)
        ref = DistributedSampler(range(40), 2, 1, True, 2)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for epoch in range(3):
                s.set_epoch(epoch)
                ref.set_epoch(epoch)
                self.assertEqual(list(s), list(ref))
        self.assertEqual([x.category for x in w], [EpochfsWarning])
        self.assertIn("injected failure on order_commit", str(w[0].message))
        self.assertEqual(len(self.server.connections), 3)  # it still tries every epoch
        self.assertIsNone(s.last_registration)

    def test_not_on_a_mount_warns_once(self):
        outside = [os.path.join(self.tmp, "elsewhere", "%d.jpg" % i) for i in range(5)]
        s = ShuffleAwareSampler(FakeFolder(outside))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertEqual(sorted(s), list(range(5)))
            self.assertEqual(sorted(s), list(range(5)))
        self.assertEqual([x.category for x in w], [EpochfsWarning])
        self.assertIn("not on an epochfs mount", str(w[0].message))
        self.assertEqual(self.server.connections, [])

    def test_dead_daemon_warns(self):
        self.server.stop()
        s = ShuffleAwareSampler(FakeFolder([os.path.join(self.mount, "a.jpg")]))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertEqual(list(s), [0])
        self.assertEqual([x.category for x in w], [EpochfsWarning])
        self.assertIn("daemon not responding", str(w[0].message))


if __name__ == "__main__":
    unittest.main()
