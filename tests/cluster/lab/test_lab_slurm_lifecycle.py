"""`cluster-lab up --slurm` and `down` leave nothing: after a clean `up --slurm` (munged and
slurmctld on node0, a slurmd per node, every node idle in sinfo, node names resolving in the
nodes, a /run of their own) and after `up --slurm` was SIGKILLed once the first slurmd ran:
no namespace, link, mount, loop device, cgroup, process (slurmctld, slurmd, munged included) or
file is left, and `down` twice says there is nothing to remove."""

import os
import shutil
import signal
import subprocess
import time
import unittest

import labtest
from epochfs_lab import workload as lab_workload
from epochfs_lab.state import LabState
from epochfs_lab.util import read_text


def _argv(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except (OSError, ValueError):
        return [b""]


def slurm_processes(directory):
    out = []
    for p in os.listdir("/proc"):
        argv = _argv(p) if p.isdigit() else [b""]
        if os.path.basename(argv[0]) in (b"slurmctld", b"slurmd", b"munged") and directory.encode() in b" ".join(argv):
            out.append(p)
    return out


class LabSlurmLifecycleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = labtest.fresh_root("slurm-lifecycle")
        cls.data = os.path.join(cls.root, "data")
        lab_workload.make_dataset(cls.data, 20, min_kib=4, max_kib=8, classes=2)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def check_gone(self, prefix, directory):
        self.assertEqual(labtest.leftovers(prefix, directory) + slurm_processes(directory), [])
        r = labtest.cluster_lab("down", "--dir", directory)
        self.assertIn("nothing to remove", r.stderr)

    def test_up_status_exec_down(self):
        d = os.path.join(self.root, "clean")
        try:
            labtest.cluster_lab("up", "--slurm", "--nodes", "2", "--data", self.data, "--dir", d)
            st = labtest.status(d)
            self.assertEqual(st["slurm"]["conf"], os.path.join(d, "slurm", "slurm.conf"))
            self.assertEqual(len(slurm_processes(d)), 4, "munged, slurmctld, 2 slurmd")
            r = labtest.cluster_lab("exec", "--dir", d, "node1", "sinfo", "-h", "-N", "-o", "%N %T")
            self.assertEqual(r.stdout.split(), ["node0", "idle", "node1", "idle"])
            r = labtest.cluster_lab("exec", "--dir", d, "node1", "getent", "hosts", "node0")
            self.assertEqual(r.stdout.split()[0], "10.99.0.11")
            r = labtest.cluster_lab("exec", "--dir", d, "node0", "findmnt", "-n", "-o", "FSTYPE", "/run")
            self.assertEqual(r.stdout.strip(), "tmpfs")
            self.assertNotIn("node0", read_text("/etc/hosts").split(), "the host's /etc/hosts untouched")
            prefix = st["prefix"]
        finally:
            labtest.cluster_lab("down", "--dir", d, check=False)
        self.check_gone(prefix, d)

    def test_down_after_up_was_killed(self):
        d = os.path.join(self.root, "killed")
        up = subprocess.Popen([labtest.CLUSTER_LAB, "up", "--slurm", "--nodes", "2", "--data", self.data,
                               "--dir", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while up.poll() is None and time.monotonic() < deadline:
            if any(os.path.basename(_argv(p)[0]) == b"slurmd" for p in slurm_processes(d)):
                break
            time.sleep(0.02)
        up.send_signal(signal.SIGKILL)
        self.assertEqual(up.wait(), -signal.SIGKILL, "up was killed while it started Slurm")
        prefix = LabState.load(d).prefix
        labtest.cluster_lab("down", "--dir", d)
        self.check_gone(prefix, d)


if __name__ == "__main__":
    labtest.main()
