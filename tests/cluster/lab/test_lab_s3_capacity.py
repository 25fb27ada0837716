"""The cluster over an object store, at capacity, counted by the store itself: the lab's rgw
(`cluster-lab up --s3`: tests/s3/rgw on a node of its own behind a 100 MiB/s link) holds 2,000
objects of 150-400 KiB (D bytes); 4 lab nodes of 2/3 D memory each mount s3://lab/data/ with
`--ram-cache 50%` (1/3 D each), and every epoch each node reads every object in its own
shuffled order. rgw's own perf counters: epoch 1 at most 1.02 GETs per object for the whole
cluster (and at least one: the counter works), epochs 2 and 3 none; every read has the
upload's bytes; what the nodes received from each other (their links less what the store
sent) is (p-1)/p of what they read within 10 %. Skipped (77) without the Ceph packages."""

import os
import shutil
import unittest

import labtest
from epochfs_lab import capacity as lab_capacity

CEPH = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "ceph", "monmaptool")


class LabS3CapacityTest(unittest.TestCase):
    def test_four_nodes_over_rgw_read_each_object_once_per_job(self):
        root = labtest.fresh_root("s3-capacity")
        try:
            r = lab_capacity.run(files=2000, nodes=4, epochs=3, workdir=root, say=print, s3=True)
        finally:
            os.rmdir(root)
        d, p, n = r["dataset_bytes"], r["nodes"], r["files"]
        for ram, limit in zip(r["ram_cache"], r["memory_limit"]):
            self.assertEqual(ram, limit // 2)
        for e in r["epochs"]:
            self.assertEqual(e["bad_reads"], [], "epoch %d" % e["epoch"])
            self.assertEqual(e["reads"], p * n)
            self.assertEqual(e["bytes_read"], p * d)
            ratio = e["link_bytes"] / ((p - 1) / p * e["bytes_read"])
            self.assertLess(abs(ratio - 1), 0.10, "epoch %d: peer bytes %.3f of (p-1)/p" % (e["epoch"], ratio))
        e1 = r["epochs"][0]
        self.assertGreaterEqual(e1["source_gets"], n)
        self.assertLessEqual(e1["source_gets"], 1.02 * n)
        self.assertGreaterEqual(e1["source_bytes"], d)
        for e in r["epochs"][1:]:
            self.assertEqual(e["source_gets"], 0, "epoch %d" % e["epoch"])


if __name__ == "__main__":
    missing = [b for b in CEPH if not shutil.which(b)]
    if missing:
        print("SKIPPED: %s not installed (tools/test installs the Ceph packages)" % ", ".join(missing))
        raise SystemExit(labtest.SKIP)
    labtest.main()
