"""The cluster lab's source: the user's data tree copied into an ext4 image (mke2fs -d), on a
read-only loop device with direct I/O on the backing file (a read of the source is a read of
the disk, not of the host's page cache), mounted read-only at DIR/source before the nodes'
mount namespaces are made, so every node sees the same mount. The read limit that all nodes
share is on this device (cgroup.py). Counted from outside: inotify on the tree (lab_count)
and the device's own read counter (/sys/block/loopN/stat).
Standard library only.
"""

import os

from .util import LabError, log, read_text, run, tree_bytes


def image_bytes(data_bytes, files):
    """Room for the data in ext4: 4 KiB blocks per file rounded up, inodes, journal."""
    return int(data_bytes * 1.05) + files * 8192 + (96 << 20)


def make_source(state, data, directory):
    """Copies `data` into an image, attaches and mounts it; returns the source's record."""
    data_bytes, files = tree_bytes(data)
    if files == 0:
        raise LabError("%s holds no regular files" % data)
    image = os.path.join(directory, "source.img")
    mnt = os.path.join(directory, "source")
    log("source: %d files, %.1f MiB from %s" % (files, data_bytes / 2**20, data))
    state.record("file", path=image)
    with open(image, "wb") as f:
        f.truncate(image_bytes(data_bytes, files))
    run(["mkfs.ext4", "-q", "-F", "-m", "0", "-N", str(files + 4096), "-d", data,
         "-E", "lazy_itable_init=0,lazy_journal_init=0", image], timeout=1800)
    if not os.path.isdir(os.path.join(data, "lost+found")):
        # ImageFolder would take ext4's lost+found for a class: the source holds DIR's tree only.
        run(["debugfs", "-w", "-R", "rmdir lost+found", image])
    loop_entry = state.record("loop", image=image, device=None)
    device = attach(image)
    state.update(loop_entry, device=device)
    os.makedirs(mnt, exist_ok=True)
    state.record("mount", path=mnt)
    run(["mount", "-t", "ext4", "-o", "ro,noatime,noload", device, mnt])
    rdev = os.stat(device).st_rdev
    source = {"path": mnt, "device": device, "image": image, "bytes": data_bytes, "files": files,
              "dev": "%d:%d" % (os.major(rdev), os.minor(rdev))}
    state.doc["source"] = source
    state.save()
    return source


def attach(image):
    for extra in (["--direct-io=on"], []):
        r = run(["losetup", "--find", "--show", "--read-only"] + extra + [image], check=not extra)
        if r.returncode == 0:
            return r.stdout.strip()
    raise LabError("losetup could not attach %s" % image)


def device_read_bytes(device):
    """Bytes read from a block device since it was attached (/sys/block/NAME/stat: sectors)."""
    text = read_text("/sys/block/%s/stat" % os.path.basename(device))
    if text is None:
        raise LabError("no block device %s (is the lab up?)" % device)
    return int(text.split()[2]) * 512


def loops_of(image):
    """Loop devices backed by `image`."""
    r = run(["losetup", "--noheadings", "--output", "NAME", "--associated", image], check=False)
    return [line.strip() for line in r.stdout.splitlines() if line.strip()]


def teardown(state, say):
    """Detaches the lab's loop devices (the recorded one and any backed by its image) and
    deletes the image. The mounts on them are gone by now (lab_mounts.teardown)."""
    for r in state.resources("loop"):
        devices = set(loops_of(r["image"])) if os.path.exists(r["image"]) else set()
        for dev in sorted(devices):
            run(["losetup", "--detach", dev], check=False)
            say("loop device %s" % dev)
    for r in state.resources("file"):
        if os.path.exists(r["path"]):
            os.unlink(r["path"])
            say("file %s" % r["path"])
