"""Installing epochfs like real software (docs/DEPLOY.md), from this build tree:

- `cmake --install BUILD --prefix P` as an unprivileged user writes only under
  P: both binaries, the man pages, the Python user API (not the benchmark
  harness), the systemd unit, the docs; the installed binaries report their
  version and `epochctl model` runs the installed Python copy;
- the systemd unit passes `systemd-analyze verify` (and a broken copy fails);
- the Kubernetes DaemonSet manifest names only options `epochfs --help` has;
- the pyproject builds offline into a venv with the user API only.
The Debian package and an upgrade under a live mount: test_package.py.

Run by ctest with Debian's /usr/bin/python3 (EPOCHFS_BIN_DIR set); exit code
77 means skipped (no epochfs binary, not root).
"""

import os
import shutil
import tempfile
import unittest

import itest_support
from itest_support import run

BIN_DIR = os.environ.get("EPOCHFS_BIN_DIR", "")
BUILD_DIR = os.path.dirname(os.path.abspath(BIN_DIR)) if BIN_DIR else ""
SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHON_DIR = "lib/python3/dist-packages"
USER_API = {"__init__.py", "admin.py", "locality.py", "model.py", "mount_table.py",
            "order_registration.py", "threaded_fetch.py", "torch.py"}


def skip_reason():
    if not os.access(os.path.join(BIN_DIR, "epochfs"), os.X_OK):
        return "epochfs binary not found in %r (EPOCHFS_BIN_DIR)" % BIN_DIR
    if os.geteuid() != 0:
        return "needs root (runs the install as nobody)"
    return None


