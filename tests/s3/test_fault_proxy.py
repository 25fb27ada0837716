"""The test tool tests/s3/fault_proxy.py against rgw: what passes through it is what rgw sends
(boto3 PUT, GET, ranged GET, HEAD, a chunked listing, several requests on one kept-alive
connection), and each fault is what it says:

- reset: the client's connection is reset (ECONNRESET), the next one passes;
- reset_request: a request on a kept-alive connection is answered with a reset;
- drop: a connection is accepted and never answered (the client's 1-s read timeout fires);
- stall_after_bytes: K bytes of the response, then nothing (the client's read timeout fires);
- slowdown N: N answers 503 with an S3 XML body Code=SlowDown on one kept-alive connection,
  then rgw's answer on that same connection; boto3's own retries get through 2 of them;
- slowdown for T seconds: 503 until then, rgw's answers after;
- expired_token: one 403 Code=ExpiredToken, then rgw's answer.

No epochfs here. Environment: EPOCHFS_RGW_DIR (the fixture). Exit 77 (skipped) without the
fixture or boto3.
"""

import errno
import hashlib
import http.client
import os
import socket
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fault_proxy  # noqa: E402
import s3_mount_support as sup  # noqa: E402

KEY_SMALL = "p/small.bin"
KEY_LARGE = "p/large.bin"
LARGE = 3 * sup.MiB + 12345
BOUND = 30.0  # seconds, a hang guard only


def skip_reason():
    try:
        import boto3  # noqa: F401 (whether it is installed)
    except ImportError:
        return "python3-boto3 not installed (tools/test installs it)"
    if not sup.RGW_DIR or not os.path.exists(os.path.join(sup.RGW_DIR, "rgw.json")):
        return "no rgw fixture (EPOCHFS_RGW_DIR=%r)" % sup.RGW_DIR
    return None


class FaultProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sup.scrub_environ()
        cls.fx = sup.Fixture()
        st = sup.rgw_counters.state(cls.fx.dir)
        cls.upstream = ("127.0.0.1", int(st["endpoint"].rsplit(":", 1)[1]))
        cls.bucket = sup.unique_bucket("proxy")
        s3 = cls.fx.client()
        s3.create_bucket(Bucket=cls.bucket)
        cls.small = b"small object through the proxy\n" * 10
        cls.large = os.urandom(LARGE)
        s3.put_object(Bucket=cls.bucket, Key=KEY_SMALL, Body=cls.small)
        s3.put_object(Bucket=cls.bucket, Key=KEY_LARGE, Body=cls.large)
        s3.close()

    def setUp(self):
        self.proxy = fault_proxy.FaultProxy(self.upstream).start()
        self.addCleanup(self.proxy.stop)

    def client(self, retries=1):
        import boto3
        from botocore.config import Config
        return boto3.session.Session().client(
            "s3", endpoint_url=self.proxy.endpoint, region_name=self.fx.region,
            aws_access_key_id=self.fx.key_id, aws_secret_access_key=self.fx.secret,
            config=Config(s3={"addressing_style": "path"}, connect_timeout=5, read_timeout=10,
                          max_pool_connections=1,
                          retries={"max_attempts": retries, "mode": "standard"}))

    def conn(self, timeout=BOUND):
        return http.client.HTTPConnection("127.0.0.1", self.proxy.port, timeout=timeout)

    @staticmethod
    def get(conn, path="/", method="GET"):
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, r.read(), r

    def test_pass_through_boto3(self):
        s3 = self.client()
        got = s3.get_object(Bucket=self.bucket, Key=KEY_LARGE)["Body"].read()
        self.assertEqual(hashlib.sha256(got).hexdigest(), hashlib.sha256(self.large).hexdigest())
        part = s3.get_object(Bucket=self.bucket, Key=KEY_LARGE,
                             Range="bytes=%d-%d" % (sup.MiB - 7, 2 * sup.MiB + 7))["Body"].read()
        self.assertEqual(part, self.large[sup.MiB - 7:2 * sup.MiB + 8])
        head = s3.head_object(Bucket=self.bucket, Key=KEY_LARGE)
        self.assertEqual(head["ContentLength"], LARGE)
        listed = [o["Key"] for o in s3.list_objects_v2(Bucket=self.bucket)["Contents"]]
        self.assertEqual(listed, sorted([KEY_SMALL, KEY_LARGE]))
        s3.put_object(Bucket=self.bucket, Key="p/put-through-proxy", Body=b"x" * 100000)
        self.assertEqual(s3.get_object(Bucket=self.bucket, Key="p/put-through-proxy")["Body"]
                         .read(), b"x" * 100000)
        s3.delete_object(Bucket=self.bucket, Key="p/put-through-proxy")
        s3.close()
        st = self.proxy.stats()
        self.assertEqual(st["faults"], 0)
        self.assertEqual(st["requests"], st["forwarded"])
        self.assertGreaterEqual(st["requests"], 7)

    def test_keep_alive(self):
        # boto3 with one pooled connection: GET, HEAD, ranged GET, LIST, GET on one connection.
        s3 = self.client()
        for _ in range(2):
            self.assertEqual(s3.get_object(Bucket=self.bucket, Key=KEY_SMALL)["Body"].read(),
                             self.small)
            self.assertEqual(s3.head_object(Bucket=self.bucket, Key=KEY_SMALL)["ContentLength"],
                             len(self.small))
            self.assertEqual(s3.get_object(Bucket=self.bucket, Key=KEY_SMALL,
                                           Range="bytes=3-9")["Body"].read(), self.small[3:10])
            s3.list_objects_v2(Bucket=self.bucket)
        s3.close()
        st = self.proxy.stats()
        self.assertEqual((st["connections"], st["requests"], st["forwarded"]), (1, 8, 8))

    def test_reset(self):
        self.proxy.set_mode("reset", count=1)
        c = self.conn()
        with self.assertRaises(OSError) as cm:
            self.get(c)
        c.close()
        self.assertIsInstance(cm.exception, (ConnectionResetError, http.client.RemoteDisconnected,
                                             BrokenPipeError), repr(cm.exception))
        if isinstance(cm.exception, ConnectionResetError):
            self.assertEqual(cm.exception.errno, errno.ECONNRESET)
        c = self.conn()
        self.assertEqual(self.get(c)[0], 200)  # the count is used up: passes again
        c.close()
        st = self.proxy.stats()
        self.assertEqual(st["faults_by_mode"]["reset"], 1)
        self.assertEqual(st["connections"], 2)

    def test_reset_until_changed(self):
        self.proxy.set_mode("reset")
        for _ in range(3):
            with self.assertRaises(ConnectionResetError):
                # The reset can come as early as the connect().
                with socket.create_connection(("127.0.0.1", self.proxy.port),
                                              timeout=BOUND) as s:
                    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                    if not s.recv(100):
                        raise AssertionError("a FIN, not a reset")
        self.proxy.set_mode("pass")
        c = self.conn()
        self.assertEqual(self.get(c)[0], 200)
        c.close()
        self.assertEqual(self.proxy.stats()["faults_by_mode"]["reset"], 3)

    def test_reset_request_kept_alive(self):
        # Two requests on one connection, then the third is answered with a reset.
        c = self.conn()
        try:
            for _ in range(2):
                self.assertEqual(self.get(c)[0], 200)
            self.proxy.set_mode("reset_request", count=1)
            with self.assertRaises(ConnectionResetError):
                self.get(c)
        finally:
            c.close()
        c = self.conn()
        self.assertEqual(self.get(c)[0], 200)
        c.close()
        st = self.proxy.stats()
        self.assertEqual((st["connections"], st["requests"], st["forwarded"]), (2, 4, 3))
        self.assertEqual(st["faults_by_mode"]["reset_request"], 1)

    def test_drop(self):
        self.proxy.set_mode("drop", count=1)
        c = self.conn(timeout=1.0)
        with self.assertRaises(socket.timeout):
            self.get(c)
        self.assertEqual(self.proxy.stats()["held"], 1)
        c.close()
        c = self.conn()
        self.assertEqual(self.get(c)[0], 200)
        c.close()
        self.assertEqual(self.proxy.stats()["faults_by_mode"]["drop"], 1)

    def test_stall_after_bytes(self):
        k = 100000
        self.proxy.set_mode("stall_after_bytes", count=1, after_bytes=k)
        s3 = self.client()
        c = self.conn(timeout=1.0)
        got = bytearray()
        try:
            # Signed by boto3, sent by hand: a raw GET of the large object.
            url = s3.generate_presigned_url("get_object", Params={"Bucket": self.bucket,
                                                                  "Key": KEY_LARGE})
            path = url.split(str(self.proxy.port), 1)[1]
            c.request("GET", path)
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            with self.assertRaises(socket.timeout):
                while True:
                    b = r.read1(65536)
                    if not b:
                        break
                    got += b
        finally:
            c.close()
        self.assertGreater(len(got), k - 1000)
        self.assertLess(len(got), k)  # the status line and headers count in K
        self.assertEqual(bytes(got), self.large[:len(got)])
        # The next request passes.
        self.assertEqual(s3.get_object(Bucket=self.bucket, Key=KEY_SMALL)["Body"].read(),
                         self.small)
        s3.close()

    def check_error(self, status, body, want_status, code):
        self.assertEqual(status, want_status)
        self.assertIn(b"<Code>%s</Code>" % code.encode(), body)

    def test_slowdown_count_keep_alive(self):
        self.proxy.set_mode("slowdown", count=2)
        c = self.conn()
        try:
            for _ in range(2):
                status, body, _ = self.get(c)
                self.check_error(status, body, 503, "SlowDown")
            status, body, _ = self.get(c)
            self.assertEqual(status, 200)
            self.assertIn(b"ListAllMyBucketsResult", body)
        finally:
            c.close()
        st = self.proxy.stats()
        self.assertEqual((st["connections"], st["requests"], st["forwarded"]), (1, 3, 1))
        self.assertEqual(st["faults_by_mode"]["slowdown"], 2)

    def test_slowdown_boto3_retries_through(self):
        self.proxy.set_mode("slowdown", count=2)
        s3 = self.client(retries=3)
        self.assertEqual(s3.get_object(Bucket=self.bucket, Key=KEY_SMALL)["Body"].read(),
                         self.small)
        s3.close()
        self.assertEqual(self.proxy.stats()["faults_by_mode"]["slowdown"], 2)

    def test_slowdown_for_seconds(self):
        self.proxy.set_mode("slowdown", seconds=1.0)
        c = self.conn()
        try:
            status, body, _ = self.get(c)
            self.check_error(status, body, 503, "SlowDown")
            deadline = time.monotonic() + BOUND
            while status == 503 and time.monotonic() < deadline:
                status, body, _ = self.get(c)
                time.sleep(0.05)
            self.assertEqual(status, 200)
        finally:
            c.close()
        self.assertEqual(self.proxy.stats()["mode"], "pass")

    def test_expired_token_once(self):
        self.proxy.set_mode("expired_token")
        s3 = self.client(retries=1)
        from botocore.exceptions import ClientError
        with self.assertRaises(ClientError) as cm:
            s3.get_object(Bucket=self.bucket, Key=KEY_SMALL)
        self.assertEqual(cm.exception.response["Error"]["Code"], "ExpiredToken")
        self.assertEqual(cm.exception.response["ResponseMetadata"]["HTTPStatusCode"], 403)
        self.assertEqual(s3.get_object(Bucket=self.bucket, Key=KEY_SMALL)["Body"].read(),
                         self.small)
        s3.close()
        st = self.proxy.stats()
        self.assertEqual(st["faults_by_mode"]["expired_token"], 1)
        self.assertEqual(st["mode"], "pass")


if __name__ == "__main__":
    sup.main(skip_reason())
