#!/usr/bin/python3
"""epochfs's Slurm prolog, epilog and task prolog (docs/CLUSTER.md "Slurm: prolog and epilog").
Installed to /usr/share/epochfs/slurm/ with the wrappers `prolog`, `epilog`, `task-prolog`
that slurm.conf names:

    PrologFlags=Alloc
    Prolog=/usr/share/epochfs/slurm/prolog
    Epilog=/usr/share/epochfs/slurm/epilog
    TaskProlog=/usr/share/epochfs/slurm/task-prolog

A job asks for a mount by its comment: `sbatch --comment=epochfs:/path/to/dataset ...`; other
jobs get none. The prolog (root, at allocation, on every node of the job) reads the comment with
`scontrol show job`, derives the job's secret as HMAC-SHA256(site key, SLURM_JOB_ID) — the same
on every node, nothing travels —, takes as node id the position of SLURMD_NODENAME in
`scontrol show hostnames $SLURM_JOB_NODELIST`, and starts `epochfs DATASET MOUNT_BASE/job-ID
--slurm` on port PORT_BASE + ID % 1000. The task prolog puts EPOCHFS_MOUNT in every task's
environment. The epilog unmounts, waits for the daemon to exit and removes the secret. A failed
start is logged and cleaned up and the prolog still exits 0: the job runs without a mount and
the node is not drained.

Configuration: KEY=VALUE lines in $EPOCHFS_SLURM_CONFIG or /etc/epochfs/slurm.conf (defaults
below; `%n` in a path is the node's name). Standard library and the package's own Python API
(epochfs.mount_table, the one mountinfo parser): the package installs it where /usr/bin/python3
looks, an install under another prefix PREFIX/lib/python3/dist-packages beside these hooks'
PREFIX/share/epochfs/slurm (put first on sys.path when it exists), and a copy of the hooks may
carry an epochfs/ package in its own directory (the cluster lab's).
"""

import hashlib
import hmac
import json
import os
import pwd
import re
import shlex
import signal
import subprocess
import sys
import time

_PREFIX_PYTHON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "lib",
                              "python3", "dist-packages")
if os.path.isdir(os.path.join(_PREFIX_PYTHON, "epochfs")):
    sys.path.insert(1, os.path.normpath(_PREFIX_PYTHON))  # after the script's own directory

from epochfs import mount_table  # noqa: E402

DEFAULTS = {
    "EPOCHFS": "/usr/bin/epochfs",
    "SITE_KEY": "/etc/epochfs/site.key",      # root-only (0600/0400), the same on every node
    "MOUNT_BASE": "/run/epochfs",             # the job's mount: MOUNT_BASE/job-ID
    "STATE_DIR": "/run/epochfs-slurm",        # root-only: job secrets, daemon logs, admin sockets
    "PORT_BASE": "17000",                     # the job's cluster port: PORT_BASE + ID % 1000
    "UCX_TLS": "",                            # e.g. tcp, or rc,sm,self; empty: UCX's choice
    "OPTIONS": "--ram-cache 50%",             # more epochfs options, split like a shell
    "EPOCHCTL": "/usr/bin/epochctl",
    "START_TIMEOUT": "90",
    "PEER_WAIT": "30",                        # seconds the prolog waits for every node to be live
    "STOP_TIMEOUT": "30",
}
COMMENT = re.compile(r"(?:^|\s)Comment=epochfs:(\S+)")


def config():
    cfg = dict(DEFAULTS)
    path = os.environ.get("EPOCHFS_SLURM_CONFIG", "/etc/epochfs/slurm.conf")
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    key, value = line.split("=", 1)
                    cfg[key.strip()] = value.strip()
    except FileNotFoundError:
        pass
    node = os.environ.get("SLURMD_NODENAME", "")
    return {k: v.replace("%n", node) for k, v in cfg.items()}


