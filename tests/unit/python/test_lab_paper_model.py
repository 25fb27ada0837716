"""Unit tests for epochfs_lab.paper_model (the model's figure per epoch of `cluster-lab paper`,
with the measured ingest term D/U_p, D/U1 where U_p is not measured), the `owned` epochs that
measure U_p (epochfs_lab.paper.owned_indices) and tools/bench/epochfs-model's --from-lab inputs.

Run: cd tests/unit/python && /usr/bin/python3 -m unittest -v test_lab_paper_model.py
Standard library only.
"""

import json
import os
import sys
import tempfile
import unittest

import checkout_paths  # noqa: F401,E402  (this checkout's tools/python and tools/bench/python)

from epochfs_lab.paper import owned_indices  # noqa: E402
from epochfs_lab.paper_model import (apply_model, from_lab_argv, ingest_rate,  # noqa: E402
                                     lab_inputs, model_seconds)

D = 1000.0   # bytes
R = 100.0    # source bytes/s: D/R = 10 s
N = 50.0     # one node's link payload bytes/s
U = 500.0    # the nodes' ingest rate together: D/U = 2 s


def run(nodes, case, epoch, seconds, cache=None, b=None, saturated=False):
    return {"nodes": nodes, "case": case, "epoch": epoch, "seconds": seconds,
            "cache_per_node": 1.5 * D / nodes if cache is None else cache,
            "balance_fraction": b, "cpu_saturated": saturated, "link_bytes": 0.0}


def doc(runs, calibration=None, files=100, ingest=None):
    out = {"dataset_bytes": D, "files": files, "runs": runs,
           "rates": {"source_bytes_per_s": R, "link_payload_bytes_per_s": N}}
    if calibration is not None:
        out["calibration"] = calibration
    if ingest is not None:
        out["ingest"] = [{"nodes": p, "case": "owned", "epoch": i + 1, "seconds": s}
                         for i, (p, s) in enumerate(ingest)]
    return out


class ModelSecondsTest(unittest.TestCase):
    def test_direct_pays_source_and_ingest_every_epoch(self):
        for epoch in (1, 2, 3):
            self.assertAlmostEqual(model_seconds("direct", epoch, 4, D, R, N, D, u=U), 12.0)
            self.assertAlmostEqual(model_seconds("direct", epoch, 4, D, R, N, D), 10.0)

    def test_epoch_one_of_cached_cases_is_the_source_fill(self):
        for case in ("local", "cluster", "cluster-order", "locality"):
            self.assertAlmostEqual(model_seconds(case, 1, 2, D, R, N, D, b=0.03, u=U), 10.0)

    def test_cluster_adds_ingest_to_the_distributed_cache_term(self):
        # p = 2, a = 1: a D/(pN) (p-1)/p = 1000/100 * 1/2 = 5 s, + D/U = 2 s
        io = model_seconds("cluster", 2, 2, D, R, N, D)
        self.assertAlmostEqual(io, 5.0)
        self.assertAlmostEqual(model_seconds("cluster", 2, 2, D, R, N, D, u=U), io + 2.0)
        self.assertAlmostEqual(model_seconds("cluster-order", 3, 2, D, R, N, D, u=U), 7.0)

    def test_partial_cache_reads_the_rest_from_the_source(self):
        # p = 2, C = D/4 per node: a = 0.5 -> 0.5 * 10 + 0.5 * 1000/100 * 1/2 = 7.5 s
        self.assertAlmostEqual(model_seconds("cluster", 2, 2, D, R, N, D / 4), 7.5)

    def test_locality_moves_only_b(self):
        # p = 4, a = 1, b = 0.05: D b/(pN) = 1000 * 0.05 / 200 = 0.25 s, + 2 s
        self.assertAlmostEqual(model_seconds("locality", 2, 4, D, R, N, D, b=0.05, u=U), 2.25)
        self.assertAlmostEqual(model_seconds("locality", 2, 4, D, R, N, D, b=None, u=U), 2.0)

    def test_local_holds_what_it_has_read(self):
        # p = 2, C = 0.75 D: epoch 2 holds D/2 -> 0.5 D/R; epoch 3 holds C -> 0.25 D/R
        self.assertAlmostEqual(model_seconds("local", 2, 2, D, R, N, 0.75 * D), 5.0)
        self.assertAlmostEqual(model_seconds("local", 3, 2, D, R, N, 0.75 * D, u=U), 2.5 + 2.0)

    def test_p1_with_every_byte_local_is_the_ingest_term_alone(self):
        for case in ("local", "cluster", "cluster-order", "locality"):
            self.assertAlmostEqual(model_seconds(case, 2, 1, D, R, N, 1.5 * D), 0.0)
            self.assertAlmostEqual(model_seconds(case, 2, 1, D, R, N, 1.5 * D, u=U), 2.0)

    def test_lab_term_does_not_shrink_with_p(self):
        # u is the nodes' joint rate (U1 or U_p on the lab): the same D/u whatever p.
        for p in (2, 4, 8):
            io = model_seconds("locality", 2, p, D, R, N, 1.5 * D / p, b=0.0)
            self.assertAlmostEqual(model_seconds("locality", 2, p, D, R, N, 1.5 * D / p, b=0.0, u=U),
                                   io + D / U)


