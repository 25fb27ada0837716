"""The cluster holds a dataset that fits only all together, counted from outside the daemons:
4 lab nodes of 2/3 D memory each with `--ram-cache 50%` (a RAM tier of 1/3 D: half of the
node, not of the host), 2,000 files of 150-400 KiB. Epoch 1 reads <= 1.01 D from the source
(inotify; the loop device's counter beside it), epoch 2 nothing, the bytes on the nodes' veths
are (p-1)/p of what the nodes read within 10 %, and every read has the source's bytes
(epochfs_lab.capacity; `cluster-lab capacity` prints the same figures)."""

import os
import unittest

import labtest
from epochfs_lab import capacity as lab_capacity


class LabCapacityTest(unittest.TestCase):
    def test_four_nodes_with_a_third_of_the_dataset_each(self):
        root = labtest.fresh_root("capacity")
        try:
            r = lab_capacity.run(files=2000, nodes=4, epochs=2, workdir=root, say=print)
        finally:
            os.rmdir(root)
        d, p = r["dataset_bytes"], r["nodes"]
        for ram, limit in zip(r["ram_cache"], r["memory_limit"]):
            self.assertEqual(limit, r["node_memory"])
            self.assertEqual(ram, limit // 2)
        e1, e2 = r["epochs"]
        for e in (e1, e2):
            self.assertEqual(e["bad_reads"], [], "epoch %d" % e["epoch"])
            self.assertEqual(e["reads"], p * r["files"])
            self.assertEqual(e["bytes_read"], p * d)
            ratio = e["link_bytes"] / ((p - 1) / p * e["bytes_read"])
            self.assertLess(abs(ratio - 1), 0.10, "epoch %d: link bytes %.3f of (p-1)/p" % (e["epoch"], ratio))
        self.assertLessEqual(e1["source_bytes"], 1.01 * d)
        self.assertGreaterEqual(e1["source_bytes"], d)  # each file at least once: the counter works
        self.assertEqual(e2["source_bytes"], 0)
        self.assertLess(e2["device_bytes"], 0.01 * d)


if __name__ == "__main__":
    labtest.main()
