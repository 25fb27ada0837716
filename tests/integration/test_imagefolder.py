"""A real torchvision ImageFolder + DataLoader over an epochfs mount.

Run by ctest with Debian's /usr/bin/python3 (EPOCHFS_BIN_DIR, PYTHONPATH set).
Exit code 77 means skipped: no /dev/fuse, no epochfs binary, or no torch.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from epochfs.mount_table import is_mount_point as is_mounted

SKIP = 77
BIN_DIR = os.environ.get("EPOCHFS_BIN_DIR", "")
EPOCHFS = os.path.join(BIN_DIR, "epochfs")
CLASSES = ["cat", "dog", "fish", "horse", "zebra"]
PER_CLASS = 20


def skip_reason():
    if not os.access(EPOCHFS, os.X_OK):
        return "epochfs binary not found at %r (EPOCHFS_BIN_DIR)" % EPOCHFS
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as e:
        return "/dev/fuse not usable: %s" % e
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        import PIL  # noqa: F401
    except ImportError as e:
        return "torch/torchvision/PIL missing: %s" % e
    return None


def unmount(path):
    if not is_mounted(path):
        return True
    subprocess.run(["fusermount3", "-u", path], capture_output=True, timeout=10)
    for _ in range(100):
        if not is_mounted(path):
            return True
        time.sleep(0.05)
    subprocess.run(["umount", "-l", path], capture_output=True, timeout=10)
    return not is_mounted(path)


def build_tree(root):
    """5 classes x 20 real images (JPEG and PNG, varied sizes), plus files
    ImageFolder must skip."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(1234)
    for ci, cls in enumerate(CLASSES):
        d = os.path.join(root, cls)
        os.makedirs(d)
        for i in range(PER_CLASS):
            h, w = 16 + int(rng.integers(0, 48)), 16 + int(rng.integers(0, 48))
            arr = rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)
            img = Image.fromarray(arr, "RGB")
            if i % 2:
                img.save(os.path.join(d, "img_%03d.png" % i))
            else:
                img.save(os.path.join(d, "img_%03d.jpg" % i), quality=90)
        with open(os.path.join(d, "README.txt"), "w") as f:
            f.write("not an image\n")
    with open(os.path.join(root, "LICENSE"), "w") as f:
        f.write("a file at the top level is not a class\n")


class RawBytes:
    """A dataset whose items are the raw bytes of each sample file."""

    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        with open(path, "rb") as f:
            return i, label, f.read()


def collate_list(batch):
    return batch


class ImageFolderOverEpochfs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The pid lets tools/test tell a live run's mount from a stale one.
        cls.tmp = tempfile.mkdtemp(prefix="epochfs-itest-py-%d-" % os.getpid())
        cls.src = os.path.join(cls.tmp, "src")
        cls.mnt = os.path.join(cls.tmp, "mnt")
        os.makedirs(cls.mnt)
        try:
            build_tree(cls.src)
            r = subprocess.run([EPOCHFS, cls.src, cls.mnt, "--ram-cache", "64M"],
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0 or not is_mounted(cls.mnt):
                raise AssertionError("mount failed: exit %d, stderr %r"
                                     % (r.returncode, r.stderr))
        except subprocess.TimeoutExpired:
            cls.tearDownClass()
            raise AssertionError("epochfs did not return within 60 s (stdio held open?)")
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if not unmount(cls.mnt):
                print("could not unmount %s" % cls.mnt, file=sys.stderr)
                return  # never delete through a live mount
        finally:
            if not is_mounted(cls.mnt):
                shutil.rmtree(cls.tmp, ignore_errors=True)

    def datasets(self):
        from torchvision.datasets import ImageFolder
        return ImageFolder(self.src), ImageFolder(self.mnt)

    def test_classes_and_samples_match(self):
        src_ds, mnt_ds = self.datasets()
        self.assertEqual(mnt_ds.classes, CLASSES)
        self.assertEqual(mnt_ds.classes, src_ds.classes)
        self.assertEqual(mnt_ds.class_to_idx, src_ds.class_to_idx)
        self.assertEqual(len(src_ds.samples), len(CLASSES) * PER_CLASS)
        rel = [(os.path.relpath(p, self.mnt), c) for p, c in mnt_ds.samples]
        want = [(os.path.relpath(p, self.src), c) for p, c in src_ds.samples]
        self.assertEqual(rel, want)
        self.assertFalse(any(p.endswith(".txt") for p, _ in rel))

    def test_dataloader_reads_identical_bytes(self):
        import torch
        src_ds, mnt_ds = self.datasets()
        loader = torch.utils.data.DataLoader(RawBytes(mnt_ds.samples), batch_size=7,
                                             shuffle=True, num_workers=2,
                                             collate_fn=collate_list,
                                             generator=torch.Generator().manual_seed(0))
        seen = set()
        for batch in loader:
            for i, label, data in batch:
                src_path, src_label = src_ds.samples[i]
                with open(src_path, "rb") as f:
                    want = f.read()
                self.assertEqual(label, src_label)
                self.assertEqual(len(data), len(want), src_path)
                self.assertTrue(data == want, "bytes differ for %s" % src_path)
                seen.add(i)
        self.assertEqual(seen, set(range(len(src_ds))))

    def test_decoded_images_match(self):
        import numpy as np
        src_ds, mnt_ds = self.datasets()
        for i in range(0, len(src_ds), 9):
            got_img, got_label = mnt_ds[i]
            want_img, want_label = src_ds[i]
            self.assertEqual(got_label, want_label)
            self.assertEqual(got_img.size, want_img.size)
            self.assertTrue(np.array_equal(np.asarray(got_img), np.asarray(want_img)),
                            "decoded pixels differ for sample %d" % i)

    def test_second_epoch_with_workers(self):
        import torch
        import torchvision.transforms as T
        from torchvision.datasets import ImageFolder
        tf = T.Compose([T.Resize((16, 16)), T.ToTensor()])
        src_ds, mnt_ds = ImageFolder(self.src, transform=tf), ImageFolder(self.mnt, transform=tf)
        for _ in range(2):
            loader = torch.utils.data.DataLoader(mnt_ds, batch_size=10, num_workers=2)
            got = torch.cat([x for x, _ in loader])
            want = torch.stack([src_ds[i][0] for i in range(len(src_ds))])
            self.assertTrue(torch.equal(got, want))


if __name__ == "__main__":
    why = skip_reason()
    if why:
        print("SKIP: " + why)
        sys.exit(SKIP)
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
