"""WebDataset-style tar shards of an ImageFolder of JPEGs (``tools/bench/train-bench gen --shards``).

Each sample of ``ROOT/classNNN/NAME.jpg`` becomes two consecutive tar members,
``KEY.jpg`` (the file's bytes, unchanged) and ``KEY.cls`` (the class index as ASCII
decimal), with ``KEY = classNNN_NAME`` (no dots: WebDataset splits a member name at its
first dot into key and extension). Samples are shuffled across shards with one seeded
permutation, as WebDataset datasets are written (a shard is a random slice of the dataset,
so reading shards in any order and shuffling within a buffer gives a well-mixed stream).
A shard is closed once it holds ``shard_bytes`` of member data, so all shards but the last
are ``shard_bytes`` plus at most one sample (plus tar headers). Standard library only.
"""

import io
import os
import random
import tarfile

SHARD_NAME = "shard-%06d.tar"


def image_folder_samples(root):
    """[(key, path, class_index)] of ROOT/CLASS/FILE.jpg, classes sorted as ImageFolder does."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    samples = []
    for index, cls in enumerate(classes):
        for name in sorted(os.listdir(os.path.join(root, cls))):
            stem, ext = os.path.splitext(name)
            if ext.lower() not in (".jpg", ".jpeg"):
                continue
            key = "%s_%s" % (cls, stem)
            if "." in key:
                raise ValueError("sample %s/%s: a WebDataset key cannot contain '.'" % (cls, name))
            samples.append((key, os.path.join(root, cls, name), index))
    return samples


def _member(name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o444
    info.mtime = 0  # reproducible shards: same samples and seed give the same bytes
    info.uname = info.gname = "root"
    return info, io.BytesIO(data)


def write_shards(root, out_dir, shard_bytes=256 << 20, seed=0):
    """Writes the samples of the ImageFolder at ``root`` as shards in ``out_dir`` (created;
    must hold no shard yet). Returns [(shard path, samples, member data bytes)]."""
    if shard_bytes <= 0:
        raise ValueError("shard size must be positive")
    samples = image_folder_samples(root)
    if not samples:
        raise ValueError("no .jpg samples under %s/CLASS/" % root)
    os.makedirs(out_dir, exist_ok=True)
    if any(n.startswith("shard-") and n.endswith(".tar") for n in os.listdir(out_dir)):
        raise ValueError("%s already holds shards; remove them first" % out_dir)
    random.Random(seed).shuffle(samples)
    written = []
    tar, path, count, size = None, None, 0, 0
    try:
        for key, src, cls in samples:
            if tar is None:
                path = os.path.join(out_dir, SHARD_NAME % len(written))
                tar, count, size = tarfile.open(path, "w", format=tarfile.USTAR_FORMAT), 0, 0
            with open(src, "rb") as f:
                data = f.read()
            tar.addfile(*_member(key + ".jpg", data))
            tar.addfile(*_member(key + ".cls", str(cls).encode()))
            count, size = count + 1, size + len(data)
            if size >= shard_bytes:
                tar.close()
                written.append((path, count, size))
                tar = None
        if tar is not None:
            tar.close()
            written.append((path, count, size))
            tar = None
    finally:
        if tar is not None:
            tar.close()
    return written


def read_shards(out_dir):
    """{key: (jpg bytes, class index)} of every shard in ``out_dir``, read back with tarfile.
    Raises ValueError on a duplicate key, a sample missing a member, or an unknown member."""
    got, parts = {}, {}
    for name in sorted(os.listdir(out_dir)):
        if not (name.startswith("shard-") and name.endswith(".tar")):
            continue
        with tarfile.open(os.path.join(out_dir, name)) as tar:
            for m in tar:
                key, _, ext = m.name.partition(".")
                if ext not in ("jpg", "cls"):
                    raise ValueError("%s: unexpected member %s" % (name, m.name))
                part = parts.setdefault(key, {})
                if ext in part:
                    raise ValueError("%s: duplicate member %s" % (name, m.name))
                part[ext] = tar.extractfile(m).read()
    for key, part in parts.items():
        if set(part) != {"jpg", "cls"}:
            raise ValueError("sample %s lacks a member (has %s)" % (key, sorted(part)))
        got[key] = (part["jpg"], int(part["cls"].decode()))
    return got


def main(root, out_dir=None, shard_mb=256, seed=0, log=print):
    """``train-bench gen --shards``: shards of ``root`` into ``out_dir`` (default
    ROOT.shards: a directory inside ROOT would be taken for a class by ImageFolder)."""
    out_dir = out_dir or os.path.normpath(root) + ".shards"
    if not 1 <= shard_mb <= 1 << 20:
        raise SystemExit("--shard-mb must be between 1 and 1048576 (WebDataset uses 100-500)")
    written = write_shards(root, out_dir, shard_mb * 1000 * 1000, seed)
    total = sum(w[2] for w in written)
    log("wrote %d shards (%d samples, %.1f MB of samples) under %s" % (
        len(written), sum(w[1] for w in written), total / 1e6, out_dir))
    return written
