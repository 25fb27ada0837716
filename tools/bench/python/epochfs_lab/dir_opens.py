"""Opens of a source's directories, counted from outside the daemons (inotify).

A walk of the source opens each directory once; the lab counts the opens while the cluster
starts, to show the job walked once (docs/CLUSTER.md "One walk per job")."""

import ctypes
import os
import struct

IN_OPEN = 0x00000020
IN_ISDIR = 0x40000000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
EVENT = struct.Struct("iIII")  # wd, mask, cookie, len


class DirOpenCounter:
    """Watches every directory under `root`; take() returns the opens of the watched
    directories themselves since the last call (an opendir of each, whichever process)."""

    def __init__(self, root):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.dirs = 0
        try:
            for d, _, _ in os.walk(root):
                if libc.inotify_add_watch(self.fd, os.fsencode(d), IN_OPEN | IN_ONLYDIR) < 0:
                    raise OSError(ctypes.get_errno(), "inotify_add_watch %s" % d)
                self.dirs += 1
        except OSError:
            os.close(self.fd)
            raise
        self.take()  # not the walk above

    def take(self):
        opens = 0
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return opens
            off = 0
            while off < len(buf):
                _, mask, _, length = EVENT.unpack_from(buf, off)
                if mask & IN_OPEN and mask & IN_ISDIR and length == 0:
                    opens += 1
                off += EVENT.size + length

    def close(self):
        os.close(self.fd)
