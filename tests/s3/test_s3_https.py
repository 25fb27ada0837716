"""epochfs over HTTPS: rgw's ssl_endpoint, its certificate signed by the fixture's throwaway CA
(tests/s3/rgw start: DIR/tls/ca.pem, rgw.json's `https_endpoint` and `ca_file`).

  1. `--s3-endpoint https://127.0.0.1:PS --s3-ca-file DIR/tls/ca.pem`: the tree is the keys under
     the prefix and every object's bytes (a few of several chunks) equal boto3's GET over HTTPS
     (verified with the same CA);
  2. `--s3-ca-file` naming another self-signed CA: the mount fails with exactly one stderr line
     `epochfs: error: ...` that names the TLS certificate problem, nothing mounted, no daemon left;
  3. no `--s3-ca-file` (the system's store, which does not trust the fixture's CA; SSL_CERT_FILE,
     SSL_CERT_DIR and CURL_CA_BUNDLE removed): fails the same way.

Environment: EPOCHFS_RGW_DIR (the fixture), EPOCHFS_BIN_DIR (set by CTest). Exit 77 (skipped)
without the fixture (or one started with --no-https), boto3, openssl, /dev/fuse or an epochfs with
--s3-endpoint.
"""

import concurrent.futures
import hashlib
import os
import shutil
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import s3_mount_support as sup  # noqa: E402
import tls_certs  # noqa: E402
from s3_mount_support import MiB  # noqa: E402

PREFIX = "tls"
BOUND = 30.0
LINE_PREFIX = "epochfs: error: "
TLS_WORDS = ("SSL", "TLS", "certificate")
CA_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE")


def skip_reason():
    reason = sup.skip_reason()
    if reason:
        return reason
    if not sup.Fixture().https_endpoint:
        return "the rgw fixture has no HTTPS endpoint (started with --no-https)"
    if not shutil.which("openssl"):
        return "openssl not installed"
    return None


class S3Https(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sup.scrub_environ()
        cls.fx = sup.Fixture()
        cls.bucket = sup.unique_bucket("https")
        cls.tmp = sup.make_tmp("https")
        s3 = cls.fx.client(https=True)
        s3.create_bucket(Bucket=cls.bucket)
        sizes = {"a/%02d.bin" % i: 1000 + 997 * i for i in range(12)}
        sizes.update({"b/big-%d.bin" % i: 3 * MiB + 4321 * i for i in range(2)})
        sup.upload(s3, cls.bucket, {"%s/%s" % (PREFIX, k): (lambda n=n: os.urandom(n))
                                    for k, n in sizes.items()})

        def get(rel):
            data = s3.get_object(Bucket=cls.bucket, Key="%s/%s" % (PREFIX, rel))["Body"].read()
            return rel, (len(data), hashlib.sha256(data).hexdigest())

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            cls.expected = dict(pool.map(get, sorted(sizes)))
        s3.close()
        cls.other_ca = tls_certs.make_ca(os.path.join(cls.tmp, "other-ca"),
                                         "not the fixture's CA")[0]
        cls.case = 0

    @classmethod
    def tearDownClass(cls):
        for m in reversed(sup.mounts_under(cls.tmp)):
            sup.unmount(m)
        if not sup.mounts_under(cls.tmp):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def new_mnt(self):
        type(self).case += 1
        mnt = os.path.join(self.tmp, "mnt%d" % self.case)
        os.makedirs(mnt)
        return mnt

    def source(self):
        return "s3://%s/%s" % (self.bucket, PREFIX)

    def args(self, *extra):
        return ["--s3-endpoint", self.fx.https_endpoint, "--s3-region", self.fx.region,
                "--ram-cache", "64M"] + list(extra)

    def env(self):
        return sup.daemon_env(AWS_SHARED_CREDENTIALS_FILE=self.fx.credentials_file,
                              AWS_PROFILE=self.fx.profile, **{k: None for k in CA_VARS})

    def test_1_bytes_over_https(self):
        mnt = self.new_mnt()
        log = os.path.join(self.tmp, "epochfs-%d.log" % self.case)
        try:
            sup.mount(self.source(), mnt, self.args("--s3-ca-file", self.fx.ca_file),
                      self.env(), log_file=log)
            listed = {}
            for d, _, names in os.walk(mnt):
                for n in names:
                    p = os.path.join(d, n)
                    listed[os.path.relpath(p, mnt)] = os.lstat(p).st_size
            self.assertEqual(listed, {k: n for k, (n, _) in self.expected.items()})
            got = sup.hash_in_subprocess([os.path.join(mnt, k) for k in sorted(self.expected)])
            got = {os.path.relpath(p, mnt): v for p, v in got.items()}
            self.assertEqual(got, self.expected, "bytes over HTTPS differ from boto3's\n%s"
                             % sup.tail(log))
        finally:
            self.assertTrue(sup.unmount(mnt))

    def refused(self, name, args):
        mnt = self.new_mnt()
        r, secs, mounted, left = sup.mount_refused(self.source(), mnt, args, self.env(),
                                                   timeout=BOUND * 2)
        self.assertIsNotNone(r, "%s: epochfs did not return within %.0f s" % (name, BOUND * 2))
        print("%s: exit %d after %.2f s: %s" % (name, r.returncode, secs, r.stderr.strip()))
        self.assertNotEqual(r.returncode, 0, "%s: exit 0" % name)
        self.assertFalse(mounted, "%s: something was mounted" % name)
        self.assertEqual(left, [], "%s: epochfs processes left running" % name)
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, "%s: want one stderr line, got %r" % (name, r.stderr))
        self.assertTrue(lines[0].startswith(LINE_PREFIX), lines[0])
        self.assertTrue(any(w in lines[0] for w in TLS_WORDS),
                        "%s: the line names none of %s: %r" % (name, TLS_WORDS, lines[0]))
        self.assertNotIn(self.fx.secret, r.stderr + r.stdout)
        self.assertLess(secs, BOUND)

    def test_2_wrong_ca(self):
        self.refused("another CA", self.args("--s3-ca-file", self.other_ca))

    def test_3_system_store(self):
        self.refused("no --s3-ca-file", self.args())


if __name__ == "__main__":
    sup.main(skip_reason())
