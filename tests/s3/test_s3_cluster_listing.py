"""One listing per job ([scale-walk]): clustered daemons over one bucket list it once.

Against the rgw fixture, 1,500 objects (2-300 KB) under one prefix:
  1. one plain mount lists the prefix: rgw's LIST count for it is L (the baseline, same run);
  2. three clustered daemons (loopback UCX, fan-out 2) started at once: rgw counts L LISTs for
     the whole job; member 0 says `namespace_source` "listing", members 1 and 2 "peer", all
     with one fingerprint; objects read through member 2 equal boto3's;
  3. the same three with `--namespace-walk each`: 3 L (every member lists).

Environment: EPOCHFS_RGW_DIR (the fixture), EPOCHFS_BIN_DIR (set by CTest). Exit 77 (skipped)
without the fixture, boto3 or /dev/fuse.
"""

import os
import socket
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import s3_mount_support as sup  # noqa: E402

PREFIX = "cluster"
OBJECTS = 1500
NODES = 3


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class S3ClusterListing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fx, cls.s3, cls.bucket = sup.open_bucket("cluster")
        cls.expected = sup.upload_image_folder(cls.s3, cls.bucket, PREFIX, OBJECTS, classes=15,
                                               seed=37, mu=9.5, sigma=1.0, smallest=2e3,
                                               largest=300e3)
        cls.tmp = sup.make_tmp("cluster")
        cls.source = "s3://%s/%s" % (cls.bucket, PREFIX)
        cls.secret = os.path.join(cls.tmp, "secret")
        fd = os.open(cls.secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("s3-cluster-listing-secret-0123456789\n")

    @classmethod
    def tearDownClass(cls):
        for m in sup.mounts_under(cls.tmp):
            sup.unmount(m)
        sup.clean_tmp(cls.tmp)
        cls.s3.close()

    def base_args(self):
        return ["--s3-endpoint", self.fx.endpoint, "--s3-credentials-file",
                self.fx.credentials_file, "--s3-profile", self.fx.profile, "--ram-cache", "256M"]

    def start_cluster(self, name, extra):
        """NODES daemons started at once; returns their mountpoints."""
        ports = free_ports(NODES)
        peers = ",".join("127.0.0.1:%d" % p for p in ports)
        env = sup.daemon_env(UCX_TLS="tcp")
        mnts, errors, threads = [], [], []
        for i in range(NODES):
            mnt = os.path.join(self.tmp, "%s%d" % (name, i))
            os.makedirs(mnt)
            mnts.append(mnt)
            args = self.base_args() + [
                "--peers", peers, "--listen", "127.0.0.1:%d" % ports[i],
                "--secret-file", self.secret, "--own-daemon", "--prefetch-window", "0"] + extra

            def start(mnt=mnt, args=args, log=os.path.join(self.tmp, "%s%d.log" % (name, i))):
                try:
                    sup.mount(self.source, mnt, args, env, log_file=log, timeout=120)
                except AssertionError as e:
                    errors.append(str(e))

            threads.append(threading.Thread(target=start))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        return mnts

    def test_one_listing_for_the_job(self):
        env = sup.daemon_env()
        plain = os.path.join(self.tmp, "plain")
        os.makedirs(plain)
        lists0 = self.fx.lists()
        sup.mount(self.source, plain, self.base_args(), env,
                  log_file=os.path.join(self.tmp, "plain.log"))
        one_listing = self.fx.lists() - lists0
        self.assertTrue(sup.unmount(plain))
        self.assertGreaterEqual(one_listing, 2, "1,500 keys take two pages or more")

        lists0 = self.fx.lists()
        mnts = self.start_cluster("once", ["--namespace-fan-out", "2"])
        once = self.fx.lists() - lists0
        statuses = [sup.status(m)["dataset"] for m in mnts]
        print("rgw LISTs: one listing %d, %d members with one walk per job %d"
              % (one_listing, NODES, once))
        self.assertEqual(once, one_listing, statuses)
        self.assertEqual([s["namespace_source"] for s in statuses], ["listing", "peer", "peer"])
        self.assertEqual(len({s["namespace_exchange"]["fingerprint"] for s in statuses}), 1)
        self.assertEqual([s["namespace_exchange"]["walker"] for s in statuses], [0, 0, 0])
        names = sorted(self.expected)[::10]
        res = sup.hash_in_subprocess([os.path.join(mnts[2], n) for n in names], timeout=300)
        self.assertEqual({os.path.relpath(p, mnts[2]): v for p, v in res.items()},
                         {n: self.expected[n] for n in names})
        for m in mnts:
            self.assertTrue(sup.unmount(m))

        lists0 = self.fx.lists()
        mnts = self.start_cluster("each", ["--namespace-walk", "each"])
        each = self.fx.lists() - lists0
        print("rgw LISTs: %d members, a listing each: %d" % (NODES, each))
        self.assertEqual(each, NODES * one_listing)
        for m in mnts:
            self.assertTrue(sup.unmount(m))


if __name__ == "__main__":
    sup.main(sup.skip_reason())
