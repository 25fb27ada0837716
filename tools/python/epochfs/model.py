"""The seed paper's performance model of data loading, and a balls-in-bins simulator of
placement + locality-aware balancing (Yang & Cong, HiPC 2019). See docs/MODEL.md.

Analytical model (``Inputs``, ``loading_time``, ``epoch_time``), per epoch of D samples on p
nodes:
    training               D / (p V)                        V: samples/s one node trains
    no cache               D/R + D/(p U)                    R: samples/s the source delivers
                                                            (aggregate), U: samples/s one node
                                                            decodes/augments
    distributed cache      (1-a) D/R + a D/Rc (p-1)/p       a: cached fraction
    locality-aware         (1-a) D/R + a D b/Rb             b: balancing fraction
    epoch time = max(training, loading)       (loading overlaps training in the DataLoader)
Rc = Rb = p N, the aggregate network rate (N: samples/s one node receives from peers).

Simulator (``simulate``): every sample of a global batch has one owner node drawn uniformly
(rendezvous hashing with equal weights is uniform); each node's count is compared with its
capacity in the batch (learners on it x local batch); what is over capacity must move
(`moved_samples`, the minimum any assignment reaches and what epochfs.locality moves). The
"imbalance" of a batch is moved / global batch = the balancing fraction b; the paper's medians
(6.9 %, 4.8 %, 3.4 % for local batch 32/64/128) are medians of that over batches with one
learner per bin. A plain distributed cache reads position j on learner j mod p, so a fraction
(P-1)/P of cached reads is remote (P nodes).

Job start (``JobStart``, ``job_start``): every node needs the source's namespace snapshot of F
files. Walked on every node, the p walks share the metadata server (M calls/s, c calls per file):
    walk per node          F / min(w, M/(p c))              w: files/s one node walks alone
    walk once + tree       F / min(w, M/c) + transfer       the snapshot (F B bytes) sent down a
    transfer               f S/L + (d-1) f s/L + d h        tree of fan-out k and depth d, in
                                                            chunks of s bytes (f = min(k, p-1),
                                                            L: link bytes/s, h: s per hop)
with p F c against F c metadata calls; s = S (no chunks) is store and forward, d f S/L.

numpy for the simulator; matplotlib only for the plots.
"""

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, replace

from .locality import greedy_transfers

PAPER_IMBALANCE = {32: 6.9, 64: 4.8, 128: 3.4}  # % of the batch, median
PAPER_SPEEDUP_256 = 30.0                          # "more than 30x faster data loading"

STRATEGIES = ("nocache", "cache", "locality")
LABELS = {"nocache": "no cache (source + decode)", "cache": "distributed cache",
          "locality": "locality-aware"}


@dataclass
class Inputs:
    """Model inputs; rates in samples per second. Defaults: an illustrative ImageNet-1K job
    (1.28 M files of ~110 KB) on 4-GPU nodes; measure your own (docs/MODEL.md)."""
    D: float = 1.28e6     # samples per epoch
    p: int = 256          # nodes
    V: float = 1600.0     # training rate of one node (4 GPUs x ~400 img/s ResNet-50)
    R: float = 10000.0    # source (shared file system) rate, whole job (~1.1 GB/s)
    U: float = 2500.0     # decode + augment rate of one node
    a: float = 1.0        # cached fraction of the dataset
    N: float = 3000.0     # peer receive rate of one node (315 MiB/s of 110 KB files:
                          # tools/bench/cluster-bench on this VM, docs/CLUSTER.md)
    b: float = 0.035      # balancing fraction (simulate() gives it)


def loading_time(m, strategy, decode_all=False):
    """Seconds of loading per epoch for 'nocache', 'cache' or 'locality' (the paper's
    formulas; decode_all adds the decode term D/(pU) to the two cached strategies too)."""
    net = m.p * m.N
    decode = m.D / (m.p * m.U)
    if strategy == "nocache":
        return m.D / m.R + decode
    extra = decode if decode_all else 0.0
    if strategy == "cache":
        return (1 - m.a) * m.D / m.R + m.a * m.D / net * (m.p - 1) / m.p + extra
    if strategy == "locality":
        return (1 - m.a) * m.D / m.R + m.a * m.D * m.b / net + extra
    raise ValueError("unknown strategy %r" % (strategy,))


