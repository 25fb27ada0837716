"""What the lab's Slurm tests share: a 2-node lab with `--slurm` (one per test file, taken
down after it, checked to leave nothing), a job run to its end, the DistributedSampler reader's
results checked against the dataset, and what a job left on the nodes."""

import glob
import json
import os
import shutil
import unittest

import labtest
from epochfs import mount_table
from epochfs_lab import node as lab_node, slurm as lab_slurm, workload as lab_workload
from epochfs_lab.lab import Lab
from epochfs_lab.down import down
from epochfs_lab.util import LabError, read_text

HERE = os.path.dirname(os.path.abspath(__file__))
READER = os.path.join(HERE, "slurm_reader.py")
NODES = 2
FILES = 240


class SlurmLabCase(unittest.TestCase):
    NAME = "slurm"

    @classmethod
    def setUpClass(cls):
        cls.root = labtest.fresh_root(cls.NAME)
        cls.lab = None
        try:
            cls.dataset = lab_workload.make_dataset(os.path.join(cls.root, "data"), FILES, min_kib=20,
                                                    max_kib=120, classes=8)
            cls.lab = Lab.up(os.path.join(cls.root, "data"), NODES, directory=os.path.join(cls.root, "lab"),
                             link=125_000_000, source_bw=0, slurm=True)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.lab is not None:
                prefix, directory = cls.lab.state.prefix, cls.lab.state.dir
                down(directory, verbose=False)
                left = labtest.leftovers(prefix, directory)
                left += ["process %s" % p for p in ("slurmctld", "slurmd", "munged") if _running(p, directory)]
                assert not left, "down left: %s" % left
        finally:
            shutil.rmtree(cls.root, ignore_errors=True)

    # ---- jobs -------------------------------------------------------------------------------

    def job(self, name, script, comment=None, timeout=150, uid=None):
        """Runs a batch script (text) to its end, as user `uid` if given; returns (job id, final
        state, its output)."""
        jobs = os.path.join(self.root, "jobs")
        os.makedirs(jobs, exist_ok=True)
        os.chmod(jobs, 0o1777)  # a job of another user writes its output here
        path = os.path.join(jobs, name + ".sh")
        with open(path, "w") as f:
            f.write(script)
        out = os.path.join(jobs, name + ".out")
        argv = ["-N", str(NODES), "-o", out, "--time=%d" % (timeout // 60)] + (["--comment=" + comment] if comment else []) + [path]
        job_id = lab_slurm.submit(self.lab, argv, uid=uid)
        try:
            state = lab_slurm.wait_job(self.lab, job_id, timeout=timeout)
        except LabError as e:
            raise AssertionError("%s\njob output:\n%s" % (e, read_text(out))) from None
        return job_id, state, read_text(out)

    def reader_cmd(self, out, data=None):
        os.makedirs(out, exist_ok=True)
        return "/usr/bin/python3 %s --out %s --epochctl %s%s" % (
            READER, out, self.lab.doc["config"]["epochctl"], " --data " + data if data else "")

    def check_reads(self, out):
        """Every rank's reads right, each epoch the whole dataset across the ranks; the ranks."""
        ranks = [json.loads(read_text(p)) for p in sorted(glob.glob(os.path.join(out, "rank-*.json")))]
        self.assertEqual(len(ranks), NODES, "one reader per node")
        self.assertEqual(sorted(r["host"] for r in ranks), ["node%d" % i for i in range(NODES)])
        for epoch in range(2):
            seen = set()
            for r in ranks:
                for path, nbytes, sha1 in r["epochs"][epoch]:
                    self.assertEqual((nbytes, sha1), self.dataset[path], "%s on %s" % (path, r["host"]))
                    seen.add(path)
            self.assertEqual(seen, set(self.dataset), "epoch %d covers the dataset" % epoch)
        # The ranks' shares differ between the epochs, so a node reads what another one read.
        self.assertNotEqual({p for p, _, _ in ranks[0]["epochs"][0]}, {p for p, _, _ in ranks[0]["epochs"][1]})
        return ranks

    def assert_each_file_once(self, opens):
        src = self.lab.source["path"]
        counts = {os.path.relpath(p, src): n for p, n in opens.take().items()}
        counts = {p: n for p, n in counts.items() if p in self.dataset}
        self.assertEqual(sorted(p for p, n in counts.items() if n > 1), [], "files read twice from the source")
        self.assertEqual(set(counts), set(self.dataset), "every file read from the source once")

    def job_leftovers(self, patterns):
        """Mounts whose point contains one of `patterns`, epochfs processes, secret files: on
        every node (its own mount namespace) and here."""
        left = []
        for node in self.lab.nodes:
            mounts = mount_table.parse(lab_node.run_in(node, ["cat", mount_table.MOUNTINFO]).stdout)
            left += ["%s: mount %s" % (node["name"], m.mount_point) for m in mounts
                     if any(p in m.mount_point for p in patterns)]
            procs = (read_text(os.path.join(node["cgroups"][0], "cgroup.procs")) or "").split()
            left += ["%s: epochfs pid %s" % (node["name"], pid) for pid in procs if _is_epochfs(pid)]
        state = self.lab.doc["slurm"]["state_dir"].replace("%n", "*")
        left += ["secret " + p for p in glob.glob(os.path.join(state, "*.secret"))]
        left += ["process %s" % pid for pid in os.listdir("/proc") if pid.isdigit() and _is_epochfs(pid)
                 and self.root.encode() in _cmdline(pid)]
        return left

    def assert_nodes_idle(self):
        states = lab_slurm.sinfo_states(self.lab)
        self.assertEqual(states, {"node%d" % i: "idle" for i in range(NODES)}, "no node drained")


def _cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _is_epochfs(pid):
    argv = _cmdline(pid).split(b"\0")
    return bool(argv) and os.path.basename(argv[0]) == b"epochfs"


def _running(program, directory):
    return any(os.path.basename(_cmdline(p).split(b"\0")[0]) == program.encode() and directory.encode() in _cmdline(p)
               for p in os.listdir("/proc") if p.isdigit())
