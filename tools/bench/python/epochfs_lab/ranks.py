"""The ranks of `cluster-lab run` and `paper`: one epochfs_lab.reader --serve process per rank,
inside its node, started once before the first epoch and kept across epochs, as a training
job's ranks are. Each epoch hands every rank its list and waits for all of them; the epoch's
clock (the caller's) does not include an interpreter's start or imports.
Standard library only.
"""

import json
import os
import select
import subprocess
import tempfile
import time

from . import node as lab_node, workload as lab_workload
from .util import PYTHON_DIR


class Ranks:
    """`world` reader processes, rank r in node r // ranks_per_node, reading under root(node);
    with compute_ms > 0 each is also a training loop (epochfs_lab.reader --compute-ms, steps of
    local_batch samples)."""

    def __init__(self, lab, world, ranks_per_node, root, threads=4, timeout=120, compute_ms=0.0,
                 local_batch=32):
        self.lab, self.procs, self.names = lab, [], []
        env = {"PYTHONPATH": PYTHON_DIR}
        try:
            for r in range(world):
                node = lab.nodes[r // ranks_per_node]
                argv = lab_workload.READER + ["--root", root(node), "--serve", "--threads", str(threads),
                                                "--compute-ms", repr(float(compute_ms)),
                                                "--batch", str(local_batch)]
                self.procs.append(lab_node.popen(node, argv, env=env, stdin=subprocess.PIPE,
                                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                                 text=True, bufsize=1))
                self.names.append("%s.rank%d" % (node["name"], r))
            self._wait_lines(timeout, "ready")
        except BaseException:
            self.close()
            raise

    def _wait_lines(self, timeout, what):
        """One line from every rank (in any order); returns them by rank."""
        deadline, lines = time.monotonic() + timeout, [None] * len(self.procs)
        waiting = {p.stdout.fileno(): i for i, p in enumerate(self.procs)}
        while waiting:
            ready, _, _ = select.select(list(waiting), [], [], max(0, deadline - time.monotonic()))
            if not ready:
                raise RuntimeError("ranks %s did not answer (%s) within %d s" % (
                    ", ".join(self.names[i] for i in waiting.values()), what, timeout))
            for fd in ready:
                i = waiting.pop(fd)
                lines[i] = self.procs[i].stdout.readline().rstrip("\n")
                if not lines[i]:
                    raise RuntimeError("rank %s exited (exit %s) before %s" % (
                        self.names[i], self.procs[i].poll(), what))
        return lines

    def epoch(self, lists, timeout=600):
        """Every rank reads its list (lists[r]: relative paths); returns ({rank name: [read
        records]}, {rank name: its done line}) once all are done."""
        files = []
        try:
            for r, paths in enumerate(lists):
                fd, listing = tempfile.mkstemp(prefix="lab-order-", dir=self.lab.state.dir)
                with os.fdopen(fd, "w") as f:
                    f.write("\n".join(paths) + "\n")
                out = listing + ".out"
                files += [listing, out]
                self.procs[r].stdin.write("%s\t%s\n" % (listing, out))
                self.procs[r].stdin.flush()
            self._wait_lines(timeout, "the epoch's reads")
            reads, done = {}, {}
            for r, name in enumerate(self.names):
                with open(files[2 * r + 1]) as f:
                    records = [json.loads(line) for line in f if line.startswith("{")]
                if not records or not records[-1].get("done"):
                    raise RuntimeError("rank %s wrote no done line" % name)
                reads[name], done[name] = records[:-1], records[-1]
            return reads, done
        finally:
            for path in files:
                try:
                    os.unlink(path)
                except OSError:
                    pass

    def close(self):
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            p.stdout.close()
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
