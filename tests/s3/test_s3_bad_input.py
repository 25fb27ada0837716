"""epochfs refuses a bad S3 mount cleanly: exit non-zero, exactly one stderr line
`epochfs: error: ...` that holds no secret, nothing mounted, no daemon left running, within a
time bound.

Cases (each differs from a mount that works, checked first, in one thing): a wrong secret key;
a bucket that does not exist; an endpoint on a closed 127.0.0.1 port; an endpoint that accepts
connections and never answers (60 s bound); malformed sources and options (`s3://`,
`s3://Bad_Bucket!`, `--s3-endpoint ftp://x`); a prefix with no objects; `--s3-credentials-file`
missing, or with mode 0644 (refused: it holds a secret); no credentials anywhere without
`--s3-no-sign-request`; `--s3-no-sign-request` on a private bucket.

Environment: EPOCHFS_RGW_DIR (the fixture), EPOCHFS_BIN_DIR (set by CTest). Exit 77 (skipped)
without the fixture, boto3, /dev/fuse or an epochfs with --s3-endpoint.
"""

import os
import shutil
import socket
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import s3_mount_support as sup  # noqa: E402

BOUND = 30.0          # seconds for a refusal
SILENT_BOUND = 60.0   # an endpoint that never answers: the client's timeouts
# The unreachable endpoints retry until the read deadline (30 s by default, 10
# attempts); 5 s gives the same one line, sooner.
SHORT_DEADLINE = ["--s3-read-deadline", "5"]
WRONG_SECRET = "WrongSecretKey0123456789abcdefghijKLMNOPQ"
PREFIX = "data"
LINE_PREFIX = "epochfs: error: "