class IngestRateTest(unittest.TestCase):
    def test_p1_cluster_epochs_two_and_later(self):
        runs = [run(1, "cluster", 1, 10.0), run(1, "cluster", 2, 1.5, saturated=True),
                run(1, "cluster", 3, 2.5), run(1, "local", 2, 9.0), run(2, "cluster", 2, 4.0)]
        u, how = ingest_rate(doc(runs))
        self.assertAlmostEqual(u, D / 2.0)
        self.assertEqual((how["from"], how["case"], how["epochs"]), ("runs", "cluster", [2, 3]))
        self.assertEqual(how["cpu_saturated_epochs"], [2])

    def test_falls_back_to_local_then_calibration(self):
        u, how = ingest_rate(doc([run(1, "local", 2, 4.0), run(2, "cluster", 2, 1.0)]))
        self.assertAlmostEqual(u, D / 4.0)
        self.assertEqual(how["case"], "local")
        u, how = ingest_rate(doc([run(2, "cluster", 2, 1.0)],
                                 calibration=[run(1, "cluster", 1, 10.0), run(1, "cluster", 2, 0.5)]))
        self.assertAlmostEqual(u, D / 0.5)
        self.assertEqual(how["from"], "calibration")

    def test_none_without_p1(self):
        self.assertEqual(ingest_rate(doc([run(2, "cluster", 2, 1.0), run(1, "cluster", 1, 9.0)])),
                         (None, None))