def training_time(m):
    return m.D / (m.p * m.V)


def epoch_time(m, strategy):
    return max(training_time(m), loading_time(m, strategy))


# --- job start ------------------------------------------------------------------------------

@dataclass
class JobStart:
    """Job-start inputs (docs/MODEL.md "Job start: one walk per job"). w and c are measured on
    one machine (docs/PERFORMANCE.md, docs/SEMANTICS.md); M, L, k, s and h are assumptions."""
    F: float = 1.28e6         # files in the source tree (ImageNet-1K)
    c: float = 1.05           # metadata calls per file (a mount of 2,000 files: 2,409, of
                              # which 308 the daemon's own start-up)
    M: float = 2e5            # metadata server capacity, calls/s, all walkers together
    w: float = 1e6 / 5.6      # files/s one node walks alone (a mount of 1 M files: 5.6 s)
    B: float = 116.0          # snapshot bytes per file on the wire (the namespace image:
                              # 93 a node + an ImageNet-like 23-byte name)
    L: float = 12.5e9         # bytes/s one node's link sends (100 Gb/s)
    k: int = 4                # tree fan-out: children each node sends the snapshot to
    s: float = 4 * 2 ** 20    # chunk, bytes (0: the whole snapshot, store and forward)
    h: float = 1e-3           # seconds per hop (connection set-up, first byte)


def tree_depth(p, k):
    """Levels below the root of a tree of fan-out k holding p nodes: the smallest d with
    1 + k + ... + k^d >= p (ceil(log_k p) or one less)."""
    depth, reached, level = 0, 1, 1
    while reached < p:
        level *= k
        reached += level
        depth += 1
    return depth


def walk_seconds(j, walkers=1):
    """Seconds of one walk of F files while `walkers` nodes walk the same metadata server."""
    return j.F / (min(j.w, j.M / (walkers * j.c)) if j.c > 0 else j.w)


def tree_seconds(j, p):
    """Seconds until the last of p nodes holds the snapshot, sent from the root down a tree
    of fan-out k in chunks: the root's link sends it f = min(k, p-1) times, and each further
    level adds one chunk sent f times; every level adds a hop."""
    if p <= 1:
        return 0.0
    snapshot = j.F * j.B
    chunk = min(j.s, snapshot) if j.s > 0 else snapshot
    fan, depth = min(j.k, p - 1), tree_depth(p, j.k)
    return fan * snapshot / j.L + (depth - 1) * fan * chunk / j.L + depth * j.h


def job_start(j, p):
    """(walk per node s, walk once + tree s, tree s, depth, calls per node, calls once) at p
    nodes."""
    tree = tree_seconds(j, p)
    return (walk_seconds(j, p), walk_seconds(j) + tree, tree, tree_depth(p, j.k),
            p * j.F * j.c, j.F * j.c)


