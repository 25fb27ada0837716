"""The benchmark environment of tools/train-bench: the throttled source (an ext4 image on a
loop device with a cgroup v1 blkio cap), the FUSE mounts of each case, and the cpu cgroup the
benchmark runs in. Needs root."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.join(REPO, "build", "bin")


def log(*a):
    print("train-bench:", *a, file=sys.stderr, flush=True)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def dataset_bytes(root):
    total = n = 0
    for dp, _, fs in os.walk(root):
        for f in fs:
            total += os.path.getsize(os.path.join(dp, f))
            n += 1
    return total, n


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def wait_mounted(path, timeout=30):
    t = time.time() + timeout
    while time.time() < t:
        if is_mounted(path):
            return True
        time.sleep(0.1)
    return False


def pid_by_mountpoint(mnt, names):
    """The pid of a FUSE daemon whose command line names `mnt` (exact argument match)."""
    mnt = os.path.realpath(mnt)
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) in names and mnt in argv:
            return int(p)
    return None


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


class Blkio:
    """A cgroup v1 blkio cgroup capping reads of one device (cf. blkio_throttle.cc)."""
    ROOT = "/sys/fs/cgroup/blkio"

    def __init__(self, dev, bps):
        self.dev = "%d:%d" % (os.major(dev), os.minor(dev))
        self.path = os.path.join(self.ROOT, "train-bench-%d" % os.getpid())
        os.mkdir(self.path)
        self._write("blkio.throttle.read_bps_device", "%s %d" % (self.dev, bps))

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def add(self, pid):
        self._write("cgroup.procs", str(pid))

    def remove_all(self):
        move_to_root(self.path, self.ROOT)

    def read_bytes(self):
        with open(os.path.join(self.path, "blkio.throttle.io_service_bytes")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0] == self.dev and parts[1] == "Read":
                    return int(parts[2])
        return 0

    def destroy(self):
        if not self.path:
            return
        for _ in range(100):
            self.remove_all()
            try:
                os.rmdir(self.path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        else:
            log("could not remove cgroup %s; run: rmdir %s" % (self.path, self.path))
        self.path = None


class ThrottledSource:
    """ext4 image on a loop device (direct I/O on the backing file), mounted, with a blkio cgroup."""

    def __init__(self, data, bps):
        self.scratch = tempfile.mkdtemp(prefix="train-bench-")
        self.image = os.path.join("/var/tmp", os.path.basename(self.scratch) + ".img")
        self.root = os.path.join(self.scratch, "src")
        self.loop = None
        self.cg = None
        os.mkdir(self.root)
        nbytes, nfiles = dataset_bytes(data)
        with open(self.image, "wb") as f:
            f.truncate(int(nbytes * 1.3) + (256 << 20))
        run(["mkfs.ext4", "-q", "-F", "-m", "0", "-N", str(nfiles + 4096), "-E",
             "lazy_itable_init=0,lazy_journal_init=0", self.image])
        self.loop = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", self.image],
                                   check=True, capture_output=True, text=True).stdout.strip()
        run(["mount", "-t", "ext4", "-o", "noatime", self.loop, self.root])
        self.mounted = True
        # Under a subdirectory: ImageFolder would take ext4's lost+found for a class.
        self.data = os.path.join(self.root, "train")
        run(["cp", "-a", data, self.data])
        os.sync()
        self.cg = Blkio(os.stat(self.loop).st_rdev, bps)
        self.bps = bps

    def set_bps(self, bps):
        self.cg._write("blkio.throttle.read_bps_device", "%s %d" % (self.cg.dev, bps))
        self.bps = bps

    def close(self):
        if self.cg:
            self.cg.destroy()
            self.cg = None
        if getattr(self, "mounted", False):
            for _ in range(100):
                if subprocess.run(["umount", self.root], capture_output=True).returncode == 0:
                    break
                time.sleep(0.2)
            else:
                subprocess.run(["umount", "-l", self.root])
            self.mounted = False
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop])
            self.loop = None
        if os.path.exists(self.image):
            os.unlink(self.image)
        shutil.rmtree(self.scratch, ignore_errors=True)


def epochfs_stats(mnt):
    out = subprocess.run([os.path.join(BIN, "epochctl"), "stats", mnt, "--json"],
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


class Mount:
    """A FUSE mount of `src` for one case; `pid` is its daemon."""

    def __init__(self, case, src):
        self.case = case
        self.dir = tempfile.mkdtemp(prefix="train-bench-mnt-")
        self.cache = None
        if case == "bindfs":
            run(["bindfs", "-o", "ro", src, self.dir])
            self.pid = pid_by_mountpoint(self.dir, {"bindfs"})
        elif case == "rclone":
            self.cache = tempfile.mkdtemp(prefix="train-bench-rclone-", dir="/var/tmp")
            subprocess.Popen(["rclone", "mount", src, self.dir, "--read-only", "--vfs-cache-mode",
                              "full", "--cache-dir", self.cache, "--log-level", "ERROR"],
                             stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                             start_new_session=True)
            if not wait_mounted(self.dir):
                raise RuntimeError("rclone mount did not appear")
            self.pid = pid_by_mountpoint(self.dir, {"rclone"})
        else:
            run([os.path.join(BIN, "epochfs"), src, self.dir, "--ram-cache", "2G"])
            st = json.loads(subprocess.run([os.path.join(BIN, "epochctl"), "status", self.dir,
                                            "--json"], capture_output=True, text=True,
                                           check=True).stdout)
            self.pid = int(st["pid"])
        if not wait_mounted(self.dir) or not self.pid:
            raise RuntimeError("%s mount at %s failed (pid %s)" % (case, self.dir, self.pid))

    def close(self):
        for _ in range(50):
            if not is_mounted(self.dir):
                break
            if subprocess.run(["fusermount3", "-u", self.dir], capture_output=True).returncode == 0:
                break
            time.sleep(0.2)
        else:
            subprocess.run(["umount", "-l", self.dir])
        if self.pid:  # wait for the daemon to exit (it holds the source open)
            for _ in range(100):
                if not os.path.exists("/proc/%d" % self.pid):
                    break
                time.sleep(0.1)
        os.rmdir(self.dir)
        if self.cache:
            shutil.rmtree(self.cache, ignore_errors=True)


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
