"""One node of the cluster lab: its namespaces, how to run a command in it, and its daemon.

A node is a network namespace (net.py) plus a UTS namespace (its hostname) and a mount
namespace, both kept alive by bind mounts of their /proc/PID/ns files under DIR/ns (a private
mount), so `exec` and `down` work whether or not a process still runs there. In the mount
namespace /sys is mounted afresh (UCX lists the node's interfaces from /sys/class/net; the
host's sysfs shows the host's) with the cgroup tree moved back on top of it (a daemon sizes
itself from its cgroup limit). The mount namespace is copied with `--propagation unchanged`,
so a FUSE mount under DIR/mnt (a shared bind mount) appears in the main namespace too.

A process runs "in" a node when it is in the node's three namespaces and its cgroups
(cgroup.py): `nsenter` after joining the cgroups in the child before exec.
Standard library only.
"""

import os
import subprocess

from . import cgroup as lab_cgroup, net as lab_net, object_store as lab_object_store
from .util import LabError, read_text, run

# Runs inside the new namespaces: the hostname, then sysfs of the node's network namespace,
# with the cgroup mounts carried over (sysfs would hide them). /sys is made a slave first so
# that nothing mounted there propagates back to the host where / is shared (systemd).
_NODE_SETUP = """set -e
hostname "$1"
mount --make-rslave /sys
mkdir -p "$2"
mount --rbind /sys/fs/cgroup "$2"
mount -t sysfs sysfs /sys
mount --move "$2" /sys/fs/cgroup
rmdir "$2"
"""


def ns_files(directory, name):
    base = os.path.join(directory, "ns", name)
    return base + ".mnt", base + ".uts"


def make_namespaces(state, directory, index, name):
    """The node's persistent mount and UTS namespaces (its network namespace exists)."""
    mnt_file, uts_file = ns_files(directory, name)
    for f in (mnt_file, uts_file):
        state.record("mount", path=f)
        open(f, "w").close()
    netns = lab_net.netns_path(lab_net.netns_name(state.prefix, index))
    scratch = os.path.join(directory, "ns", name + ".cgroup")
    run(["nsenter", "--net=" + netns, "--", "unshare", "--mount=" + mnt_file, "--uts=" + uts_file,
         "--propagation", "unchanged", "--", "sh", "-c", _NODE_SETUP, "node-setup", name, scratch])


def nsenter_argv(node, cwd=None):
    """The nsenter prefix that runs a command in the node's namespaces."""
    argv = ["nsenter", "--net=" + lab_net.netns_path(node["netns"]), "--uts=" + node["uts_ns"],
            "--mount=" + node["mnt_ns"]]
    if cwd:
        argv.append("--wd=" + cwd)
    return argv + ["--"]


def _preexec(dirs):
    def join():
        lab_cgroup.join(dirs)
    return join


def node_env(node, extra=None):
    env = dict(os.environ)
    env.update({"EPOCHFS_LAB_NODE": node["name"], "EPOCHFS_LAB_MOUNT": node["mountpoint"],
                "UCX_TLS": "tcp"})
    env.update(node.get("env") or {})  # e.g. SLURM_CONF on a lab with --slurm
    env.update(extra or {})
    return env


def popen(node, argv, cwd=None, env=None, **kw):
    """Starts argv inside the node (namespaces and cgroups); returns the Popen."""
    cwd = cwd if cwd is not None else _cwd_or_root()
    return subprocess.Popen(nsenter_argv(node, cwd) + list(argv), env=node_env(node, env),
                            preexec_fn=_preexec(node["cgroups"]), **kw)


def run_in(node, argv, timeout=120, env=None, check=True):
    """Runs argv inside the node; returns the CompletedProcess (text output captured)."""
    p = popen(node, argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise LabError("%s on %s did not finish within %d s" % (argv[0], node["name"], timeout)) from None
    if check and p.returncode != 0:
        raise LabError("%s on %s failed (exit %d): %s" % (" ".join(argv[:2]), node["name"], p.returncode,
                                                          (err or out).strip()[-500:]))
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def exec_in(node, argv):
    """Replaces this process with argv running inside the node."""
    lab_cgroup.join(node["cgroups"])
    full = nsenter_argv(node, _cwd_or_root()) + list(argv)
    os.execvpe(full[0], full, node_env(node))


def _cwd_or_root():
    try:
        return os.getcwd()
    except OSError:
        return "/"


def daemon_argv(lab_doc, node, epochfs, options):
    """The documented cluster launch (docs/CLUSTER.md): hostfile, listen address, secret; over
    the lab's object store, its s3:// URL and options instead of the source's path."""
    store = lab_doc.get("store")
    source = [store["url"]] if store else [lab_doc["source"]["path"]]
    s3 = lab_object_store.mount_options(store) if store else []
    return [epochfs] + source + [node["mountpoint"], "--hostfile", lab_doc["hostfile"],
            "--listen", "%s:%d" % (node["address"], lab_net.PORT), "--secret-file", lab_doc["secret"],
            "--log-file", node["log"], "--admin-socket", node["admin_socket"]] + s3 + list(options)


def start_daemon(lab_doc, node, epochfs, options, timeout=120):
    """Starts the node's epochfs (it daemonizes once mounted)."""
    argv = daemon_argv(lab_doc, node, epochfs, options)
    r = run_in(node, argv, timeout=timeout, check=False)
    if r.returncode != 0:
        tail = (read_text(node["log"]) or "").strip().splitlines()[-5:]
        raise LabError("epochfs on %s failed (exit %d): %s%s" % (
            node["name"], r.returncode, (r.stderr or r.stdout).strip(),
            ("\n  log: " + "\n  log: ".join(tail)) if tail else ""))


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _is_worker(pid, argv):
    """A worker started by a supervisor carries the supervisor's channel in its environment;
    with --no-supervisor the one process is the worker."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            if b"EPOCHFS_SUPERVISOR_FD=" in f.read():
                return True
    except OSError:
        return False
    return "--no-supervisor" in argv


def daemon_pids(node):
    """(supervisor pid or None, worker pid or None) of the node's epochfs: the processes in the
    node's cgroup whose command is epochfs serving the node's mountpoint (by command line, not
    by /proc/PID/exe, which reads "(deleted)" once the binary was rebuilt under them)."""
    procs = read_text(os.path.join(node["cgroups"][0], "cgroup.procs")) or ""
    supervisor = worker = None
    for pid in map(int, procs.split()):
        argv = _cmdline(pid)
        if not argv or os.path.basename(argv[0]) != "epochfs" or node["mountpoint"] not in argv:
            continue
        if _is_worker(pid, argv):
            worker = pid
        else:
            supervisor = pid
    return supervisor, worker
