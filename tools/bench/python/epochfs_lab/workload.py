"""Workloads on the cluster lab, counted from outside the daemons: a dataset of files larger
than one FUSE read, epochs in which every node reads the whole tree in its own shuffled order
(epochfs_lab.reader inside each node), and the counters an epoch is judged by:

- source reads: inotify IN_OPEN on every directory of the source (the daemon opens a source
  file for each chunk it reads; every file here is one chunk, so bytes = opens x size), and
  the loop device's own read counter (metadata included);
- link bytes: each node's veth, on the bridge side (lab_net.link_counters).

Standard library only.
"""

import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from . import net as lab_net, node as lab_node, source as lab_source
from epochfs_bench.capacity_bench import OpenCounter
from epochfs_bench.locality_bench import _drop_caches as drop_caches
from .util import PYTHON_DIR

READER = [sys.executable if os.path.exists(sys.executable) else "/usr/bin/python3", "-m", "epochfs_lab.reader"]


def make_dataset(root, files, min_kib=150, max_kib=400, classes=16, seed=2026):
    """`files` random files of [min_kib, max_kib] KiB in `classes` class directories;
    returns {relative path: (size, sha1)}."""
    rng = random.Random(seed)
    out = {}
    for c in range(classes):
        os.makedirs(os.path.join(root, "class%02d" % c), exist_ok=True)
    for i in range(files):
        rel = os.path.join("class%02d" % (i % classes), "img%06d.bin" % i)
        data = rng.randbytes(rng.randint(min_kib << 10, max_kib << 10))
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
        out[rel] = (len(data), hashlib.sha1(data).hexdigest())
    return out


def source_counter(source_path):
    """An inotify counter of opens on every directory of the source tree."""
    dirs = [d for d, _, _ in os.walk(source_path)]
    return OpenCounter(dirs)


class Counters:
    """Snapshot of the outside counters; `since(before)` gives one epoch's figures."""

    def __init__(self, lab, opens, dataset):
        self.lab, self.opens, self.dataset = lab, opens, dataset

    def begin(self):
        """At an epoch's start: the opens so far are not the epoch's."""
        self.opens.take()

    def snapshot(self):
        return {"links": {n["name"]: lab_net.link_counters(n["host_link"]) for n in self.lab.nodes},
                "device": lab_source.device_read_bytes(self.lab.source["device"]),
                "time": time.monotonic()}

    def since(self, before):
        after = self.snapshot()
        src = self.lab.source["path"]
        opens = {os.path.relpath(p, src): n for p, n in self.opens.take().items()}
        to_node = {k: after["links"][k]["to_node"] - v["to_node"] for k, v in before["links"].items()}
        from_node = {k: after["links"][k]["from_node"] - v["from_node"] for k, v in before["links"].items()}
        return {"source_bytes": sum(self.dataset[p][0] * n for p, n in opens.items() if p in self.dataset),
                "source_opens": sum(opens.values()),
                "files_read_twice": sum(1 for n in opens.values() if n > 1),
                "device_bytes": after["device"] - before["device"],
                "link_to_nodes": to_node, "link_from_nodes": from_node,
                "link_bytes": sum(to_node.values()), "seconds": after["time"] - before["time"]}


def shuffled(paths, seed):
    order = sorted(paths)
    random.Random(seed).shuffle(order)
    return order


def start_readers(lab, orders, threads=1, until=None):
    """Starts one reader per node in `orders` ({node name: [paths]}), its records going to a
    file (a pipe would stall a reader nobody drains while a fault is under way); returns the
    handles."""
    handles = []
    for name, order in orders.items():
        node = lab.node(name)
        fd, listing = tempfile.mkstemp(prefix="lab-order-", dir=lab.state.dir)
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(order) + "\n")
        argv = READER + ["--root", node["mountpoint"], "--list", listing, "--threads", str(threads)]
        if until:
            argv += ["--until", until]
        env = {"PYTHONPATH": PYTHON_DIR}
        out = tempfile.TemporaryFile(mode="w+", dir=lab.state.dir)
        p = lab_node.popen(node, argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        handles.append((name, p, listing, out))
    return handles


def collect(handles, timeout=600, done=None):
    """{node name: [read records]} once every reader has finished; raises if one failed.
    `done` (a dict), if given, gets each reader's last line ({"done": true, ...})."""
    out, deadline = {}, time.monotonic() + timeout
    for name, p, listing, output in handles:
        try:
            p.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise RuntimeError("the reader on %s did not finish within %d s" % (name, timeout))
        finally:
            os.unlink(listing)
        output.seek(0)
        lines = output.read().splitlines()
        output.close()
        records = [json.loads(line) for line in lines if line.startswith("{")]
        if p.returncode != 0 or not records or not records[-1].get("done"):
            raise RuntimeError("the reader on %s failed (exit %s): %s" % (name, p.returncode, "\n".join(lines[-20:])))
        out[name] = records[:-1]
        if done is not None:
            done[name] = records[-1]
    return out


def check_reads(reads, dataset):
    """Reads that returned wrong bytes or an error: [(node, path, what)]."""
    bad = []
    for name, records in reads.items():
        for r in records:
            want = dataset.get(r["path"])
            if "error" in r:
                bad.append((name, r["path"], r["error"]))
            elif want is None or r["sha1"] != want[1] or r["bytes"] != want[0]:
                bad.append((name, r["path"], "wrong bytes (%d B, sha1 %s)" % (r["bytes"], r["sha1"])))
    return bad


def epoch(lab, counters, dataset, epoch_no, nodes=None, threads=1, seed=0, during=None):
    """Every node in `nodes` (default all) reads the whole tree in its own order, the page
    cache dropped first; returns (counters of the epoch, reads). With `during` (a function,
    e.g. a fault and its repair) the readers go round their lists until it has returned and
    their first round is done."""
    nodes = nodes or [n["name"] for n in lab.nodes]
    orders = {name: shuffled(dataset, seed * 1000 + epoch_no * 100 + i) for i, name in enumerate(nodes)}
    stop = os.path.join(lab.state.dir, "epoch-%d.stop" % epoch_no) if during else None
    drop_caches()
    counters.begin()
    before = counters.snapshot()
    handles = start_readers(lab, orders, threads, until=stop)
    failure = None
    if during:
        try:
            during()
        except BaseException as e:  # the readers still finish before it is raised
            failure = e
        open(stop, "w").close()
    try:
        reads = collect(handles)
    finally:
        if stop:
            os.unlink(stop)
    if failure:
        raise failure
    figures = counters.since(before)
    figures["bytes_read"] = sum(r.get("bytes", 0) for rs in reads.values() for r in rs)
    figures["max_read_seconds"] = max(r["seconds"] for rs in reads.values() for r in rs)
    return figures, reads


def summary_line(label, f, dataset_bytes, nodes):
    p = nodes
    expected = (p - 1) / p * f["bytes_read"]
    return ("%s: %.1f s, read %.0f MiB, source %.3f D (%d opens, %d files twice; device %.3f D), "
            "link %.0f MiB = %.3f of (p-1)/p x read, slowest read %.2f s" % (
                label, f["seconds"], f["bytes_read"] / 2**20, f["source_bytes"] / dataset_bytes,
                f["source_opens"], f["files_read_twice"], f["device_bytes"] / dataset_bytes,
                f["link_bytes"] / 2**20, f["link_bytes"] / expected if expected else 0,
                f["max_read_seconds"]))
