"""boto3's view of a bucket, for tests/s3/s3_client_test.cc (the S3Client integration test): the
reference its listings are compared with.

    s3_client_boto3.py list RGW_DIR BUCKET PREFIX   # JSON [[key, size, etag], ...] in key order

Lists with boto3's ListObjectsV2 paginator (encoding-type=url, decoded by botocore), path-style,
against the rgw fixture of RGW_DIR (its rgw.json and credentials file); none of the caller's
AWS_* or proxy variables are used. Not a test itself (CMake registers tests/s3/test_*.py only).
Exit 77 without python3-boto3.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import rgw_counters  # noqa: E402


def client(rgw_dir):
    import boto3
    from botocore.config import Config
    for k in list(os.environ):
        if k.startswith("AWS_") or k.lower() in ("http_proxy", "https_proxy", "all_proxy",
                                                 "no_proxy"):
            del os.environ[k]
    st = rgw_counters.state(rgw_dir)
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = st["credentials_file"]
    os.environ["AWS_CONFIG_FILE"] = "/dev/null"
    session = boto3.session.Session(profile_name=st["profile"])
    return session.client("s3", endpoint_url=st["endpoint"], region_name=st["region"],
                          config=Config(s3={"addressing_style": "path"},
                                        retries={"max_attempts": 1}))


def main(argv):
    if len(argv) != 5 or argv[1] != "list":
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import boto3  # noqa: F401
    except ImportError:
        print("SKIPPED: python3-boto3 not installed", file=sys.stderr)
        return 77
    s3 = client(argv[2])
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=argv[3], Prefix=argv[4]):
        for o in page.get("Contents", []):
            out.append([o["Key"], o["Size"], o.get("ETag", "")])
    out.sort(key=lambda e: e[0].encode("utf-8"))
    json.dump(out, sys.stdout, ensure_ascii=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