class Job:
    def __init__(self, cfg):
        self.cfg = cfg
        self.id = os.environ["SLURM_JOB_ID"]
        self.node = os.environ.get("SLURMD_NODENAME", "")
        self.mount = os.path.join(cfg["MOUNT_BASE"], "job-" + self.id)
        state = cfg["STATE_DIR"]
        self.secret = os.path.join(state, "job-%s.secret" % self.id)
        self.log_file = os.path.join(state, "job-%s.log" % self.id)
        self.socket = os.path.join(state, "job-%s.sock" % self.id)

    def log(self, msg):
        line = "%s epochfs-slurm job %s on %s: %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), self.id, self.node, msg)
        sys.stderr.write(line)
        try:
            os.makedirs(self.cfg["STATE_DIR"], mode=0o700, exist_ok=True)
            with open(os.path.join(self.cfg["STATE_DIR"], "slurm-hooks.log"), "a") as f:
                f.write(line)
        except OSError:
            pass


def scontrol(*args):
    return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30, check=True).stdout


def job_record(job_id):
    """(the dataset the job's comment names (epochfs:/path) or None, the job's node list)."""
    record = scontrol("show", "job", "-o", job_id)
    m = COMMENT.search(record)
    nodes = re.search(r"(?:^|\s)NodeList=(\S+)", record)
    return (m.group(1) if m else None), (nodes.group(1) if nodes else "")


def job_secret(site_key_path, job_id):
    """HMAC-SHA256(site key, job id), hex: the same on every node of the job."""
    st = os.stat(site_key_path)
    if st.st_uid != 0 or st.st_mode & 0o077:
        raise RuntimeError("site key %s must be owned by root, mode 0600 or 0400" % site_key_path)
    with open(site_key_path, "rb") as f:
        key = f.read()
    if len(key) < 16:
        raise RuntimeError("site key %s is shorter than 16 bytes" % site_key_path)
    return hmac.new(key, job_id.encode(), hashlib.sha256).hexdigest()


def user_can_read(path, uid, gid):
    """Whether the job's user can list `path` (every directory above it searchable): a root
    daemon with --allow-other must not expose what the user could not reach. Checked in a child
    that takes the user's ids (the kernel's own check, not a re-implementation)."""
    if uid == 0:
        return os.path.isdir(path)
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            name = pwd.getpwuid(uid).pw_name
            os.setgroups(os.getgrouplist(name, gid))
            os.setgid(gid)
            os.setuid(uid)
            ok = os.path.isdir(path) and os.access(path, os.R_OK | os.X_OK)
        except Exception:  # noqa: BLE001 — no such user, or no access: refused
            ok = False
        os._exit(0 if ok else 1)
    return os.waitpid(pid, 0)[1] == 0


def is_mounted(path):
    return mount_table.is_mount_point(path)


