"""A data loader's reads, run inside a lab node (`cluster-lab exec NODE python3 -m
epochfs.lab.reader ...`): reads the listed files under --root in order with --threads
threads, each whole (32 KiB reads, as sha1sum: the kernel sends 128 KiB FUSE READs), hashes
it, and drops its pages afterwards (POSIX_FADV_DONTNEED) so that reading it again asks the
daemon, not the page cache. With --until FILE it goes round the list again and again, and stops
as soon as FILE exists once it has been through the list at least once. Prints one JSON line per read:
{"path", "sha1", "bytes", "start", "seconds"} (or "error" instead of "sha1"), then
{"done": true, "seconds": S, "max_rss_bytes": B, "cpu_s": C} (B: this process's peak resident set,
VmHWM; C: the user + system CPU seconds of the reading, the interpreter's start not included).
With --serve it is a rank that lives across epochs (`cluster-lab run` and `paper`, through
epochfs.lab.ranks): it prints "ready", then for each line "LIST<TAB>OUT" on its standard input
reads LIST's files as above, writes their records and the done line (cpu_s: this round's) to
OUT, and prints OUT once OUT is complete; it exits at the end of its input. A training job's
ranks are started once, not every epoch: an interpreter's start and imports (0.1-0.2 CPU
seconds each here) are not part of an epoch's loading.
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

    def __init__(self, root, paths, until, out=None):
        self.root, self.paths, self.until = root, paths, until
        self.out = out or sys.stdout
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
                self.out.write(line + "\n")


def read_list(root, list_path, threads, until=None, out=None):
    """Reads the list's files with `threads` threads, one record per read to `out`, then the
    done line (its cpu_s: the CPU seconds of this call)."""
    out = out or sys.stdout
    with open(list_path) as f:
        paths = [line.rstrip("\n") for line in f if line.strip()]
    reader = Reader(root, paths, until, out)
    t0, cpu0 = time.monotonic(), os.times()
    threads = [threading.Thread(target=reader.run) for _ in range(max(1, threads))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu = os.times()
    out.write(json.dumps({"done": True, "seconds": time.monotonic() - t0, "max_rss_bytes": peak_rss(),
                          "cpu_s": max(0.0, (cpu.user + cpu.system) - (cpu0.user + cpu0.system))}) + "\n")


def serve(root, threads):
    """--serve: one round per "LIST<TAB>OUT" line of standard input (see the module's doc)."""
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        list_path, out_path = line.rstrip("\n").split("\t")
        with open(out_path, "w") as out:
            read_list(root, list_path, threads, out=out)
        sys.stdout.write(out_path + "\n")
        sys.stdout.flush()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m epochfs.lab.reader", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.environ.get("EPOCHFS_LAB_MOUNT"),
                    help="where the files are (default: the node's mountpoint, $EPOCHFS_LAB_MOUNT)")
    ap.add_argument("--list", help="file with one path (relative to --root) per line")
    ap.add_argument("--serve", action="store_true",
                    help="stay up: one list per \"LIST<TAB>OUT\" line of standard input")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--until", default=None, help="go round the list again until this file exists")
    a = ap.parse_args(argv)
    if not a.root:
        ap.error("--root not given and $EPOCHFS_LAB_MOUNT not set")
    if a.serve:
        return serve(a.root, a.threads)
    if not a.list:
        ap.error("--list or --serve is required")
    read_list(a.root, a.list, a.threads, a.until)
    return 0


if __name__ == "__main__":
    sys.exit(main())
