"""An s3:// mount through the fault proxy (fault_proxy.py) in front of rgw: the S3 client's
retries meet real 503s, real TCP resets and a real stall, and credentials that expire.

Under the prefix `retry/` of a fresh bucket: 24 objects of 200 KB-1.5 MiB. Mounted through the
proxy with `--s3-read-deadline 6` and `--s3-credentials-file` (a copy of the fixture's keys in
the test's directory). Each case reads files nobody has read before (page cache dropped), and the
faults are counted by the proxy, outside the daemon:

  1. SlowDown: the next 3 requests answered 503 SlowDown by the proxy, the read returns the
     uploaded bytes, and the daemon counts >= 3 retries and 3 throttled answers;
  2. resets: the next 2 requests answered with a TCP RST on a kept-alive connection: the read
     returns the uploaded bytes;
  3. a stall: every response stopped after 100 bytes: the read fails with EIO within a 30-s
     hang guard (each chunk's GET ends at the deadline: a file of two chunks takes two), never a
     hang; with the proxy passing again, the same file reads right (nothing poisoned);
  4. credentials that expire: a second key pair made for the fixture's user (radosgw-admin), the
     credentials file rewritten with it (rename, as a refresher does), the proxy answers the next
     request 403 ExpiredToken: the read returns the uploaded bytes (no failed read), the daemon
     counts a credential reload, and rgw's own usage log shows requests signed by the new key.

Environment: EPOCHFS_RGW_DIR (the fixture), EPOCHFS_BIN_DIR (set by CTest). Root (drop_caches).
Exit 77 (skipped) without the fixture, boto3, /dev/fuse or an epochfs with --s3-read-deadline.
"""

import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import s3_mount_support as sup  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
from s3_mount_support import MiB  # noqa: E402

SEED = 20261205
PREFIX = "retry"
OBJECTS = 24
DEADLINE = 6
HANG_GUARD = 30.0


