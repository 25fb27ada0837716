"""Slurm on the cluster lab (`cluster-lab up --slurm`, docs/LAB.md "Slurm"): Debian's slurm-wlm
and munge, installed when missing; munged and slurmctld run in node0 (the head node), one
slurmd in every node, each in the node's namespaces and cgroups, so `down` stops them with the
node's other processes and removes their state with DIR/slurm. Every node's mount namespace
gets DIR/slurm/hosts over /etc/hosts (nodeI -> its address: the node names in
SLURM_JOB_NODELIST resolve, as on a cluster) and a /run of its own (a tmpfs). The prolog, epilog and task prolog are the
package's (tools/packaging/slurm/), through wrappers that point them at the lab's config.
With --slurm the lab starts no epochfs of its own: jobs do, through the prolog or the sbatch
recipe (docs/CLUSTER.md). Standard library only.
"""

import os
import shutil
import subprocess
import time

from . import net as lab_net, node as lab_node
from .util import REPO, LabError, log, read_text, run, write_text

PACKAGES = ("slurm-wlm", "munge")
PROGRAMS = ("slurmctld", "slurmd", "munged", "sbatch", "srun", "scontrol", "sinfo")
SLURM_DIR = "slurm"
HOOKS = os.path.join(REPO, "tools", "packaging", "slurm")

# In the node's mount namespace: the mounts holding /etc/hosts, /tmp and /run become private
# there (non-recursively: DIR/mnt stays shared), so nothing mounted below them propagates to the
# host where / is shared (systemd); then the hosts file over /etc/hosts and a /run of the node's
# own (a tmpfs, as on a real node: daemons' default admin sockets live there and would collide).
_NODE_SETUP = """set -e
for p in /etc/hosts /tmp /run; do mount --make-private "$(findmnt -n -o TARGET -T $p)"; done
mount --bind "$1" /etc/hosts
mount -t tmpfs -o mode=755,size=64m lab-run /run
"""


def missing_programs():
    return [p for p in PROGRAMS if not shutil.which(p)]


