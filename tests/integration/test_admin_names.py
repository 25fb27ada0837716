"""Golden test of the names users' dashboards and scripts depend on: every
Prometheus family (name, type, label keys) of `epochctl metrics` and every key
path of `epochctl status --json` and `stats --json`, for a one-node mount with
a disk tier and a registered order, against the checked-in list
tests/integration/golden/admin_names.txt.

The clients' side of the same names: every counter path the clients read
(fusefs/admin_counters.h kCounterPaths, and their Python twins STATS_*/STATUS_*
in tools/python/epochfs/admin.py) must be served too. So a counter renamed on
the daemon's side only, or on the clients' side only, fails here (and CTest
admin-command-names checks the constants against the golden list).

A rename or a removal fails here: make it deliberate by updating the list in the
same commit as docs/METRICS.md and docs/ADMIN.md (regenerate it with
`EPOCHFS_BIN_DIR=build/bin python3 tests/integration/test_admin_names.py --write`).
A family missing from docs/METRICS.md fails too.

Run by ctest with Debian's /usr/bin/python3 (EPOCHFS_BIN_DIR set); exit code
77 means skipped (no epochfs binary or /dev/fuse).
"""

import json
import os
import re
import shutil
import sys
import tempfile
import unittest

import itest_support
from itest_support import mount_skip_reason, run, unmount

BIN_DIR = os.environ.get("EPOCHFS_BIN_DIR", "")
HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "golden", "admin_names.txt")
METRICS_DOC = os.path.join(HERE, "..", "..", "docs", "METRICS.md")
COUNTERS = os.path.join(HERE, "..", "..", "fusefs", "admin_counters.h")


def client_counter_paths():
    """The paths the clients read: C++ kCounterPaths (the one-node ones) and the Python twins
    (all but those admin_counters.h lists as cluster-only)."""
    from epochfs import admin
    with open(COUNTERS) as f:
        text = f.read()
    constants = dict(re.findall(r'inline constexpr const char\* (k\w+) =\s*"([^"]+)";', text))
    listed = re.search(r"\bkCounterPaths\[\] = \{([^}]*)\}", text).group(1)
    cluster = re.search(r"\bkClusterCounterPaths\[\] = \{([^}]*)\}", text).group(1)
    cxx = {constants[n] for n in re.findall(r"k\w+", listed)}
    cluster_paths = {constants[n] for n in re.findall(r"k\w+", cluster)}
    python = {v for k, v in vars(admin).items()
              if re.match(r"STAT(S|US)_", k) and v not in cluster_paths}
    return cxx, python


def key_paths(value, prefix):
    """Every key path of a JSON value; arrays as [] (their first element's keys)."""
    out = set()
    if isinstance(value, dict):
        for k, v in value.items():
            path = prefix + "." + k
            out.add(path)
            out |= key_paths(v, path)
    elif isinstance(value, list) and value:
        out |= key_paths(value[0], prefix + "[]")
    return out


