"""Zero-change mode: `--order torch-distributed:seed=S,world=W,ranks=...` makes the
daemon follow an unchanged DistributedSampler over ImageFolder: it detects the epoch
from the first reads and prefetches the rest, so nearly all later reads are hits.

Pass criterion: the detected epoch equals the epoch the loader ran, for two epochs in a
row (the second detected from re-reads), and after detection >= 90% of the daemon's
planned reads are served from the cache (prefetched), with the kernel page cache dropped.
"""
import json
import os
import random
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


@unittest.skipUnless(os.path.exists("/dev/fuse") and os.geteuid() == 0, "needs /dev/fuse and root")
class ZeroChangeOrderTest(unittest.TestCase):
    def setUp(self):
        try:
            import torch  # noqa: F401
            import torchvision  # noqa: F401
        except ImportError:
            self.skipTest("torch/torchvision not installed")
        self.tmp = tempfile.mkdtemp(prefix="epochfs-zc-")
        self.src = os.path.join(self.tmp, "src")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.makedirs(self.mnt)
        rnd = random.Random(3)
        # 7 classes, nested dirs, non-image files; 211 samples (not divisible by world=2).
        n = 0
        for c in range(7):
            for k in range(31 if c < 6 else 25):
                sub = os.path.join(self.src, f"class{c}", "nested" if k % 5 == 0 else "")
                os.makedirs(sub, exist_ok=True)
                with open(os.path.join(sub, f"img{k:03d}.jpg"), "wb") as f:
                    f.write(rnd.randbytes(rnd.randint(2000, 30000)))
                n += 1
            with open(os.path.join(self.src, f"class{c}", "notes.txt"), "w") as f:
                f.write("not an image")
        self.assertEqual(n, 211)
        subprocess.run([f"{BIN}/epochfs", self.src, self.mnt, "--prefetch-window", "64",
                        "--order", "torch-distributed:seed=11,world=2,ranks=0+1"], check=True)

    def tearDown(self):
        subprocess.run(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", self.tmp])

    def read_epoch(self, dataset, epoch):
        from torch.utils.data import DistributedSampler
        orders = []
        for rank in (0, 1):
            s = DistributedSampler(dataset, num_replicas=2, rank=rank, seed=11, shuffle=True)
            s.set_epoch(epoch)
            orders.append(list(s))
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


if __name__ == "__main__":
    unittest.main()
