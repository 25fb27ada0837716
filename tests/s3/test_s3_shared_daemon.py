"""Two mounts of one bucket share one daemon and read each object from rgw once ([shared-node]).

Against the rgw fixture, 600 objects (20-300 KB, log-normal) under one prefix:
  1. mount A, then mount B of the same s3:// source with the same credentials and options: one
     daemon (the same `status` pid; its `mounts` lists both);
  2. epoch 1, page cache dropped, A and B each read every object at once (two readers each):
     every object's bytes equal boto3's on both, and rgw counts at most 1.02 GETs per object
     for the two mounts together; epoch 2 (page cache dropped again): 0 GETs;
  3. mount C with a second key pair of the same rgw user: its own daemon (another pid; another
     credentials' identity never shares), which reads right;
  4. unmounting B leaves A served; unmounting A ends the daemon.

Environment: EPOCHFS_RGW_DIR (the fixture), EPOCHFS_BIN_DIR (set by CTest). Exit 77 (skipped)
without the fixture, boto3, /dev/fuse or root (page cache drops).
"""

import json
import os
import random
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import s3_mount_support as sup  # noqa: E402

PREFIX = "shared"
OBJECTS = 600


class S3SharedDaemon(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fx, cls.s3, cls.bucket = sup.open_bucket("shared")
        cls.expected = sup.upload_image_folder(cls.s3, cls.bucket, PREFIX, OBJECTS, classes=12,
                                               seed=36, mu=11.6, sigma=0.4, smallest=20e3,
                                               largest=300e3)
        cls.tmp = sup.make_tmp("shared")
        cls.source = "s3://%s/%s" % (cls.bucket, PREFIX)
        cls.second_key = None

    @classmethod
    def tearDownClass(cls):
        sup.clean_tmp(cls.tmp)
        if cls.second_key:
            sup.radosgw_key(cls.fx, "rm", "--access-key", cls.second_key)
        cls.s3.close()

    def args(self, credentials_file, profile):
        return ["--s3-endpoint", self.fx.endpoint, "--s3-credentials-file", credentials_file,
                "--s3-profile", profile, "--ram-cache", "512M"]

    def mountpoint(self, name):
        path = os.path.join(self.tmp, name)
        os.makedirs(path)
        return path

    def read_all(self, mounts):
        """Every object through every mount at once, two readers per mount; returns
        {mount: {rel: (size, sha256)}}."""
        got, errors, threads = {m: {} for m in mounts}, [], []
        names = sorted(self.expected)

        def reader(mnt, part):
            try:
                paths = [os.path.join(mnt, rel) for rel in part]
                res = sup.hash_in_subprocess(paths, timeout=300)
                got[mnt].update({os.path.relpath(p, mnt): v for p, v in res.items()})
            except AssertionError as e:
                errors.append("%s: %s" % (mnt, e))

        for i, m in enumerate(mounts):
            order = names[:]
            random.Random(100 + i).shuffle(order)
            for part in (order[0::2], order[1::2]):
                threads.append(threading.Thread(target=reader, args=(m, part)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        return got

    def test_two_mounts_one_daemon_one_get_per_object(self):
        env = sup.daemon_env()
        a, b = self.mountpoint("a"), self.mountpoint("b")
        log = os.path.join(self.tmp, "log")
        args = self.args(self.fx.credentials_file, self.fx.profile)
        sup.mount(self.source, a, args, env, log_file=log)
        sup.mount(self.source, b, args, env, log_file=log)
        st_a, st_b = sup.status(a), sup.status(b)
        self.assertEqual(st_a["pid"], st_b["pid"], "a daemon per mount")
        self.assertEqual(sorted(st_a["mounts"]), sorted([a, b]))

        for epoch in (1, 2):
            sup.drop_caches()
            gets0 = self.fx.gets()
            got = self.read_all([a, b])
            gets = self.fx.gets() - gets0
            print("epoch %d: rgw counted %d GETs for %d objects read through 2 mounts"
                  % (epoch, gets, OBJECTS))
            for m in (a, b):
                self.assertEqual(got[m], self.expected, "%s: bytes differ from boto3's" % m)
            if epoch == 1:
                self.assertLessEqual(gets, 1.02 * OBJECTS)
            else:
                self.assertEqual(gets, 0)

        # Another key pair of the same user: another credentials' identity, its own daemon.
        out = sup.radosgw_key(self.fx, "create", "--gen-access-key", "--gen-secret")
        self.assertEqual(out.returncode, 0, "radosgw-admin key create: %s" % out.stderr[-500:])
        fresh = [k for k in json.loads(out.stdout)["keys"] if k["access_key"] != self.fx.key_id]
        self.assertTrue(fresh, "no second key")
        type(self).second_key = fresh[-1]["access_key"]
        creds = os.path.join(self.tmp, "second-credentials")
        fd = os.open(creds, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
                    % (fresh[-1]["access_key"], fresh[-1]["secret_key"]))
        c = self.mountpoint("c")
        sup.mount(self.source, c, self.args(creds, "default"), env)
        st_c = sup.status(c)
        self.assertNotEqual(st_c["pid"], st_a["pid"], "another key's mount joined the daemon")
        self.assertEqual(st_c["mounts"], [c])
        names = sorted(self.expected)[::25]
        res = sup.hash_in_subprocess([os.path.join(c, n) for n in names], timeout=120)
        self.assertEqual({os.path.relpath(p, c): v for p, v in res.items()},
                         {n: self.expected[n] for n in names})
        self.assertTrue(sup.unmount(c))

        # B goes, A is served on; A goes, the daemon ends.
        self.assertTrue(sup.unmount(b))
        self.assertEqual(sup.status(a)["pid"], st_a["pid"])
        self.assertEqual(sup.status(a)["mounts"], [a])
        self.assertTrue(sup.unmount(a))
        self.assertEqual(sup.epochfs_pids(a), [])


if __name__ == "__main__":
    sup.main(sup.skip_reason(root=True))
