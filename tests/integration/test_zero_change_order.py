"""Zero-change mode: `--order torch-distributed:seed=S,world=W,ranks=...` makes the
daemon follow an unchanged DistributedSampler over ImageFolder: it detects the epoch
from the first reads and prefetches the rest, so nearly all later reads are hits.

Pass criterion: the detected epoch equals the epoch the loader ran, for two epochs in a
row (the second detected from re-reads), and after detection >= 90% of the daemon's
planned reads are served from the cache (prefetched), with the kernel page cache dropped.

Per mount (ZeroChangeOrderPerMountTest): two mounts of one dataset, each with its own
`--order` (another seed and world), share one daemon; two jobs read in lock step, each
in its own sampler's order and epoch, then once more after the worker is killed. Pass
criterion: one daemon pid (one new one after the kill); each mount's `mount.torch_epoch`
is its own job's epoch, three epochs in a row; each job's streams carry that mount's
job and >= 90% of its planned reads are hits.
"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import unittest

BIN = os.environ.get("EPOCHFS_BIN_DIR", os.path.join(os.path.dirname(__file__), "../../build/bin"))
sys.path[:0] = [os.path.join(os.path.dirname(__file__), d) for d in ("../../tools/python", "../../tools/bench/python")]


def stats(mnt):
    out = subprocess.run([f"{BIN}/epochctl", "stats", mnt, "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1")


def make_image_folder(test, src):
    """7 classes, nested dirs, non-image files; 211 samples (not divisible by world=2)."""
    rnd = random.Random(3)
    n = 0
    for c in range(7):
        for k in range(31 if c < 6 else 25):
            sub = os.path.join(src, f"class{c}", "nested" if k % 5 == 0 else "")
            os.makedirs(sub, exist_ok=True)
            with open(os.path.join(sub, f"img{k:03d}.jpg"), "wb") as f:
                f.write(rnd.randbytes(rnd.randint(2000, 30000)))
            n += 1
        with open(os.path.join(src, f"class{c}", "notes.txt"), "w") as f:
            f.write("not an image")
    test.assertEqual(n, 211)


def needs_torch(test):
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError:
        test.skipTest("torch/torchvision not installed")


def sampler_orders(dataset, world, seed, epoch):
    from torch.utils.data import DistributedSampler
    orders = []
    for rank in range(world):
        s = DistributedSampler(dataset, num_replicas=world, rank=rank, seed=seed, shuffle=True)
        s.set_epoch(epoch)
        orders.append(list(s))
    return orders


@unittest.skipUnless(os.path.exists("/dev/fuse") and os.geteuid() == 0, "needs /dev/fuse and root")
class ZeroChangeOrderTest(unittest.TestCase):
    def setUp(self):
        needs_torch(self)
        self.tmp = tempfile.mkdtemp(prefix="epochfs-zc-")
        self.src = os.path.join(self.tmp, "src")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.makedirs(self.mnt)
        make_image_folder(self, self.src)
        subprocess.run([f"{BIN}/epochfs", self.src, self.mnt, "--prefetch-window", "64",
                        "--order", "torch-distributed:seed=11,world=2,ranks=0+1"], check=True)

    def tearDown(self):
        subprocess.run(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", self.tmp])

    def read_epoch(self, dataset, epoch):
        orders = sampler_orders(dataset, 2, 11, epoch)
        # Both ranks read in lock step, as two trainers on this node would.
        for i in range(len(orders[0])):
            for rank in (0, 1):
                path = dataset.samples[orders[rank][i]][0]
                with open(path, "rb") as f:
                    f.read()

    def test_follows_two_epochs(self):
        import torchvision
        dataset = torchvision.datasets.ImageFolder(self.mnt, loader=lambda p: None)
        self.assertEqual(len(dataset), 211)
        for epoch in (4, 5):
            drop_caches()
            before = stats(self.mnt)
            self.read_epoch(dataset, epoch)
            time.sleep(0.2)
            after = stats(self.mnt)
            self.assertEqual(after["prefetch"]["torch_epoch"], epoch)
            hits = sum(s["hits"] for s in after["prefetch"]["streams"])
            stalls = sum(s["stalls"] for s in after["prefetch"]["streams"])
            self.assertEqual({s["epoch"] for s in after["prefetch"]["streams"]}, {epoch})
            self.assertGreaterEqual(hits / max(1, hits + stalls), 0.9,
                                    f"epoch {epoch}: hits {hits} stalls {stalls}")
            del before


@unittest.skipUnless(os.path.exists("/dev/fuse") and os.geteuid() == 0, "needs /dev/fuse and root")
class ZeroChangeOrderPerMountTest(unittest.TestCase):
    # Job A: 2 ranks, seed 11; job B: 1 rank, seed 5 (their own sampler settings).
    JOBS = ({"seed": 11, "world": 2, "order": "torch-distributed:seed=11,world=2,ranks=0+1"},
            {"seed": 5, "world": 1, "order": "torch-distributed:seed=5,world=1,ranks=0"})

    def setUp(self):
        needs_torch(self)
        self.tmp = tempfile.mkdtemp(prefix="epochfs-zcm-")
        self.src = os.path.join(self.tmp, "src")
        make_image_folder(self, self.src)
        self.mnts = []
        for i, job in enumerate(self.JOBS):
            mnt = os.path.join(self.tmp, f"mnt{i}")
            os.makedirs(mnt)
            self.mnts.append(mnt)
            subprocess.run([f"{BIN}/epochfs", self.src, mnt, "--prefetch-window", "64",
                            "--order", job["order"]], check=True)

    def tearDown(self):
        for mnt in reversed(self.mnts):
            subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", self.tmp])

    def worker_pids(self):
        out = []
        for m in self.mnts:
            r = subprocess.run([f"{BIN}/epochctl", "status", m, "--json"], capture_output=True,
                               text=True)
            out.append(json.loads(r.stdout)["pid"] if r.returncode == 0 else None)
        return out

    def test_each_mount_follows_its_own_order(self):
        import torchvision
        pids = self.worker_pids()
        self.assertEqual(pids[0], pids[1], "the second mount joined the first")
        datasets = [torchvision.datasets.ImageFolder(m, loader=lambda p: None) for m in self.mnts]
        # The third pair after the worker is killed: the supervisor's next
        # worker follows each mount's own order again.
        for epochs in ((4, 9), (5, 10), (6, 11)):
            if epochs[0] == 6:
                os.kill(pids[0], signal.SIGKILL)
                deadline = time.time() + 30
                while time.time() < deadline:
                    now = self.worker_pids()
                    if None not in now and pids[0] not in now:
                        break
                    time.sleep(0.1)
                self.assertEqual(len(set(self.worker_pids()) - {None, pids[0]}), 1,
                                 "one new worker serves both mounts")
            drop_caches()
            # Each job's reads, its ranks in lock step; the two jobs interleaved.
            reads = []
            for job, ds, epoch in zip(self.JOBS, datasets, epochs):
                orders = sampler_orders(ds, job["world"], job["seed"], epoch)
                reads.append([ds.samples[o[i]][0] for i in range(len(orders[0])) for o in orders])
            for i in range(max(len(r) for r in reads)):
                for r in reads:
                    if i < len(r):
                        with open(r[i], "rb") as f:
                            f.read()
            time.sleep(0.2)
            for mnt, epoch in zip(self.mnts, epochs):
                st = stats(mnt)
                self.assertEqual(st["mount"]["torch_epoch"], epoch, mnt)
                mine = [s for s in st["prefetch"]["streams"] if s["job"] == st["mount"]["job"]]
                self.assertEqual({s["epoch"] for s in mine}, {epoch}, mnt)
                hits = sum(s["hits"] for s in mine)
                stalls = sum(s["stalls"] for s in mine)
                self.assertGreaterEqual(hits / max(1, hits + stalls), 0.9,
                                        f"{mnt} epoch {epoch}: hits {hits} stalls {stalls}")


if __name__ == "__main__":
    unittest.main()
