"""A data loader's reads, run inside a lab node (`cluster-lab exec NODE python3 -m
epochfs_lab.reader ...`): reads the listed files under --root in order with --threads
threads, each whole (32 KiB reads, as sha1sum: the kernel sends 128 KiB FUSE READs), hashes
it, and drops its pages afterwards (POSIX_FADV_DONTNEED) so that reading it again asks the
daemon, not the page cache. With --until FILE it goes round the list again and again, and stops
as soon as FILE exists once it has been through the list at least once. Prints one JSON line per read:
{"path", "sha1", "bytes", "start", "seconds"} (or "error" instead of "sha1"), then
{"done": true, "seconds": S, "max_rss_bytes": B, "cpu_s": C} (B: this process's peak resident set,
VmHWM; C: the user + system CPU seconds of the reading, the interpreter's start not included).
With --compute-ms MS it is also the training loop the loader feeds: the reader threads put
each read into a bounded queue (--prefetch reads, as a DataLoader's workers keep prefetch_factor
batches each), and the calling thread takes --batch reads at a time and then "computes" for
batch x MS milliseconds with the CPU idle (a sleep: the step runs on an accelerator); the done
line then also has "compute_s" (the steps' time) and "wait_s" (the time the loop waited for
reads: the loading time a training job sees).
With --serve it is a rank that lives across epochs (`cluster-lab run` and `paper`, through
epochfs_lab.ranks): it prints "ready", then for each line "LIST<TAB>OUT" on its standard input
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
import queue
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

    def run(self, fed=None):
        """Reads until the list is done; each record also goes to `fed` (a bounded queue: the
        training loop's) when given."""
        while True:
            rel = self.take()
            if rel is None:
                return
            record = read_one(self.root, rel)
            line = json.dumps(record)
            with self.out_lock:
                self.out.write(line + "\n")
            if fed is not None:
                fed.put(record)


class TrainingLoop:
    """The consumer of --compute-ms: takes `batch` reads from `fed`, then sleeps batch x
    compute_s (an accelerator's step: the CPU is free meanwhile), until `total` reads were
    taken. wait_s: the time spent waiting for reads."""

    def __init__(self, fed, total, batch, compute_s):
        self.fed, self.total, self.batch, self.compute_s = fed, total, max(1, batch), compute_s
        self.wait_s = self.step_s = 0.0

    def run(self, feeding):
        """feeding(): whether a reader thread is still alive (a dead one ends the loop early
        instead of leaving it waiting forever)."""
        taken = 0
        while taken < self.total:
            n = min(self.batch, self.total - taken)
            t0 = time.monotonic()
            got = 0
            while got < n:
                try:
                    self.fed.get(timeout=0.5)
                    got += 1
                except queue.Empty:
                    if not feeding():
                        return
            t1 = time.monotonic()
            time.sleep(n * self.compute_s)
            self.wait_s += t1 - t0
            self.step_s += time.monotonic() - t1
            taken += n


def read_list(root, list_path, threads, until=None, out=None, compute_ms=0.0, batch=32, prefetch=None):
    """Reads the list's files with `threads` threads, one record per read to `out`, then the
    done line (its cpu_s: the CPU seconds of this call). With compute_ms > 0 the reads also feed
    a TrainingLoop (batches of `batch`, at most `prefetch` reads ahead of it; default 2 batches
    per thread) and the done line has its compute_s and wait_s."""
    out = out or sys.stdout
    with open(list_path) as f:
        paths = [line.rstrip("\n") for line in f if line.strip()]
    reader = Reader(root, paths, until, out)
    loop = None
    if compute_ms > 0:
        if until:
            raise ValueError("--compute-ms goes through the list once: not with --until")
        fed = queue.Queue(maxsize=prefetch or 2 * max(1, batch) * max(1, threads))
        loop = TrainingLoop(fed, len(paths), batch, compute_ms / 1000.0)
    t0, cpu0 = time.monotonic(), os.times()
    workers = [threading.Thread(target=reader.run, args=(loop and loop.fed,)) for _ in range(max(1, threads))]
    for t in workers:
        t.start()
    if loop:
        loop.run(lambda: any(t.is_alive() for t in workers))
    for t in workers:
        t.join()
    cpu = os.times()
    done = {"done": True, "seconds": time.monotonic() - t0, "max_rss_bytes": peak_rss(),
            "cpu_s": max(0.0, (cpu.user + cpu.system) - (cpu0.user + cpu0.system))}
    if loop:
        done.update(compute_s=loop.step_s, wait_s=loop.wait_s)
    out.write(json.dumps(done) + "\n")


def serve(root, threads, compute_ms=0.0, batch=32):
    """--serve: one round per "LIST<TAB>OUT" line of standard input (see the module's doc)."""
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        list_path, out_path = line.rstrip("\n").split("\t")
        with open(out_path, "w") as out:
            read_list(root, list_path, threads, out=out, compute_ms=compute_ms, batch=batch)
        sys.stdout.write(out_path + "\n")
        sys.stdout.flush()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m epochfs_lab.reader", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.environ.get("EPOCHFS_LAB_MOUNT"),
                    help="where the files are (default: the node's mountpoint, $EPOCHFS_LAB_MOUNT)")
    ap.add_argument("--list", help="file with one path (relative to --root) per line")
    ap.add_argument("--serve", action="store_true",
                    help="stay up: one list per \"LIST<TAB>OUT\" line of standard input")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--until", default=None, help="go round the list again until this file exists")
    ap.add_argument("--compute-ms", type=float, default=0.0,
                    help="a training step's time per sample, CPU idle (default 0: no training loop)")
    ap.add_argument("--batch", type=int, default=32, help="samples per training step (--compute-ms)")
    a = ap.parse_args(argv)
    if a.compute_ms < 0 or a.batch < 1:
        ap.error("--compute-ms must be >= 0 and --batch >= 1")
    if a.compute_ms > 0 and a.until:
        ap.error("--compute-ms goes through the list once: not with --until")
    if not a.root:
        ap.error("--root not given and $EPOCHFS_LAB_MOUNT not set")
    if a.serve:
        return serve(a.root, a.threads, a.compute_ms, a.batch)
    if not a.list:
        ap.error("--list or --serve is required")
    read_list(a.root, a.list, a.threads, a.until, compute_ms=a.compute_ms, batch=a.batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
