"""The mounts of /proc/self/mountinfo (proc(5)): the Python twin of fusefs/mount_table.h, the
one parser for the Python tests, the benches, the lab and the Slurm hook.

    from epochfs import mount_table
    mount_table.is_mount_point("/mnt/imagenet")
    [m.mount_point for m in mount_table.read() if m.fstype == "fuse.epochfs"]

Each line: ``id parent major:minor root mount-point options [optional...] - fstype source
super-options``. The kernel writes a space, tab, newline and backslash in the root, the mount
point and the source as octal escapes (``\\040``, ``\\011``, ``\\012``, ``\\134``); they are
decoded here. Other bytes come as they are (a path that is not UTF-8 keeps its bytes as
surrogate escapes, as os.fsdecode does). Lines that do not parse are skipped; a table that
cannot be read is empty, as in the C++ parser. Standard library only.
"""

import re
from typing import NamedTuple

MOUNTINFO = "/proc/self/mountinfo"

_OCTAL = re.compile(r"\\([0-3][0-7][0-7])")


class MountEntry(NamedTuple):
    mount_id: int
    parent_id: int
    device: str          # "major:minor"
    root: str            # the directory of the filesystem that is mounted
    mount_point: str
    mount_options: str   # per-mount, comma-separated ("ro,nosuid,nodev,relatime")
    fstype: str          # "fuse.epochfs", "cgroup2", ...
    source: str
    super_options: str   # comma-separated


def unescape(field):
    """Decodes mountinfo's octal escapes ("\\040" -> " "): space, tab, newline, backslash."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse(text):
    """The mounts of a mountinfo text, in its order."""
    out = []
    for line in text.split("\n"):  # fields hold no raw whitespace: the kernel escapes it
        f = line.split(" ")
        try:
            dash = f.index("-", 6)
            mount_id, parent_id = int(f[0]), int(f[1])
        except ValueError:
            continue
        if len(f) < dash + 4:
            continue
        out.append(MountEntry(mount_id, parent_id, f[2], unescape(f[3]), unescape(f[4]), f[5],
                              f[dash + 1], unescape(f[dash + 2]), f[dash + 3]))
    return out


def read(path=MOUNTINFO):
    """The mounts of ``path`` (this process's mount namespace by default)."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return parse(f.read())
    except OSError:
        return []


def mount_points_under(directory, mounts=None):
    """Mount points at or below ``directory``, in table order (innermost last)."""
    prefix = directory.rstrip("/") + "/"
    return [m.mount_point for m in (read() if mounts is None else mounts)
            if m.mount_point == directory or m.mount_point.startswith(prefix)]


def is_mount_point(path, mounts=None):
    """Whether ``path`` (absolute, as mountinfo names it: no symlinks) is a mount point."""
    return any(m.mount_point == path for m in (read() if mounts is None else mounts))
