"""The benchmark environment of the benchmark scripts (tools/bench/train-bench): the throttled source
(an ext4 image on a loop device whose reads are capped by the kernel's block-I/O controller),
the FUSE mounts of each case over it, and the cpu cgroup the benchmark runs in. Needs root.

The throttled source and the case mounts are made, served and removed by `epochbench env` (the
one implementation, tools/bench/epochbench/bench_env.h, docs/PERFORMANCE.md "The benchmark
environment"); ThrottledSource is a client of that process, which lives as long as the pipe to
it, so nothing is left behind when a script dies."""

import json
import os
import shutil
import subprocess
import sys
import time

from epochfs import mount_table

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def find_binary(name):
    """$EPOCHFS_BIN_DIR/name, else this checkout's build/bin/name, else name in PATH."""
    for d in (os.environ.get("EPOCHFS_BIN_DIR"), os.path.join(REPO, "build", "bin")):
        if d and os.access(os.path.join(d, name), os.X_OK):
            return os.path.abspath(os.path.join(d, name))
    found = shutil.which(name)
    if not found:
        raise RuntimeError("%s not found (set EPOCHFS_BIN_DIR, or build with tools/build)" % name)
    return found


def log(*a):
    print("train-bench:", *a, file=sys.stderr, flush=True)


def drop_caches(mode=3):
    """sync; echo MODE > /proc/sys/vm/drop_caches (1: the page cache; 3: dentries and inodes too)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("%d\n" % mode)


def dataset_bytes(root):
    total = n = 0
    for dp, _, fs in os.walk(root):
        for f in fs:
            total += os.path.getsize(os.path.join(dp, f))
            n += 1
    return total, n


def is_mounted(path):
    return mount_table.is_mount_point(os.path.realpath(path))


def move_to_root(cgroup, root):
    """Moves every process of a cgroup v1 group back to the hierarchy's root (exited ones are
    skipped), so the group can be removed."""
    with open(os.path.join(cgroup, "cgroup.procs")) as f:
        pids = f.read().split()
    for pid in pids:
        try:
            with open(os.path.join(root, "cgroup.procs"), "w") as f:
                f.write(pid)
        except OSError:
            pass


class Throttle:
    """The throttled cgroup of a ThrottledSource: its members' reads of the source's device are
    capped. A handle on the `epochbench env` process that owns it."""

    def __init__(self, env, info):
        self._env = env
        self.path = info["cgroup"]
        self.dev = info["device"]
        self.mechanism = info["mechanism"]

    def add(self, pid):
        """Puts process `pid` (and the threads and children it makes later) in the cgroup."""
        self._env.request("join %d" % pid)

    def remove(self, pid):
        """Moves process `pid` back to the cgroup the environment was started from."""
        self._env.request("leave %d" % pid)

    def read_bytes(self):
        """Bytes the members have read from the source's device, as the kernel counts them."""
        return self._env.request("read-bytes")["bytes"]


class BenchEnv:
    """One `epochbench env` process (tools/bench/epochbench/bench_env.h): it owns the environment and
    lives as long as its stdin; one command per line, one JSON reply per line."""

    def __init__(self, data, bps, subdir):
        cmd = [find_binary("epochbench"), "env", "--data", data, "--rate", str(int(bps)),
               "--subdir", subdir]
        try:  # the epochfs of `mount epochfs`: the one $EPOCHFS_BIN_DIR names, like epochctl's
            cmd += ["--epochfs", find_binary("epochfs")]
        except RuntimeError:
            pass
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.info = self._reply()
        if not self.info.get("ok"):
            self.close()
            raise RuntimeError("epochbench env: %s" % self.info.get("error"))

    def _reply(self):
        line = self.proc.stdout.readline()
        if not line:
            self.close()
            raise RuntimeError("epochbench env exited (status %s)" % self.proc.returncode)
        return json.loads(line)

    def request(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self._reply()
        if not reply.get("ok"):
            raise RuntimeError("epochbench env: %s: %s" % (line, reply.get("error")))
        return reply

    def close(self):
        """Tears the environment down and waits until it is gone."""
        try:
            self.proc.stdin.close()  # end of input: the process tears down and exits
        except OSError:
            pass
        self.proc.wait()
        self.proc.stdout.close()


class CaseMount:
    """A mount of one case over a ThrottledSource's root, made by its `epochbench env`
    (tools/bench/epochbench/case_mount.h): `dir` is the mountpoint, `pid` the daemon that reads the
    source (in the throttled cgroup, with the rest of `pids`)."""

    def __init__(self, env, case, ram_cache):
        self.case = case
        self._env = env
        kind = case if case in ("bindfs", "rclone") else "epochfs"
        args = " --ram-cache %s" % ram_cache if kind == "epochfs" else ""
        reply = env.request("mount " + kind + args)
        self.id = reply["id"]
        self.dir = reply["dir"]
        self.pids = reply["pids"]
        self.pid = self.pids[0]

    def close(self):
        """Unmounts and waits for the daemon to exit (it holds the source open)."""
        if self._env:
            self._env.request("unmount %d" % self.id)
            self._env = None


class ThrottledSource:
    """`data` copied onto an ext4 image on a loop device (direct I/O on the backing file), mounted
    at `root`; reads of the processes put in `cg` capped at `bps` bytes/s. Made and removed by
    `epochbench env`; this is its client. The copy is at `data` = root/SUBDIR (under a
    subdirectory: ImageFolder would take ext4's lost+found for a class)."""

    def __init__(self, data, bps, subdir="train"):
        self.env = BenchEnv(data, bps, subdir)
        info = self.env.info
        self.root = info["root"]
        self.data = info["data"]
        self.loop = info["loop_device"]
        self.image = info["image"]
        self.bps = info["read_bps"]
        self.cg = Throttle(self.env, info)

    def drop_caches(self):
        self.env.request("drop-caches")

    def mount(self, case, ram_cache="2G"):
        """A FUSE mount of the source for one case (bindfs, rclone; epochfs for any other, with
        --ram-cache `ram_cache`), its daemon already in the throttled cgroup."""
        return CaseMount(self.env, case, ram_cache)

    def close(self):
        if self.env:
            self.env.close()
            self.env = None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


def epochfs_stats(mnt):
    out = subprocess.run([find_binary("epochctl"), "stats", mnt, "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def flatten(d, prefix=""):
    res = {}
    for k, v in d.items():
        key = prefix + k
        if isinstance(v, dict):
            res.update(flatten(v, key + "."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            res[key] = v
    return res


class CpuPriority:
    """This process and everything it starts (loader workers, FUSE daemons) in a cgroup v1
    `cpu` group with the largest cpu.shares, so other work on a shared box yields the CPU to the
    benchmark (it still runs, but gets weight 1024 against 262144)."""
    ROOT = "/sys/fs/cgroup/cpu"

    def __init__(self, enabled):
        self.path = None
        if not enabled or not os.path.exists(os.path.join(self.ROOT, "cpu.shares")):
            return
        self.path = os.path.join(self.ROOT, "train-bench-%d" % os.getpid())
        os.mkdir(self.path)
        with open(os.path.join(self.path, "cpu.shares"), "w") as f:
            f.write("262144")
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        log("cpu priority: cgroup %s, cpu.shares 262144" % self.path)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        if not self.path:
            return
        for _ in range(50):
            move_to_root(self.path, self.ROOT)
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)
        log("could not remove cgroup %s; run: rmdir %s" % (self.path, self.path))
