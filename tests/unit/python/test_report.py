"""Tests of epochfs_bench.report's peers and cluster pictures (`tools/bench/train-bench report --peers /
--cluster`), from small hand-written result documents.

Run: cd tests/unit/python && /usr/bin/python3 -m unittest -v test_report
The tables need only the standard library; the pictures skip without matplotlib.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from checkout_paths import REPO  # noqa: E402  (this checkout's tools/python and tools/bench/python on sys.path)

from epochfs_bench import report  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

try:
    import matplotlib  # noqa: F401
    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False


def peers_doc():
    cells = []
    for fs, base in (("native", 1000.0), ("epochfs", 500.0)):
        for t in (1, 2):
            for state in ("cold", "warm"):
                f = {"fs": fs, "workload": "files", "threads": t, "state": state,
                     "files_per_s": [base * t, base * t + 10, base * t - 10]}
                m = {"fs": fs, "workload": "shards", "threads": t, "state": state,
                     "mb_per_s": [base / 2 * t, base / 2 * t + 1]}
                if fs != "native":
                    f["daemon_cpu_s_per_1k_files"] = [0.25, 0.5, 0.75]
                    m["daemon_cpu_s_per_gb"] = [1.0]
                cells += [f, m]
    return {"config": {"files": 10, "file_bytes": 1100000, "shards": 2, "shard_mib": 1,
                       "threads": [1, 2], "repeats": 3, "filesystems": ["native", "bindfs", "epochfs"],
                       "load_average_before": 1.0, "load_average_after": 2.0},
            "cells": cells, "skipped": {"bindfs": "bindfs is not installed"}}


def cluster_doc():
    node = lambda ram, peer, source: {"ram": ram << 20, "disk": 0, "staging": 0, "peer": peer << 20,
                                      "source": source << 20, "peer_fetched": peer << 20}
    return {"nodes": 2, "ranks_per_node": 2, "files": 64, "dataset_bytes": 4 << 20,
            "plain": {"per_node": [node(1, 3, 0), node(2, 2, 1)]},
            "locality": [{"local_batch": 32, "per_node": [node(4, 0, 0), node(3, 1, 0)]}]}


def assert_report_png(test, flag, doc, png):
    """`train-bench report FLAG DOC.json --png DIR` writes DIR/PNG, a PNG file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "doc.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        subprocess.run([sys.executable, os.path.join(REPO, "tools", "bench", "train-bench"), "report",
                        flag, path, "--png", os.path.join(tmp, "img")], check=True,
                       capture_output=True)
        with open(os.path.join(tmp, "img", png), "rb") as f:
            test.assertEqual(f.read(8), PNG_MAGIC)


class PeersReportTest(unittest.TestCase):
    # Pass: the table shows each cell as median [min..max] of its repeats, the daemon CPU of
    # the smallest T, and a skipped filesystem with its reason.
    def test_table_medians_and_skips(self):
        table = report.peers_table(peers_doc())
        self.assertIn("| native | cold | 1000 [990..1010] | 2000 [1990..2010] | 500 [500..501] | "
                      "1000 [1000..1001] | - |", table)
        self.assertIn("| epochfs | warm | 500 [490..510] | 1000 [990..1010] | 250 [250..251] | "
                      "500 [500..501] | 0.500 [0.250..0.750] |", table)
        self.assertIn("| bindfs | skipped: bindfs is not installed |", table)

    # Pass: `train-bench report --peers F --png DIR` writes DIR/peers-matrix.png, a PNG.
    @unittest.skipUnless(HAVE_MPL, "matplotlib (python3-matplotlib) is not installed")
    def test_train_bench_report_peers_png(self):
        assert_report_png(self, "--peers", peers_doc(), "peers-matrix.png")


class ClusterReportTest(unittest.TestCase):
    # Pass: every node of every measured epoch is a row with its bytes by source in MiB and
    # their total; a result without per-node counters is refused with ValueError.
    def test_table_rows_per_node(self):
        table = report.cluster_table(cluster_doc())
        self.assertIn("| DistributedSampler | 1 | 2.00 | 0.00 | 0.00 | 2.00 | 1.00 | 5.00 |", table)
        self.assertIn("| LocalityAwareSampler b=32 | 0 | 4.00 | 0.00 | 0.00 | 0.00 | 0.00 | 4.00 |", table)
        with self.assertRaises(ValueError):
            report.cluster_table({"nodes": 3, "files": 96})

    # Pass: `train-bench report --cluster F --png DIR` writes DIR/cluster-bytes-by-source.png.
    @unittest.skipUnless(HAVE_MPL, "matplotlib (python3-matplotlib) is not installed")
    def test_train_bench_report_cluster_png(self):
        assert_report_png(self, "--cluster", cluster_doc(), "cluster-bytes-by-source.png")


if __name__ == "__main__":
    unittest.main()