def metric_families(text):
    """name -> 'type {label,keys}' from the Prometheus exposition."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    labels = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ", line)
        name, body = m.group(1), m.group(2) or ""
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
        keys = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', body)) - {"le"}
        labels.setdefault(family, set()).update(keys)
    return {name: "%s {%s}" % (kind, ",".join(sorted(labels.get(name, ()))))
            for name, kind in types.items()}


def current_names():
    tmp = tempfile.mkdtemp(prefix="epochfs-itest-py-%d-" % os.getpid())
    src, mnt, ssd = (os.path.join(tmp, d) for d in ("src", "mnt", "ssd"))
    for d in (os.path.join(src, "class"), mnt, ssd):
        os.makedirs(d)
    for i in range(3):
        with open(os.path.join(src, "class", "f%d" % i), "wb") as f:
            f.write(os.urandom(200 * 1024))
    epochctl = os.path.join(BIN_DIR, "epochctl")
    try:
        r = run([os.path.join(BIN_DIR, "epochfs"), src, mnt, "--cache-dir", ssd,
                 "--ram-cache", "64M"], timeout=60)
        if r.returncode != 0:
            raise AssertionError("mount failed: " + r.stderr)
        # An order, so that the prefetch streams' rows (and status.plan) are in the replies.
        r = run([epochctl, "order", mnt, "--epoch", "0", "--rank", "0", "-"], timeout=30,
                input="".join("class/f%d\n" % i for i in range(3)))
        if r.returncode != 0:
            raise AssertionError("order failed: " + r.stderr)
        for i in range(3):
            with open(os.path.join(mnt, "class", "f%d" % i), "rb") as f:
                f.read()
        lines = []
        for cmd in ("status", "stats"):
            r = run([epochctl, cmd, mnt, "--json"], timeout=30)
            if r.returncode != 0:
                raise AssertionError("%s failed: %s" % (cmd, r.stderr))
            lines += ["json %s" % p for p in sorted(key_paths(json.loads(r.stdout), cmd))]
        r = run([epochctl, "metrics", mnt], timeout=30)
        if r.returncode != 0:
            raise AssertionError("metrics failed: " + r.stderr)
        families = metric_families(r.stdout)
        lines += ["metric %s %s" % (n, families[n]) for n in sorted(families)]
        r = run([epochctl, "stats", mnt, "--schema", "--json"], timeout=30)
        if r.returncode != 0:
            raise AssertionError("stats --schema failed: " + r.stderr)
        return lines, families, json.loads(r.stdout)["metrics"]
    finally:
        unmount(mnt)
        shutil.rmtree(tmp, ignore_errors=True)


def documented(name, doc):
    """Named in full, or as a `_suffix` on a line that names a family sharing its prefix
    (METRICS.md's tables write `epochfs_admin_connections_total`, `_refused_total`, ...)."""
    if name in doc:
        return True
    parts = name.split("_")
    for line in doc.splitlines():
        for k in range(len(parts) - 1, 1, -1):
            prefix, rest = "_".join(parts[:k]), "_".join(parts[k:])
            if "`" + prefix in line and "`_" + rest + "`" in line:
                return True
    return False


class AdminNamesTest(unittest.TestCase):
    def test_names_match_the_golden_list_and_the_docs(self):
        lines, families, schema = current_names()
        with open(GOLDEN) as f:
            golden = [line for line in f.read().splitlines() if line and not line.startswith("#")]
        removed = sorted(set(golden) - set(lines))
        added = sorted(set(lines) - set(golden))
        self.assertEqual((removed, added), ([], []),
                         "the names changed (removed, added); if deliberate, update %s with "
                         "METRICS.md/ADMIN.md in the same commit" % GOLDEN)
        with open(METRICS_DOC) as f:
            doc = f.read()
        undocumented = [n for n in families if not documented(n, doc)]
        self.assertEqual(undocumented, [], "metric families docs/METRICS.md does not name")
        self.check_schema(schema, lines, families)
        self.check_client_paths(lines)

    def check_client_paths(self, lines):
        """Every counter path a client reads by its constant is served."""
        served = {line.split(" ", 1)[1] for line in lines if line.startswith("json ")}
        cxx, python = client_counter_paths()
        self.assertEqual(sorted(cxx - served), [],
                         "fusefs/admin_counters.h names paths the daemon does not serve")
        self.assertEqual(sorted(python - served), [],
                         "tools/python/epochfs/admin.py names paths the daemon does not serve")

    def check_schema(self, schema, lines, families):
        """The daemon's declarations (`stats --schema`) are what the replies and the
        exposition hold: every declared path is a key of its reply, every exported family
        is declared with the exposition's type, every declared one is exported."""
        paths = {line.split(" ", 1)[1] for line in lines if line.startswith("json ")}
        declared = {}
        for m in schema:
            path = m["path"]
            if "[]" not in path:  # table columns: rows exist only with an order
                self.assertIn(path, paths, "declared but not in its reply")
            if m["family"]:
                kind = "gauge" if m["kind"] == "info" else m["kind"]
                self.assertEqual(declared.setdefault(m["family"], kind), kind, m["family"])
                self.assertTrue(m["help"], path)
        exported = {name: spec.split(" ")[0] for name, spec in families.items()}
        self.assertEqual(declared, exported, "declared families vs the exposition's")


if __name__ == "__main__":
    reason = mount_skip_reason(BIN_DIR)
    if reason is None and sys.argv[1:] == ["--write"]:
        names, _, _ = current_names()
        os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
        with open(GOLDEN, "w") as f:
            f.write("# The admin names users depend on (tests/integration/test_admin_names.py):\n"
                    "# JSON key paths of status/stats --json, Prometheus families (type, labels).\n")
            f.write("\n".join(names) + "\n")
        print("wrote %d names to %s" % (len(names), GOLDEN))
        sys.exit(0)
    itest_support.main(reason)
