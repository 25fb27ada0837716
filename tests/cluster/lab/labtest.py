"""What the lab's tests share (tests/cluster/lab/test_*.py import it from their own directory):
why a lab cannot run here, the cluster-lab command, and the check that a lab left nothing
behind after `down`. Run by ctest with /usr/bin/python3, PYTHONPATH=tools/python."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import unittest

from epochfs import mount_table
from epochfs_lab import lab as lab_mod
from epochfs_lab.down import down

SKIP = 77  # CTest's SKIP_RETURN_CODE
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLUSTER_LAB = os.path.join(REPO, "tools", "bench", "cluster-lab")
WORKDIR = os.environ.get("EPOCHFS_LAB_TEST_DIR", "/var/tmp")


def skip_reason():
    why = lab_mod.unavailable_reason()
    if why:
        return why
    try:
        lab_mod.find_binary("epochfs", os.environ.get("EPOCHFS_BIN_DIR"))
    except Exception as e:  # LabError: not built
        return str(e)
    return None


def fresh_root(name):
    """WORKDIR/epochfs-labtest-NAME-BUILD, empty: a lab a killed earlier run of this build's
    tests left there (say, at CTest's timeout) is taken down first, from its state file. BUILD
    (a hash of EPOCHFS_BIN_DIR) keeps two build trees' test runs out of each other's way."""
    build = hashlib.sha1(os.path.abspath(os.environ.get("EPOCHFS_BIN_DIR", "")).encode()).hexdigest()[:8]
    root = os.path.join(WORKDIR, "epochfs-labtest-%s-%s" % (name, build))
    for dirpath, dirnames, files in os.walk(root):
        if "state.json" in files:
            down(dirpath, verbose=False)
            dirnames[:] = []
        elif dirpath.count(os.sep) - root.count(os.sep) >= 3:
            dirnames[:] = []
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    return root


def cluster_lab(*args, check=True, timeout=300):
    """Runs tools/bench/cluster-lab; returns the CompletedProcess (text)."""
    r = subprocess.run([CLUSTER_LAB, *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError("cluster-lab %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def status(directory):
    return json.loads(cluster_lab("status", "--json", "--dir", directory).stdout)


def leftovers(prefix, directory):
    """What a lab with this prefix in this directory left: namespaces, links, mounts, loop
    devices, cgroups, processes, files. Empty when `down` did its job."""
    out = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    out += ["netns " + line.split()[0] for line in ns.splitlines() if line.startswith(prefix + "-")]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    out += ["link " + line.split(":")[1].strip() for line in links.splitlines()
            if line.split(":")[1].strip().startswith(prefix + "-")]
    out += ["mount " + p for p in mount_table.mount_points_under(directory)]
    loops = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
                           capture_output=True, text=True).stdout
    out += ["loop " + line for line in loops.splitlines() if directory in line]
    for dirpath, dirnames, _ in os.walk("/sys/fs/cgroup"):
        for d in dirnames:
            if d == "epochfs-lab-" + prefix:
                out.append("cgroup " + os.path.join(dirpath, d))
        dirnames[:] = [d for d in dirnames if not d.startswith("epochfs-lab-")]
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    if directory.encode() in f.read():
                        out.append("process %s" % p)
            except OSError:
                pass
    if os.path.exists("/run/epochfs-lab-" + prefix):  # admin sockets of a lab with a long DIR
        out.append("directory /run/epochfs-lab-" + prefix)
    if os.path.isdir(directory) and os.listdir(directory):
        out.append("files in %s: %s" % (directory, sorted(os.listdir(directory))))
    return out


def main():
    why = skip_reason()
    if why:
        print("SKIP: " + why)
        sys.exit(SKIP)
    # SIGTERM (a test runner giving up) unwinds like Ctrl-C, so tearDown and finally run `down`.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    unittest.main(module="__main__", verbosity=2)
