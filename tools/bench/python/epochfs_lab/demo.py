"""`tools/demo --cluster`: the demo's main job on N lab nodes (docs/LAB.md). The dataset in
--data goes onto a lab's shared, throttled source; every node reads the whole tree once per
epoch in its own shuffled order, as a training job's data loaders would; for each epoch it
prints what came from the source (inotify: opens, files read twice) and the bytes each node's
link carried in and out, and checks every read's SHA-1 against the source. The lab is taken
down at the end, also on failure or Ctrl-C. Standard library only.
"""

import hashlib
import os
import signal
import sys

from . import workload as lab_workload
from .lab import Lab
from .down import down
from .util import ArgParser, LabError, parse_rate


def dataset_of(root):
    """{relative path: (size, sha1)} of the files under root."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                data = f.read()
            out[os.path.relpath(os.path.join(d, n), root)] = (len(data), hashlib.sha1(data).hexdigest())
    return out


def report(e, f, dataset, nodes, bad):
    d = sum(s for s, _ in dataset.values())
    print("epoch %d: %d nodes x %d files, %.1f MB read in %.1f s; %d wrong reads" % (
        e, len(nodes), len(dataset), f["bytes_read"] / 1e6, f["seconds"], len(bad)))
    print("   from the source   %8.1f MB = %.3f x the dataset (%d opens for %d files, %d files twice)" % (
        f["source_bytes"] / 1e6, f["source_bytes"] / d, f["source_opens"], len(dataset), f["files_read_twice"]))
    for n in nodes:
        print("   %s's link        in %8.1f MB, out %8.1f MB" % (
            n, f["link_to_nodes"][n] / 1e6, f["link_from_nodes"][n] / 1e6))
    expected = (len(nodes) - 1) / len(nodes) * f["bytes_read"]
    print("   all links          %8.1f MB = %.2f x (p-1)/p of the bytes read" % (
        f["link_bytes"] / 1e6, f["link_bytes"] / expected if expected else 0))


def main(argv=None):
    ap = ArgParser(prog="epochfs_lab.demo", description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--dir", required=True, help="the lab's directory (removed at the end)")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--link", default="1gbit")
    ap.add_argument("--source-bw", default="100M")
    ap.add_argument("--bin", default=None)
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    lab = None
    try:
        dataset = dataset_of(a.data)
        print("== lab: %d nodes, %s links, source %s shared (tools/bench/cluster-lab up --dir %s)" % (
            a.nodes, a.link, a.source_bw, a.dir), flush=True)
        lab = Lab.up(a.data, a.nodes, directory=a.dir, link=parse_rate(a.link),
                     source_bw=parse_rate(a.source_bw), bindir=a.bin)
        counters = lab_workload.Counters(lab, lab_workload.source_counter(lab.source["path"]), dataset)
        names = [n["name"] for n in lab.nodes]
        ok = True
        for e in range(1, a.epochs + 1):
            figures, reads = lab_workload.epoch(lab, counters, dataset, e)
            bad = lab_workload.check_reads(reads, dataset)
            report(e, figures, dataset, names, bad)
            ok = ok and not bad
        return 0 if ok else 1
    except LabError as e:
        print("demo --cluster: %s" % e, file=sys.stderr)
        return 2
    finally:
        if lab is not None:
            print("== cluster-lab down --dir %s" % a.dir, flush=True)
            down(lab.state.dir, verbose=False)


if __name__ == "__main__":
    sys.exit(main())
