"""A Slurm job that uses the epochfs prolog/epilog (tools/packaging/slurm/, docs/CLUSTER.md) on a
2-node lab with `cluster-lab up --slurm`: `sbatch -N 2 --comment=epochfs:SOURCE` gets a mount on
both nodes at allocation, EPOCHFS_MOUNT in every task; a DistributedSampler reader per node
reads 2 epochs (each rank's share changes between them) with the source's bytes, and every file
comes from the source once (inotify, from outside); after the job no mount, no daemon and no
secret is left on either node. A job without the comment gets no mount, and one naming a
dataset that does not exist runs without one: nothing mounted, nothing left, no node drained.
A job of another user (nobody) reads its mount, and gets none for a directory it cannot reach."""

import os

import labtest
import slurmtest
from epochfs_lab import workload as lab_workload
from epochfs_lab.util import read_text

JOB = """#!/bin/bash
set -e
srun --ntasks-per-node=1 %s
"""


class LabSlurmPrologTest(slurmtest.SlurmLabCase):
    NAME = "slurm-prolog"

    def test_1_job_with_a_mount(self):
        out = os.path.join(self.root, "prolog-reads")
        opens = lab_workload.source_counter(self.lab.source["path"])
        try:
            job_id, state, output = self.job("prolog", JOB % self.reader_cmd(out),
                                             comment="epochfs:" + self.lab.source["path"])
            self.assertEqual(state, "COMPLETED", output)
            ranks = self.check_reads(out)
            self.assert_each_file_once(opens)
        finally:
            opens.close()
        base = self.lab.doc["slurm"]["mount_base"]
        for r in ranks:  # the task prolog's EPOCHFS_MOUNT: the node's per-job mount
            self.assertEqual(r["env_mount"], os.path.join(base.replace("%n", r["host"]), "job-" + job_id))
        self.assertEqual(self.job_leftovers(["job-" + job_id]), [])
        self.assert_nodes_idle()

    def test_2_job_without_a_mount(self):
        _, state, output = self.job("plain", JOB % "sh -c 'echo mount=${EPOCHFS_MOUNT:-none}'")
        self.assertEqual(state, "COMPLETED", output)
        self.assertEqual(output.split(), ["mount=none"] * 2)

    def test_3_failed_start_leaves_nothing(self):
        job_id, state, output = self.job("missing", JOB % "sh -c 'echo mount=${EPOCHFS_MOUNT:-none}'",
                                         comment="epochfs:/nonexistent/dataset")
        self.assertEqual(state, "COMPLETED", output)
        self.assertEqual(output.split(), ["mount=none"] * 2)
        self.assertEqual(self.job_leftovers(["job-" + job_id]), [])
        self.assert_nodes_idle()
        log = "".join(read_text(os.path.join(self.lab.doc["slurm"]["state_dir"].replace("%n", "node%d" % i),
                                             "slurm-hooks.log")) for i in range(slurmtest.NODES))
        self.assertIn("job %s on node0: start failed" % job_id, log)

    def test_4_another_users_job(self):
        """A job of nobody (uid 65534) gets a mount it can read (--allow-other, the source's
        modes), and none for a directory it could not reach (/root, 0700)."""
        show = "sh -c 'echo mount=${EPOCHFS_MOUNT:-none} uid=$(id -u) dirs=$(ls ${EPOCHFS_MOUNT:-/nonexistent} | wc -l)'"
        job_id, state, output = self.job("nobody", JOB % show, comment="epochfs:" + self.lab.source["path"], uid=NOBODY)
        self.assertEqual(state, "COMPLETED", output)
        classes = len({p.split("/")[0] for p in self.dataset})
        self.assertEqual(sorted(output.split()), sorted(["mount=%s/job-%s" % (
            self.lab.doc["slurm"]["mount_base"].replace("%n", "node%d" % i), job_id) for i in range(2)]
            + ["uid=%d" % NOBODY] * 2 + ["dirs=%d" % classes] * 2))
        self.assertEqual(self.job_leftovers(["job-" + job_id]), [])
        os.makedirs("/root/.epochfs-slurm-test", mode=0o700, exist_ok=True)
        try:
            job_id, state, output = self.job("nobody-root", JOB % show, comment="epochfs:/root/.epochfs-slurm-test",
                                             uid=NOBODY)
        finally:
            os.rmdir("/root/.epochfs-slurm-test")
        self.assertEqual(state, "COMPLETED", output)
        self.assertEqual(output.split().count("mount=none"), 2, output)
        self.assertEqual(self.job_leftovers(["job-" + job_id]), [])
        self.assert_nodes_idle()


NOBODY = 65534


if __name__ == "__main__":
    labtest.main()
