"""The one benchmark environment (`epochbench env`) through its Python client
(epochfs_bench.bench_env.ThrottledSource), as tools/bench/train-bench uses it.

Pass criterion: the dataset is copied byte for byte under the source's root; a reader in the
throttled cgroup reading an 8 MiB file with the page cache dropped takes at least 3/4 of
size / rate, and the cgroup counts at least the file's bytes; leaving the cgroup works; a bad
request is an error and the environment stays usable; after close() the loop device is
detached, the source unmounted, the cgroup, the image and the scratch directory gone. A bad
rate fails at once and leaves nothing either. Case mounts (epochfs; bindfs where installed) over
the source serve its bytes, their daemon is in the throttled cgroup, and one left mounted is
unmounted by close(). Skips (77) when not root or no loop device or
block-I/O controller is usable.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path[:0] = [os.path.join(HERE, d) for d in ("../../tools/python", "../../tools/bench/python")]

import itest_support  # noqa: E402
from epochfs_bench.bench_env import ThrottledSource, find_binary, is_mounted  # noqa: E402

RATE = 4 << 20


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (loop devices, mounts, cgroups)"
    try:
        find_binary("epochbench")
    except RuntimeError as e:
        return str(e)
    if not os.path.exists("/dev/loop-control"):
        return "no loop devices (/dev/loop-control)"
    v2 = ""
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        with open("/sys/fs/cgroup/cgroup.controllers") as f:
            v2 = f.read()
    if not os.path.exists("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device") and "io" not in v2.split():
        return "no block-I/O controller (cgroup v1 blkio or v2 io)"
    return None


def loop_backing(device):
    r = subprocess.run(["losetup", "--noheadings", "--output", "BACK-FILE", device],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


class BenchEnvTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="test-bench-env-")
        self.data = os.path.join(self.tmp.name, "data")
        os.makedirs(os.path.join(self.data, "class0"))
        self.blob = os.urandom(8 << 20)
        with open(os.path.join(self.data, "class0", "big.bin"), "wb") as f:
            f.write(self.blob)
        with open(os.path.join(self.data, "small.txt"), "w") as f:
            f.write("hello\n")

    def tearDown(self):
        self.tmp.cleanup()

    def test_throttled_reads_and_teardown(self):
        ts = ThrottledSource(self.data, RATE)
        try:
            self.assertEqual(ts.data, os.path.join(ts.root, "train"))
            self.assertTrue(is_mounted(ts.root))
            self.assertEqual(loop_backing(ts.loop), ts.image)
            self.assertEqual(ts.bps, RATE)
            with open(os.path.join(ts.data, "small.txt")) as f:
                self.assertEqual(f.read(), "hello\n")
            with self.assertRaises(RuntimeError):
                ts.env.request("no-such-command")
            ts.cg.add(os.getpid())
            try:
                ts.drop_caches()
                before = ts.cg.read_bytes()
                t0 = time.monotonic()
                with open(os.path.join(ts.data, "class0", "big.bin"), "rb") as f:
                    got = f.read()
                elapsed = time.monotonic() - t0
                read = ts.cg.read_bytes() - before
            finally:
                ts.cg.remove(os.getpid())
            self.assertEqual(got, self.blob)
            self.assertGreaterEqual(read, len(self.blob))
            self.assertGreaterEqual(elapsed, 0.75 * len(self.blob) / RATE,
                                    "8 MiB at 4 MiB/s read in %.2f s: not throttled" % elapsed)
            with open("/proc/self/cgroup") as f:
                self.assertNotIn(os.path.basename(ts.cg.path), f.read())
            root, loop, image, cgroup = ts.root, ts.loop, ts.image, ts.cg.path
        finally:
            ts.close()
        self.assertFalse(is_mounted(root))
        self.assertEqual(loop_backing(loop), "")
        self.assertFalse(os.path.exists(image))
        self.assertFalse(os.path.exists(cgroup))
        self.assertFalse(os.path.exists(os.path.dirname(root)))  # the scratch directory

    def test_case_mounts(self):
        cases = ["epochfs"] + (["bindfs"] if shutil.which("bindfs") else [])
        try:
            find_binary("epochfs")
        except RuntimeError:
            cases.remove("epochfs")
        if not cases:
            self.skipTest("neither epochfs nor bindfs here")
        ts = ThrottledSource(self.data, 64 << 20)
        try:
            with self.assertRaisesRegex(RuntimeError, "no such case"):
                ts.env.request("mount nfs")
            for case in cases:
                m = ts.mount(case)
                with open("/proc/%d/cgroup" % m.pid) as f:
                    self.assertIn(os.path.basename(ts.cg.path), f.read(), case)
                with open(os.path.join(m.dir, "train", "class0", "big.bin"), "rb") as f:
                    self.assertEqual(f.read(), self.blob, case)
                m.close()
                self.assertFalse(is_mounted(m.dir), case)
            left = ts.mount(cases[0])
        finally:
            ts.close()
        self.assertFalse(is_mounted(left.dir))
        self.assertFalse(is_mounted(ts.root))

    def test_bad_rate_fails_cleanly(self):
        loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
        with self.assertRaisesRegex(RuntimeError, "rate"):
            ThrottledSource(self.data, 0)
        self.assertEqual(subprocess.run(["losetup", "-a"], capture_output=True,
                                        text=True).stdout, loops)


if __name__ == "__main__":
    itest_support.main(skip_reason())