def print_job_start(j, node_counts, out=None):
    w = (out or sys.stdout).write
    w("| nodes | walk per node s | walk once + tree s | of which tree s | tree depth |"
      " per node / once | metadata calls, walk per node | metadata calls, walk once |\n")
    w("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for p in node_counts:
        per_node, once, tree, depth, calls_p, calls_1 = job_start(j, p)
        w("| %d | %.1f | %.1f | %.3f | %d | %.1fx | %s | %s |\n"
          % (p, per_node, once, tree, depth, per_node / once, format(round(calls_p), ","),
             format(round(calls_1), ",")))


def plot_job_start(j, node_counts, path, title, m=None):
    """Both job-start curves against nodes; with `m` (Inputs) one epoch's training D/(pV)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    rows = [job_start(j, p) for p in node_counts]
    ax.plot(node_counts, [r[0] for r in rows], "o-", label="walk per node")
    ax.plot(node_counts, [r[1] for r in rows], "s-",
            label="walk once + tree (fan-out %d)" % j.k)
    ax.plot(node_counts[1:], [r[2] for r in rows[1:]], "s:", color="C1", alpha=0.6,
            label="of which the tree")
    if m is not None:
        ax.plot(node_counts, [training_time(replace(m, p=p)) for p in node_counts], "k--",
                label="one epoch's training D/(pV)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(node_counts[::2], [str(p) for p in node_counts[::2]])
    ax.set_xlabel("nodes")
    ax.set_ylabel("job start (s): every node holds the namespace")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 0.12))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- simulator ------------------------------------------------------------------------------

def moved_samples(counts, capacity):
    """Samples over capacity (they must move) summed over the last axis; counts: per-node
    owned samples of a batch (numpy array, any leading shape)."""
    import numpy as np
    return np.maximum(np.asarray(counts) - capacity, 0).sum(axis=-1)


@dataclass
class SimResult:
    learners: int
    per_node: int
    local_batch: int
    batches: int
    median_b: float       # median balancing fraction (moved / global batch)
    mean_b: float
    p90_b: float
    plain_remote: float   # fraction of cached reads a plain distributed cache reads remotely
    median_transfers: float
    max_transfers: int
    seconds: float

    @property
    def nodes(self):
        return self.learners // self.per_node

    @property
    def reduction(self):
        """Communication volume of a plain distributed cache / locality-aware."""
        return self.plain_remote / self.mean_b if self.mean_b else float("inf")


def simulate(learners, local_batch, per_node=1, batches=200, seed=0, transfer_batches=20):
    """Balls in bins: `batches` global batches of learners*local_batch samples, owners uniform
    over learners/per_node nodes. Returns a SimResult."""
    import numpy as np
    t0 = time.perf_counter()
    if learners % per_node:
        raise ValueError("learners must be a multiple of per_node")
    nodes = learners // per_node
    g = learners * local_batch
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(g, [1.0 / nodes] * nodes, size=batches)
    b = moved_samples(counts, per_node * local_batch) / g
    # Plain: reader of position j is learner j % p; an owner uniform over nodes is the
    # reader's node with probability 1/nodes.
    plain_local = rng.binomial(g, 1.0 / nodes, size=batches) / g
    transfers = []
    for row in counts[:transfer_batches]:
        # Node-level excess split evenly over the node's learners (as the sampler deals).
        excess = []
        for c in row.tolist():
            base, extra = divmod(c, per_node)
            excess.extend((base + (1 if k < extra else 0)) - local_batch for k in range(per_node))
        transfers.append(len(greedy_transfers(excess)))
    return SimResult(learners, per_node, local_batch, batches, float(np.median(b)),
                     float(b.mean()), float(np.percentile(b, 90)), float(1 - plain_local.mean()),
                     float(np.median(transfers)) if transfers else 0.0,
                     max(transfers) if transfers else 0, time.perf_counter() - t0)


def median_imbalance(local_batch, learners=64, batches=200, seed=0, per_node=1):
    """Median balancing fraction (the paper's "imbalance", a fraction of the global batch)."""
    return simulate(learners, local_batch, per_node, batches, seed, transfer_batches=0).median_b


# --- reports --------------------------------------------------------------------------------

def paper_report(out=None, seed=0):
    t0 = time.perf_counter()
    w = (out or sys.stdout).write
    w("Median imbalance (samples that must move / global batch), one learner per bin,\n"
      "median over 200 global batches per world size:\n\n")
    sizes = (4, 16, 64, 256, 1024)
    w("| local batch | paper | " + " | ".join("%d learners" % s for s in sizes) + " | closed form |\n")
    w("|---:|---:|" + "---:|" * len(sizes) + "---:|\n")
    for lb, paper in PAPER_IMBALANCE.items():
        cells = [100 * median_imbalance(lb, s, 200, seed) for s in sizes]
        w("| %d | %.1f %% | %s | %.1f %% |\n" % (lb, paper, " | ".join("%.1f %%" % c for c in cells),
                                                 100 / math.sqrt(2 * math.pi * lb)))
    w("\n256 nodes x 4 learners (1,024 learners), communication volume per epoch as a fraction\n"
      "of the cached bytes read (balancing fraction b, 200 global batches):\n\n")
    w("| local batch | plain distributed cache | locality, per node (4 learners) | reduction |"
      " locality, per learner | reduction | transfers/batch (median, max; p-1 = 1023) |\n")
    w("|---:|---:|---:|---:|---:|---:|---:|\n")
    for lb in PAPER_IMBALANCE:
        node = simulate(1024, lb, per_node=4, batches=200, seed=seed)
        lrn = simulate(1024, lb, per_node=1, batches=200, seed=seed, transfer_batches=0)
        lrn_red = node.plain_remote / lrn.mean_b
        w("| %d | %.2f %% | %.2f %% | %.0fx | %.2f %% | %.0fx | %.0f, %d |\n"
          % (lb, 100 * node.plain_remote, 100 * node.mean_b, node.reduction, 100 * lrn.mean_b,
             lrn_red, node.median_transfers, node.max_transfers))
    w("\npaper: > %.0fx faster data loading for ImageNet-1K at 256 nodes / 1,024 learners.\n"
      % PAPER_SPEEDUP_256)
    w("(simulated in %.1f s)\n" % (time.perf_counter() - t0))


def sweep(m, node_counts, local_batch, per_node, cache_per_node=None, seed=0, decode_all=False):
    """Rows (nodes, b, training, loading per strategy) with b simulated per node count and,
    when cache_per_node (samples) is given, a = min(1, nodes * cache_per_node / D)."""
    rows = []
    for p in node_counts:
        b = simulate(p * per_node, local_batch, per_node, batches=100, seed=seed,
                     transfer_batches=0).mean_b if p > 1 else 0.0
        a = m.a if cache_per_node is None else min(1.0, p * cache_per_node / m.D)
        mp = replace(m, p=p, b=b, a=a)
        rows.append((p, a, b, training_time(mp),
                     {s: loading_time(mp, s, decode_all) for s in STRATEGIES}))
    return rows


def print_sweep(rows, out=None):
    w = (out or sys.stdout).write
    w("| nodes | cached a | b | training s | " + " | ".join(LABELS[s] + " s" for s in STRATEGIES)
      + " | cache / locality |\n")
    w("|---:|---:|---:|---:|" + "---:|" * len(STRATEGIES) + "---:|\n")
    for p, a, b, tr, lt in rows:
        ratio = "%.1fx" % (lt["cache"] / lt["locality"]) if lt["locality"] else "-"
        w("| %d | %.2f | %.2f %% | %.1f | %s | %s |\n"
          % (p, a, 100 * b, tr, " | ".join("%.2f" % lt[s] for s in STRATEGIES), ratio))


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ps = [r[0] for r in rows]
    for s, style in zip(STRATEGIES, ("o-", "s-", "^-")):
        ax.plot(ps, [r[4][s] for r in rows], style, label=LABELS[s])
    ax.plot(ps, [r[3] for r in rows], "k--", label="training D/(pV)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("nodes (4 learners each)")
    ax.set_ylabel("loading time per epoch (s)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None, prog="epochfs-model"):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("--paper", action="store_true", help="print the paper reproduction tables")
    ap.add_argument("--png", metavar="DIR", help="write loading-time-vs-nodes.png and job-start-vs-nodes.png into DIR")
    d = Inputs()
    for name, help_ in (("D", "samples per epoch"), ("V", "training samples/s per node"),
                        ("R", "source samples/s (aggregate)"), ("U", "decode samples/s per node"),
                        ("a", "cached fraction (used with --cache-per-node 0)"),
                        ("N", "peer receive samples/s per node")):
        ap.add_argument("--" + name, type=float, default=getattr(d, name),
                        help="%s (default %g)" % (help_, getattr(d, name)))
    ap.add_argument("--cache-per-node", type=float, default=80000.0,
                    help="samples one node caches, a = min(1, p*this/D) (default 80000, ~9 GB of"
                         " 110 KB files); 0: use --a for every node count")
    ap.add_argument("--decode-all", action="store_true",
                    help="add the decode term D/(pU) to the cached strategies too")
    ap.add_argument("--local-batch", type=int, default=32)
    ap.add_argument("--per-node", type=int, default=4, help="learners per node (default 4)")
    ap.add_argument("--max-nodes", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    js = JobStart()
    ap.add_argument("--job-start", action="store_true",
                    help="also print job-start time (namespace snapshot on every node) for 1, 2,"
                         " 4, ... nodes up to max(1024, --max-nodes): walk per node against walk"
                         " once + tree")
    ap.add_argument("--files", type=float, help="files in the source tree (default: --D)")
    for name, field, help_ in (
            ("--calls-per-file", "c", "metadata calls per file of a walk"),
            ("--mds-calls-per-s", "M", "metadata server capacity, calls/s, all walkers together"),
            ("--walk-files-per-s", "w", "files/s one node walks alone"),
            ("--snapshot-bytes-per-file", "B", "namespace snapshot bytes per file on the wire"),
            ("--link-bytes-per-s", "L", "bytes/s one node's link sends"),
            ("--snapshot-chunk", "s", "bytes the tree forwards at a time; 0: the whole snapshot"
                                      " (store and forward)"),
            ("--hop-seconds", "h", "seconds each tree level adds besides the bytes")):
        ap.add_argument(name, type=float, default=getattr(js, field),
                        help="%s (default %g)" % (help_, getattr(js, field)))
    ap.add_argument("--fan-out", type=int, default=js.k,
                    help="children each node sends the snapshot to (default %d)" % js.k)
    args = ap.parse_args(argv)
    if args.fan_out < 1:
        ap.error("--fan-out must be at least 1")
    for name in ("mds_calls_per_s", "walk_files_per_s", "link_bytes_per_s"):
        if getattr(args, name) <= 0:
            ap.error("--%s must be positive" % name.replace("_", "-"))
    if args.paper:
        paper_report(seed=args.seed)
        print()
    m = Inputs(D=args.D, V=args.V, R=args.R, U=args.U, a=args.a, N=args.N)
    counts, p = [], 1
    while p <= args.max_nodes:
        counts.append(p)
        p *= 2
    rows = sweep(m, counts, args.local_batch, args.per_node, args.cache_per_node or None, args.seed,
                 args.decode_all)
    print("Loading time per epoch (analytical model, b simulated), local batch %d, %d learners"
          " per node; D=%g V=%g R=%g U=%g N=%g:\n" % (args.local_batch, args.per_node, m.D, m.V,
                                                      m.R, m.U, m.N))
    print_sweep(rows)
    j = JobStart(F=m.D if args.files is None else args.files, c=args.calls_per_file,
                 M=args.mds_calls_per_s, w=args.walk_files_per_s, B=args.snapshot_bytes_per_file,
                 L=args.link_bytes_per_s, k=args.fan_out, s=args.snapshot_chunk, h=args.hop_seconds)
    start_counts, p = [], 1
    while p <= max(1024, args.max_nodes):
        start_counts.append(p)
        p *= 2
    if args.job_start:
        print("\nJob start: seconds until every node holds the namespace snapshot, walked on every"
              " node or walked once and sent down a tree (analytical model); F=%g c=%g M=%g w=%g"
              " B=%g L=%g k=%d s=%g h=%g:\n" % (j.F, j.c, j.M, j.w, j.B, j.L, j.k, j.s, j.h))
        print_job_start(j, start_counts)
    if args.png:
        os.makedirs(args.png, exist_ok=True)
        path = os.path.join(args.png, "loading-time-vs-nodes.png")
        plot(rows, path, "Loading time per epoch, local batch %d (D=%g)" % (args.local_batch, m.D))
        print("\nwrote %s" % path)
        path = os.path.join(args.png, "job-start-vs-nodes.png")
        plot_job_start(j, start_counts, path, "Job start (model), F=%g files, fan-out %d" % (j.F, j.k), m)
        print("wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
