"""Unit tests for epochfs.model's job-start terms (docs/MODEL.md "Job start: one walk per job"):
walk per node against walk once + a tree of fan-out k, and `--job-start` of epochfs-model.

Run: cd tests/unit/python && /usr/bin/python3 -m unittest -v test_job_start_model.py
Standard library only (`main` with --max-nodes 1 simulates nothing, so needs no numpy).
"""

import io
import math
import unittest
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace

import checkout_paths  # noqa: F401,E402  (this checkout's tools/python)

from epochfs import model  # noqa: E402

# One walk: 1,000 files at 100 files/s = 10 s; the metadata server serves 400 calls/s at 2
# calls a file, so it saturates above 2 walkers (200 files/s over p walkers).
J = model.JobStart(F=1000.0, c=2.0, M=400.0, w=100.0, B=10.0, L=1000.0, k=4, s=0.0, h=0.0)


class JobStartTest(unittest.TestCase):
    def test_one_node_is_one_walk_either_way(self):
        per_node, once, tree, depth, calls_p, calls_1 = model.job_start(J, 1)
        self.assertAlmostEqual(per_node, 10.0)
        self.assertAlmostEqual(once, 10.0)
        self.assertEqual((tree, depth), (0.0, 0))
        self.assertEqual(calls_p, calls_1)
        # the default inputs too: the measured 1 M files in 5.6 s
        d = model.JobStart(F=1e6)
        self.assertAlmostEqual(model.job_start(d, 1)[0], 5.6)
        self.assertAlmostEqual(model.job_start(d, 1)[1], 5.6)

    def test_walk_per_node_is_linear_in_p_once_the_server_saturates(self):
        self.assertAlmostEqual(model.walk_seconds(J, 2), 10.0)   # 2 x 100 x 2 = 400 calls/s
        for p in (4, 8, 64, 1024):
            self.assertAlmostEqual(model.walk_seconds(J, p), p * J.F * J.c / J.M)
            self.assertAlmostEqual(model.walk_seconds(J, 2 * p), 2 * model.walk_seconds(J, p))

    def test_walk_once_does_not_depend_on_p_and_the_tree_grows_with_depth(self):
        # store and forward (s = 0): each level sends the 10,000-byte snapshot k = 4 times at
        # 1,000 bytes/s, 40 s a level
        for d in range(1, 6):
            full = sum(4 ** i for i in range(d + 1))          # 5, 21, 85, 341, 1365 nodes
            self.assertEqual(model.tree_depth(full, 4), d)
            self.assertEqual(model.tree_depth(full + 1, 4), d + 1)
            self.assertAlmostEqual(model.tree_seconds(J, full), 40.0 * d)
            self.assertAlmostEqual(model.job_start(J, full)[1], 10.0 + 40.0 * d)

    def test_tree_grows_like_log_p(self):
        for p in (2, 5, 16, 100, 1024, 10 ** 6):
            depth = model.tree_depth(p, 4)
            self.assertLessEqual(depth, math.ceil(math.log(p, 4)))
            self.assertGreaterEqual(depth, math.ceil(math.log(p, 4)) - 1)
            self.assertLessEqual(model.tree_seconds(J, p), 40.0 * math.ceil(math.log(p, 4)))
        # pipelined: the snapshot leaves the root once per child, then each level adds a chunk
        pipe = replace(J, s=100.0, h=0.5)
        self.assertAlmostEqual(model.tree_seconds(pipe, 5), 40.0 + 0.5)
        self.assertAlmostEqual(model.tree_seconds(pipe, 1365), 40.0 + 4 * 0.4 + 5 * 0.5)
        # the root of fewer than k others sends to those only
        self.assertAlmostEqual(model.tree_seconds(J, 2), 10.0)
        # fan-out p - 1: one sender to all
        self.assertAlmostEqual(model.tree_seconds(replace(J, k=1023), 1024), 1023 * 10.0)

    def test_metadata_calls_ratio_is_p(self):
        for p in (1, 2, 16, 1024):
            _, _, _, _, calls_p, calls_1 = model.job_start(J, p)
            self.assertAlmostEqual(calls_1, J.F * J.c)
            self.assertAlmostEqual(calls_p / calls_1, p)

    def test_main_prints_the_job_start_table_up_to_1024_nodes(self):
        out = io.StringIO()
        with redirect_stdout(out):
            rc = model.main(["--job-start", "--max-nodes", "1", "--files", "1e6",
                             "--fan-out", "8", "--calls-per-file", "1"])
        self.assertEqual(rc, 0)
        text = out.getvalue()
        self.assertIn("Job start:", text)
        rows = {int(line.split("|")[1]): [c.strip() for c in line.split("|")[2:-1]]
                for line in text.split("Job start:")[1].splitlines()
                if line.startswith("| ") and line.split("|")[1].strip().isdigit()}
        self.assertEqual(sorted(rows), [2 ** i for i in range(11)])
        self.assertEqual(rows[1][0], "5.6")
        self.assertEqual(rows[1][1], "5.6")
        self.assertEqual(rows[1024][3], "4")                    # 1 + 8 + 64 + 512 < 1024
        self.assertEqual(rows[1024][5], "1,024,000,000")
        self.assertEqual(rows[1024][6], "1,000,000")
        self.assertAlmostEqual(float(rows[1024][0]), 1024 * 1e6 / 2e5, places=1)
        # without --job-start the table is not printed
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(model.main(["--max-nodes", "1"]), 0)
        self.assertNotIn("Job start:", out.getvalue())

    def test_bad_fan_out_is_a_usage_error(self):
        with redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as e:
            model.main(["--fan-out", "0"])
        self.assertEqual(e.exception.code, 2)


if __name__ == "__main__":
    unittest.main()
