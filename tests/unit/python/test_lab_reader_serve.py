"""Unit tests for epochfs_lab.reader --serve (the lab's ranks that live across epochs,
epochfs_lab.ranks): ready, one round per "LIST<TAB>OUT" line with every read's record and a done
line in OUT, OUT's name on stdout once it is complete, exit at the end of the input; with
--compute-ms, the training loop's steps and waits in the done line. No lab:
the reader reads a temporary directory.

Run: cd tests/unit/python && /usr/bin/python3 -m unittest -v test_lab_reader_serve.py
Standard library only.
"""

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

from checkout_paths import REPO  # noqa: E402

PYTHON_DIR = os.pathsep.join([os.path.join(REPO, "tools", "bench", "python"), os.path.join(REPO, "tools", "python")])


class ReaderServe(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.tmp.name, "root")
        os.makedirs(os.path.join(self.root, "c"))
        self.files = {}
        for i in range(5):
            rel = os.path.join("c", "f%d" % i)
            data = os.urandom(40_000 + 1000 * i)
            with open(os.path.join(self.root, rel), "wb") as f:
                f.write(data)
            self.files[rel] = hashlib.sha1(data).hexdigest()

    def tearDown(self):
        self.tmp.cleanup()

    @contextlib.contextmanager
    def serving(self, *options):
        """A reader --serve process with 2 threads (and `options`): checks it says ready, and
        that it exits 0 once its input is closed after the body."""
        proc = subprocess.Popen([sys.executable, "-m", "epochfs_lab.reader", "--root", self.root, "--serve",
                                 "--threads", "2", *options], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
        try:
            self.assertEqual(proc.stdout.readline(), "ready\n")
            yield proc
            proc.stdin.close()
            self.assertEqual(proc.wait(timeout=30), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()

    def round(self, proc, paths, name):
        listing, out = os.path.join(self.tmp.name, name), os.path.join(self.tmp.name, name + ".out")
        with open(listing, "w") as f:
            f.write("\n".join(paths) + "\n")
        proc.stdin.write("%s\t%s\n" % (listing, out))
        proc.stdin.flush()
        self.assertEqual(proc.stdout.readline().rstrip("\n"), out)
        with open(out) as f:
            return [json.loads(line) for line in f]

    # Pass: two rounds in one process, each with exactly its list's reads (right bytes) and a
    # done line of its own; the process exits 0 when its input ends.
    def test_rounds_in_one_process(self):
        with self.serving() as proc:
            for name, paths in (("e1", sorted(self.files)), ("e2", sorted(self.files)[:2])):
                records = self.round(proc, paths, name)
                self.assertTrue(records[-1]["done"])
                self.assertGreaterEqual(records[-1]["cpu_s"], 0)
                reads = records[:-1]
                self.assertEqual(sorted(r["path"] for r in reads), sorted(paths))
                for r in reads:
                    self.assertEqual(r["sha1"], self.files[r["path"]])

    # Pass: with --compute-ms every rank is a training loop: the round reads every file once,
    # its done line says the steps took (files x compute) and how long the loop waited for
    # reads; a step's sleep leaves the CPU idle (cpu_s well below the steps' time). Fail: a
    # missing or short compute_s, no wait_s, or the steps burning CPU.
    def test_training_loop(self):
        with self.serving("--compute-ms", "40", "--batch", "2") as proc:
            records = self.round(proc, sorted(self.files), "t1")
            done, reads = records[-1], records[:-1]
            self.assertEqual(sorted(r["path"] for r in reads), sorted(self.files))
            self.assertGreaterEqual(done["compute_s"], 5 * 0.040 * 0.95)
            self.assertGreaterEqual(done["wait_s"], 0)
            self.assertGreaterEqual(done["seconds"], done["compute_s"])
            self.assertLess(done["cpu_s"], done["compute_s"])

    # Pass: a bad --compute-ms or --compute-ms with --until is refused with a usage error
    # (exit 2), not a hang.
    def test_training_loop_bad_options(self):
        for extra in (["--compute-ms", "-1"], ["--compute-ms", "5", "--until", "/nonexistent"]):
            r = subprocess.run([sys.executable, "-m", "epochfs_lab.reader", "--root", self.root,
                                "--list", "/dev/null"] + extra, capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=PYTHON_DIR), timeout=30)
            self.assertEqual(r.returncode, 2, extra)
            self.assertIn("--compute-ms", r.stderr)


if __name__ == "__main__":
    unittest.main()
