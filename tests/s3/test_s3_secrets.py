"""An S3 mount's credentials never leak: not in any process's argv, not in the environment of
the epochfs processes (supervisor and worker; the worker's replacement after a SIGKILL too), not
in the debug log, `epochctl status`/`stats`/`metrics`, the Prometheus endpoint or the mount
table.

Two mounts of the same small dataset (default: daemonized and supervised; `--log-level debug
--log-file F --metrics-port 0`):
  - credentials from the environment: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (rgw has no
    session tokens); the key id is looked for in the environments too;
  - --s3-credentials-file (a 0600 copy of the fixture's file), no AWS_* variables.
Each: reads every file (bytes checked), looks for the secret everywhere above, kills the worker
with SIGKILL, waits for the supervisor's new worker, reads again, and looks again.

Environment: EPOCHFS_RGW_DIR (the fixture), EPOCHFS_BIN_DIR (set by CTest). Exit 77 (skipped)
without the fixture, boto3, /dev/fuse or an epochfs with --s3-endpoint.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import s3_mount_support as sup  # noqa: E402

PREFIX = "sec"
RESTART_TIMEOUT = 30


def proc_read(pid, what):
    try:
        with open("/proc/%d/%s" % (pid, what), "rb") as f:
            return f.read()
    except OSError:
        return None


def ppid(pid):
    text = proc_read(pid, "status") or b""
    for line in text.decode(errors="replace").splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return None


class S3Secrets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sup.scrub_environ()
        cls.fx = sup.Fixture()
        s3 = cls.fx.client()
        cls.bucket = sup.unique_bucket("secrets")
        s3.create_bucket(Bucket=cls.bucket)
        items = {"%s/class%d/img%03d.JPEG" % (PREFIX, i % 3, i): os.urandom(1000 + 997 * i)
                 for i in range(60)}
        items["%s/large/blob.bin" % PREFIX] = os.urandom(3 * sup.MiB + 12345)
        done = sup.upload(s3, cls.bucket, items)
        s3.close()
        cls.expected = {k[len(PREFIX) + 1:]: v for k, v in done.items()}
        cls.tmp = sup.make_tmp("secrets")

    @classmethod
    def tearDownClass(cls):
        for m in reversed(sup.mounts_under(cls.tmp)):
            sup.unmount(m)
        if not sup.mounts_under(cls.tmp):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    # ---- helpers -----------------------------------------------------------------------------
    def read_all(self, mnt):
        paths = [os.path.join(mnt, rel) for rel in sorted(self.expected)]
        got = sup.hash_in_subprocess(paths, timeout=60)
        self.assertEqual({os.path.relpath(p, mnt): v for p, v in got.items()}, self.expected)

    def processes(self, mnt):
        """{pid: role} of the mount's epochfs processes: the worker (status's pid), its
        supervisor (its parent, an epochfs too), and any other epochfs naming `mnt`."""
        st = sup.status(mnt)
        worker = st["pid"]
        procs = {pid: "epochfs" for pid in sup.epochfs_pids(mnt)}
        procs[worker] = "worker"
        parent = ppid(worker)
        exe = proc_read(parent, "cmdline") if parent else None
        if exe and os.path.basename(exe.split(b"\0")[0]) == b"epochfs":
            procs[parent] = "supervisor"
        return procs

    def leaks(self, mnt, log, what, secret, key_id):
        """Where `secret` (and `key_id`, in environments) shows up; [] when nowhere."""
        found = []
        s, k = secret.encode(), key_id.encode()
        # Every process's command line (ps shows them to everyone).
        for name in os.listdir("/proc"):
            if name.isdigit():
                cmd = proc_read(int(name), "cmdline")
                if cmd and s in cmd:
                    found.append("/proc/%s/cmdline" % name)
        procs = self.processes(mnt)
        self.assertIn("supervisor", procs.values(), "no supervisor found: %s" % procs)
        for pid, role in sorted(procs.items()):
            env = proc_read(pid, "environ")
            self.assertIsNotNone(env, "cannot read /proc/%d/environ" % pid)
            for needle, label in ((s, "secret"), (k, "key id")):
                if needle in env:
                    found.append("the %s in /proc/%d/environ (%s)" % (label, pid, role))
            for t in os.listdir("/proc/%d/task" % pid):
                if s in (proc_read(pid, "task/%s/cmdline" % t) or b""):
                    found.append("/proc/%d/task/%s/cmdline" % (pid, t))
        # The log as written so far (the daemon buffers it: most of it lands at exit, and
        # check_mount looks at it again after the unmount).
        with open(log, "rb") as f:
            text = f.read()
        if s in text:
            found.append("the log file %s" % log)
        st = sup.status(mnt)
        outputs = {
            "status --json": sup.epochctl(mnt, "status", "--json").stdout,
            "status": sup.epochctl(mnt, "status").stdout,
            "stats --json": sup.epochctl(mnt, "stats", "--json").stdout,
            "metrics": sup.epochctl(mnt, "metrics").stdout,
        }
        port = st.get("admin", {}).get("metrics_port")
        self.assertTrue(port, "status has no admin.metrics_port: %s" % st.get("admin"))
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
            outputs["GET /metrics"] = r.read().decode(errors="replace")
        self.assertIn("epochfs_", outputs["GET /metrics"])
        for m in sup.mount_table():
            if m.mount_point == mnt:
                outputs["mountinfo"] = repr(m)
        for name, out in outputs.items():
            if secret in out:
                found.append(name)
        print("%s: looked in %d processes (%s), %d bytes of log, %s"
              % (what, len(procs), ", ".join("%d %s" % kv for kv in sorted(procs.items())),
                 len(text), ", ".join(outputs)))
        return found

    def kill_worker_and_wait(self, mnt):
        st = sup.status(mnt)
        old = st["pid"]
        supervisor = ppid(old)
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + RESTART_TIMEOUT
        new = None
        while time.monotonic() < deadline:
            time.sleep(0.2)
            r = sup.epochctl(mnt, "status", "--json", check=False, timeout=10)
            if r.returncode == 0:
                pid = json.loads(r.stdout).get("pid")
                if pid and pid != old:
                    new = pid
                    break
        self.assertIsNotNone(new, "no new worker within %d s after SIGKILL of %d"
                             % (RESTART_TIMEOUT, old))
        self.assertEqual(ppid(new), supervisor, "the new worker's parent is not the supervisor")
        return old, new

    def check_mount(self, what, source, args, env):
        mnt = os.path.join(self.tmp, "mnt-" + what)
        log = os.path.join(self.tmp, "log-" + what)
        os.makedirs(mnt)
        try:
            sup.mount(source, mnt, args + ["--log-level", "debug", "--metrics-port", "0"], env,
                      log_file=log)
            self.read_all(mnt)
            st = sup.status(mnt)
            self.assertTrue(str(st.get("source", "")).startswith("s3://%s/%s"
                                                                 % (self.bucket, PREFIX)))
            found = self.leaks(mnt, log, what, self.fx.secret, self.fx.key_id)
            self.assertEqual(found, [], "%s: the secret leaks: %s" % (what, found))

            old, new = self.kill_worker_and_wait(mnt)
            print("%s: worker %d killed, the supervisor started %d" % (what, old, new))
            self.read_all(mnt)
            found = self.leaks(mnt, log, what + " after the restart", self.fx.secret,
                               self.fx.key_id)
            self.assertEqual(found, [], "%s, after the worker's restart: the secret leaks: %s"
                             % (what, found))
        except AssertionError as e:
            sup.unmount(mnt)
            raise AssertionError("%s\n--- log tail:\n%s" % (e, sup.tail(log))) from None
        finally:
            self.assertTrue(sup.unmount(mnt), "could not unmount %s" % mnt)
        with open(log, "rb") as f:
            text = f.read()
        print("%s: the log after the unmount: %d bytes, %d lines at debug level"
              % (what, len(text), text.count(b"] [debug] ")))
        self.assertGreater(len(text), 0, "%s: the log is empty after the unmount" % what)
        self.assertNotIn(self.fx.secret.encode(), text, "%s: the secret is in the log" % what)

    # ---- the tests ---------------------------------------------------------------------------
    def test_0_the_search_finds_a_planted_secret(self):
        # The search itself: a process given the secret in its environment and argv is found.
        p = subprocess.Popen([
            "/bin/sh", "-c", "sleep 60; exit 0", "sh", self.fx.secret], env=sup.daemon_env(
            AWS_ACCESS_KEY_ID=self.fx.key_id, AWS_SECRET_ACCESS_KEY=self.fx.secret),
            start_new_session=True)
        try:
            deadline = time.monotonic() + 10  # until it has exec'd sh
            while not (proc_read(p.pid, "cmdline") or b"").startswith(b"/bin/sh\0") \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertIn(self.fx.secret.encode(), proc_read(p.pid, "environ"))
            self.assertIn(self.fx.key_id.encode(), proc_read(p.pid, "environ"))
            self.assertIn(self.fx.secret.encode(), proc_read(p.pid, "cmdline"))
        finally:
            os.killpg(p.pid, signal.SIGKILL)  # sh and its sleep: the group this test started
            p.wait()

    def test_credentials_from_environment(self):
        env = sup.daemon_env(AWS_ACCESS_KEY_ID=self.fx.key_id,
                             AWS_SECRET_ACCESS_KEY=self.fx.secret)
        self.check_mount("env", "s3://%s/%s" % (self.bucket, PREFIX),
                         ["--s3-endpoint", self.fx.endpoint], env)

    def test_credentials_file(self):
        path = os.path.join(self.tmp, "credentials")
        with open(self.fx.credentials_file) as f:
            text = f.read()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.check_mount("file", "s3://%s/%s" % (self.bucket, PREFIX),
                         ["--s3-endpoint", self.fx.endpoint, "--s3-credentials-file", path,
                          "--s3-profile", self.fx.profile], sup.daemon_env())


if __name__ == "__main__":
    sup.main(sup.skip_reason())
