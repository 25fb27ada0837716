#!/usr/bin/env python3
"""SigV4 test vectors for transport/s3/sigv4_signer, made by botocore's signer.

botocore's S3SigV4Auth (Debian: python3-botocore) signs a fixed set of S3
requests with fixed credentials at a fixed time; the requests' inputs and
botocore's canonical request, string to sign and headers go to a JSON file that
tests/unit/transport/s3_sigv4_signer_test.cc compares the C++ signer against.
The object paths are encoded here as botocore's REST serializer encodes a
{Key+} label (percent_encode(key, safe='/~')), since S3SigV4Auth signs the URL
path as given.

    tests/unit/transport/sigv4_vectors.py --write tests/unit/transport/sigv4_vectors.json
    tests/unit/transport/sigv4_vectors.py --check tests/unit/transport/sigv4_vectors.json

--check (CTest s3_sigv4_vectors_current, label unit) exits 1 when the file is
not what botocore says now, 77 (skipped) when botocore is missing.
"""
import argparse
import calendar
import contextlib
import datetime
import json
import sys
from unittest import mock

try:
    import botocore
    import botocore.auth
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.config import Config
    from botocore.credentials import Credentials
    from botocore.utils import percent_encode
except ImportError as e:  # pragma: no cover
    print(f"SKIPPED: botocore not importable ({e}); apt-get install python3-botocore")
    sys.exit(77)

ACCESS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example key
TOKEN = "IQoJb3JpZ2luX2VjEXAMPLE/token+with=odd/chars=="
WHEN = datetime.datetime(2024, 3, 1, 12, 34, 56)
SPECIAL_KEY = "dir/ä b+c%d~e.jpg"
ODD_KEY = "odd/*(1)!'@$&,;=:.png"

CASES = [
    # name, scheme://host, bucket path prefix ('' = virtual-hosted), key, query, extra headers,
    # region, sign payload?, session token?
    dict(name="get_key_with_spaces_plus_percent_tilde_utf8", base="https://examplebucket.s3.eu-central-1.amazonaws.com",
         bucket="", key=SPECIAL_KEY, query=[], headers=[], region="eu-central-1", sign_payload=True,
         token=False),
    dict(name="get_path_style_with_port_odd_chars", base="http://127.0.0.1:7480",
         bucket="/bucket", key=ODD_KEY, query=[], headers=[], region="us-east-1",
         sign_payload=True, token=False),
    dict(name="ranged_get_with_if_match", base="https://examplebucket.s3.eu-central-1.amazonaws.com",
         bucket="", key=SPECIAL_KEY, query=[],
         headers=[("Range", "bytes=1048576-2097151"),
                  ("If-Match", '"0123456789abcdef0123456789abcdef-3"')],
         region="eu-central-1", sign_payload=True, token=False),
    dict(name="ranged_get_unsigned_payload", base="https://examplebucket.s3.eu-central-1.amazonaws.com",
         bucket="", key="train/n01440764/n01440764_10026.JPEG", query=[],
         headers=[("Range", "bytes=0-1048575")], region="eu-central-1", sign_payload=False,
         token=False),
    dict(name="list_objects_v2_empty_prefix_and_token", base="https://examplebucket.s3.eu-central-1.amazonaws.com",
         bucket="", key="", query=[("list-type", "2"), ("encoding-type", "url"), ("prefix", ""),
                                   ("delimiter", "/"),
                                   ("continuation-token", "1/AbC+dEf/gh==x*y"),
                                   ("max-keys", "1000")],
         headers=[], region="eu-central-1", sign_payload=True, token=False),
    dict(name="list_objects_v2_path_style_prefix", base="http://localhost:7480",
         bucket="/bucket", key="", query=[("list-type", "2"), ("encoding-type", "url"),
                                          ("prefix", "train/ä b/"), ("delimiter", "/")],
         headers=[], region="us-east-1", sign_payload=True, token=False),
    dict(name="get_with_session_token", base="https://examplebucket.s3.us-west-2.amazonaws.com",
         bucket="", key=SPECIAL_KEY, query=[], headers=[("Range", "bytes=0-99")],
         region="us-west-2", sign_payload=True, token=True),
]


