"""A data loader's reads, run inside a lab node (`cluster-lab exec NODE python3 -m
epochfs.lab.reader ...`): reads the listed files under --root in order with --threads
threads, each whole (32 KiB reads, as sha1sum: the kernel sends 128 KiB FUSE READs), hashes
it, and drops its pages afterwards (POSIX_FADV_DONTNEED) so that reading it again asks the
daemon, not the page cache. With --until FILE it goes round the list again and again, and stops
as soon as FILE exists once it has been through the list at least once. Prints one JSON line per read:
{"path", "sha1", "bytes", "start", "seconds"} (or "error" instead of "sha1"), then
{"done": true, "seconds": S, "max_rss_bytes": B} (B: this process's peak resident set, VmHWM).
Standard library only.
"""

import argparse
import hashlib
import json
import os
import sys
import threading
import time

from .memory import peak_rss


def read_one(root, rel):
    t0 = time.monotonic()
    h, n = hashlib.sha1(), 0
    try:
        fd = os.open(os.path.join(root, rel), os.O_RDONLY)
        try:
            while True:
                b = os.read(fd, 32 << 10)
                if not b:
                    break
                h.update(b)
                n += len(b)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    except OSError as e:
        return {"path": rel, "error": str(e), "start": t0, "seconds": time.monotonic() - t0}
    return {"path": rel, "sha1": h.hexdigest(), "bytes": n, "start": t0, "seconds": time.monotonic() - t0}


class Reader:
    """Hands the list's entries to the threads in order, round after round until --until
    appears (after the first round)."""

    def __init__(self, root, paths, until):
        self.root, self.paths, self.until = root, paths, until
        self.next, self.rounds = 0, 0
        self.lock, self.out_lock = threading.Lock(), threading.Lock()

    def take(self):
        with self.lock:
            if self.next >= len(self.paths):
                self.next, self.rounds = 0, self.rounds + 1
            if self.rounds >= 1 and (not self.until or os.path.exists(self.until)):
                return None
            self.next += 1
            return self.paths[self.next - 1]

    def run(self):
        while True:
            rel = self.take()
            if rel is None:
                return
            line = json.dumps(read_one(self.root, rel))
            with self.out_lock:
                sys.stdout.write(line + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m epochfs.lab.reader", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.environ.get("EPOCHFS_LAB_MOUNT"),
                    help="where the files are (default: the node's mountpoint, $EPOCHFS_LAB_MOUNT)")
    ap.add_argument("--list", required=True, help="file with one path (relative to --root) per line")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--until", default=None, help="go round the list again until this file exists")
    a = ap.parse_args(argv)
    if not a.root:
        ap.error("--root not given and $EPOCHFS_LAB_MOUNT not set")
    with open(a.list) as f:
        paths = [line.rstrip("\n") for line in f if line.strip()]
    reader = Reader(a.root, paths, a.until)
    t0 = time.monotonic()
    threads = [threading.Thread(target=reader.run) for _ in range(max(1, a.threads))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.stdout.write(json.dumps({"done": True, "seconds": time.monotonic() - t0,
                                 "max_rss_bytes": peak_rss()}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
