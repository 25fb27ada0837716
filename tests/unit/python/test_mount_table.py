"""Unit tests for epochfs.mount_table, the Python twin of fusefs/mount_table.h (same sample as
tests/unit/fusefs/mount_table_test.cc). Standard library only.

Run: cd tests/unit/python && /usr/bin/python3 -m unittest -v test_mount_table
"""

import os
import shutil
import subprocess
import tempfile
import unittest

import checkout_paths  # noqa: F401  (this checkout's tools/python and tools/bench/python)

from epochfs import mount_table

# A mount point with a space (\040) and a tab (\011), a source with a backslash (\134),
# optional fields, and lines that do not parse.
SAMPLE = (
    "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw\n"
    "97 29 0:52 / /tmp/a\\040b\\011c rw,nosuid,nodev,relatime shared:40 master:3 - "
    "fuse.epochfs /data\\134set ro,user_id=0,group_id=0,allow_other\n"
    "35 25 0:30 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
    "garbage without a separator\n"
    "1 2 3 4 5 - too short\n"
)


class ParseTest(unittest.TestCase):
    def test_fields_around_optional_ones(self):
        mounts = mount_table.parse(SAMPLE)
        self.assertEqual(len(mounts), 3)
        m = mounts[1]
        self.assertEqual((m.mount_id, m.parent_id, m.device, m.root), (97, 29, "0:52", "/"))
        self.assertEqual(m.mount_options, "rw,nosuid,nodev,relatime")
        self.assertEqual(m.fstype, "fuse.epochfs")
        self.assertEqual(m.super_options, "ro,user_id=0,group_id=0,allow_other")
        self.assertIn("memory", mounts[2].super_options.split(","))

    def test_space_tab_and_backslash_escapes_are_decoded(self):
        m = mount_table.parse(SAMPLE)[1]
        self.assertEqual(m.mount_point, "/tmp/a b\tc")
        self.assertEqual(m.source, "/data\\set")
        self.assertEqual(mount_table.unescape("a\\012b"), "a\nb")
        self.assertEqual(mount_table.unescape("no\\9escape\\04"), "no\\9escape\\04")

    def test_queries_on_a_given_table(self):
        mounts = mount_table.parse(SAMPLE)
        self.assertTrue(mount_table.is_mount_point("/tmp/a b\tc", mounts))
        self.assertFalse(mount_table.is_mount_point("/tmp/a\\040b\\011c", mounts))
        self.assertEqual(mount_table.mount_points_under("/sys/fs", mounts), ["/sys/fs/cgroup/memory"])
        self.assertEqual(mount_table.mount_points_under("/sys/f", mounts), [])
        self.assertEqual(mount_table.mount_points_under("/proc", mounts), ["/proc"])

    def test_an_unreadable_table_is_empty(self):
        self.assertEqual(mount_table.read("/nonexistent/mountinfo"), [])


class RealMountinfoTest(unittest.TestCase):
    def test_this_process_table_parses(self):
        mounts = mount_table.read()
        self.assertTrue(mounts)
        self.assertTrue(mount_table.is_mount_point("/"))
        self.assertEqual(len({m.mount_id for m in mounts}), len(mounts))

    def test_the_kernel_escapes_round_trip(self):
        """A bind mount on a directory named with a space and a tab, in a private mount
        namespace (gone with it): the kernel's own escaping, decoded back."""
        if os.geteuid() != 0 or not shutil.which("unshare"):
            self.skipTest("needs root and unshare(1)")
        tmp = tempfile.mkdtemp(prefix="epochfs-mount-table-")
        try:
            d = os.path.join(tmp, "a b\tc")
            os.mkdir(d)
            r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                'mount --bind "$1" "$1" && cat /proc/self/mountinfo', "sh", d],
                               capture_output=True, text=True, errors="surrogateescape")
            if r.returncode != 0:
                self.skipTest("no private bind mount here: %s" % r.stderr.strip())
            self.assertIn("a\\040b\\011c", r.stdout)
            self.assertIn(d, mount_table.mount_points_under(tmp, mount_table.parse(r.stdout)))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
