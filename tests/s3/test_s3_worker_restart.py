"""A restarted worker of an s3:// mount does not list the bucket again (issue #34): the
supervisor keeps the namespace the worker handed over (a sealed memfd, with the listing's
ETags), and the next worker serves from it.

One supervised mount of 1,200 objects: some are read (bytes equal boto3's), an unrelated object
is uploaded under the prefix, the worker is SIGKILLed; once a new worker serves (polled,
bounded), rgw counts no LIST request since the kill (its usage log), `status` says the namespace
was "handed over", the reads still return boto3's bytes (If-Match with the handed-over ETags),
and the new object is not visible.

Environment: EPOCHFS_RGW_DIR (the fixture), EPOCHFS_BIN_DIR (set by CTest). Exit 77 (skipped)
without the fixture, boto3, /dev/fuse or an epochfs with --s3-endpoint.
"""

import json
import os
import shutil
import signal
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import s3_mount_support as sup  # noqa: E402

PREFIX = "restart"
OBJECTS = 1200
RESTART_TIMEOUT = 60


class S3WorkerRestart(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sup.scrub_environ()
        cls.fx = sup.Fixture()
        cls.s3 = cls.fx.client()
        cls.bucket = sup.unique_bucket("restart")
        cls.s3.create_bucket(Bucket=cls.bucket)
        items = {"%s/class%02d/img%05d.JPEG" % (PREFIX, i % 20, i): os.urandom(200 + 37 * i)
                 for i in range(OBJECTS)}
        items["%s/large/blob.bin" % PREFIX] = os.urandom(3 * sup.MiB + 4321)
        done = sup.upload(cls.s3, cls.bucket, items)
        cls.expected = {k[len(PREFIX) + 1:]: v for k, v in done.items()}
        cls.tmp = sup.make_tmp("restart")

    @classmethod
    def tearDownClass(cls):
        for m in reversed(sup.mounts_under(cls.tmp)):
            sup.unmount(m)
        if not sup.mounts_under(cls.tmp):
            shutil.rmtree(cls.tmp, ignore_errors=True)
        cls.s3.close()

    def read_some(self, mnt, names):
        paths = [os.path.join(mnt, rel) for rel in names]
        got = sup.hash_in_subprocess(paths, timeout=120)
        self.assertEqual({os.path.relpath(p, mnt): v for p, v in got.items()},
                         {n: self.expected[n] for n in names})

    def wait_new_worker(self, mnt, old):
        deadline = time.monotonic() + RESTART_TIMEOUT
        while time.monotonic() < deadline:
            r = sup.epochctl(mnt, "status", "--json", check=False, timeout=10)
            if r.returncode == 0:
                st = json.loads(r.stdout)
                if st.get("pid") and st["pid"] != old:
                    return st
            time.sleep(0.2)
        self.fail("no new worker served within %d s after SIGKILL of %d" % (RESTART_TIMEOUT, old))

    def test_restarted_worker_lists_nothing(self):
        mnt = os.path.join(self.tmp, "mnt")
        log = os.path.join(self.tmp, "log")
        os.makedirs(mnt)
        lists_at_start = self.fx.lists()
        try:
            sup.mount("s3://%s/%s" % (self.bucket, PREFIX), mnt,
                      ["--s3-endpoint", self.fx.endpoint, "--s3-credentials-file",
                       self.fx.credentials_file, "--s3-profile", self.fx.profile],
                      sup.daemon_env(), log_file=log)
            st = sup.status(mnt)
            self.assertEqual(st["dataset"]["namespace_source"], "listing")
            self.assertEqual(st["dataset"]["files"], len(self.expected))
            names = sorted(self.expected)
            some = names[::37] + ["large/blob.bin"]
            self.read_some(mnt, some)

            new_key = "%s/class00/uploaded-after-mount.JPEG" % PREFIX
            self.s3.put_object(Bucket=self.bucket, Key=new_key, Body=b"not in the snapshot")
            lists_before = self.fx.lists()  # settled: the upload's own requests are counted
            # The count sees the mount's own listing (at least one LIST request).
            self.assertGreaterEqual(lists_before - lists_at_start, 1)
            old = st["pid"]
            os.kill(old, signal.SIGKILL)
            st = self.wait_new_worker(mnt, old)
            print("worker %d killed; worker %d serves (namespace: %s)"
                  % (old, st["pid"], st["dataset"].get("namespace_source")))
            self.assertEqual(st["dataset"]["namespace_source"], "handed over")
            self.assertEqual(st["dataset"]["files"], len(self.expected))
            self.assertEqual(st["s3"]["listings"], 0)
            # Reads after the restart: the ones read before (maybe cached) and others
            # (GETs with the handed-over ETags).
            self.read_some(mnt, some + names[5::41])
            self.assertFalse(os.path.exists(os.path.join(mnt, "class00",
                                                         "uploaded-after-mount.JPEG")))
            self.assertNotIn("uploaded-after-mount.JPEG", os.listdir(os.path.join(mnt,
                                                                                  "class00")))
            lists_after = self.fx.lists()
            self.assertEqual(lists_after - lists_before, 0,
                             "rgw saw %d LIST requests after the kill"
                             % (lists_after - lists_before))
        except AssertionError as e:
            sup.unmount(mnt)
            raise AssertionError("%s\n--- log tail:\n%s" % (e, sup.tail(log))) from None
        finally:
            self.assertTrue(sup.unmount(mnt), "could not unmount %s" % mnt)


if __name__ == "__main__":
    sup.main(sup.skip_reason())
