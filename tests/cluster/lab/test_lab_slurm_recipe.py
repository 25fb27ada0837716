"""docs/CLUSTER.md's sbatch recipe ("Slurm (the daemon outlives the job step)"), taken from the
document at run time and changed only in its paths (dataset, secret's home, /tmp, the binary),
the node count (2) and UCX_TLS (tcp), run on a 2-node lab with `cluster-lab up --slurm`: the
daemons started with `--slurm` as a background step form one cache, the "training" step (a
DistributedSampler reader per node, 2 epochs) reads the source's bytes, every file comes from the
source once (inotify, from outside), and after the job no mount, no daemon and no secret is left
on either node."""

import os
import re

import labtest
import slurmtest
from epochfs_lab import workload as lab_workload
from epochfs_lab.util import read_text

DOC = os.path.join(labtest.REPO, "docs", "CLUSTER.md")


def recipe():
    """The bash block under docs/CLUSTER.md's "### Slurm (the daemon outlives the job step)"."""
    m = re.search(r"### Slurm \(the daemon outlives the job step\)\s*```bash\n(.*?)```", read_text(DOC), re.S)
    if not m:
        raise AssertionError("docs/CLUSTER.md has no sbatch recipe where this test looks for it")
    return m.group(1)


class LabSlurmRecipeTest(slurmtest.SlurmLabCase):
    NAME = "slurm-recipe"

    def test_sbatch_recipe(self):
        home, tmp, out = (os.path.join(self.root, d) for d in ("home", "tmp", "recipe-reads"))
        for i in range(slurmtest.NODES):  # each node's --cache-dir (the lab's nodes share one disk)
            os.makedirs(os.path.join(tmp, "cache-node%d" % i))
        script, changes = recipe(), dict((("#SBATCH -N 4", "#SBATCH -N %d" % slurmtest.NODES),
                         ("UCX_TLS=rc,sm,self", "UCX_TLS=tcp"),
                         ("$HOME/.epochfs", home + "/.epochfs"),
                         ("/gpfs/datasets/imagenet", self.lab.source["path"]),
                         ("/local/scratch", tmp + "/cache-$SLURMD_NODENAME"),
                         ("/tmp/epochfs-", tmp + "/epochfs-"),
                         ("exec epochfs ", "exec %s " % self.lab.epochfs),
                         ("python train.py --data", self.reader_cmd(out) + " --data")))
        for old in changes:
            self.assertIn(old, script, "the recipe changed: update this test")
        # In one pass, so that a path put in is not changed again.
        script = re.sub("|".join(map(re.escape, changes)), lambda m: changes[m.group(0)], script)
        opens = lab_workload.source_counter(self.lab.source["path"])
        try:
            job_id, state, output = self.job("recipe", script)
            self.assertEqual(state, "COMPLETED", output)
            self.check_reads(out)
            self.assert_each_file_once(opens)
        finally:
            opens.close()
        self.assertEqual(self.job_leftovers([tmp + "/epochfs-" + job_id]), [])
        self.assertEqual(os.listdir(os.path.join(home, ".epochfs")), [], "the secret is removed")
        self.assert_nodes_idle()


if __name__ == "__main__":
    labtest.main()
