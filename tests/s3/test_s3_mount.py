"""epochfs over S3 (rgw): an ImageFolder tree and two large objects, mounted and read for three
epochs, with rgw counting the requests.

Uploads with boto3 (a thread pool) under the prefix `ds/` of a fresh bucket: 2,000 objects
train/<class>/<name>.JPEG (20 classes x 100, log-normal sizes around 110 KB, seeded; a class and a
few names with spaces, `+`, `%`, `&`, `=`, `~` and non-ASCII) and shards/shard-000.bin (64 MiB)
and shards/shard-001.bin (160 MiB), multipart; plus three keys just outside the prefix (`ds`,
`ds-sibling/...`, `outside/...`). Then mounts `s3://BUCKET/ds` (credentials from
AWS_SHARED_CREDENTIALS_FILE + AWS_PROFILE, --ram-cache 1G, daemonized, supervised) and checks:

  1. the mount and a walk + lstat of everything do no GET (rgw's counter); the tree is exactly
     the keys under the prefix (names, sizes), files 0444, directories 0555, uid = ours;
  2. epoch 1, 4 reader threads in a seeded shuffled order: every object's SHA-256 equals boto3's
     GET's, the large ones also read in 1 MiB and odd-sized pieces at random offsets (chunk
     boundaries, end of file); GETs <= 1.02 x objects + the large objects' 1 MiB chunks, and
     bytes fetched <= 1.02 x the data;
  3. epochs 2 and 3 (page cache dropped before each): same bytes, zero GETs;
  4. torchvision ImageFolder + DataLoader (num_workers=2, a loader returning each file's length
     and hash): the classes and samples the key listing implies, every sample's bytes;
  5. `epochctl refresh` after a new object, two same-size overwrites (one object, and the 64 MiB
     one partly cached) and a delete: the overwritten ones serve their new bytes, the deleted one
     is gone and the new object is listed with its bytes, with no page-cache drop after the
     refresh; before the refresh a read is old, new or an error, never a mix of both versions.

Environment: EPOCHFS_RGW_DIR (the fixture), EPOCHFS_BIN_DIR (set by CTest). Root (drop_caches).
Exit 77 (skipped) without the fixture, boto3, torch, /dev/fuse or an epochfs with --s3-endpoint.
"""

import concurrent.futures
import hashlib
import json
import math
import os
import random
import shutil
import stat
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import s3_mount_support as sup  # noqa: E402
from s3_mount_support import MiB  # noqa: E402

SEED = 20261206
PREFIX = "ds"
CLASSES = ["n%08d" % i for i in range(19)] + ["z kläss+ü 日本"]
PER_CLASS = 100
MEAN = 110_000
SIGMA = 0.5
LARGE = {"shards/shard-000.bin": 64 * MiB, "shards/shard-001.bin": 160 * MiB}
SPECIAL_NAMES = {(3, 0): "img with space.JPEG", (7, 1): "a+b=c&d.JPEG",
                 (11, 2): "café_日本語.JPEG", (13, 3): "100% sure~ (1).JPEG"}
OUTSIDE = ["ds", "ds-sibling/x.JPEG", "outside/y.JPEG"]
READERS = 4
RAM_CACHE = "1G"
CHUNK = MiB


def small_body(i, size):
    import numpy as np
    return np.random.default_rng([SEED, i]).bytes(size)


def large_body(key, size, version=0):
    import numpy as np
    return np.random.default_rng([SEED, 1000 + version, sorted(LARGE).index(key)]).bytes(size)


def small_objects():
    """{relative key: (index, size)} of the ImageFolder part, seeded."""
    rng = random.Random(SEED)
    mu = math.log(MEAN) - SIGMA * SIGMA / 2
    out = {}
    i = 0
    for c, cls in enumerate(CLASSES):
        for k in range(PER_CLASS):
            name = SPECIAL_NAMES.get((c, k), "%s_%05d.JPEG" % (cls.split()[0], k))
            size = max(1, min(int(rng.lognormvariate(mu, SIGMA)), 4 * MiB))
            out["train/%s/%s" % (cls, name)] = (i, size)
            i += 1
    return out