class ApplyModelTest(unittest.TestCase):
    def test_sets_both_figures_and_the_rates(self):
        d = doc([run(1, "cluster", 2, 2.0), run(1, "cluster", 3, 2.0), run(2, "direct", 1, 11.0),
                 run(2, "cluster", 2, 6.0, cache=D)])
        u = apply_model(d)
        self.assertAlmostEqual(u, D / 2.0)
        self.assertAlmostEqual(d["rates"]["U1_bytes_per_s"], 500.0)
        self.assertAlmostEqual(d["rates"]["D_over_U1_s"], 2.0)
        r = d["runs"]
        self.assertAlmostEqual(r[0]["model_seconds_io"], 0.0)
        self.assertAlmostEqual(r[0]["model_seconds"], 2.0)
        self.assertAlmostEqual(r[2]["model_seconds_io"], 10.0)
        self.assertAlmostEqual(r[2]["model_seconds"], 12.0)
        self.assertAlmostEqual(r[3]["model_seconds"], 5.0 + 2.0)

    def test_without_u1_the_model_is_the_io_terms(self):
        d = doc([run(2, "direct", 2, 11.0)])
        self.assertIsNone(apply_model(d))
        self.assertIsNone(d["rates"]["D_over_U1_s"])
        self.assertAlmostEqual(d["runs"][0]["model_seconds"], d["runs"][0]["model_seconds_io"])

    def test_u1_from_another_run_of_the_same_d(self):
        other = doc([run(1, "cluster", 2, 4.0)])
        d = doc([run(2, "direct", 2, 11.0)])
        self.assertAlmostEqual(apply_model(d, ("other.json", other)), D / 4.0)
        self.assertEqual(d["rates"]["U1_measured"]["from"], "other.json")
        self.assertAlmostEqual(d["runs"][0]["model_seconds"], 10.0 + 4.0)
        other["dataset_bytes"] = 2 * D
        with self.assertRaises(ValueError):
            apply_model(doc([run(2, "direct", 2, 11.0)]), ("other.json", other))


    def test_u_p_from_owned_epochs_where_measured(self):
        # U1: D/2 s; U_4: D / mean(3, 5) = D/4 s; p = 2 not measured: D/U1.
        d = doc([run(1, "cluster", 2, 2.0), run(4, "locality", 2, 5.0, cache=D, b=0.05),
                 run(2, "locality", 2, 3.0, cache=D, b=0.05), run(4, "direct", 2, 13.0)],
                ingest=[(4, 3.0), (4, 5.0)])
        self.assertAlmostEqual(apply_model(d), D / 2.0)
        self.assertEqual(sorted(d["rates"]["U_by_nodes"]), ["1", "4"])
        self.assertAlmostEqual(d["rates"]["U_by_nodes"]["4"], D / 4.0)
        r = d["runs"]
        # p = 4 locality: D b/(pN) = 0.25 s, + D/U_4 = 4 s; with D/U1: + 2 s
        self.assertAlmostEqual(r[1]["model_seconds"], 4.25)
        self.assertAlmostEqual(r[1]["model_seconds_u1"], 2.25)
        self.assertAlmostEqual(r[1]["model_seconds_io"], 0.25)
        self.assertAlmostEqual(r[2]["model_seconds"], 0.25 * 2 + 2.0)  # D b/(2N) + D/U1
        self.assertAlmostEqual(r[3]["model_seconds"], 10.0 + 2.0)  # direct: D/R + D/U1
        self.assertAlmostEqual(r[0]["model_seconds"], r[0]["model_seconds_u1"])


class OwnedIndicesTest(unittest.TestCase):
    def test_each_rank_reads_only_its_nodes_files_once(self):
        owners = [i % 3 for i in range(30)] + [-1, 7]  # 3 nodes; one uncached, one foreign
        out = owned_indices(len(owners), 6, 2, owners, seed=0, epoch=1)
        self.assertEqual(sorted(i for r in out for i in r), list(range(len(owners))))
        for r, files in enumerate(out):
            local = [i for i in files if 0 <= owners[i] < 3]
            self.assertTrue(all(owners[i] == r // 2 for i in local), r)
            self.assertEqual(len(local), 5)  # 10 files a node, dealt round robin to 2 ranks
        self.assertEqual(out, owned_indices(len(owners), 6, 2, owners, seed=0, epoch=1))
        self.assertNotEqual(out, owned_indices(len(owners), 6, 2, owners, seed=0, epoch=2))


class FromLabTest(unittest.TestCase):
    def test_u1_is_the_per_node_u_in_samples(self):
        d = doc([run(1, "cluster", 2, 2.0), run(1, "direct", 1, 10.0)], files=100)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(d, f)
        try:
            m = lab_inputs(f.name)
            self.assertAlmostEqual(m["U"], 100 / 2.0)   # samples/s: files / mean seconds
            self.assertAlmostEqual(m["R"], 100 / 10.0)
            argv, note = from_lab_argv(["--from-lab", f.name, "--max-nodes", "8"])
            self.assertIn("--decode-all", argv)
            self.assertEqual(argv[argv.index("--U") + 1], repr(50.0))
            self.assertIn("U1 per node", note)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
