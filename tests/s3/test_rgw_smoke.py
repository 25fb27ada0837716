"""Smoke test of the rgw fixture (tests/s3/rgw, CTest fixture s3_rgw): the S3 server the s3 tests
use works at the tests' size, and its GET counter counts exactly the GETs a client did.

Uploads 2,000 objects (~110 KB, log-normal sizes, seeded) in an ImageFolder-like tree
(train/<class>/<n>.JPEG, 50 classes) and one 64 MiB object in 4 parts (a multipart ETag, "-4"),
lists them with ListObjectsV2 in pages of 500 (2,000 + 1 keys, sizes), GETs a sample (whole
objects, the large one whole and in two ranges) checking their bytes, and checks that rgw's `get`
counter advanced by exactly the GETs done and not at all for the listing, and its usage log
counted exactly the listing requests (rgw_counters.py).

The bucket (a fresh name) is left in place: emptying it takes ~4 s, and the fixture's data goes
with it at s3_rgw_stop.

Environment: EPOCHFS_RGW_DIR, the fixture's directory (set by CTest). Run by hand:
    tests/s3/rgw start /tmp/rgw && EPOCHFS_RGW_DIR=/tmp/rgw /usr/bin/python3 \
        tests/s3/test_rgw_smoke.py; tests/s3/rgw stop /tmp/rgw
Exit 77 (skipped) without python3-boto3 or the ceph packages.
"""

import concurrent.futures
import hashlib
import io
import math
import os
import random
import shutil
import sys
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rgw_counters  # noqa: E402

SKIP = 77
SEED = 20261205
CLASSES = 50
FILES = 2000
MEAN_KB = 110
SIGMA = 0.5  # log-normal spread of the sizes (as epochbench gen)
LARGE = 64 << 20
PART = 16 << 20
PAGE = 500
SAMPLE = 100
THREADS = 8


def body(key, size):
    """The bytes of object `key`: seeded by its name, so a GET can be checked without a copy."""
    return random.Random("%d:%s" % (SEED, key)).randbytes(size)


def dataset():
    """{key: size}: FILES objects in CLASSES class directories, log-normal sizes around MEAN_KB."""
    rng = random.Random(SEED)
    mu = math.log(MEAN_KB * 1000) - SIGMA * SIGMA / 2
    out = {}
    for i in range(FILES):
        key = "train/n%08d/%06d.JPEG" % (i % CLASSES, i)
        out[key] = max(1, min(int(rng.lognormvariate(mu, SIGMA)), 4 << 20))
    return out


def skip_reason():
    try:
        import boto3  # noqa: F401
    except ImportError:
        return "python3-boto3 not installed (tools/test installs it)"
    d = os.environ.get("EPOCHFS_RGW_DIR", "")
    if not d:
        return "EPOCHFS_RGW_DIR not set (run through ctest, or see tests/s3/README.md)"
    if not os.path.exists(os.path.join(d, "rgw.json")) and not shutil.which("radosgw"):
        return "radosgw not installed, no fixture (tools/test installs radosgw ceph-mon ceph-osd ceph-common)"
    return None


