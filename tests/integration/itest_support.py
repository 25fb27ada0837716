"""Helpers shared by the Python integration tests that run commands and mount
(test_install.py, test_package.py, test_admin_names.py): they import it from their own directory."""

import os
import subprocess
import sys
import time
import unittest

from epochfs_bench.bench_env import is_mounted  # noqa: F401  (re-exported for the tests)

SKIP = 77  # CTest's SKIP_RETURN_CODE for the Python tests


def mount_skip_reason(bin_dir):
    """Why a test that mounts cannot run here (no epochfs in bin_dir, no /dev/fuse), or None."""
    if not os.access(os.path.join(bin_dir, "epochfs"), os.X_OK):
        return "epochfs binary not found in %r (EPOCHFS_BIN_DIR)" % bin_dir
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as e:
        return "/dev/fuse not usable: %s" % e
    return None


def run(cmd, timeout=300, **kw):
    """Runs `cmd`, capturing text output; never raises on a non-zero exit."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run(cmd, timeout=timeout, **kw)




def unmount(path):
    """fusermount3 -u, then a lazy umount if that did not take within 5 s."""
    for cmd in (["fusermount3", "-u", path], ["umount", "-l", path]):
        if not is_mounted(path):
            return
        run(cmd, timeout=10)
        for _ in range(100):
            if not is_mounted(path):
                return
            time.sleep(0.05)


def wait_for(cond, seconds):
    until = time.time() + seconds
    while time.time() < until:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def main(skip_reason):
    """Runs the calling test module's tests, or exits SKIP saying why they cannot run here."""
    if skip_reason:
        print("SKIP: " + skip_reason)
        sys.exit(SKIP)
    unittest.main(module="__main__", verbosity=2)