def installed_once(prefix_parent):
    """`cmake --install` as nobody into PREFIX (owned by nobody). CMake also
    writes BUILD/install_manifest.txt, which a user owns in their own build:
    here a nobody-owned file is bound over it in a private mount namespace.
    nobody keeps CAP_DAC_READ_SEARCH only (the checkout may sit under a
    0700 directory): it may read anything but write only where nobody may."""
    prefix = os.path.join(prefix_parent, "p")
    manifest = os.path.join(BUILD_DIR, "install_manifest.txt")
    open(manifest, "a").close()
    stand_in = os.path.join(prefix_parent, "install_manifest.txt")
    open(stand_in, "w").close()
    for p in (prefix_parent, stand_in):
        os.chown(p, 65534, 65534)
    script = ('mount --bind "$1" "$2" && exec setpriv --reuid=65534 --regid=65534 '
              '--clear-groups --inh-caps=+dac_read_search --ambient-caps=+dac_read_search '
              'cmake --install "$3" --prefix "$4"')
    r = run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
             stand_in, manifest, BUILD_DIR, prefix], cwd="/")
    return prefix, r, stand_in


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="epochfs-itest-py-%d-" % os.getpid())
        os.chmod(cls.tmp, 0o755)
        parent = os.path.join(cls.tmp, "install")
        os.mkdir(parent)
        cls.prefix, cls.install, cls.manifest = installed_once(parent)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.assertEqual(self.install.returncode, 0,
                         "cmake --install as nobody failed:\n%s%s" %
                         (self.install.stdout, self.install.stderr))

    def p(self, rel):
        return os.path.join(self.prefix, rel)

    def test_install_writes_the_layout_under_the_prefix_only(self):
        with open(self.manifest) as f:
            listed = [line for line in f.read().splitlines() if line]
        self.assertTrue(listed)
        for path in listed:
            self.assertTrue(path.startswith(self.prefix + "/"), path)
            self.assertTrue(os.path.isfile(path), path)
        for rel in ("bin/epochfs", "bin/epochctl", "share/man/man1/epochfs.1.gz",
                    "share/man/man1/epochctl.1.gz", "lib/systemd/system/epochfs@.service",
                    "share/doc/epochfs/README.md", "share/doc/epochfs/DEPLOY.md",
                    "share/doc/epochfs/copyright"):
            self.assertIn(self.p(rel), listed)
        api = set(os.listdir(self.p(PYTHON_DIR + "/epochfs")))
        self.assertEqual(api, USER_API, "the benchmark harness must not be installed")

    def test_installed_binaries_report_one_version(self):
        with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
            version = f.read().split("project(epochfs VERSION ", 1)[1].split()[0]
        fs = run([self.p("bin/epochfs"), "--version"])
        self.assertEqual(fs.returncode, 0, fs.stderr)
        lines = fs.stdout.splitlines()
        self.assertEqual(lines[0], "epochfs " + version)
        self.assertRegex(lines[1], r"^libfuse 3\.\d+\.\d+ \(FUSE protocol 7\.\d+\)$")
        self.assertRegex(lines[2], r"^UCX \d+\.\d+")
        ctl = run([self.p("bin/epochctl"), "--version"])
        self.assertEqual((ctl.returncode, ctl.stdout.strip()), (0, "epochctl " + version))
        with open(self.p("lib/systemd/system/epochfs@.service")) as f:
            self.assertIn("ExecStart=%s -f " % self.p("bin/epochfs"), f.read())
        # Written once: no source, script or packaging file repeats it (the
        # docs show sample output).
        tracked = run(["git", "-C", SOURCE_DIR, "ls-files"]).stdout.split()
        for rel in tracked:
            if rel == "CMakeLists.txt" or rel.startswith("docs/") or rel.endswith(".md"):
                continue
            path = os.path.join(SOURCE_DIR, rel)
            if not os.path.isfile(path) or os.path.getsize(path) > 1 << 20:
                continue
            with open(path, "rb") as f:
                self.assertNotIn(b'"' + version.encode() + b'"', f.read(),
                                 "%s repeats the version: take it from CMake" % rel)

    def test_man_pages_render_and_document_every_option(self):
        for page in ("epochfs", "epochctl"):
            r = run(["man", "--warnings", "-l", self.p("share/man/man1/%s.1.gz" % page)],
                    env=dict(os.environ, MANPAGER="cat", MANWIDTH="80"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr.strip(), "")
            self.assertIn(page.upper() + "(1)", r.stdout)
        check = run([os.path.join(SOURCE_DIR, "tools", "check", "man-pages"), BIN_DIR,
                     os.path.join(SOURCE_DIR, "docs", "man")])
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

    def test_python_api_and_model_come_from_the_installed_files(self):
        site = self.p(PYTHON_DIR)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EPOCHFS_PYTHONPATH")}
        r = run(["/usr/bin/python3", "-c",
                 "import epochfs, epochfs.locality, epochfs.model; print(epochfs.__file__)"],
                cwd="/", env=dict(env, PYTHONPATH=site, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.strip().startswith(site), r.stdout)
        # `epochctl model` from the installed binary runs the installed copy:
        # a marker in that copy (inside this test's prefix) shows it.
        model = os.path.join(site, "epochfs", "model.py")
        with open(model, "a") as f:
            f.write("\nprint('INSTALLED-COPY')\n")
        r = run([self.p("bin/epochctl"), "model", "--help"], cwd="/",
                env=dict(env, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("INSTALLED-COPY", r.stdout)
        self.assertIn("usage: epochctl model", r.stdout)

    def test_slurm_hook_imports_the_mount_table_of_its_prefix(self):
        # PREFIX/share/epochfs/slurm/epochfs_slurm.py reads mounts with
        # epochfs.mount_table from PREFIX's Python directory, not the checkout's.
        hook = self.p("share/epochfs/slurm/epochfs_slurm.py")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SLURM_JOB_ID")}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        r = run(["/usr/bin/python3", "-c", "import runpy, sys; "
                 "print(runpy.run_path(sys.argv[1])['mount_table'].__file__)", hook],
                cwd="/", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.strip().startswith(self.p(PYTHON_DIR) + "/"), r.stdout)
        r = run(["/usr/bin/python3", hook, "prolog"], cwd="/", env=env)
        self.assertEqual(r.returncode, 2, r.stderr)  # imported; refuses to run outside slurmd
        self.assertIn("usage: epochfs_slurm.py", r.stderr)

    def test_systemd_unit_verifies_and_a_broken_one_does_not(self):
        if shutil.which("systemd-analyze") is None:
            self.fail("systemd-analyze missing (tools/build installs systemd)")
        units = os.path.join(self.tmp, "units")
        os.makedirs(units, exist_ok=True)
        with open(self.p("lib/systemd/system/epochfs@.service")) as f:
            text = f.read()
        for name, body in (("epochfs@.service", text),
                           ("broken@.service", text.replace("Type=notify", "Type=notanytype")
                            .replace("KillMode=mixed", "KillMode=bogus"))):
            with open(os.path.join(units, name), "w") as f:
                f.write(body)
        good = run(["systemd-analyze", "verify", "--man=no",
                    os.path.join(units, "epochfs@dataset.service")], cwd=units)
        self.assertEqual(good.returncode, 0, good.stdout + good.stderr)
        self.assertEqual(good.stderr.strip(), "")
        bad = run(["systemd-analyze", "verify", "--man=no",
                   os.path.join(units, "broken@dataset.service")], cwd=units)
        self.assertTrue(bad.returncode != 0 or bad.stderr.strip(), "the check cannot fail")

    def test_daemonset_names_only_existing_options(self):
        import yaml
        with open(os.path.join(SOURCE_DIR, "docs", "deploy", "epochfs-daemonset.yaml")) as f:
            manifest = yaml.safe_load(f)
        self.assertEqual(manifest["kind"], "DaemonSet")
        container = manifest["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(container["command"], ["/usr/bin/epochfs"])
        help_text = run([os.path.join(BIN_DIR, "epochfs"), "--help"]).stdout
        known = {tok.split("=")[0] for line in help_text.splitlines()
                 for tok in line.replace(",", " ").split() if tok.startswith("-")}
        args = container["args"]
        options = [a.split("=")[0] for a in args if a.startswith("-")]
        self.assertIn("--hostfile", options)
        for opt in options:
            self.assertIn(opt, known, "the DaemonSet passes %s, which epochfs lacks" % opt)
        positional = [a for a in args if not a.startswith("-")]
        self.assertEqual(len(positional), 2, args)
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        self.assertIn(positional[0], mounts)  # the source is a volume
        self.assertTrue(any(positional[1].startswith(m + "/") for m in mounts))
        self.assertTrue(manifest["spec"]["template"]["spec"]["hostNetwork"])

    def test_pyproject_installs_the_user_api_into_a_venv(self):
        work = os.path.join(self.tmp, "py")
        shutil.copytree(os.path.join(SOURCE_DIR, "tools", "python"),
                        os.path.join(work, "tools", "python"),
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        shutil.copy(os.path.join(SOURCE_DIR, "CMakeLists.txt"), work)
        venv = os.path.join(work, "venv")
        # Debian's python3-wheel (bdist_wheel) comes in through the system site.
        r = run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv])
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run([os.path.join(venv, "bin", "pip"), "install", "--no-build-isolation",
                 "--no-index", "--no-deps", os.path.join(work, "tools", "python")],
                cwd=work, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = run([os.path.join(venv, "bin", "python"), "-c",
                 "import epochfs, importlib.metadata as m, os; "
                 "print(os.path.dirname(epochfs.__file__)); print(m.version('epochfs'))"],
                cwd="/", env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        self.assertEqual(r.returncode, 0, r.stderr)
        where, version = r.stdout.split()
        self.assertTrue(where.startswith(venv), where)
        modules = set(os.listdir(where)) - {"__pycache__"}
        self.assertEqual(modules, USER_API, "the benchmark harness (bench/, lab/) must not be installed")
        self.assertEqual(version, run([self.p("bin/epochctl"), "--version"]).stdout.split()[1])


if __name__ == "__main__":
    itest_support.main(skip_reason())