class RgwSmoke(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import boto3
        from botocore.config import Config
        # Only the fixture's settings: none of the caller's AWS_* (an AWS_CA_BUNDLE, a profile)
        # or proxies reach botocore.
        for k in list(os.environ):
            if k.startswith("AWS_") or k.lower() in ("http_proxy", "https_proxy", "all_proxy",
                                                     "no_proxy"):
                del os.environ[k]
        cls.dir = os.environ["EPOCHFS_RGW_DIR"]
        st = rgw_counters.state(cls.dir)
        os.environ["AWS_SHARED_CREDENTIALS_FILE"] = st["credentials_file"]
        os.environ["AWS_CONFIG_FILE"] = "/dev/null"
        session = boto3.session.Session(profile_name=st["profile"])
        cls.s3 = session.client("s3", endpoint_url=st["endpoint"], region_name=st["region"],
                                config=Config(s3={"addressing_style": "path"},
                                              max_pool_connections=THREADS,
                                              retries={"max_attempts": 1}))
        cls.bucket = "smoke-%s" % uuid.uuid4().hex[:12]
        cls.s3.create_bucket(Bucket=cls.bucket)

    def test_upload_list_get_counted(self):
        from boto3.s3.transfer import TransferConfig
        objects = dataset()
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(lambda kv: self.s3.put_object(Bucket=self.bucket, Key=kv[0],
                                                        Body=body(*kv)), objects.items()))
        large_key = "large/shard-000.bin"
        large = body(large_key, LARGE)
        self.s3.upload_fileobj(io.BytesIO(large), self.bucket, large_key,
                               Config=TransferConfig(multipart_threshold=PART,
                                                     multipart_chunksize=PART, max_concurrency=4))
        objects[large_key] = LARGE
        t_upload = time.monotonic() - t0
        print("uploaded %d objects, %.1f MB, in %.1f s" % (len(objects),
              sum(objects.values()) / 1e6, t_upload))

        lists_before = rgw_counters.list_count(self.dir)
        before = rgw_counters.read(self.dir)

        # ListObjectsV2, pages of PAGE keys.
        t0 = time.monotonic()
        listed, pages = {}, 0
        for page in self.s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, PaginationConfig={"PageSize": PAGE}):
            pages += 1
            for o in page.get("Contents", []):
                listed[o["Key"]] = (o["Size"], o["ETag"])
        self.assertEqual(len(listed), FILES + 1)
        self.assertEqual({k: s for k, (s, _) in listed.items()}, objects)
        self.assertEqual(pages, math.ceil((FILES + 1) / PAGE))
        self.assertTrue(listed[large_key][1].endswith('-%d"' % (LARGE // PART)), listed[large_key])
        classes = self.s3.list_objects_v2(Bucket=self.bucket, Prefix="train/", Delimiter="/")
        self.assertEqual(len(classes.get("CommonPrefixes", [])), CLASSES)
        t_list = time.monotonic() - t0

        after_list = rgw_counters.read(self.dir)
        self.assertEqual(after_list["get"], before["get"], "a listing counted as a GET")
        self.assertEqual(after_list["requests"] - before["requests"], pages + 1)
        lists = rgw_counters.list_count(self.dir) - lists_before
        self.assertEqual(lists, pages + 1, "rgw's usage log: list_bucket")

        # GETs: a sample of the small objects whole, the large one whole and in two ranges.
        t0 = time.monotonic()
        sample = random.Random(SEED + 1).sample(sorted(k for k in objects if k != large_key),
                                                SAMPLE)

        def get_check(key):
            got = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            self.assertEqual(got, body(key, objects[key]), key)

        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(get_check, sample))
        got = self.s3.get_object(Bucket=self.bucket, Key=large_key)["Body"].read()
        self.assertEqual(hashlib.sha256(got).digest(), hashlib.sha256(large).digest())
        for first, last in ((0, (1 << 20) - 1), (LARGE - 12345, LARGE - 1)):
            got = self.s3.get_object(Bucket=self.bucket, Key=large_key,
                                     Range="bytes=%d-%d" % (first, last))["Body"].read()
            self.assertEqual(got, large[first:last + 1])
        gets = SAMPLE + 1 + 2
        t_get = time.monotonic() - t0

        after = rgw_counters.read(self.dir)
        self.assertEqual(after["get"] - after_list["get"], gets)
        self.assertEqual(after["failed"], before["failed"])
        print("listed %d keys in %d pages in %.2f s; %d GETs in %.2f s; rgw counted %d GETs, "
              "%d listings" % (len(listed), pages, t_list, gets, t_get,
                               after["get"] - after_list["get"], lists))


if __name__ == "__main__":
    reason = skip_reason()
    if reason:
        print("SKIPPED: " + reason)
        sys.exit(SKIP)
    t0 = time.monotonic()
    try:
        unittest.main(verbosity=2)
    finally:
        print("s3_rgw_smoke: %.1f s" % (time.monotonic() - t0))
