"""Shuffle-aware prefetch against a deliberately slow source.

The daemon adds 20 ms to every source read (--inject-source-latency, a fault-injection
option); a torch DataLoader (2 workers) reads the mount through ShuffleAwareSampler, which
registers each epoch's order, and "computes" 5 ms per sample.

Pass criterion: with the order registered, the epoch finds its files already cached: at
most 5% of the planned reads waited on the source (stalls), every sample's bytes equal the
source's, and the indices are exactly DistributedSampler's. Without a registered order (the
control), most reads stall — so the test can fail.
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("EPOCHFS_BIN_DIR", os.path.join(HERE, "../../build/bin"))
sys.path[:0] = [os.path.join(HERE, d) for d in ("../../tools/python", "../../tools/bench/python")]


def stats(mnt):
    out = subprocess.run([f"{BIN}/epochctl", "stats", mnt, "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


class RawFiles:
    """A map-style dataset of ImageFolder's samples returning raw bytes (no decoding)."""

    def __init__(self, root):
        import torchvision
        self.samples = torchvision.datasets.ImageFolder(root, loader=lambda p: None).samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        with open(self.samples[i][0], "rb") as f:
            data = f.read()
        time.sleep(0.005)  # compute
        return i, data


@unittest.skipUnless(os.path.exists("/dev/fuse") and os.geteuid() == 0, "needs /dev/fuse and root")
class PrefetchSlowSourceTest(unittest.TestCase):
    def setUp(self):
        try:
            import torch  # noqa: F401
            import torchvision  # noqa: F401
        except ImportError:
            self.skipTest("torch/torchvision not installed")
        self.tmp = tempfile.mkdtemp(prefix="epochfs-slow-")
        self.src = os.path.join(self.tmp, "src")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.makedirs(self.mnt)
        rnd = random.Random(5)
        for c in range(6):
            os.makedirs(os.path.join(self.src, f"c{c}"))
            for k in range(50):
                with open(os.path.join(self.src, f"c{c}", f"{k:03d}.jpg"), "wb") as f:
                    f.write(rnd.randbytes(rnd.randint(1000, 20000)))

    def tearDown(self):
        subprocess.run(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", self.tmp])

    def run_epoch(self, register):
        import torch
        from torch.utils.data import DataLoader, DistributedSampler
        from epochfs.torch import ShuffleAwareSampler
        subprocess.run([f"{BIN}/epochfs", self.src, self.mnt, "--inject-source-latency", "20",
                        "--prefetch-window", "64"], check=True)
        try:
            ds = RawFiles(self.mnt)
            cls = ShuffleAwareSampler if register else DistributedSampler
            sampler = cls(ds, num_replicas=1, rank=0, seed=9, shuffle=True)
            sampler.set_epoch(2)
            expected = list(DistributedSampler(ds, num_replicas=1, rank=0, seed=9))
            ref = DistributedSampler(ds, num_replicas=1, rank=0, seed=9)
            ref.set_epoch(2)
            self.assertEqual(list(sampler), list(ref))
            seen = []
            loader = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2,
                                collate_fn=lambda b: b)
            for batch in loader:
                for i, data in batch:
                    src_path = os.path.join(self.src, os.path.relpath(ds.samples[i][0], self.mnt))
                    with open(src_path, "rb") as f:
                        self.assertEqual(data, f.read(), src_path)
                    seen.append(i)
            self.assertEqual(sorted(seen), sorted(expected))
            return stats(self.mnt)
        finally:
            subprocess.run(["fusermount3", "-u", self.mnt], check=True)

    def test_registered_order_is_prefetched(self):
        s = self.run_epoch(register=True)
        streams = s["prefetch"]["streams"]
        self.assertEqual(len(streams), 1)
        hits, stalls = streams[0]["hits"], streams[0]["stalls"]
        self.assertEqual(streams[0]["position"], 300)
        self.assertLessEqual(stalls, 0.05 * (hits + stalls), f"hits {hits} stalls {stalls}")

    def test_control_without_order_waits_on_the_source(self):
        s = self.run_epoch(register=False)
        self.assertEqual(s["prefetch"]["streams"], [])
        # Every sample was a miss served from the source.
        self.assertGreaterEqual(s["tiers"]["source"]["read_chunks"], 300)


if __name__ == "__main__":
    unittest.main()
