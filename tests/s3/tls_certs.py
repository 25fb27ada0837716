"""A throwaway certificate authority for the tests, made with the `openssl` command (Debian's
openssl package): a self-signed CA and a server certificate it signs for 127.0.0.1 and localhost.

    make_ca(dir, name)                    -> (ca.pem, ca.key)   a CA (CA:TRUE, keyCertSign)
    make_server_cert(dir, ca_pem, ca_key) -> (cert.pem, key.pem) subjectAltName IP:127.0.0.1,
                                                                 DNS:localhost; serverAuth

RSA 2048, valid 30 days. Keys are written with mode 0600; nothing here is a secret of anyone's
(the fixture's CA exists for one test run). Used by tests/s3/rgw (the fixture's HTTPS endpoint)
and by test_s3_https.py (a second, unrelated CA). Standard library only.
"""

import os
import subprocess

DAYS = "30"
REQ_CONFIG = """[req]
distinguished_name = dn
prompt = no
[dn]
CN = %s
"""
SERVER_EXT = """basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
authorityKeyIdentifier = keyid
subjectKeyIdentifier = hash
"""


class CertError(Exception):
    pass


def _openssl(args, cwd):
    r = subprocess.run(["openssl"] + args, cwd=cwd, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    if r.returncode != 0:
        raise CertError("openssl %s failed (%d): %s" % (args[0], r.returncode, r.stderr.strip()))


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _key(path, cwd):
    # The key file exists with mode 0600 before openssl writes it.
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    _openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path],
             cwd)


def make_ca(d, name="epochfs test CA"):
    """A self-signed CA in `d`: returns (d/ca.pem, d/ca.key)."""
    os.makedirs(d, exist_ok=True)
    pem, key = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    conf = os.path.join(d, "ca-req.cnf")
    _write(conf, REQ_CONFIG % name)
    _key(key, d)
    # `-config` names our own file: no v3_ca section of the system's openssl.cnf adds to it.
    _openssl(["req", "-new", "-x509", "-config", conf, "-key", key, "-days", DAYS, "-sha256",
              "-addext", "basicConstraints=critical,CA:TRUE",
              "-addext", "keyUsage=critical,keyCertSign,cRLSign",
              "-addext", "subjectKeyIdentifier=hash", "-out", pem], d)
    return pem, key


def make_server_cert(d, ca_pem, ca_key, name="127.0.0.1"):
    """A server certificate for 127.0.0.1 and localhost signed by the CA: returns
    (d/server.pem, d/server.key)."""
    os.makedirs(d, exist_ok=True)
    pem, key = os.path.join(d, "server.pem"), os.path.join(d, "server.key")
    csr, conf, ext = (os.path.join(d, n) for n in ("server.csr", "server-req.cnf",
                                                    "server-ext.cnf"))
    _write(conf, REQ_CONFIG % name)
    _write(ext, SERVER_EXT)
    _key(key, d)
    _openssl(["req", "-new", "-config", conf, "-key", key, "-out", csr], d)
    _openssl(["x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key, "-CAcreateserial",
              "-days", DAYS, "-sha256", "-extfile", ext, "-out", pem], d)
    return pem, key