def body(i):
    rng = random.Random("%d:%d" % (SEED, i))
    return rng.randbytes(rng.randrange(200_000, 3 * MiB // 2))


def write_credentials(path, key_id, secret):
    """The file a refresher writes: a new file renamed over the old one, mode 0600."""
    tmp = path + ".new"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n" % (key_id, secret))
    os.replace(tmp, path)


class S3Retries(sup.MountTest):
    @classmethod
    def setUpClass(cls):
        sup.scrub_environ()
        cls.fx = sup.Fixture()
        cls.bucket = sup.unique_bucket("retries")
        cls.tmp = sup.make_tmp("retries")
        cls.mnt = os.path.join(cls.tmp, "mnt")
        cls.log = os.path.join(cls.tmp, "epochfs.log")
        cls.creds = os.path.join(cls.tmp, "credentials")
        os.makedirs(cls.mnt)
        write_credentials(cls.creds, cls.fx.key_id, cls.fx.secret)
        cls.data = {"c%d/%03d.bin" % (i % 2, i): body(i) for i in range(OBJECTS)}
        s3 = cls.fx.client()
        s3.create_bucket(Bucket=cls.bucket)
        sup.upload(s3, cls.bucket, {PREFIX + "/" + rel: d for rel, d in cls.data.items()})
        s3.close()
        port = int(cls.fx.endpoint.rsplit(":", 1)[1])
        cls.proxy = FaultProxy(("127.0.0.1", port)).start()
        cls.unread = sorted(cls.data)
        random.Random(SEED).shuffle(cls.unread)
        args = ["--ram-cache", "512M", "--s3-endpoint", "http://127.0.0.1:%d" % cls.proxy.port,
                "--s3-region", cls.fx.region, "--s3-credentials-file", cls.creds,
                "--s3-read-deadline", str(DEADLINE), "--log-level", "info"]
        try:
            sup.mount("s3://%s/%s" % (cls.bucket, PREFIX), cls.mnt, args, sup.daemon_env(),
                      log_file=cls.log)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.proxy.stop()
        cls.remove_mount()

    def next_unread(self):
        return type(self).unread.pop()

    def read(self, rel):
        sup.drop_caches(1)
        return sup.read_child(os.path.join(self.mnt, rel), timeout=HANG_GUARD * 2)

    def assert_reads_right(self, rel, what):
        r = self.read(rel)
        if not r["ok"] or (r["len"], r["sha256"]) != sup.digest(self.data[rel]):
            self.fail_with_log("%s: %s read %s" % (what, rel, r))
        return r

    def s3_stats(self):
        return json.loads(sup.epochctl(self.mnt, "stats", "--json").stdout)["s3"]

    def faults(self, mode):
        return self.proxy.stats()["faults_by_mode"].get(mode, 0)

    def test_1_slowdown_answers_are_retried(self):
        before, stats0 = self.faults("slowdown"), self.s3_stats()
        self.proxy.set_mode("slowdown", count=3)
        r = self.assert_reads_right(self.next_unread(), "after 3 SlowDown answers")
        self.assertEqual(self.faults("slowdown") - before, 3, "the proxy answered 3 with 503")
        stats = self.s3_stats()
        self.assertGreaterEqual(stats["retries"] - stats0["retries"], 3)
        self.assertEqual(stats["slowdowns"] - stats0["slowdowns"], 3)
        print("3 SlowDown answers: read in %.2f s" % r["secs"])

    def test_2_resets_are_retried(self):
        before = self.faults("reset_request")
        self.proxy.set_mode("reset_request", count=2)
        r = self.assert_reads_right(self.next_unread(), "after 2 resets")
        self.assertEqual(self.faults("reset_request") - before, 2, "the proxy reset 2 requests")
        print("2 resets: read in %.2f s" % r["secs"])

    def test_3_a_stall_ends_in_eio_within_the_deadline(self):
        rel = self.next_unread()
        self.proxy.set_mode("stall_after_bytes", after_bytes=100)
        try:
            r = self.read(rel)
        finally:
            self.proxy.set_mode("pass")
        print("a stalled read: %s" % r)
        if r["ok"] or r.get("errname") != "EIO":
            self.fail_with_log("want EIO from a stalled read, got %s" % r)
        self.assertLess(r["secs"], HANG_GUARD, "a hang, not the deadline")
        self.assertGreater(self.faults("stall_after_bytes"), 0)
        self.assert_reads_right(rel, "after the stall ended")

    def test_4_expired_credentials_are_read_again(self):
        out = subprocess.run(["radosgw-admin", "-c", os.path.join(self.fx.dir, "ceph.conf"), "key",
                              "create", "--uid", "epochfs-test", "--key-type", "s3",
                              "--gen-access-key", "--gen-secret"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, "radosgw-admin key create: %s" % out.stderr[-500:])
        fresh = [k for k in json.loads(out.stdout)["keys"] if k["access_key"] != self.fx.key_id]
        self.assertTrue(fresh, "no second key")
        new_key = fresh[-1]
        write_credentials(self.creds, new_key["access_key"], new_key["secret_key"])
        reloads0, before = self.s3_stats()["credential_reloads"], self.faults("expired_token")
        self.proxy.set_mode("expired_token", count=1)
        rel = self.next_unread()
        self.assert_reads_right(rel, "after ExpiredToken with the file rewritten")
        self.assertEqual(self.faults("expired_token") - before, 1)
        self.assertGreaterEqual(self.s3_stats()["credential_reloads"] - reloads0, 1)
        # Every later request is signed with the new key: a read with it, then with the old key
        # removed from rgw, still works.
        out = subprocess.run(["radosgw-admin", "-c", os.path.join(self.fx.dir, "ceph.conf"), "key",
                              "rm", "--uid", "epochfs-test", "--key-type", "s3", "--access-key",
                              self.fx.key_id], capture_output=True, text=True, timeout=60)
        try:
            self.assertEqual(out.returncode, 0, "radosgw-admin key rm: %s" % out.stderr[-500:])
            self.assert_reads_right(self.next_unread(), "with the old key gone from rgw")
        finally:  # the fixture is shared: its own key comes back
            subprocess.run(["radosgw-admin", "-c", os.path.join(self.fx.dir, "ceph.conf"), "key",
                            "create", "--uid", "epochfs-test", "--key-type", "s3", "--access-key",
                            self.fx.key_id, "--secret-key", self.fx.secret],
                           capture_output=True, text=True, timeout=60, check=True)
            subprocess.run(["radosgw-admin", "-c", os.path.join(self.fx.dir, "ceph.conf"), "key",
                            "rm", "--uid", "epochfs-test", "--key-type", "s3", "--access-key",
                            new_key["access_key"]], capture_output=True, text=True, timeout=60)


if __name__ == "__main__":
    reason = sup.skip_reason(root=True)
    if not reason and not sup.epochfs_has_option("--s3-read-deadline"):
        reason = "this epochfs has no --s3-read-deadline"
    sup.main(reason)
