"""`cluster-lab capacity`: does a lab cluster hold a dataset that fits only all together?

A dataset of F files of 150-400 KiB (D bytes) on a lab of N nodes whose memory is 2/3 D each,
every daemon started with `--ram-cache 50%` (so its RAM tier is 1/3 D: half of its node, not
of the host; checked against the daemon's status); every epoch each node reads the whole tree
in its own shuffled order (one reader per node, all at once, page cache dropped before).
Counted outside the daemons: source bytes (inotify opens x sizes, and the loop device's
counter), link bytes on the nodes' veths, each read's bytes against the source's sha1.
The figures the lab answers for (docs/LAB.md): epoch 1 reads <= 1.01 D from the source,
later epochs none, link bytes (p-1)/p of what the nodes read within 10 %.
With --s3 the dataset is in the lab's object store (object_store.py: rgw on a node of its own
behind a link of --source-bw) and the nodes mount it; counted by rgw itself: epoch 1 <= 1.02
GETs per object for the whole cluster, later epochs none; the peer bytes are what the nodes
received less what the store sent.
Standard library only.
"""

import argparse
import json
import os
import shutil
import tempfile
import time

from epochfs import admin
from . import object_store as lab_object_store, workload as lab_workload
from .lab import Lab
from .down import down
from .util import ArgParser, LabError, log, parse_rate


def daemon_ram_cache(lab, node):
    """(ram_cache, memory_limit) the node's daemon reports."""
    with admin.AdminClient(node["mountpoint"]) as c:
        opts = c.call({"cmd": admin.CMD_STATUS})["options"]
    return opts["ram_cache"], opts["memory_limit"]


def run(files=2000, nodes=4, epochs=2, link=125_000_000, source_bw=100 << 20, workdir="/var/tmp",
        say=log, s3=False):
    """Makes a lab, runs the epochs, removes the lab; returns the figures."""
    root = tempfile.mkdtemp(prefix="epochfs-lab-capacity-", dir=workdir)
    lab = None
    try:
        data = os.path.join(root, "data")
        dataset = lab_workload.make_dataset(data, files)
        d_bytes = sum(s for s, _ in dataset.values())
        memory = 2 * d_bytes // 3
        if memory < (128 << 20):
            raise LabError("a dataset of %.0f MiB is too small: nodes of 2/3 of it would have under "
                           "128 MiB of memory; use --files %d or more"
                           % (d_bytes / 2**20, files * (192 << 20) // d_bytes + 1))
        say("%d files, %.1f MiB; %d nodes of %.1f MiB memory, --ram-cache 50%%" % (
            files, d_bytes / 2**20, nodes, memory / 2**20))
        lab = Lab.up(data, nodes, directory=os.path.join(root, "lab"), link=link, source_bw=source_bw,
                     node_memory=memory, epochfs_options=["--ram-cache", "50%"], s3=s3)
        ram = [daemon_ram_cache(lab, n) for n in lab.nodes]
        if s3:
            counters = lab_object_store.StoreCounters(lab)
        else:
            counters = lab_workload.Counters(lab, lab_workload.source_counter(lab.source["path"]), dataset)
        out = {"files": files, "dataset_bytes": d_bytes, "nodes": nodes, "s3": s3,
               "node_memory": lab.doc["config"]["node_memory"],
               "link_bytes_per_s": link, "source_bw_bytes_per_s": source_bw,
               "ram_cache": [r for r, _ in ram], "memory_limit": [m for _, m in ram], "epochs": []}
        for e in range(1, epochs + 1):
            figures, reads = lab_workload.epoch(lab, counters, dataset, e)
            figures["epoch"] = e
            figures["bad_reads"] = lab_workload.check_reads(reads, dataset)[:20]
            figures["reads"] = sum(len(r) for r in reads.values())
            out["epochs"].append(figures)
            line = (lab_object_store.summary_line("epoch %d" % e, figures, d_bytes, files, nodes) if s3
                    else lab_workload.summary_line("epoch %d" % e, figures, d_bytes, nodes))
            say(line
                + ("; %d WRONG reads" % len(figures["bad_reads"]) if figures["bad_reads"] else ""))
        return out
    finally:
        if lab is not None:
            down(lab.state.dir, verbose=False)
        shutil.rmtree(root, ignore_errors=True)


def main(argv):
    ap = ArgParser(prog="cluster-lab capacity", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--link", default="1gbit", help="each node's link (default %(default)s)")
    ap.add_argument("--source-bw", default="100M", help="the source's shared read limit (default %(default)s)")
    ap.add_argument("--workdir", default="/var/tmp", help="where the dataset and the lab go")
    ap.add_argument("--s3", action="store_true",
                    help="the dataset in the lab's object store (rgw behind a link of --source-bw)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.files < 1 or a.nodes < 2 or a.epochs < 1:
        raise LabError("cluster-lab capacity: need --files >= 1, --nodes >= 2, --epochs >= 1")
    t0 = time.monotonic()
    out = run(a.files, a.nodes, a.epochs, parse_rate(a.link), parse_rate(a.source_bw), a.workdir, s3=a.s3)
    out["wall_seconds"] = time.monotonic() - t0
    line, ok = verdict(out)
    print(json.dumps(out, indent=1) if a.json else line)
    return 0 if ok else 1


def verdict(out):
    """(one line saying which of the lab's capacity targets were met, whether all were)."""
    d, p, epochs = out["dataset_bytes"], out["nodes"], out["epochs"]
    link_ok = all(abs(e["link_bytes"] / ((p - 1) / p * e["bytes_read"]) - 1) < 0.10 for e in epochs)
    if out.get("s3"):
        n = out["files"]
        checks = [("every read right", all(not e["bad_reads"] for e in epochs)),
                  ("epoch 1 GETs <= 1.02 x objects", epochs[0]["source_gets"] <= 1.02 * n),
                  ("later epochs no GETs", all(e["source_gets"] == 0 for e in epochs[1:])),
                  ("peer bytes (p-1)/p of the bytes read within 10 %", link_ok)]
        return ("; ".join("%s: %s" % (name, "yes" if ok else "NO") for name, ok in checks),
                all(ok for _, ok in checks))
    checks = [("every read right", all(not e["bad_reads"] for e in epochs)),
              ("epoch 1 source <= 1.01 D", epochs[0]["source_bytes"] <= 1.01 * d),
              ("later epochs no source reads", all(e["source_bytes"] == 0 for e in epochs[1:])),
              ("link bytes (p-1)/p of the bytes read within 10 %", link_ok)]
    return ("; ".join("%s: %s" % (name, "yes" if ok else "NO") for name, ok in checks),
            all(ok for _, ok in checks))
