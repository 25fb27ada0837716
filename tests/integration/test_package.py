"""The Debian package, installed, upgraded under a live mount and removed by
dpkg itself (docs/DEPLOY.md), in a dpkg root of this test's own
(`dpkg --root`, maintainer scripts chrootless with $DPKG_ROOT), so the
machine's own packages are never touched:

- CPack builds the package from this build tree; lintian finds no error;
- installed, the daemon mounts and serves from the package's files;
- a newer package (same tree, higher version) installed over it while the
  mount is live: the mount keeps serving, `epochctl upgrade` runs the new
  binary, and so does the supervisor's restart after a worker crash;
- `dpkg -r` leaves no file (byte-compiled Python caches included).

Run by ctest with Debian's /usr/bin/python3 (EPOCHFS_BIN_DIR set); exit code
77 means skipped (no epochfs binary, /dev/fuse, dpkg or cpack; not root).
"""

import json
import os
import shutil
import signal
import tempfile
import unittest

import itest_support
from itest_support import is_mounted, mount_skip_reason, run, unmount, wait_for

BIN_DIR = os.environ.get("EPOCHFS_BIN_DIR", "")
BUILD_DIR = os.path.dirname(os.path.abspath(BIN_DIR)) if BIN_DIR else ""


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (mounts)"
    for tool in ("dpkg", "cpack", "dpkg-shlibdeps"):
        if shutil.which(tool) is None:
            return "%s missing (tools/build installs dpkg-dev)" % tool
    return mount_skip_reason(BIN_DIR)


def cache_value(build_dir, key):
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split("=", 1)[1].strip()
    raise AssertionError("no %s in CMakeCache.txt" % key)


class PackageTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="epochfs-itest-py-%d-" % os.getpid())
        self.root = os.path.join(self.tmp, "root")
        for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates"):
            os.makedirs(os.path.join(self.root, d))
        for f in ("status", "available"):
            open(os.path.join(self.root, "var/lib/dpkg", f), "w").close()
        self.mnt = os.path.join(self.tmp, "mnt")
        os.makedirs(self.mnt)

    def tearDown(self):
        unmount(self.mnt)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def package(self, version):
        out = os.path.join(self.tmp, "pkg-" + version)
        r = run(["cpack", "-G", "DEB", "--config", os.path.join(BUILD_DIR, "CPackConfig.cmake"),
                 "-B", out, "-D", "CPACK_PACKAGE_VERSION=" + version], cwd=BUILD_DIR)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        debs = [f for f in os.listdir(out) if f.endswith(".deb")]
        self.assertEqual(len(debs), 1, debs)
        return os.path.join(out, debs[0])

    def dpkg(self, *args):
        # The machine's libraries are not in this root's status: --force-depends.
        r = run(["dpkg", "--root=" + self.root, "--force-depends", "--force-script-chrootless",
                 "--force-not-root", *args])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r

    def test_install_upgrade_under_a_live_mount_and_remove(self):
        version = cache_value(BUILD_DIR, "CMAKE_PROJECT_VERSION")
        old_deb = self.package(version)
        new_deb = self.package(version + "+upgrade1")
        # lintian judges the package users get: the Release build's, not a
        # sanitizer build's (tools/build installs lintian).
        if cache_value(BUILD_DIR, "EPOCHFS_SANITIZE") == "":
            lint = run(["lintian", "--fail-on", "error", old_deb])
            self.assertEqual(lint.returncode, 0, lint.stdout + lint.stderr)
        info = run(["dpkg-deb", "-f", old_deb, "Depends", "Recommends"]).stdout
        for dep in ("fuse3", "python3-numpy", "libfuse3-3", "libucx0"):
            self.assertIn(dep, info)
        self.assertIn("Recommends: python3-torch", info)

        self.dpkg("-i", old_deb)
        epochfs = os.path.join(self.root, "usr/bin/epochfs")
        epochctl = os.path.join(self.root, "usr/bin/epochctl")
        self.assertEqual(run([epochfs, "--version"]).stdout.split("\n")[0], "epochfs " + version)

        src = os.path.join(self.tmp, "src")
        os.makedirs(src)
        data = os.urandom(300 * 1024)  # more than one FUSE read
        with open(os.path.join(src, "sample.bin"), "wb") as f:
            f.write(data)
        r = run([epochfs, src, self.mnt, "--ram-cache", "64M"], timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)

        def read():
            with open(os.path.join(self.mnt, "sample.bin"), "rb") as f:
                return f.read() == data

        def worker():
            st = run([epochctl, "status", self.mnt, "--json"], timeout=30)
            return json.loads(st.stdout)["pid"] if st.returncode == 0 else None

        def exe(pid):
            return os.readlink("/proc/%d/exe" % pid)

        self.assertTrue(read())
        old = worker()
        self.assertEqual(exe(old), epochfs)

        self.dpkg("-i", new_deb)  # the upgrade, under the live mount
        self.assertIn(version + "+upgrade1",
                      run(["dpkg", "--root=" + self.root, "-s", "epochfs"]).stdout)
        self.assertTrue(exe(old).endswith(" (deleted)"), "dpkg did not replace the binary")
        self.assertTrue(read(), "the mount stops serving after the upgrade")
        up = run([epochctl, "upgrade", self.mnt], timeout=60)
        self.assertEqual(up.returncode, 0, up.stdout + up.stderr)
        self.assertTrue(wait_for(lambda: worker() not in (None, old), 30))
        new = worker()
        self.assertEqual(exe(new), epochfs, "epochctl upgrade ran the old binary")
        self.assertTrue(read())

        # Reinstalled (dpkg replaces the files again), then the worker crashes:
        # the supervisor's restart starts the binary now on disk as well.
        self.dpkg("-i", new_deb)
        self.assertTrue(exe(new).endswith(" (deleted)"))
        os.kill(new, signal.SIGKILL)
        self.assertTrue(wait_for(lambda: worker() not in (None, new), 30))
        self.assertEqual(exe(worker()), epochfs, "the restart ran the old binary")
        self.assertTrue(read())
        unmount(self.mnt)
        self.assertFalse(is_mounted(self.mnt))

        # Root's first import writes byte-compiled caches beside the modules.
        site = os.path.join(self.root, "usr/lib/python3/dist-packages")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        r = run(["/usr/bin/python3", "-c", "import epochfs.locality"], cwd="/",
                env=dict(env, PYTHONPATH=site))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isdir(os.path.join(site, "epochfs", "__pycache__")))
        self.dpkg("-r", "epochfs")
        left = [os.path.join(d, f) for d, _, files in os.walk(os.path.join(self.root, "usr"))
                for f in files]
        self.assertEqual(left, [], "dpkg -r left files")
        self.assertFalse(os.path.exists(os.path.join(site, "epochfs")))


if __name__ == "__main__":
    itest_support.main(skip_reason())
