"""`cluster-lab down`: removes everything a lab made and nothing else, from its state file,
also after `up` or the lab's processes were killed, and as often as it is run.

Order: the lab's processes (members of its cgroups, of its network namespaces and of its
mount namespaces) are stopped, the mounts under the lab's directory unmounted (FUSE mounts,
the shared and private bind mounts, the namespace files, the source), the network
namespaces, veths and bridge deleted, the loop device detached, the cgroups removed, and the
files the lab wrote deleted. A step that fails is reported and the others still run; the state
file stays until everything is gone, so `down` can be run again.
Standard library only.
"""

import os
import shutil
import signal
import time

from epochfs import mount_table

from . import cgroup as lab_cgroup, net as lab_net, object_store as lab_object_store, source as lab_source
from .state import LabState
from .util import LabError, log, read_text, run

# What `up` writes directly in the lab's directory (besides the state file).
LAB_ENTRIES = ("ns", "mnt", "nodes", "secret", "hostfile", "source", "slurm", "store")


def _mounts_under(directory):
    """Mount points at or below directory in this namespace, deepest (and latest) first."""
    return list(reversed(mount_table.mount_points_under(directory)))


def _ns_inodes(state):
    inodes = set()
    for node in state.doc["nodes"] + ([state.doc["store"]] if state.doc.get("store") else []):
        for f in (node.get("mnt_ns"), node.get("uts_ns"),
                  lab_net.netns_path(node.get("netns", "-"))):
            try:
                st = os.stat(f)
            except (OSError, TypeError):
                continue
            inodes.add((st.st_dev, st.st_ino))
    return inodes


def _pids_in_namespaces(inodes):
    if not inodes:
        return set()
    out = set()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        for kind in ("net", "mnt", "uts"):
            try:
                st = os.stat("/proc/%s/ns/%s" % (p, kind))
                if (st.st_dev, st.st_ino) in inodes:
                    out.add(int(p))
                    break
            except OSError:
                break
    return out


def lab_pids(state):
    """The lab's processes, never this one or its ancestors."""
    pids = lab_cgroup.pids(state) | _pids_in_namespaces(_ns_inodes(state))
    me, spare = os.getpid(), set()
    while me > 1:
        spare.add(me)
        stat = read_text("/proc/%d/stat" % me) or ""
        me = int(stat.rsplit(")", 1)[1].split()[1]) if ")" in stat else 0
    return pids - spare


def _signal(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop_processes(state, say, grace_s=2.0, wait_s=10.0):
    """SIGTERM (after SIGCONT, for frozen ones), then SIGKILL what is left."""
    pids = lab_pids(state)
    if not pids:
        return
    _signal(pids, signal.SIGCONT)
    _signal(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while lab_pids(state) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = lab_pids(state)
    _signal(left, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while lab_pids(state):
        if time.monotonic() > deadline:
            raise LabError("processes %s did not exit" % sorted(lab_pids(state)))
        time.sleep(0.1)
    say("%d processes (%d killed)" % (len(pids), len(left)))


def _abort_fuse(point):
    """Aborts the FUSE connection of a mount whose daemon hangs (a frozen or dead one)."""
    for m in mount_table.read():
        path = "/sys/fs/fuse/connections/%s/abort" % m.device.split(":")[1]
        if m.mount_point == point and m.fstype.startswith("fuse") and os.path.exists(path):
            with open(path, "w") as fh:
                fh.write("1")


def unmount_all(directory, say):
    for _ in range(8):
        points = _mounts_under(directory)
        if not points:
            return
        for p in points:
            _abort_fuse(p)
            if run(["umount", p], check=False, timeout=30).returncode != 0:
                run(["umount", "-l", p], check=False, timeout=30)
            say("mount %s" % p)
    left = _mounts_under(directory)
    if left:
        raise LabError("still mounted: %s" % ", ".join(left))


def remove_files(state, directory, say):
    if _mounts_under(directory):
        raise LabError("not removing files: mounts remain under %s" % directory)
    extra = [r["path"] for r in state.resources("dir")]
    for p in [os.path.join(directory, name) for name in LAB_ENTRIES] + extra:
        if os.path.isdir(p):
            shutil.rmtree(p)
            say("directory %s" % p)
        elif os.path.lexists(p):
            os.unlink(p)
            say("file %s" % p)


def down(directory, verbose=True):
    """Removes the lab in `directory`; returns the number of things removed (0: no lab)."""
    directory = os.path.abspath(directory)
    state = LabState.load(directory)
    if state is None:
        if verbose:
            log("no lab in %s (nothing to remove)" % directory)
        return 0
    removed, errors = [], []

    def say(what):
        removed.append(what)
        if verbose:
            log("removed " + what)

    steps = [("object store", lambda: lab_object_store.teardown(state, say)),
             ("processes", lambda: stop_processes(state, say)),
             ("mounts", lambda: unmount_all(directory, say)),
             ("network", lambda: lab_net.teardown(state, say)),
             ("source", lambda: lab_source.teardown(state, say)),
             ("cgroups", lambda: lab_cgroup.teardown(state, say)),
             ("files", lambda: remove_files(state, directory, say))]
    for name, step in steps:
        try:
            step()
        except (LabError, OSError) as e:
            errors.append("%s: %s" % (name, e))
    if errors:
        raise LabError("down left things behind (run it again, or remove them by hand):\n  "
                       + "\n  ".join(errors))
    state.remove_file()
    if state.doc.get("dir_created"):
        try:
            os.rmdir(directory)
        except OSError:
            pass
    return len(removed)
