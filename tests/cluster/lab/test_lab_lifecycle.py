"""tools/bench/cluster-lab up / status / exec / down on 4 nodes: the nodes look like nodes (own
hostname, address, interfaces, memory limit the daemon sizes itself from), and `down` leaves no
namespace, link, mount, loop device, cgroup, process or file behind — after a clean run, after
every lab process was SIGKILLed mid-run, and after `up` itself was SIGKILLed; `down` twice is
fine; bad input is one line and exit 2, never a traceback."""

import json
import os
import shutil
import signal
import subprocess
import time
import unittest

import labtest
from epochfs_lab import workload as lab_workload


def cpu_quota(dirs):
    """Cores a node's cpu cgroup allows (cgroup v1 cfs quota, or v2 cpu.max)."""
    for d in dirs:
        for name in ("cpu.cfs_quota_us", "cpu.max"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                with open(p) as f:
                    quota = f.read().split()[0]
                with open(os.path.join(d, "cpu.cfs_period_us")) if name == "cpu.cfs_quota_us" else open(p) as f:
                    period = f.read().split()[-1]
                return int(quota) / int(period)
    return None


def source_limit(dirs):
    """(the read limit on the source, the pids it applies to): cgroup v1 blkio of the lab,
    or v2 io.max of the nodes' parent."""
    for d in dirs + [os.path.dirname(d) for d in dirs]:
        for name in ("blkio.throttle.read_bps_device", "io.max"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                with open(p) as f:
                    limit = f.read().strip()
                members = set()
                for sub, _, files in os.walk(d):
                    if "cgroup.procs" in files:
                        with open(os.path.join(sub, "cgroup.procs")) as f:
                            members.update(int(x) for x in f.read().split())
                if limit:
                    return limit, members
    return None, set()


class LabLifecycleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = labtest.fresh_root("lifecycle")
        cls.data = os.path.join(cls.root, "data")
        cls.dataset = lab_workload.make_dataset(cls.data, 200)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def setUp(self):
        self.dir = os.path.join(self.root, "lab-" + self._testMethodName)

    def tearDown(self):
        labtest.cluster_lab("down", "--dir", self.dir, check=False)

    def up(self, *extra):
        labtest.cluster_lab("up", "--nodes", "4", "--data", self.data, "--dir", self.dir,
                            "--link", "1gbit", "--node-memory", "512M", *extra)
        return labtest.status(self.dir)

    def assert_down_leaves_nothing(self, prefix):
        r = labtest.cluster_lab("down", "--dir", self.dir)
        self.assertNotIn("Traceback", r.stderr)
        self.assertEqual(labtest.leftovers(prefix, self.dir), [])
        again = labtest.cluster_lab("down", "--dir", self.dir)
        self.assertIn("nothing to remove", again.stderr)

    def test_up_status_exec_down(self):
        st = self.up("--node-cpus", "1.5", "--source-bw", "50M", "--", "--ram-cache", "50%")
        self.assertEqual(st["source"], os.path.join(self.dir, "source"))
        self.assertEqual(len(st["nodes"]), 4)
        # One walk for the job (counted with inotify on the source): each directory once,
        # and each other member's open of the root.
        start = st["start"]
        self.assertGreater(start["source_dirs"], 5)
        self.assertGreaterEqual(start["source_dir_opens"], start["source_dirs"])
        self.assertLessEqual(start["source_dir_opens"], start["source_dirs"] + 3, start)
        for i, n in enumerate(st["nodes"]):
            self.assertEqual(n["name"], "node%d" % i)
            self.assertEqual(n["address"], "10.99.0.%d" % (11 + i))
            self.assertEqual(n["link"], "1gbit")
            self.assertTrue(n["pid"] and n["supervisor_pid"], n)
            self.assertTrue(n["mounted"], n)
            self.assertTrue(os.path.isdir(os.path.join(n["mountpoint"], "class00")))
            self.assertEqual(cpu_quota(n["cgroups"]), 1.5)
            rdev = os.stat(st["source_device"]).st_rdev
            limit, members = source_limit(n["cgroups"])
            self.assertRegex(limit, r"^%d:%d (rbps=)?%d\b" % (os.major(rdev), os.minor(rdev), 50 << 20))
            self.assertIn(n["pid"], members)
        out = labtest.cluster_lab("exec", "--dir", self.dir, "node2", "sh", "-c",
                                  "hostname; ls /sys/class/net; ip -o -4 addr show eth0; "
                                  "echo $EPOCHFS_LAB_MOUNT; tc qdisc show dev eth0").stdout
        self.assertIn("node2\n", out)
        self.assertIn("10.99.0.13/24", out)
        self.assertEqual(sorted(out.split("\n")[1:3]), ["eth0", "lo"])
        self.assertIn("tbf", out)
        self.assertIn(st["nodes"][2]["mountpoint"], out)
        # A node's exit status comes back; its daemon sized --ram-cache 50% from the node.
        self.assertEqual(labtest.cluster_lab("exec", "--dir", self.dir, "1", "false", check=False).returncode, 1)
        ctl = subprocess.run([os.path.join(os.path.dirname(st["epochfs"]), "epochctl"), "status",
                              st["nodes"][0]["mountpoint"], "--json"], capture_output=True, text=True)
        opts = json.loads(ctl.stdout)["options"]
        self.assertEqual(opts["memory_limit"], 512 << 20)
        self.assertEqual(opts["ram_cache"], 256 << 20)
        self.assert_down_leaves_nothing(st["prefix"])

    def test_down_after_everything_was_killed(self):
        st = self.up()
        sleeper = subprocess.Popen([labtest.CLUSTER_LAB, "exec", "--dir", self.dir, "node3", "sh", "-c",
                                    "cat $EPOCHFS_LAB_MOUNT/class01/* > /dev/null; sleep 600"])
        time.sleep(1)
        pids = [p for n in st["nodes"] for p in (n["pid"], n["supervisor_pid"])] + [sleeper.pid]
        for p in pids:
            os.kill(p, signal.SIGKILL)
        sleeper.wait()
        self.assert_down_leaves_nothing(st["prefix"])

    def test_down_after_up_was_killed(self):
        for delay in (0.6, 1.2):
            up = subprocess.Popen([labtest.CLUSTER_LAB, "up", "--nodes", "4", "--data", self.data,
                                   "--dir", self.dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Killed `delay` after it recorded its first resource: under load
            # (CI, other builds) `up` may take seconds to get that far.
            state = os.path.join(self.dir, "state.json")
            deadline = time.monotonic() + 60
            while not os.path.exists(state) and up.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(delay)
            up.kill()
            up.wait()
            with open(os.path.join(self.dir, "state.json")) as f:
                prefix = json.load(f)["prefix"]
            self.assert_down_leaves_nothing(prefix)

    def test_bad_input_is_one_line(self):
        for args in (["up", "--nodes", "0", "--data", self.data, "--dir", self.dir],
                     ["up", "--nodes", "2", "--data", "/nonexistent", "--dir", self.dir],
                     ["up", "--nodes", "2", "--data", self.data, "--link", "fast", "--dir", self.dir],
                     ["status", "--dir", self.dir], ["exec", "--dir", self.dir, "node0", "true"],
                     ["frobnicate"]):
            r = labtest.cluster_lab(*args, check=False)
            self.assertEqual(r.returncode, 2, args)
            self.assertNotIn("Traceback", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


if __name__ == "__main__":
    labtest.main()