def daemon_pids(mount):
    """Processes whose command is epochfs serving `mount`."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"epochfs" and mount.encode() in argv:
            out.append(int(p))
    return out


def stop(job, timeout):
    """Unmounts the job's mount, waits for its daemon to exit (SIGKILL after `timeout`), removes
    the secret and the mountpoint. Returns what it did."""
    did = []
    if is_mounted(job.mount):
        if subprocess.run(["fusermount3", "-u", job.mount], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", job.mount], capture_output=True)
        did.append("unmounted")
    deadline = time.monotonic() + timeout
    while daemon_pids(job.mount) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = daemon_pids(job.mount)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
        did.append("killed %d" % pid)
    for path in (job.secret, job.socket):
        try:
            os.unlink(path)
            did.append("removed " + os.path.basename(path))
        except FileNotFoundError:
            pass
    try:
        os.rmdir(job.mount)
    except OSError:
        pass
    return did


def live_members(epochctl, mount):
    r = subprocess.run([epochctl, "peers", mount, "--json"], capture_output=True, text=True, timeout=10)
    try:
        return sum(1 for p in json.loads(r.stdout).get("peers", []) if p.get("live"))
    except ValueError:
        return 0


def wait_peers(cfg, mount, n):
    """Waits (at most PEER_WAIT s) until the daemon sees all n nodes live, so that the job's first
    reads are shared; a node that is late only costs source reads, never a failed start."""
    deadline = time.monotonic() + float(cfg["PEER_WAIT"])
    live = 0
    while time.monotonic() < deadline:
        live = live_members(cfg["EPOCHCTL"], mount)
        if live >= n:
            return "all %d nodes live" % n
        time.sleep(0.1)
    return "%d of %d nodes live after %s s (going on)" % (live, n, cfg["PEER_WAIT"])


def prolog(job):
    dataset, nodelist = job_record(job.id)
    if dataset is None:
        return  # the job did not ask for epochfs
    cfg = job.cfg
    try:
        # The prolog's environment lacks SLURM_JOB_NODELIST with PrologFlags=Alloc (22.05).
        nodelist = os.environ.get("SLURM_JOB_NODELIST") or nodelist
        nodes = scontrol("show", "hostnames", nodelist).split()
        if job.node not in nodes:
            raise RuntimeError("%s is not in the job's nodes %s" % (job.node, nodes))
        uid, gid = int(os.environ.get("SLURM_JOB_UID", -1)), int(os.environ.get("SLURM_JOB_GID", -1))
        if not os.path.isabs(dataset) or not user_can_read(dataset, uid, gid):
            raise RuntimeError("dataset %s is not a directory the job's user (uid %d) can read" % (dataset, uid))
        os.makedirs(cfg["STATE_DIR"], mode=0o700, exist_ok=True)
        fd = os.open(job.secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(job_secret(cfg["SITE_KEY"], job.id) + "\n")
        os.makedirs(job.mount, exist_ok=True)
        port = int(cfg["PORT_BASE"]) + int(job.id) % 1000
        env = dict(os.environ, SLURM_JOB_NODELIST=",".join(nodes), SLURM_NODEID=str(nodes.index(job.node)))
        if cfg["UCX_TLS"]:
            env["UCX_TLS"] = cfg["UCX_TLS"]
        argv = [cfg["EPOCHFS"], dataset, job.mount, "--slurm", "--cluster-port", str(port),
                "--secret-file", job.secret, "--log-file", job.log_file, "--admin-socket", job.socket,
                "--allow-other"] + shlex.split(cfg["OPTIONS"])
        job.log("starting: %s (node id %d of %d)" % (" ".join(argv), nodes.index(job.node), len(nodes)))
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=int(cfg["START_TIMEOUT"]),
                           stdin=subprocess.DEVNULL)
        if r.returncode != 0 or not is_mounted(job.mount):
            raise RuntimeError("epochfs exited %d: %s" % (r.returncode, (r.stderr or r.stdout).strip()[-300:]))
        job.log("mounted %s at %s; %s" % (dataset, job.mount, wait_peers(cfg, job.mount, len(nodes))))
    except Exception as e:  # noqa: BLE001 — any failure: clean up, log, do not drain the node
        job.log("start failed, the job runs without epochfs: %s; cleanup: %s"
                % (e, ", ".join(stop(job, int(cfg["STOP_TIMEOUT"]))) or "nothing"))


def epilog(job):
    did = stop(job, int(job.cfg["STOP_TIMEOUT"]))
    if did:
        job.log("stopped: " + ", ".join(did))


def task_prolog(job):
    """Runs as the job's user for every task: its stdout lines `export K=V` reach the task."""
    if os.path.isdir(job.mount) and is_mounted(job.mount):
        print("export EPOCHFS_MOUNT=%s" % job.mount)


def main(argv):
    mode = argv[1] if len(argv) > 1 else ""
    hooks = {"prolog": prolog, "epilog": epilog, "task-prolog": task_prolog}
    if mode not in hooks or "SLURM_JOB_ID" not in os.environ:
        sys.stderr.write("usage: epochfs_slurm.py prolog|epilog|task-prolog (run by slurmd)\n")
        return 2
    job = Job(config())
    try:
        hooks[mode](job)
    except Exception as e:  # noqa: BLE001 — a failing hook must not drain the node
        job.log("%s failed: %s" % (mode, e))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