def raw_digest(path):
    """An ImageFolder loader: the file's path, length and SHA-256 (no decoding)."""
    with open(path, "rb") as f:
        data = f.read()
    return path, len(data), hashlib.sha256(data).hexdigest()


def collate_list(batch):
    return batch


class S3Mount(sup.MountTest):
    @classmethod
    def setUpClass(cls):
        sup.scrub_environ()
        cls.fx = sup.Fixture()
        cls.s3 = cls.fx.client()
        cls.bucket = sup.unique_bucket("mount")
        cls.tmp = sup.make_tmp("mount")
        cls.mnt = os.path.join(cls.tmp, "mnt")
        cls.log = os.path.join(cls.tmp, "epochfs.log")
        os.makedirs(cls.mnt)
        cls.epoch1_done = False
        cls.added = None
        try:
            cls.upload()
            cls.mount()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def upload(cls):
        s3 = cls.s3
        s3.create_bucket(Bucket=cls.bucket)
        t0 = time.monotonic()
        smalls = small_objects()
        items = {PREFIX + "/" + rel: (lambda i=i, n=n: small_body(i, n))
                 for rel, (i, n) in smalls.items()}
        for k in OUTSIDE:
            items[k] = b"outside the prefix: " + k.encode()
        done = sup.upload(s3, cls.bucket, items)
        cls.large = {}
        for key, size in LARGE.items():
            data = large_body(key, size)
            sup.upload_large(s3, cls.bucket, PREFIX + "/" + key, data)
            cls.large[key] = data
            done[PREFIX + "/" + key] = (size, hashlib.sha256(data).hexdigest())
        cls.expected = {k[len(PREFIX) + 1:]: v for k, v in done.items()
                        if k.startswith(PREFIX + "/")}
        total = sum(n for n, _ in cls.expected.values())
        print("uploaded %d objects (%d under %s/), %.1f MB, in %.1f s"
              % (len(done), len(cls.expected), PREFIX, total / 1e6, time.monotonic() - t0))
        cls.total_bytes = total

        # What a plain S3 client reads back: the listing and every object's bytes.
        t0 = time.monotonic()
        listed = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=cls.bucket,
                                                                 Prefix=PREFIX + "/"):
            for o in page.get("Contents", []):
                listed[o["Key"][len(PREFIX) + 1:]] = o["Size"]
        assert listed == {k: n for k, (n, _) in cls.expected.items()}, "listing differs"

        def get(rel):
            body = s3.get_object(Bucket=cls.bucket, Key=PREFIX + "/" + rel)["Body"]
            h, n = hashlib.sha256(), 0
            for b in iter(lambda: body.read(MiB), b""):
                h.update(b)
                n += len(b)
            return rel, (n, h.hexdigest())

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            got = dict(pool.map(get, sorted(cls.expected)))
        assert got == cls.expected, "boto3 GETs differ from what was uploaded"
        print("boto3 listed and GET all %d objects in %.1f s"
              % (len(got), time.monotonic() - t0))

    @classmethod
    def mount(cls):
        cls.source = "s3://%s/%s" % (cls.bucket, PREFIX)
        cls.env = sup.daemon_env(AWS_SHARED_CREDENTIALS_FILE=cls.fx.credentials_file,
                                 AWS_PROFILE=cls.fx.profile)
        cls.lists_before = cls.fx.lists()
        cls.before_mount = cls.fx.counters()
        secs = sup.mount(cls.source, cls.mnt,
                         ["--ram-cache", RAM_CACHE, "--s3-endpoint", cls.fx.endpoint,
                          "--s3-region", cls.fx.region, "--log-level", "info"],
                         cls.env, log_file=cls.log)
        cls.after_mount = cls.fx.counters()
        print("mounted %s in %.2f s" % (cls.source, secs))

    @classmethod
    def tearDownClass(cls):
        cls.s3.close()
        ok = sup.unmount(cls.mnt)
        if not ok:
            print("could not unmount %s" % cls.mnt, file=sys.stderr)
            return  # never delete through a live mount
        if os.environ.get("EPOCHFS_S3_KEEP_LOG"):
            print("log kept in %s" % cls.log)
            return
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def settled_counters(self, quiet=1.0, limit=15.0):
        """rgw's counters once they have not moved for `quiet` seconds (requests the prefetcher
        may still have in flight land in the window they belong to)."""
        last = self.fx.counters()
        deadline = time.monotonic() + limit
        while True:
            time.sleep(quiet)
            now = self.fx.counters()
            if now == last or time.monotonic() > deadline:
                return now
            last = now

    # ---- 1: the mount and a full walk download nothing; the tree and its attributes --------
    def test_1_mount_and_walk_download_nothing(self):
        self.assertEqual(self.after_mount["get"] - self.before_mount["get"], 0,
                         "GETs (or HEADs) of objects during the mount")
        lists = self.fx.lists() - self.lists_before
        print("the mount listed with %d ListObjects requests (rgw's usage log)" % lists)
        self.assertGreaterEqual(lists, 1)

        files, dirs = {}, set()
        uid = os.getuid()
        root = os.lstat(self.mnt)
        self.assertTrue(stat.S_ISDIR(root.st_mode))
        self.assertEqual(stat.S_IMODE(root.st_mode), 0o555, "mount root mode %o" % root.st_mode)
        self.assertEqual(root.st_uid, uid)
        bad_modes = []
        for d, subdirs, names in os.walk(self.mnt):
            for s in subdirs:
                p = os.path.join(d, s)
                st = os.lstat(p)
                dirs.add(os.path.relpath(p, self.mnt))
                if not stat.S_ISDIR(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o555 \
                        or st.st_uid != uid:
                    bad_modes.append((p, oct(st.st_mode), st.st_uid))
            for n in names:
                p = os.path.join(d, n)
                st = os.lstat(p)
                files[os.path.relpath(p, self.mnt)] = st.st_size
                if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o444 \
                        or st.st_uid != uid:
                    bad_modes.append((p, oct(st.st_mode), st.st_uid))
        after_walk = self.fx.counters()
        self.assertEqual(after_walk["get"] - self.before_mount["get"], 0,
                         "GETs (or HEADs) of objects during ls -R / stat")
        want_dirs = set()
        for rel in self.expected:
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                want_dirs.add("/".join(parts[:i]))
        want = {k: n for k, (n, _) in self.expected.items()}
        self.assertEqual(sorted(set(files) - set(want)), [], "files not under the prefix")
        self.assertEqual(sorted(set(want) - set(files)), [], "objects missing from the mount")
        self.assertEqual(files, want, "sizes differ")
        self.assertEqual(dirs, want_dirs)
        self.assertEqual(bad_modes, [], "want files 0444, directories 0555, uid %d" % uid)

        st = sup.status(self.mnt)
        self.assertTrue(str(st.get("source", "")).startswith("s3://%s/%s" % (self.bucket, PREFIX)),
                        st.get("source"))
        self.assertIn("s3", st, "status --json has no s3 object")

    # ---- 2: epoch 1: the bytes, and how many GETs ------------------------------------------
    def read_epoch(self, seed, pieces):
        order = sorted(self.expected)
        random.Random(seed).shuffle(order)

        def task(rel):
            path = os.path.join(self.mnt, rel)
            bad = self.check_pieces(rel, seed) if pieces and rel in self.large else []
            try:
                got = sup.sha256_file(path)
            except OSError as e:
                return rel, ("error", str(e)), bad
            return rel, got, bad

        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(READERS) as pool:
            results = list(pool.map(task, order))
        secs = time.monotonic() - t0
        wrong = [(rel, got, self.expected[rel]) for rel, got, _ in results
                 if tuple(got) != self.expected[rel]]
        bad_pieces = [b for _, _, bs in results for b in bs]
        if wrong or bad_pieces:
            self.fail_with_log("epoch (seed %d): %d files with wrong bytes, e.g. %s; %d pieces "
                               "wrong, e.g. %s" % (seed, len(wrong), wrong[:3], len(bad_pieces),
                                                   bad_pieces[:5]))
        return secs

    def check_pieces(self, rel, seed):
        """Reads `rel` (a large object) in 1 MiB and odd-sized pieces at random offsets;
        returns the pieces whose bytes differ."""
        data = self.large[rel]
        size = len(data)
        rng = random.Random("%d:%s" % (seed, rel))
        chunks = size // CHUNK
        pieces = []
        for _ in range(8):
            pieces.append((rng.randrange(chunks) * CHUNK, MiB))           # aligned 1 MiB
            pieces.append((rng.randrange(size - MiB), MiB))                # unaligned 1 MiB
        for n in (1, 7, 4095, 4096, 4097, 65537, 777777, MiB + 1, 3 * MiB + 12345):
            pieces.append((rng.randrange(size - n), n))
            k = rng.randrange(1, chunks)
            pieces.append((k * CHUNK - min(n, CHUNK) // 2 - 1, n))          # across a boundary
        pieces += [(size - 100, 1000), (size - 1, 1), (size, 10), (size + 12345, 10),
                   (0, 1), (CHUNK - 1, 2)]
        bad = []
        fd = os.open(os.path.join(self.mnt, rel), os.O_RDONLY)
        try:
            for off, n in pieces:
                got = sup.pread_full(fd, n, off)
                if got != data[off:off + n]:
                    bad.append((rel, off, n, len(got)))
        finally:
            os.close(fd)
        return bad

    def test_2_epoch1_bytes_and_gets(self):
        c0 = self.fx.counters()
        secs = self.read_epoch(SEED + 1, pieces=True)
        c1 = self.settled_counters()
        gets = c1["get"] - c0["get"]
        got_bytes = c1["get_b"] - c0["get_b"] + gets  # rgw counts one byte less per GET
        n = len(self.expected)
        large_chunks = sum(math.ceil(s / CHUNK) for s in LARGE.values())
        bound = 1.02 * n + large_chunks
        print("epoch 1: %d files, %.1f MB in %.1f s (%.0f MB/s); rgw: %d GETs (bound %.0f), "
              "%.1f MB sent, %d failed requests"
              % (n, self.total_bytes / 1e6, secs, self.total_bytes / 1e6 / secs, gets, bound,
                 got_bytes / 1e6, c1["failed_req"] - c0["failed_req"]))
        if gets > bound:
            self.fail_with_log("epoch 1 made %d GETs, more than %.0f (1.02 x %d objects + %d "
                               "chunks of the large ones)" % (gets, bound, n, large_chunks))
        self.assertGreaterEqual(gets, n - len(LARGE), "fewer GETs than objects: rgw's counter?")
        self.assertLessEqual(got_bytes, 1.02 * self.total_bytes,
                             "epoch 1 fetched %d bytes for %d bytes of data"
                             % (got_bytes, self.total_bytes))
        type(self).epoch1_done = True

    # ---- 3: epochs 2 and 3 come from the cache ---------------------------------------------
    def test_3_epochs_2_3_no_gets(self):
        if not self.epoch1_done:
            self.skipTest("epoch 1 did not complete")
        for epoch in (2, 3):
            sup.drop_caches(1)
            c0 = self.fx.counters()
            secs = self.read_epoch(SEED + epoch, pieces=False)
            c1 = self.settled_counters()
            print("epoch %d: %.1f s; rgw: %d GETs, %d requests"
                  % (epoch, secs, c1["get"] - c0["get"], c1["req"] - c0["req"]))
            if c1["get"] != c0["get"]:
                self.fail_with_log("epoch %d made %d GETs with a %s RAM cache for %.0f MB"
                                   % (epoch, c1["get"] - c0["get"], RAM_CACHE,
                                      self.total_bytes / 1e6))

    # ---- 4: torchvision ImageFolder + DataLoader, unchanged ---------------------------------
    def test_4_torchvision_imagefolder(self):
        import torch
        from torchvision.datasets import ImageFolder
        root = os.path.join(self.mnt, "train")
        train = {rel[len("train/"):]: v for rel, v in self.expected.items()
                 if rel.startswith("train/")}
        want_classes = sorted({k.split("/")[0] for k in train})
        self.assertEqual(want_classes, sorted(CLASSES))
        want_samples = [(os.path.join(root, c, name), i) for i, c in enumerate(want_classes)
                        for name in sorted(k.split("/", 1)[1] for k in train
                                           if k.split("/")[0] == c)]
        c0 = self.fx.counters()
        ds = ImageFolder(root, loader=raw_digest)
        self.assertEqual(ds.classes, want_classes)
        self.assertEqual(ds.class_to_idx, {c: i for i, c in enumerate(want_classes)})
        self.assertEqual(ds.samples, want_samples)
        loader = torch.utils.data.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2,
                                             collate_fn=collate_list,
                                             generator=torch.Generator().manual_seed(SEED))
        seen, wrong = {}, []
        for batch in loader:
            for (path, n, h), label in batch:
                rel = os.path.relpath(path, root)
                seen[rel] = seen.get(rel, 0) + 1
                if (n, h) != train[rel] or label != want_classes.index(rel.split("/")[0]):
                    wrong.append((rel, n, label))
        self.assertEqual(wrong, [])
        self.assertEqual(seen, {k: 1 for k in train})
        print("torchvision: %d classes, %d samples; rgw GETs meanwhile: %d"
              % (len(ds.classes), len(ds), self.fx.counters()["get"] - c0["get"]))

    # ---- 5: refresh: overwritten (never mixed), deleted, added ---------------------------------
    def piece_hashes(self, rel, timeout=120):
        """The SHA-256 of each 1 MiB piece of `rel` read through the mount in a child process,
        or ("error", message)."""
        code = ("import hashlib,json,sys\nout=[]\ntry:\n f=open(sys.argv[1],'rb',buffering=0)\n"
                " while True:\n  b=f.read(%d)\n  if not b: break\n"
                "  out.append(hashlib.sha256(b).hexdigest())\n print(json.dumps(out))\n"
                "except OSError as e:\n print(json.dumps(['error',str(e)]))\n" % MiB)
        import subprocess
        try:
            r = subprocess.run([sys.executable, "-c", code, os.path.join(self.mnt, rel)],
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail_with_log("reading %s through the mount took over %d s" % (rel, timeout))
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        if out[:1] == ["error"]:
            return tuple(out)
        return out

    @staticmethod
    def pieces_of(data):
        return [hashlib.sha256(data[i:i + MiB]).hexdigest() for i in range(0, len(data), MiB)]

    def classify(self, got, old, new):
        if isinstance(got, tuple):
            return "error"
        if got == old:
            return "old"
        if got == new:
            return "new"
        return "mixed: pieces old %s, new %s, neither %s" % (
            [i for i, h in enumerate(got) if i < len(old) and h == old[i]][:20],
            [i for i, h in enumerate(got) if i < len(new) and h == new[i]][:20],
            [i for i, h in enumerate(got) if (i >= len(old) or h != old[i])
             and (i >= len(new) or h != new[i])][:20])

    def test_5_refresh(self):
        s3 = self.s3
        key = lambda rel: PREFIX + "/" + rel  # noqa: E731
        smalls = small_objects()
        small_rel = sorted(k for k in smalls if k.startswith("train/n00000005/"))[0]
        gone_rel = sorted(k for k in smalls if k.startswith("train/n00000009/"))[-1]
        large_rel = "shards/shard-000.bin"
        added_rel = "train/n00000000/zz added after mount+1.JPEG"

        # The 64 MiB object partly cached: evict it, read every other chunk.
        r = sup.epochctl(self.mnt, "evict", large_rel, "--json")
        print("evict: %s" % r.stdout.strip())
        sup.drop_caches(1)
        old_large = self.large[large_rel]
        fd = os.open(os.path.join(self.mnt, large_rel), os.O_RDONLY)
        try:
            for k in range(0, len(old_large) // CHUNK, 2):
                off = k * CHUNK + 1000
                self.assertEqual(sup.pread_full(fd, 4096, off), old_large[off:off + 4096])
        finally:
            os.close(fd)

        # The changes: same-size overwrites (new ETags), a new object, a delete.
        old_small = small_body(*smalls[small_rel])
        new_small = bytes(b ^ 0x5A for b in old_small)
        new_large = large_body(large_rel, len(old_large), version=1)
        added = small_body(99999, 54321)
        s3.put_object(Bucket=self.bucket, Key=key(small_rel), Body=new_small)
        sup.upload_large(s3, self.bucket, key(large_rel), new_large, part=8 * MiB)
        s3.put_object(Bucket=self.bucket, Key=key(added_rel), Body=added)
        s3.delete_object(Bucket=self.bucket, Key=key(gone_rel))

        old_pieces, new_pieces = self.pieces_of(old_large), self.pieces_of(new_large)
        sup.drop_caches(1)
        before = {
            small_rel: self.classify(self.piece_hashes(small_rel), self.pieces_of(old_small),
                                     self.pieces_of(new_small)),
            large_rel: self.classify(self.piece_hashes(large_rel), old_pieces, new_pieces),
        }
        print("before the refresh: %s; the new object %s" % (
            before, "visible" if os.path.exists(os.path.join(self.mnt, added_rel))
            else "not visible"))
        for rel, what in before.items():
            if what.startswith("mixed"):
                self.fail_with_log("%s after its overwrite, before the refresh: %s"
                                   % (rel, what))

        r = sup.epochctl(self.mnt, "refresh", "--json", check=False)
        print("refresh: exit %d: %s %s" % (r.returncode, r.stdout.strip(), r.stderr.strip()))
        self.assertEqual(r.returncode, 0, r.stderr)
        # No page-cache drop: the refresh has the kernel drop what it holds of changed entries.
        problems = []
        added_path = os.path.join(self.mnt, added_rel)
        if os.path.basename(added_rel) not in os.listdir(os.path.dirname(added_path)):
            problems.append("the added object is not listed")
        got = sup.read_child(added_path)
        if (got.get("len"), got.get("sha256")) != sup.digest(added):
            problems.append("the added object reads %s" % got)
        if os.path.basename(gone_rel) in os.listdir(os.path.join(self.mnt,
                                                                 os.path.dirname(gone_rel))):
            problems.append("the deleted object is still listed")
        if os.path.exists(os.path.join(self.mnt, gone_rel)):
            problems.append("the deleted object still opens")
        after = {
            small_rel: self.classify(self.piece_hashes(small_rel), self.pieces_of(old_small),
                                     self.pieces_of(new_small)),
            large_rel: self.classify(self.piece_hashes(large_rel), old_pieces, new_pieces),
        }
        print("after the refresh: %s" % after)
        for rel, what in after.items():
            if what != "new":
                problems.append("%s after the refresh: %s (want the new bytes)" % (rel, what))
        if after[large_rel] == "new":
            self.large[large_rel] = new_large
            bad = self.check_pieces(large_rel, SEED + 5)
            if bad:
                problems.append("pieces of %s after the refresh: %s" % (large_rel, bad[:5]))
        if problems:
            self.fail_with_log("; ".join(problems))

if __name__ == "__main__":
    sup.main(sup.skip_reason(torch=True, root=True))