class S3BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sup.scrub_environ()
        cls.fx = sup.Fixture()
        s3 = cls.fx.client()
        cls.bucket = sup.unique_bucket("bad")
        s3.create_bucket(Bucket=cls.bucket)
        sup.upload(s3, cls.bucket, {"%s/c%d/%02d.JPEG" % (PREFIX, i % 2, i): b"x" * (100 + i)
                                    for i in range(10)})
        s3.close()
        cls.tmp = sup.make_tmp("bad")
        cls.case = 0
        cls.lines = []

    @classmethod
    def tearDownClass(cls):
        left = sup.mounts_under(cls.tmp)
        for m in reversed(left):
            sup.unmount(m)
        if not sup.mounts_under(cls.tmp):
            shutil.rmtree(cls.tmp, ignore_errors=True)
        print("\nthe error lines:\n" + "\n".join(cls.lines))

    def source(self, prefix=PREFIX, bucket=None):
        return "s3://%s/%s" % (bucket or self.bucket, prefix)

    def base_args(self):
        return ["--s3-endpoint", self.fx.endpoint, "--s3-region", self.fx.region,
                "--ram-cache", "64M"]

    def creds_env(self, **extra):
        return sup.daemon_env(AWS_ACCESS_KEY_ID=self.fx.key_id,
                              AWS_SECRET_ACCESS_KEY=self.fx.secret, **extra)

    def new_mnt(self):
        type(self).case += 1
        mnt = os.path.join(self.tmp, "mnt%d" % self.case)
        os.makedirs(mnt)
        return mnt

    def expect_refusal(self, name, source, args, env, bound=BOUND, mention=None):
        mnt = self.new_mnt()
        # Waits past the bound (2.5x) so that a failure says how long it really took.
        r, secs = sup.run_epochfs([source, mnt] + list(args), env, timeout=bound * 2.5)
        mounted = sup.is_mounted(mnt)
        deadline = time.monotonic() + 5  # a daemon that failed may take a moment to exit
        while sup.epochfs_pids(mnt) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = sup.epochfs_pids(mnt)
        if mounted or left:
            sup.unmount(mnt)
        self.assertIsNotNone(r, "%s: epochfs did not return within %.0f s"
                             % (name, bound * 2.5))
        lines = r.stderr.splitlines()
        type(self).lines.append("%-28s exit %d, %.2f s: %s"
                                % (name, r.returncode, secs, " | ".join(lines)))
        self.assertNotEqual(r.returncode, 0, "%s: exit 0 (stderr %r)" % (name, r.stderr))
        self.assertFalse(mounted, "%s: something is mounted at %s" % (name, mnt))
        self.assertEqual(left, [], "%s: epochfs processes left running" % name)
        self.assertEqual(sup.mounts_under(mnt), [])
        self.assertEqual(len(lines), 1, "%s: want one stderr line, got %r" % (name, r.stderr))
        self.assertTrue(lines[0].startswith(LINE_PREFIX) and len(lines[0]) > len(LINE_PREFIX),
                        "%s: %r" % (name, lines[0]))
        for secret in (self.fx.secret, WRONG_SECRET):
            self.assertNotIn(secret, r.stderr + r.stdout, "%s: a secret in the output" % name)
        self.assertLess(secs, bound, "%s: took %.1f s" % (name, secs))
        if mention:
            self.assertTrue(any(m in lines[0] for m in mention),
                            "%s: the message names none of %s: %r" % (name, mention, lines[0]))
        return lines[0]

    # A mount that works: the cases below differ from it in one thing each.
    def test_00_control_mounts(self):
        mnt = self.new_mnt()
        try:
            sup.mount(self.source(), mnt, self.base_args(), self.creds_env())
            self.assertEqual(sorted(os.listdir(mnt)), ["c0", "c1"])
        finally:
            self.assertTrue(sup.unmount(mnt))

    def test_wrong_secret(self):
        self.expect_refusal("wrong secret key", self.source(), self.base_args(),
                            sup.daemon_env(AWS_ACCESS_KEY_ID=self.fx.key_id,
                                           AWS_SECRET_ACCESS_KEY=WRONG_SECRET))

    def test_missing_bucket(self):
        missing = sup.unique_bucket("missing")
        self.expect_refusal("missing bucket", self.source(bucket=missing), self.base_args(),
                            self.creds_env())

    def test_closed_port(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        args = self.base_args() + SHORT_DEADLINE
        args[1] = "http://127.0.0.1:%d" % port
        self.expect_refusal("closed port", self.source(), args, self.creds_env())

    def test_silent_endpoint(self):
        # Accepts connections (the kernel's backlog) and never answers.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(64)
            args = self.base_args() + SHORT_DEADLINE
            args[1] = "http://127.0.0.1:%d" % s.getsockname()[1]
            self.expect_refusal("endpoint never answers", self.source(), args, self.creds_env(),
                                bound=SILENT_BOUND)

    def test_malformed_sources(self):
        for name, source, extra in (
                ("s3:// (no bucket)", "s3://", []),
                ("s3://Bad_Bucket!", "s3://Bad_Bucket!", []),
                ("s3://Bad_Bucket!/prefix", "s3://Bad_Bucket!/" + PREFIX, []),
                ("--s3-endpoint ftp://x", self.source(), ["--s3-endpoint", "ftp://x"])):
            with self.subTest(name):
                args = self.base_args()
                if extra:
                    args = extra + args[2:]
                self.expect_refusal(name, source, args, self.creds_env())

    def test_empty_prefix(self):
        self.expect_refusal("prefix with no objects", self.source(prefix="no-such-prefix"),
                            self.base_args(), self.creds_env())

    def test_credentials_file_missing(self):
        path = os.path.join(self.tmp, "no-such-credentials")
        self.expect_refusal("credentials file missing", self.source(),
                            self.base_args() + ["--s3-credentials-file", path],
                            sup.daemon_env(), mention=[path, "--s3-credentials-file"])

    def test_credentials_file_0644(self):
        path = os.path.join(self.tmp, "credentials-0644")
        with open(self.fx.credentials_file) as f:
            text = f.read()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        try:
            self.expect_refusal("credentials file 0644", self.source(),
                                self.base_args() + ["--s3-credentials-file", path],
                                sup.daemon_env(), mention=[path, "--s3-credentials-file"])
        finally:
            os.unlink(path)

    def test_no_credentials(self):
        home = os.path.join(self.tmp, "home")
        os.makedirs(home, exist_ok=True)
        self.expect_refusal("no credentials", self.source(), self.base_args(),
                            sup.daemon_env(HOME=home))

    def test_unsigned_on_private_bucket(self):
        self.expect_refusal("--s3-no-sign-request, private", self.source(),
                            self.base_args() + ["--s3-no-sign-request"], sup.daemon_env())


if __name__ == "__main__":
    sup.main(sup.skip_reason())
