"""Faults on a lab cluster mid-epoch (4 nodes, 2,000 files of 150-400 KiB, warm caches): a
node's link cut at the bridge for longer than the bound below, then restored; a worker daemon
SIGKILLed (its supervisor starts a new one); a worker frozen (SIGSTOP) past the bound, then
thawed. While every node reads the whole tree (each file's pages dropped after its read, so
each read reaches the daemon): every read on every node returns the source's bytes, no read on
another node waits longer than the peer deadline (2 s, the default) plus READ_MARGIN_S for the
source and a loaded 2-core machine, the fault sent reads to the source (inotify), the node
rejoins (every node sees all 4 live), and the next epoch, read on every node, is right and
moves at most (p-1)/p (+10 %) of the bytes read over the links (veth counters)."""

import os
import shutil
import time
import unittest

import labtest
from epochfs_lab import fault as lab_fault, workload as lab_workload
from epochfs_lab.lab import Lab
from epochfs_lab.down import down

PEER_TIMEOUT_S = 2.0  # epochfs's default --peer-timeout, which the lab keeps
READ_MARGIN_S = 5.0  # the source's time for a file, generously, on a saturated 2-core VM
HOLD_S = PEER_TIMEOUT_S + READ_MARGIN_S + 2  # a read that waited out the fault breaks the bound
FILES = 2000


class LabFaultTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = labtest.fresh_root("faults")
        try:
            data = os.path.join(cls.root, "data")
            cls.dataset = lab_workload.make_dataset(data, FILES)
            cls.d = sum(s for s, _ in cls.dataset.values())
            cls.lab = Lab.up(data, 4, directory=os.path.join(cls.root, "lab"), link=125_000_000,
                             source_bw=100 << 20, node_memory=1 << 30, bindir=os.environ.get("EPOCHFS_BIN_DIR"))
            cls.counters = lab_workload.Counters(cls.lab, lab_workload.source_counter(cls.lab.source["path"]),
                                                 cls.dataset)
            cls.epoch_no = 1
            warm, reads = cls.run_epoch()
            assert not lab_workload.check_reads(reads, cls.dataset), "the warm-up epoch read wrong bytes"
        except BaseException:
            cls.tearDownClass()  # unittest does not call it when setUpClass fails
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            down(os.path.join(cls.root, "lab"), verbose=False)
        finally:
            shutil.rmtree(cls.root, ignore_errors=True)

    @classmethod
    def run_epoch(cls, during=None):
        cls.epoch_no += 1
        figures, reads = lab_workload.epoch(cls.lab, cls.counters, cls.dataset, cls.epoch_no, during=during)
        print(lab_workload.summary_line("epoch %d" % cls.epoch_no, figures, cls.d, 4), flush=True)
        return figures, reads

    def check_fault_epoch(self, victim, during):
        window = {}

        def timed():
            time.sleep(2)  # the readers are well into their round
            window["start"] = time.monotonic()
            during()
            window["end"] = time.monotonic()
            time.sleep(2)

        figures, reads = self.run_epoch(timed)
        self.assertEqual(lab_workload.check_reads(reads, self.dataset), [])
        others = [r for name, rs in reads.items() if name != victim["name"] for r in rs]
        in_fault = [r for r in others if window["start"] <= r["start"] <= window["end"]]
        slowest = max(r["seconds"] for r in others)
        print("%s: %d reads on the other nodes during the fault, slowest of all %.2f s; "
              "source %d opens" % (victim["name"], len(in_fault), slowest, figures["source_opens"]), flush=True)
        self.assertGreater(len(in_fault), 0, "no read on another node overlapped the fault")
        self.assertGreater(figures["source_opens"], 0, "the fault sent no read to the source")
        self.assertLessEqual(slowest, PEER_TIMEOUT_S + READ_MARGIN_S)
        t0 = time.monotonic()
        self.lab.wait_cluster(60)
        print("%s: all 4 nodes see each other live %.1f s after the repair" % (
            victim["name"], time.monotonic() - t0), flush=True)
        after, reads = self.run_epoch()
        self.assertEqual(lab_workload.check_reads(reads, self.dataset), [])
        self.assertEqual(after["bytes_read"], 4 * self.d)
        # No storm of transfers after the rejoin: at most (p-1)/p of the bytes read cross the
        # links (less when guest copies serve reads; veth counters, from outside).
        self.assertLess(after["link_bytes"], 1.10 * 3 / 4 * after["bytes_read"])
        return after

    def test_link_cut_and_restored(self):
        victim = self.lab.node("node1")

        def fault():
            lab_fault.cut_link(self.lab, victim)
            time.sleep(HOLD_S)
            lab_fault.restore_link(self.lab, victim)

        self.check_fault_epoch(victim, fault)

    def test_worker_killed_and_restarted(self):
        victim = self.lab.node("node2")
        supervisor, _ = self.lab.daemon_pids(victim)
        pids = {}

        def fault():
            pids["old"] = lab_fault.kill_worker(self.lab, victim)
            pids["new"] = lab_fault.wait_new_worker(self.lab, victim, pids["old"])
            time.sleep(2)

        after = self.check_fault_epoch(victim, fault)
        self.assertEqual(self.lab.daemon_pids(victim), (supervisor, pids["new"]))
        # The new worker started empty: its share came from the source again, once.
        self.assertLess(after["source_bytes"], 0.5 * self.d)

    def test_worker_frozen_and_thawed(self):
        victim = self.lab.node("node3")

        def fault():
            pid = lab_fault.freeze(self.lab, victim)
            try:
                time.sleep(HOLD_S)
            finally:
                lab_fault.thaw(self.lab, victim, pid)

        self.check_fault_epoch(victim, fault)


if __name__ == "__main__":
    labtest.main()
