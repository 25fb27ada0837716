"""The cluster lab's cgroups: per node a memory and a cpu limit (so a daemon that sizes itself
from its cgroup, `--ram-cache 50%`, takes half of its node, not of the host), and one shared
block-I/O read limit on the source's loop device for all nodes together (a parallel
filesystem's bandwidth is shared).

cgroup v1 (this VM): memory/PARENT/epochfs-lab-ID/nodeI, cpu/PARENT/epochfs-lab-ID/nodeI and
blkio/PARENT/epochfs-lab-ID (every node's processes in that one group); PARENT is the cgroup
`up` runs in, so a lab started inside a job's cgroup stays inside it. cgroup v2 (stock
Debian 12): /epochfs-lab-ID at the root of the hierarchy with io.max, and nodeI below it with
memory.max and cpu.max — at the root because v2 lets a cgroup hand controllers to children only
when it has no processes of its own, and the cgroup `up` runs in (a login session's scope) has.
Standard library only.
"""

import os
import time

from epochfs import mount_table

from .util import LabError, read_text, write_text

ROOT = "/sys/fs/cgroup"


def _mounts():
    """(mount point, fstype, super options) of each mount; a cgroup v1 mount names its
    controllers among its super options."""
    return [(m.mount_point, m.fstype, m.super_options.split(",")) for m in mount_table.read()]


def _own_cgroup(controller):
    """This process's path in the cgroup v1 hierarchy of `controller`."""
    for line in (read_text("/proc/self/cgroup") or "").splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path.strip()
    raise LabError("this process is in no cgroup v1 %s group" % controller)


def detect():
    """'v2', 'v1', or raises LabError saying what is missing."""
    mounts = _mounts()
    if any(path == ROOT and fstype == "cgroup2" for path, fstype, _ in mounts):
        return "v2"
    have = {c for _, fstype, opts in mounts if fstype == "cgroup" for c in opts}
    missing = [c for c in ("memory", "cpu", "blkio") if c not in have]
    if missing:
        raise LabError("no cgroup v2 at %s and no cgroup v1 %s controller" % (ROOT, ", ".join(missing)))
    return "v1"


def _v1_mount(controller):
    for path, fstype, opts in _mounts():
        if fstype == "cgroup" and controller in opts:
            return path
    raise LabError("cgroup v1 %s controller not mounted" % controller)


class LabCgroups:
    """The lab's cgroup directories, recorded in the state before they are made."""

    def __init__(self, state):
        self.state = state
        self.version = state.doc["config"].setdefault("cgroup", detect())
        self.name = "epochfs-lab-" + state.prefix

    def _lab_dir(self, controller):
        if self.version == "v2":
            return os.path.join(ROOT, self.name)
        return os.path.join(_v1_mount(controller), _own_cgroup(controller).lstrip("/"), self.name)

    def _mkdir(self, path):
        self.state.record("cgroup", path=path)
        try:
            os.makedirs(path)
        except FileExistsError:
            pass
        except OSError as e:
            raise LabError("cannot create cgroup %s: %s" % (path, e)) from None

    def _set(self, path, name, value):
        try:
            write_text(os.path.join(path, name), value)
        except OSError as e:
            raise LabError("cannot set %s in %s to %r: %s" % (name, path, value, e)) from None

    def make_shared(self, device, read_bps):
        """The lab's group with the source's read limit (device 'MAJ:MIN', bytes/s; 0: none)."""
        if self.version == "v2":
            lab = self._lab_dir("")
            self._enable_v2(ROOT)
            self._mkdir(lab)
            self._enable_v2(lab)
            if read_bps:
                self._set(lab, "io.max", "%s rbps=%d" % (device, read_bps))
            return
        lab = self._lab_dir("blkio")
        self._mkdir(lab)
        if read_bps:
            self._set(lab, "blkio.throttle.read_bps_device", "%s %d" % (device, read_bps))

    def _enable_v2(self, path):
        available = (read_text(os.path.join(path, "cgroup.controllers")) or "").split()
        have = (read_text(os.path.join(path, "cgroup.subtree_control")) or "").split()
        for c in ("memory", "cpu", "io"):
            if c not in available:
                raise LabError("cgroup v2 controller %s is not available in %s" % (c, path))
            if c not in have:
                self._set(path, "cgroup.subtree_control", "+" + c)

    def node_dirs(self, index):
        """The directories a node's processes join."""
        node = "node%d" % index
        if self.version == "v2":
            return [os.path.join(self._lab_dir(""), node)]
        return [os.path.join(self._lab_dir("memory"), node), os.path.join(self._lab_dir("cpu"), node),
                self._lab_dir("blkio")]

    def make_node(self, index, memory_bytes, cpus):
        """A node's memory (bytes; 0: none) and cpu (cores, may be fractional; 0: none) limits."""
        if self.version == "v2":
            (node,) = self.node_dirs(index)
            self._mkdir(node)
            if memory_bytes:
                self._set(node, "memory.max", str(memory_bytes))
            if cpus:
                self._set(node, "cpu.max", "%d 100000" % int(cpus * 100000))
            return
        mem, cpu, _ = self.node_dirs(index)
        self._mkdir(os.path.dirname(mem))
        self._mkdir(mem)
        self._mkdir(os.path.dirname(cpu))
        self._mkdir(cpu)
        if memory_bytes:
            self._set(mem, "memory.limit_in_bytes", str(memory_bytes))
        if cpus:
            self._set(cpu, "cpu.cfs_period_us", "100000")
            self._set(cpu, "cpu.cfs_quota_us", str(int(cpus * 100000)))

    def source_read_bytes(self, device):
        """Bytes the lab's processes read from the source device, as the kernel counts them."""
        if self.version == "v2":
            for line in (read_text(os.path.join(self._lab_dir(""), "io.stat")) or "").splitlines():
                f = line.split()
                if f and f[0] == device:
                    return int(dict(kv.split("=") for kv in f[1:]).get("rbytes", 0))
            return 0
        text = read_text(os.path.join(self._lab_dir("blkio"), "blkio.throttle.io_service_bytes_recursive"))
        for line in (text or "").splitlines():
            f = line.split()
            if len(f) == 3 and f[0] == device and f[1] == "Read":
                return int(f[2])
        return 0


def join(dirs):
    """Moves the calling process into each cgroup directory (for a child before exec)."""
    for d in dirs:
        write_text(os.path.join(d, "cgroup.procs"), str(os.getpid()))


def pids(state):
    """Every process in any of the lab's cgroups (recorded directories and those below)."""
    out = set()
    for r in state.resources("cgroup"):
        for dirpath, _, files in os.walk(r["path"]):
            if "cgroup.procs" in files:
                out.update(int(p) for p in (read_text(os.path.join(dirpath, "cgroup.procs")) or "").split())
    return out


def teardown(state, say, wait_s=10.0):
    """Removes the lab's cgroup directories, deepest first, waiting for exiting members."""
    dirs = sorted({r["path"] for r in state.resources("cgroup")}, key=len, reverse=True)
    deadline = time.monotonic() + wait_s
    for d in dirs:
        while os.path.isdir(d):
            try:
                os.rmdir(d)
                say("cgroup %s" % d)
            except OSError as e:
                if time.monotonic() > deadline:
                    raise LabError("cannot remove cgroup %s: %s (processes: %s)"
                                   % (d, e, (read_text(os.path.join(d, "cgroup.procs")) or "").split()))
                time.sleep(0.1)
