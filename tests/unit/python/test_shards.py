"""Tests of epochfs_bench.shards and `tools/bench/train-bench gen --jpeg --shards` (WebDataset tar shards).

Run: cd tests/unit/python && /usr/bin/python3 -m unittest -v test_shards
Needs numpy and PIL (the JPEG generator); skips without them.
"""

import os
import subprocess
import sys
import tarfile
import tempfile
import unittest

from checkout_paths import REPO  # noqa: E402  (this checkout's tools/python and tools/bench/python on sys.path)

from epochfs_bench import shards  # noqa: E402


try:
    import numpy  # noqa: F401
    import PIL  # noqa: F401
    HAVE_PIL = True
except ImportError:
    HAVE_PIL = False


@unittest.skipUnless(HAVE_PIL, "numpy and PIL are needed to draw the JPEGs")
class GenShardsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="test-shards-")
        cls.data = os.path.join(cls.tmp.name, "data")
        # 3 classes x 4 JPEGs (~110 KB each), shards of 1 MB: 4 shards, the last one partial.
        subprocess.run([sys.executable, os.path.join(REPO, "tools", "bench", "train-bench"), "gen", cls.data,
                        "--jpeg", "--classes", "3", "--per-class", "4", "--shards", "--shard-mb", "1"],
                       check=True, capture_output=True)
        cls.shard_dir = cls.data + ".shards"

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def jpeg_files(self):
        out = {}
        for cls_index, cls in enumerate(sorted(os.listdir(self.data))):
            for name in os.listdir(os.path.join(self.data, cls)):
                with open(os.path.join(self.data, cls, name), "rb") as f:
                    out[cls + "_" + os.path.splitext(name)[0]] = (f.read(), cls_index)
        return out

    # Pass: every sample is in the shards exactly once, its .jpg member byte-equal to the
    # JPEG file and its .cls member the ImageFolder class index, and nothing else is there.
    def test_every_sample_bytes_equal_the_jpeg_file(self):
        want = self.jpeg_files()
        self.assertEqual(len(want), 12)
        self.assertEqual(shards.read_shards(self.shard_dir), want)

    # Pass: the shard files are plain tars that tarfile reads, named shard-000000.tar...,
    # each (but the last) holding >= 1 MB of samples, members in pairs KEY.jpg, KEY.cls.
    def test_shards_are_webdataset_tars(self):
        names = sorted(os.listdir(self.shard_dir))
        self.assertEqual(names, ["shard-%06d.tar" % i for i in range(len(names))])
        self.assertGreater(len(names), 1)
        for i, name in enumerate(names):
            with tarfile.open(os.path.join(self.shard_dir, name)) as tar:
                members = tar.getmembers()
            self.assertEqual(len(members) % 2, 0)
            for a, b in zip(members[::2], members[1::2]):
                self.assertEqual((a.name.rsplit(".", 1)[1], b.name.rsplit(".", 1)[1]), ("jpg", "cls"))
                self.assertEqual(a.name.split(".")[0], b.name.split(".")[0])
            if i + 1 < len(names):
                self.assertGreaterEqual(sum(m.size for m in members[::2]), 1000 * 1000)

    # Pass: samples are shuffled across shards: the sample order over the shards is not the
    # ImageFolder order, and the first shard holds samples of more than one class.
    def test_samples_shuffled_across_shards(self):
        keys = []
        for name in sorted(os.listdir(self.shard_dir)):
            with tarfile.open(os.path.join(self.shard_dir, name)) as tar:
                keys.append([m.name.split(".")[0] for m in tar.getmembers()[::2]])
        flat = [k for shard in keys for k in shard]
        self.assertEqual(len(flat), 12)
        self.assertNotEqual(flat, sorted(flat))
        self.assertGreater(len({k.split("_")[0] for k in keys[0]}), 1)


class WriteShardsErrorsTest(unittest.TestCase):
    # Pass: an empty ImageFolder and a directory already holding shards are refused
    # with ValueError, not overwritten or silently empty.
    def test_refuses_empty_tree_and_existing_shards(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "data")
            os.makedirs(os.path.join(root, "class000"))
            with self.assertRaises(ValueError):
                shards.write_shards(root, os.path.join(tmp, "out"))
            with open(os.path.join(root, "class000", "a.jpg"), "wb") as f:
                f.write(b"\xff\xd8not really a jpeg\xff\xd9")
            written = shards.write_shards(root, os.path.join(tmp, "out"), shard_bytes=1)
            self.assertEqual([(os.path.basename(p), n, b) for p, n, b in written],
                             [("shard-000000.tar", 1, 21)])
            with self.assertRaises(ValueError):
                shards.write_shards(root, os.path.join(tmp, "out"))


if __name__ == "__main__":
    unittest.main()
