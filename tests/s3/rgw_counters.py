"""rgw's own request counters: GET and PUT from its perf counters (admin socket), LIST from its
usage log.

The S3 tests count requests where the server counts them, never in the client under test.
- Perf counters (`ceph --admin-daemon ASOK perf dump`, section `rgw`), exact and up to date when
  the response has been read. Measured on Ceph 16.2.15 (Debian bookworm) with boto3:
    get     +1 per GET of an object that succeeded, a ranged GET included (one per request,
            whatever the range); +1 per HEAD of an object too; a GET answered 404 does not count.
    get_b   bytes sent for those GETs, but one less per request (rgw counts end - start).
    put     +1 per PUT of an object and per UploadPart; Create/CompleteMultipartUpload do not.
    req     +1 per request of any kind; failed_req +1 per request answered with an error.
  16.2 has no perf counter for listings (per-op counters such as list_obj came with Ceph 18).
- The usage log (`rgw enable usage log = true`, tests/s3/rgw turns it on): per user and bucket,
  one count per operation category (`get_obj`, `put_obj`, `list_bucket` = ListObjects and
  ListObjectsV2, `list_buckets`, ...), read with `radosgw-admin usage show`. rgw writes it every
  `rgw usage log tick interval` (1 s here), so list_count() waits until it stops changing.

Used by the `counters DIR` subcommand of tests/s3/rgw and imported by the S3 tests:
    import rgw_counters
    before = rgw_counters.read(fixture_dir)["get"]
"""

import json
import os
import subprocess
import time

# The names above, as the `rgw` section of `perf dump` spells them.
GET = "get"
PUT = "put"
REQUESTS = "req"
FAILED = "failed_req"


def clean_env():
    """The environment for the ceph tools: no AWS_*, proxies or CEPH_* settings of the caller."""
    drop = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy")
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "CEPH_")) and k.lower() not in drop}


def state(fixture_dir):
    """The fixture's state file (written by `tests/s3/rgw start`): endpoint, asok, paths."""
    with open(os.path.join(fixture_dir, "rgw.json")) as f:
        return json.load(f)


def perf_dump(asok, timeout=30):
    """The full `perf dump` of the daemon behind admin socket `asok`, as a dict."""
    out = subprocess.run(["ceph", "--admin-daemon", asok, "perf", "dump"], env=clean_env(),
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError("perf dump through %s failed (%d): %s"
                           % (asok, out.returncode, out.stderr.strip()))
    return json.loads(out.stdout)


def read(fixture_dir):
    """rgw's perf counters of object operations: {"get", "put", "requests", "failed"}."""
    rgw = perf_dump(state(fixture_dir)["rgw_asok"])["rgw"]
    return {"get": rgw[GET], "put": rgw[PUT], "requests": rgw[REQUESTS], "failed": rgw[FAILED]}


def usage(fixture_dir, timeout=30):
    """The usage log of the fixture's S3 user: {category: successful ops}, e.g. "list_bucket"."""
    st = state(fixture_dir)
    out = subprocess.run(["radosgw-admin", "-c", st["conf"], "usage", "show", "--uid", st["user"],
                          "--show-log-entries=false"], env=clean_env(), capture_output=True,
                         text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError("radosgw-admin usage show failed (%d): %s"
                           % (out.returncode, out.stderr.strip()))
    counts = {}
    for user in json.loads(out.stdout).get("summary", []):
        for c in user.get("categories", []):
            counts[c["category"]] = counts.get(c["category"], 0) + c["successful_ops"]
    return counts


def list_count(fixture_dir, settle=1.5, timeout=30):
    """ListObjects/ListObjectsV2 requests served so far (usage log category list_bucket), read once
    the log has stopped changing for `settle` seconds (rgw writes it every second)."""
    deadline = time.monotonic() + timeout
    last = usage(fixture_dir)
    while True:
        time.sleep(settle)
        now = usage(fixture_dir)
        if now == last or time.monotonic() > deadline:
            return now.get("list_bucket", 0)
        last = now
