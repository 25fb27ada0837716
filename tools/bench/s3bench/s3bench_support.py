"""What s3bench and s3large share: the environment their children get, FUSE mounts that always
come down, whole-file readers over a shared list, and boto3's reader. Stdlib only; boto3 is
imported by the callers. The `STOP` event, set by a caller's signal handler, ends every reader
at its next file.
"""

import concurrent.futures
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [os.path.join(REPO, "tools", "python")]
from epochfs import mount_table  # noqa: E402

PROG = ["s3bench"]  # the name log() prints; a caller sets PROG[0]

def log(msg):
    print(PROG[0] + ": " + msg, file=sys.stderr, flush=True)


class Interrupted(Exception):
    pass


STOP = threading.Event()  # set on a signal: reader threads stop at their next file


def on_signal(signum, _frame):
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # one cleanup, not interrupted by a second signal
    STOP.set()
    raise Interrupted("signal %d" % signum)


def clean_env():
    """The children's environment: none of the caller's AWS_*, CEPH_* or proxy settings."""
    drop = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy")
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "CEPH_")) and k.lower() not in drop}


def run(cmd, **kw):
    kw.setdefault("env", clean_env())
    return subprocess.run(cmd, check=True, **kw)


# ----------------------------------------------------------------------------------- mounts

def pids_naming(path):
    """Processes whose command line names `path` (the mount daemons of our unique mountpoints)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                args = f.read().split(b"\0")
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if path.encode() in args and state != "Z":
            out.append(int(d))
    return out


def is_mounted(path):
    return mount_table.is_mount_point(os.path.realpath(path))


class Mount:
    """One FUSE mount on a fresh directory; unmount() waits for its daemon to exit."""

    def __init__(self, mnt, cmd, env=None):
        self.mnt = mnt
        os.makedirs(mnt)
        run(cmd, env=env or clean_env(), stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not is_mounted(mnt):
            if time.monotonic() > deadline:
                raise RuntimeError("%s is not mounted 30 s after: %s" % (mnt, " ".join(cmd)))
            time.sleep(0.05)

    def unmount(self):
        if is_mounted(self.mnt):
            r = subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
            if r.returncode != 0:
                subprocess.run(["fusermount3", "-uz", self.mnt], capture_output=True)
        deadline = time.monotonic() + 15
        while pids_naming(self.mnt) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in pids_naming(self.mnt):  # a daemon that outlived its mount (ours: it names it)
            log("daemon %d of %s still running after unmount: SIGKILL" % (pid, self.mnt))
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.rmdir(self.mnt)
        except OSError:
            pass


# ----------------------------------------------------------------------------------- readers

def read_pass(paths, threads):
    """Every path read whole (open, read to EOF) by `threads` threads sharing one list, in its
    order, as DataLoader workers do. Returns (files, bytes, seconds)."""
    lock, it, total, errors = threading.Lock(), iter(paths), [0, 0], []

    def worker():
        try:
            while not STOP.is_set():
                with lock:
                    p = next(it, None)
                if p is None:
                    return
                with open(p, "rb") as f:
                    n = len(f.read())
                with lock:
                    total[0] += 1
                    total[1] += n
        except OSError as e:
            errors.append(e)

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        while t.is_alive():
            t.join(0.2)
    dt = time.monotonic() - t0
    if errors:
        raise RuntimeError("read failed: %s" % errors[0])
    if STOP.is_set():
        raise Interrupted("stopped")
    return total[0], total[1], dt


def scan(root):
    """An ImageFolder-style scan (class directories, then their files, stat'ed), untimed."""
    n = 0
    for d, _, fs in os.walk(root):
        for f in fs:
            os.stat(os.path.join(d, f))
            n += 1
    return n


def boto3_pass(s3, bucket, keys, threads):
    """get_object of every whole key, `threads` threads sharing the list in its order."""
    lock, it, total = threading.Lock(), iter(keys), [0, 0]

    def worker():
        while not STOP.is_set():
            with lock:
                k = next(it, None)
            if k is None:
                return
            n = len(s3.get_object(Bucket=bucket, Key=k)["Body"].read())
            with lock:
                total[0] += 1
                total[1] += n

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        futs = [pool.submit(worker) for _ in range(threads)]
        for f in futs:
            while True:
                try:
                    f.result(timeout=0.2)
                    break
                except concurrent.futures.TimeoutError:
                    continue
    dt = time.monotonic() - t0
    if STOP.is_set():
        raise Interrupted("stopped")
    return total[0], total[1], dt


