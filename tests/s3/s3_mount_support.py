"""Helpers shared by the S3 tests that mount epochfs over the rgw fixture (test_s3_mount.py,
test_s3_bad_input.py, test_s3_secrets.py): skip checks, a clean environment, the fixture's
credentials, a boto3 client, mounting and unmounting, epochctl, the daemon's processes.

Not a test itself (CMake registers tests/s3/test_*.py only). Standard library and boto3.
"""

import concurrent.futures
import configparser
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(ROOT, "tools", "python"))
import rgw_counters  # noqa: E402

SKIP = 77
BIN_DIR = os.environ.get("EPOCHFS_BIN_DIR") or os.path.join(ROOT, "build", "bin")
EPOCHFS = os.path.join(BIN_DIR, "epochfs")
EPOCHCTL = os.path.join(BIN_DIR, "epochctl")
RGW_DIR = os.environ.get("EPOCHFS_RGW_DIR", "")
MiB = 1 << 20
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy")
# A path that does not exist: the AWS chain's default files (~/.aws/...) stay out of the tests.
NO_FILE = "/nonexistent/epochfs-s3-test/none"


def skip_reason(torch=False, root=False):
    """Why these tests cannot run here, or None."""
    try:
        import boto3  # noqa: F401
    except ImportError:
        return "python3-boto3 not installed (tools/test installs it)"
    if not RGW_DIR:
        return "EPOCHFS_RGW_DIR not set (run through ctest, or see tests/s3/README.md)"
    if not os.path.exists(os.path.join(RGW_DIR, "rgw.json")):
        return "no rgw fixture: %s/rgw.json is missing" % RGW_DIR
    if not os.access(EPOCHFS, os.X_OK):
        return "epochfs binary not found in %r (EPOCHFS_BIN_DIR)" % BIN_DIR
    try:
        out = subprocess.run([EPOCHFS, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "epochfs --help failed: %s" % e
    if "--s3-endpoint" not in out.stdout + out.stderr:
        return "this epochfs has no S3 source yet (--help does not mention --s3-endpoint)"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as e:
        return "/dev/fuse not usable: %s" % e
    if root and os.geteuid() != 0:
        return "needs root (drops the page cache through /proc/sys/vm/drop_caches)"
    if torch:
        try:
            import torch as _t  # noqa: F401
            import torchvision  # noqa: F401
        except ImportError as e:
            return "torch/torchvision missing: %s" % e
    return None


def main(reason):
    """Runs the calling module's tests (exit 1 on failure), or exits SKIP saying why not."""
    import unittest
    if reason:
        print("SKIPPED: " + reason)
        sys.exit(SKIP)
    t0 = time.monotonic()
    result = unittest.main(module="__main__", exit=False, verbosity=2).result
    print("%s: %.1f s" % (os.path.basename(sys.argv[0]), time.monotonic() - t0))
    sys.exit(0 if result.wasSuccessful() else 1)


def scrub_environ():
    """Drops the caller's AWS_* settings and proxies from this process's environment (botocore
    reads them), and points AWS_CONFIG_FILE at /dev/null."""
    for k in list(os.environ):
        if k.startswith("AWS_") or k.lower() in PROXY_VARS:
            del os.environ[k]
    os.environ["AWS_CONFIG_FILE"] = "/dev/null"


def daemon_env(**extra):
    """An environment for epochfs: this one without AWS_* and proxies, the AWS files pointed
    at nothing, plus `extra` (a value of None removes the name)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and k.lower() not in PROXY_VARS}
    env["AWS_CONFIG_FILE"] = "/dev/null"
    env["AWS_SHARED_CREDENTIALS_FILE"] = NO_FILE
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


class Fixture:
    """The rgw fixture: endpoint, region, credentials file, and the keys in it."""

    def __init__(self, d=None):
        self.dir = d or RGW_DIR
        st = rgw_counters.state(self.dir)
        self.endpoint = st["endpoint"]
        self.region = st["region"]
        self.credentials_file = st["credentials_file"]
        self.profile = st["profile"]
        # The HTTPS endpoint and the CA that signed its certificate (None: --no-https).
        self.https_endpoint = st.get("https_endpoint")
        self.ca_file = st.get("ca_file")
        ini = configparser.ConfigParser()
        ini.read(self.credentials_file)
        self.key_id = ini[self.profile]["aws_access_key_id"]
        self.secret = ini[self.profile]["aws_secret_access_key"]
        assert len(self.secret) >= 16 and len(self.key_id) >= 8

    def client(self, threads=16, https=False):
        """boto3 against the plain endpoint, or (https) the HTTPS one verified with the CA."""
        import boto3
        from botocore.config import Config
        return boto3.session.Session().client(
            "s3", endpoint_url=self.https_endpoint if https else self.endpoint,
            region_name=self.region, verify=self.ca_file if https else None,
            aws_access_key_id=self.key_id, aws_secret_access_key=self.secret,
            config=Config(s3={"addressing_style": "path"}, max_pool_connections=threads,
                          retries={"max_attempts": 3}))

    def gets(self):
        """rgw's count of object GETs (and HEADs) so far."""
        return rgw_counters.read(self.dir)["get"]

    def counters(self):
        """rgw's perf counters: get, get_b (bytes, one less per GET), put, req, failed_req."""
        rgw = rgw_counters.perf_dump(rgw_counters.state(self.dir)["rgw_asok"])["rgw"]
        return {k: rgw[k] for k in ("get", "get_b", "put", "req", "failed_req")}

    def lists(self):
        return rgw_counters.list_count(self.dir)


def open_bucket(kind):
    """A scrubbed environment, the fixture, a boto3 client and a new bucket: (fx, s3, bucket)."""
    scrub_environ()
    fx = Fixture()
    s3 = fx.client()
    bucket = unique_bucket(kind)
    s3.create_bucket(Bucket=bucket)
    return fx, s3, bucket


def clean_tmp(tmp):
    """Unmounts everything under `tmp`, then removes it (kept when a mount would not go)."""
    for m in reversed(mounts_under(tmp)):
        unmount(m)
    if not mounts_under(tmp):
        shutil.rmtree(tmp, ignore_errors=True)


def radosgw_key(fx, *args):
    """`radosgw-admin key ARGS` for the fixture's user; its CompletedProcess."""
    return subprocess.run(["radosgw-admin", "-c", os.path.join(fx.dir, "ceph.conf"), "key",
                           *args, "--uid", "epochfs-test", "--key-type", "s3"],
                          capture_output=True, text=True, timeout=60)


def gateway(action, d=None, timeout=120):
    """`tests/s3/rgw stop-gateway|start-gateway DIR`: radosgw alone stopped or started again
    (mon and OSD keep running; start returns when S3 answers). Raises AssertionError on failure."""
    assert action in ("stop-gateway", "start-gateway"), action
    r = subprocess.run([sys.executable, os.path.join(HERE, "rgw"), action, d or RGW_DIR],
                       capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise AssertionError("rgw %s: exit %d: %s%s" % (action, r.returncode, r.stdout,
                                                        r.stderr))


def epochfs_has_option(option):
    """Whether `epochfs --help` lists `option` (e.g. --s3-read-deadline)."""
    r = subprocess.run([EPOCHFS, "--help"], capture_output=True, text=True, timeout=30)
    return option in r.stdout + r.stderr


def unique_bucket(kind):
    return "epochfs-%s-%s" % (kind, uuid.uuid4().hex[:10])


def upload(s3, bucket, items, threads=8):
    """PUTs `items` ({key: bytes, or a callable returning bytes}) with a thread pool; returns
    {key: (size, sha256 hex)}."""
    def put(kv):
        key, body = kv
        data = body() if callable(body) else body
        s3.put_object(Bucket=bucket, Key=key, Body=data)
        return key, (len(data), hashlib.sha256(data).hexdigest())

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return dict(pool.map(put, items.items()))


def upload_image_folder(s3, bucket, prefix, objects, classes, seed, mu, sigma, smallest, largest):
    """PUTs `objects` random objects PREFIX/classNN/imgNNNN.JPEG, sizes log-normal(mu, sigma)
    clamped to [smallest, largest]; returns {path under PREFIX: (size, sha256 hex)}."""
    rng = random.Random(seed)
    items = {"%s/class%02d/img%04d.JPEG" % (prefix, i % classes, i):
             os.urandom(int(min(largest, max(smallest, rng.lognormvariate(mu, sigma)))))
             for i in range(objects)}
    done = upload(s3, bucket, items)
    return {k[len(prefix) + 1:]: v for k, v in done.items()}


def upload_large(s3, bucket, key, data, part=16 * MiB):
    """A multipart upload (parts of `part` bytes, 4 at a time)."""
    import io
    from boto3.s3.transfer import TransferConfig
    s3.upload_fileobj(io.BytesIO(data), bucket, key,
                      Config=TransferConfig(multipart_threshold=part, multipart_chunksize=part,
                                            max_concurrency=4))


def mount_table():
    from epochfs import mount_table as mt
    return mt.read()


def is_mounted(path):
    return any(m.mount_point == path for m in mount_table())


def mounts_under(directory):
    prefix = directory.rstrip("/") + "/"
    return [m.mount_point for m in mount_table()
            if m.mount_point == directory or m.mount_point.startswith(prefix)]


def epochfs_pids(mnt):
    """Pids of the epochfs processes whose command line names mountpoint `mnt`."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"epochfs" and os.fsencode(mnt) in argv:
            out.append(int(name))
    return sorted(out)


def unmount(mnt, processes_timeout=15):
    """fusermount3 -u, then umount -l; then waits for the daemon's processes to exit and kills
    (by pid) those that stay: they were started by this test for this unique mountpoint.
    Returns whether nothing is mounted at `mnt`."""
    for cmd in (["fusermount3", "-u", mnt], ["umount", "-l", mnt]):
        if not is_mounted(mnt):
            break
        subprocess.run(cmd, capture_output=True, timeout=30)
        for _ in range(100):
            if not is_mounted(mnt):
                break
            time.sleep(0.05)
    deadline = time.monotonic() + processes_timeout
    while epochfs_pids(mnt) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in epochfs_pids(mnt):
        print("unmount: epochfs pid %d for %s still running; SIGKILL" % (pid, mnt),
              file=sys.stderr)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return not is_mounted(mnt)


def run_epochfs(args, env, timeout=60):
    """Runs `epochfs ARGS` (daemonizing by default: it returns once mounted or failed).
    Returns (CompletedProcess or None on timeout, seconds)."""
    t0 = time.monotonic()
    try:
        r = subprocess.run([EPOCHFS] + list(args), env=env, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        r = None
    return r, time.monotonic() - t0


def tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return "(%s)" % e


def mount(source, mnt, args, env, log_file=None, timeout=60):
    """Mounts or raises AssertionError with epochfs's output and the log's tail."""
    full = [source, mnt] + list(args)
    if log_file:
        full += ["--log-file", log_file]
    r, secs = run_epochfs(full, env, timeout)
    if r is None or r.returncode != 0 or not is_mounted(mnt):
        unmount(mnt)
        raise AssertionError(
            "mount failed: epochfs %s\n  %s after %.1f s\n  stdout %r\n  stderr %r\n  log:\n%s"
            % (" ".join(full), "timed out" if r is None else "exit %d" % r.returncode, secs,
               r and r.stdout, r and r.stderr, tail(log_file) if log_file else ""))
    return secs


def mount_refused(source, mnt, args, env, timeout):
    """Runs `epochfs SOURCE MNT ARGS` expected to fail; cleans up whatever it left (a mount, a
    daemon). Returns (CompletedProcess or None on timeout, seconds, mounted, pids left)."""
    r, secs = run_epochfs([source, mnt] + list(args), env, timeout)
    mounted = is_mounted(mnt)
    deadline = time.monotonic() + 5  # a daemon that failed may take a moment to exit
    while epochfs_pids(mnt) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = epochfs_pids(mnt)
    if mounted or left:
        unmount(mnt)
    return r, secs, mounted, left


def epochctl(mnt, *args, check=True, timeout=120):
    r = subprocess.run([EPOCHCTL] + list(args[:1]) + [mnt] + list(args[1:]), capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError("epochctl %s %s: exit %d: %s%s"
                             % (args[0], mnt, r.returncode, r.stdout, r.stderr))
    return r


def status(mnt):
    return json.loads(epochctl(mnt, "status", "--json").stdout)


def drop_caches(level=1):
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write(str(level))


def sha256_file(path, piece=MiB):
    h = hashlib.sha256()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(piece)
            if not b:
                break
            h.update(b)
            n += len(b)
    return n, h.hexdigest()


def pread_full(fd, size, offset):
    """pread until `size` bytes or end of file."""
    out = bytearray()
    while len(out) < size:
        b = os.pread(fd, size - len(out), offset + len(out))
        if not b:
            break
        out += b
    return bytes(out)


def hash_in_subprocess(paths, timeout=60):
    """{path: (size, sha256)} computed by a child python (a hung FUSE read cannot hang the test);
    raises AssertionError on a timeout or an error."""
    code = ("import hashlib,json,sys\nout={}\nfor p in json.load(sys.stdin):\n"
            "  d=open(p,'rb').read()\n  out[p]=[len(d),hashlib.sha256(d).hexdigest()]\n"
            "print(json.dumps(out))\n")
    try:
        r = subprocess.run([sys.executable, "-c", code], input=json.dumps(paths),
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError("reading %d files through the mount took over %d s"
                             % (len(paths), timeout))
    if r.returncode != 0:
        raise AssertionError("reading through the mount failed: %s" % r.stderr.strip())
    return {p: tuple(v) for p, v in json.loads(r.stdout).items()}


READ_CHILD = """import errno,hashlib,json,os,sys,time
path, off, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t0 = time.monotonic()
try:
    fd = os.open(path, os.O_RDONLY)
    try:
        out = bytearray()
        while size < 0 or len(out) < size:
            b = os.pread(fd, 1 << 20 if size < 0 else min(1 << 20, size - len(out)), off + len(out))
            if not b:
                break
            out += b
    finally:
        os.close(fd)
    r = {"ok": True, "len": len(out), "sha256": hashlib.sha256(out).hexdigest()}
except OSError as e:
    r = {"ok": False, "errno": e.errno, "errname": errno.errorcode.get(e.errno, "?"),
         "error": str(e)}
r["secs"] = time.monotonic() - t0
print(json.dumps(r))
"""


def read_child(path, offset=0, size=-1, timeout=60):
    """Reads `size` bytes (-1: to the end) of `path` from `offset` in a child python (a hung FUSE
    read cannot hang the test). Returns {"ok": True, "len", "sha256", "secs"} or {"ok": False,
    "errno", "errname", "error", "secs"}; {"ok": False, "errname": "TIMEOUT"} after `timeout` s."""
    t0 = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-c", READ_CHILD, path, str(offset), str(size)],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "errno": None, "errname": "TIMEOUT", "error": "over %d s" % timeout,
                "secs": time.monotonic() - t0}
    if r.returncode != 0:
        raise AssertionError("the reading child failed: %s" % r.stderr.strip())
    return json.loads(r.stdout)


def digest(data):
    """What read_child reports for `data` read whole: (len, sha256 hex)."""
    return len(data), hashlib.sha256(data).hexdigest()


def make_tmp(kind):
    # The pid in the name lets tools/test tell a live run's mount from a stale one.
    return tempfile.mkdtemp(prefix="epochfs-s3-%s-%d-" % (kind, os.getpid()))


class MountTest(unittest.TestCase):
    """What the mount tests share; their setUpClass sets cls.mnt (the mountpoint), cls.tmp (the
    test's directory, the mountpoint inside it) and cls.log (the daemon's log file)."""

    @classmethod
    def remove_mount(cls):
        """Unmounts and removes cls.tmp; False, keeping it, when the mount would not go (never
        delete through a live mount)."""
        if not unmount(cls.mnt):
            print("could not unmount %s" % cls.mnt, file=sys.stderr)
            return False
        shutil.rmtree(cls.tmp, ignore_errors=True)
        return True

    def fail_with_log(self, msg):
        self.fail("%s\n--- epochfs log (tail):\n%s" % (msg, tail(self.log)))

    def path(self, rel):
        return os.path.join(self.mnt, rel)
