"""Small helpers of the cluster lab (tools/bench/cluster-lab): the error type user mistakes raise,
running commands, and parsing the sizes and rates its options take.

Rates follow tc's units where tc has them: ``bit``, ``kbit``, ``mbit``, ``gbit`` are bits per
second (powers of 1000). Byte rates and sizes take ``K``/``M``/``G`` (also ``KiB``/``MiB``/
``GiB``, powers of 1024) or ``KB``/``MB``/``GB`` (powers of 1000); a rate may end in ``/s``.
Standard library only.
"""

import argparse
import os
import re
import subprocess
import sys

# The checkout, and the PYTHONPATH of the readers run in the nodes: the instruments'
# tools/bench/python and the shipped API's tools/python.
BENCH_PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(BENCH_PYTHON_DIR)))
PYTHON_DIR = os.pathsep.join([BENCH_PYTHON_DIR, os.path.join(REPO, "tools", "python")])
# ip, tc, losetup, mkfs.ext4 live in sbin, which a non-login root shell's PATH may lack.
os.environ["PATH"] = os.pathsep.join(
    [os.environ.get("PATH", "/usr/bin:/bin")] +
    [d for d in ("/usr/sbin", "/sbin") if d not in os.environ.get("PATH", "").split(os.pathsep)])

_BIT_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
               "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
               "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_NUMBER = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*(?:/s)?\s*")


class LabError(Exception):
    """A failure the user can act on: printed as one line, no traceback."""


class ArgParser(argparse.ArgumentParser):
    """argparse that reports a bad command line as a LabError (one line, exit 2)."""

    def error(self, message):
        raise LabError("%s: %s" % (self.prog, message))


def log(msg):
    print("cluster-lab: " + msg, file=sys.stderr, flush=True)


def parse_size(text):
    """Bytes of a size like 512M, 1.5G, 300MB, 4096."""
    m = _NUMBER.fullmatch(text or "")
    unit = m.group(2).lower() if m else None
    if not m or unit not in _BYTE_UNITS:
        raise LabError("bad size %r: use a number with K, M, G (or KiB, MiB, GiB; KB, MB, GB)" % text)
    return int(float(m.group(1)) * _BYTE_UNITS[unit])


def parse_rate(text):
    """Bytes per second of a rate like 200mbit, 1gbit (bits) or 100M, 100MB/s (bytes)."""
    m = _NUMBER.fullmatch(text or "")
    unit = m.group(2).lower() if m else None
    if m and unit in _BIT_UNITS:
        value = int(float(m.group(1)) * _BIT_UNITS[unit] / 8)
    elif m and unit in _BYTE_UNITS:
        value = int(float(m.group(1)) * _BYTE_UNITS[unit])
    else:
        raise LabError("bad rate %r: use e.g. 200mbit, 1gbit (bits/s) or 100M, 100MB/s (bytes/s)"
                       % text)
    if value <= 0:
        raise LabError("rate %r must be above zero" % text)
    return value


def rate_text(bytes_per_s):
    """A rate for people and for tc: '1gbit', '200mbit', '123456bit'."""
    bits = bytes_per_s * 8
    for unit, scale in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bits % scale == 0:
            return "%d%s" % (bits // scale, unit)
    return "%dbit" % bits


def run(cmd, check=True, timeout=120, **kw):
    """Runs a command, capturing its output; a failure raises LabError naming the command
    and its error output."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    try:
        r = subprocess.run(cmd, timeout=timeout, **kw)
    except FileNotFoundError:
        raise LabError("%s not found (is it installed?)" % cmd[0]) from None
    except subprocess.TimeoutExpired:
        raise LabError("%s did not finish within %d s" % (" ".join(cmd), timeout)) from None
    if check and r.returncode != 0:
        err = (r.stderr or r.stdout or "").strip().splitlines()
        raise LabError("%s failed (exit %d): %s" % (" ".join(cmd), r.returncode,
                                                     err[-1] if err else "no output"))
    return r


def read_text(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


def tree_bytes(root):
    """(bytes, files) of the regular files under root."""
    total = files = 0
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            if os.path.isfile(p) and not os.path.islink(p):
                total += os.path.getsize(p)
                files += 1
    return total, files