class RecordingAuth(S3SigV4Auth):
    """S3SigV4Auth that keeps the canonical request and string to sign it made."""

    def string_to_sign(self, request, canonical_request):
        self.recorded_canonical = canonical_request
        self.recorded_sts = super().string_to_sign(request, canonical_request)
        return self.recorded_sts


class FixedDatetime(datetime.datetime):
    @classmethod
    def utcnow(cls):
        return cls(WHEN.year, WHEN.month, WHEN.day, WHEN.hour, WHEN.minute, WHEN.second)

    @classmethod
    def now(cls, tz=None):
        t = cls.utcnow()
        return t.replace(tzinfo=tz) if tz else t


class DatetimeModule:
    """botocore.auth's `datetime` module, with the clock stopped at WHEN."""
    datetime = FixedDatetime

    def __getattr__(self, name):
        return getattr(datetime, name)


def stopped_clock():
    """The clock add_auth reads, stopped at WHEN: Debian's botocore (1.29)
    calls datetime.datetime.utcnow(), newer ones botocore.auth.get_current_datetime()."""
    patches = [mock.patch("botocore.auth.datetime", DatetimeModule())]
    if hasattr(botocore.auth, "get_current_datetime"):
        patches.append(mock.patch("botocore.auth.get_current_datetime", FixedDatetime.utcnow))
    stack = contextlib.ExitStack()
    for p in patches:
        stack.enter_context(p)
    return stack


def make_case(case):
    path = case["bucket"] + "/" + case["key"]
    url = case["base"] + percent_encode(path, safe="/~")
    host = case["base"].split("://", 1)[1]
    creds = Credentials(ACCESS_KEY, SECRET_KEY, TOKEN if case["token"] else None)
    request = AWSRequest(method="GET", url=url, headers=dict(case["headers"]),
                         params=list(case["query"]))
    if not case["sign_payload"]:
        request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    auth = RecordingAuth(creds, "s3", case["region"])
    with stopped_clock():
        auth.add_auth(request)
    added = {name.lower(): request.headers[name] for name in
             ("Authorization", "X-Amz-Date", "X-Amz-Content-SHA256", "X-Amz-Security-Token")
             if name in request.headers}
    return {
        "name": case["name"],
        "method": "GET",
        "host": host,
        "path": path,
        "query": [list(p) for p in case["query"]],
        "headers": [list(h) for h in case["headers"]],
        "region": case["region"],
        "unsigned_payload": not case["sign_payload"],
        "access_key": ACCESS_KEY,
        "secret_key": SECRET_KEY,
        "session_token": TOKEN if case["token"] else "",
        "time_epoch_s": calendar.timegm(WHEN.timetuple()),
        "expected": {
            "canonical_request": auth.recorded_canonical,
            "string_to_sign": auth.recorded_sts,
            "headers": added,
        },
    }


def generate():
    return {
        "generated_by": "tests/unit/transport/sigv4_vectors.py --write "
                        "tests/unit/transport/sigv4_vectors.json (botocore.auth.S3SigV4Auth)",
        "botocore_version": botocore.__version__,
        "cases": [make_case(c) for c in CASES],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FILE")
    mode.add_argument("--check", metavar="FILE")
    args = ap.parse_args()
    fresh = generate()
    if args.write:
        with open(args.write, "w", encoding="utf-8") as f:
            json.dump(fresh, f, ensure_ascii=False, indent=2)
            f.write("\n")
        print(f"wrote {len(fresh['cases'])} cases to {args.write}")
        return 0
    with open(args.check, encoding="utf-8") as f:
        stored = json.load(f)
    stored_cases = {c["name"]: c for c in stored.get("cases", [])}
    fresh_cases = {c["name"]: c for c in fresh["cases"]}
    bad = sorted(set(stored_cases) ^ set(fresh_cases))
    bad += [n for n in fresh_cases if n in stored_cases and stored_cases[n] != fresh_cases[n]]
    for name in bad:
        print(f"{args.check}: case {name} differs from what botocore "
              f"{botocore.__version__} makes now", file=sys.stderr)
    if bad:
        print(f"regenerate: {fresh['generated_by'].split(' (')[0]}", file=sys.stderr)
        return 1
    print(f"{args.check}: {len(fresh_cases)} cases match botocore {botocore.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