def ensure_installed():
    """apt-get installs slurm-wlm and munge when a program of theirs is missing."""
    missing = missing_programs()
    if not missing:
        return
    log("installing %s (missing: %s)" % (" ".join(PACKAGES), " ".join(missing)))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    r = run(["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES], check=False, timeout=900, env=env)
    if r.returncode != 0:
        run(["apt-get", "update"], timeout=600, env=env)
        run(["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES], timeout=900, env=env)
    if missing_programs():
        raise LabError("slurm-wlm/munge installed but %s still missing" % " ".join(missing_programs()))


def paths(directory):
    d = os.path.join(directory, SLURM_DIR)
    return {"dir": d, "conf": os.path.join(d, "slurm.conf"), "munge_key": os.path.join(d, "munge.key"),
            "munge_socket": os.path.join(d, "munge", "munge.socket"), "hosts": os.path.join(d, "hosts"),
            "site_key": os.path.join(d, "site.key"), "epochfs_conf": os.path.join(d, "epochfs-slurm.conf"),
            "log": os.path.join(d, "log"), "state": os.path.join(d, "state"),
            "mounts": os.path.join(directory, "mnt", "%n")}


def _slurm_conf(prefix, p, nodes, cpus):
    d = p["dir"]
    lines = [
        "# cluster-lab %s: Slurm on the lab's nodes (tools/bench/python/epochfs_lab/slurm.py)" % prefix,
        "ClusterName=lab%s" % prefix[2:],
        "SlurmctldHost=node0(%s)" % lab_net.node_address(0),
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", "AuthInfo=socket=%s" % p["munge_socket"],
        "StateSaveLocation=%s/ctld" % d, "SlurmdSpoolDir=%s/spool/%%n" % d,
        "SlurmctldPidFile=%s/run/slurmctld.pid" % d, "SlurmdPidFile=%s/run/slurmd-%%n.pid" % d,
        "SlurmctldLogFile=%s/slurmctld.log" % p["log"], "SlurmdLogFile=%s/slurmd-%%n.log" % p["log"],
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/builtin", "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
        "MpiDefault=none", "ReturnToService=2", "SlurmdParameters=config_overrides",
        "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=5", "MinJobAge=300",
        # The job's epochfs: started at allocation (PrologFlags=Alloc), before the first step.
        "PrologFlags=Alloc", "Prolog=%s/prolog" % d, "Epilog=%s/epilog" % d,
        "TaskProlog=%s/task-prolog" % d, "PrologEpilogTimeout=120",
    ]
    for i in range(nodes):
        lines.append("NodeName=node%d NodeAddr=%s CPUs=%d State=UNKNOWN" % (i, lab_net.node_address(i), cpus))
    lines.append("PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _epochfs_conf(p, epochfs, options):
    """The prolog's site configuration (tools/packaging/slurm/slurm.conf.example's keys)."""
    return ("# cluster-lab: the epochfs Slurm prolog's configuration on this lab\n"
            "EPOCHFS=%s\nEPOCHCTL=%s\nSITE_KEY=%s\nMOUNT_BASE=%s\nSTATE_DIR=%s/%%n\nUCX_TLS=tcp\nOPTIONS=%s\n"
            % (epochfs, os.path.join(os.path.dirname(epochfs), "epochctl"), p["site_key"], p["mounts"], p["state"], " ".join(options)))


def _wrapper(p, hook):
    return ("#!/bin/sh\n# cluster-lab: the package's %s with the lab's configuration\n"
            "export EPOCHFS_SLURM_CONFIG=%s SLURM_CONF=%s\nexec %s \"$@\"\n"
            % (os.path.basename(hook), p["epochfs_conf"], p["conf"], hook))


def _secret_file(path, nbytes):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(nbytes))


def write_files(lab, options):
    """DIR/slurm: slurm.conf, the munge key, the site key (root only), the prolog's config and
    wrappers, the hosts file; returns the paths."""
    d, prefix = lab.state.dir, lab.state.prefix
    p = paths(d)
    for sub in ("", "munge", "ctld", "spool", "run", "log", "state"):
        os.makedirs(os.path.join(p["dir"], sub), mode=0o755, exist_ok=True)  # munge/: users reach its socket
    _secret_file(p["munge_key"], 128)
    _secret_file(p["site_key"], 32)
    write_text(p["conf"], _slurm_conf(prefix, p, len(lab.nodes), os.cpu_count() or 1))
    write_text(p["epochfs_conf"], _epochfs_conf(p, lab.epochfs, options))
    # The package's hooks, copied: the task prolog runs as the job's user, who may not reach
    # this checkout (a clone under /root).
    hooks = os.path.join(p["dir"], "hooks")
    os.makedirs(hooks, mode=0o755, exist_ok=True)
    for name in ("prolog", "epilog", "task-prolog", "epochfs_slurm.py"):
        shutil.copy(os.path.join(HOOKS, name), hooks)
    # ... with the Python API they import (epochfs.mount_table), as the package installs it.
    shutil.copytree(os.path.join(REPO, "tools", "python", "epochfs"), os.path.join(hooks, "epochfs"),
                    ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    for hook in ("prolog", "epilog", "task-prolog"):
        path = os.path.join(p["dir"], hook)
        write_text(path, _wrapper(p, os.path.join(hooks, hook)))
        os.chmod(path, 0o755)
    hosts = (read_text("/etc/hosts") or "127.0.0.1 localhost\n").rstrip("\n") + "\n# cluster-lab %s\n" % prefix
    hosts += "".join("%s node%d\n" % (lab_net.node_address(i), i) for i in range(len(lab.nodes)))
    write_text(p["hosts"], hosts)
    return p


def _in_node(node, argv, what, timeout=60):
    r = lab_node.run_in(node, argv, timeout=timeout, check=False)
    if r.returncode != 0:
        raise LabError("%s on %s failed (exit %d): %s" % (what, node["name"], r.returncode,
                                                         (r.stderr or r.stdout).strip()[-400:]))
    return r


def start(lab, options, wait_s=60):
    """Starts munged, slurmctld (node0) and the slurmds; returns when every node is idle."""
    ensure_installed()
    p = write_files(lab, options)
    lab.doc["slurm"] = {"conf": p["conf"], "dir": p["dir"], "site_key": p["site_key"],
                        "mount_base": p["mounts"], "state_dir": os.path.join(p["state"], "%n"),
                        "log": p["log"]}
    for node in lab.nodes:
        node["env"] = {"SLURM_CONF": p["conf"]}
        os.makedirs(os.path.join(p["state"], node["name"]), mode=0o700, exist_ok=True)
        os.makedirs(os.path.join(os.path.dirname(p["mounts"]), node["name"]), exist_ok=True)
    lab.state.save()
    for node in lab.nodes:
        run(lab_node.nsenter_argv(node) + ["sh", "-c", _NODE_SETUP, "node-setup", p["hosts"]])
    head = lab.nodes[0]
    log("starting munged and slurmctld on %s" % head["name"])
    _in_node(head, ["munged", "--force", "--socket", p["munge_socket"], "--key-file", p["munge_key"],
                    "--pid-file", os.path.join(p["dir"], "munge", "munged.pid"),
                    "--seed-file", os.path.join(p["dir"], "munge", "munged.seed"),
                    "--log-file", os.path.join(p["log"], "munged.log")], "munged")
    _in_node(head, ["slurmctld", "-c", "-f", p["conf"]], "slurmctld")
    for node in lab.nodes:
        _in_node(node, ["slurmd", "-f", p["conf"]], "slurmd")
    wait_idle(lab, wait_s)


def sinfo_states(lab):
    r = lab_node.run_in(lab.nodes[0], ["sinfo", "-h", "-N", "-o", "%N %T"], timeout=20, check=False)
    return dict(line.split()[:2] for line in r.stdout.splitlines() if len(line.split()) >= 2)


def wait_idle(lab, wait_s=60):
    deadline = time.monotonic() + wait_s
    while True:
        states = sinfo_states(lab)
        if len(states) == len(lab.nodes) and all(s == "idle" for s in states.values()):
            return
        if time.monotonic() > deadline:
            raise LabError("Slurm's nodes did not come up within %d s (sinfo: %s; logs in %s)"
                           % (wait_s, states or "no answer", lab.doc["slurm"]["log"]))
        time.sleep(0.3)


def submit(lab, argv, node="node0", timeout=60, uid=None):
    """sbatch --parsable ARGV on `node` (the lab's SLURM_CONF), as user `uid` (and its group
    of the same number) if given; returns the job id."""
    user = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups", "--"] if uid is not None else []
    r = lab_node.run_in(lab.node(node), user + ["sbatch", "--parsable"] + list(argv), timeout=timeout)
    return r.stdout.strip().split(";")[0]


def job_state(lab, job_id):
    r = lab_node.run_in(lab.nodes[0], ["scontrol", "show", "job", "-o", str(job_id)], timeout=20, check=False)
    for field in r.stdout.split():
        if field.startswith("JobState="):
            return field.split("=", 1)[1]
    return "UNKNOWN"


def wait_job(lab, job_id, timeout=180):
    """Waits until the job ended; returns its final state (COMPLETED, FAILED, ...)."""
    deadline = time.monotonic() + timeout
    while True:
        state = job_state(lab, job_id)
        if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "UNKNOWN"):
            return state
        if time.monotonic() > deadline:
            subprocess.run(lab_node.nsenter_argv(lab.nodes[0]) + ["scancel", str(job_id)],
                           env=lab_node.node_env(lab.nodes[0]), check=False)
            raise LabError("job %s still %s after %d s" % (job_id, state, timeout))
        time.sleep(0.3)
