"""Plots for tools/bench/train-bench results (``tools/bench/train-bench report RESULTS.json --png DIR``).

Draws, from the JSON that ``train-bench matrix`` writes:
  wait_fraction.png   data-wait fraction per epoch per case (bars: median over repeats,
                      error bars min..max)
  samples_per_s.png   samples/s over time, per case (lines; first repeat, 1 s bins)
  bytes_by_tier.png   bytes by tier per epoch (stacked bars; first repeat): for epochfs the
                      daemon's own counters (source / RAM / disk tier / page cache = the rest),
                      for the other cases the source device's blkio counter and the rest
and prints a table (median [min..max] over repeats) and the training targets (EVIDENCE.md).

``tools/bench/train-bench report --peers PEERS.json --png DIR`` draws, from ``epochbench peers --json``:
  peers-matrix.png    files/s and MB/s against reader threads T per filesystem, cold and warm,
                      and the daemon's CPU seconds per 1,000 files (median, whiskers min..max)
``tools/bench/train-bench report --cluster CLUSTER.json [--cluster MORE.json] --png DIR`` draws, from
``tools/bench/cluster-bench locality --json`` and/or ``tools/bench/cluster-bench peer-prefetch --json``:
  cluster-bytes-by-source.png  bytes served per node by where they came from (the node's RAM,
                      disk and staging tiers, peers, the source), stacked, for each measured
                      epoch of the run (the daemons' own counters)
Needs matplotlib (python3-matplotlib) for the pictures only.
"""

import json
import os
import statistics
import sys

from epochfs import admin

CASE_ORDER = ["direct", "bindfs", "rclone", "epochfs", "epochfs-sampler"]
COLORS = {"direct": "#7f7f7f", "bindfs": "#1f77b4", "rclone": "#ff7f0e", "epochfs": "#9467bd",
          "epochfs-sampler": "#2ca02c"}


def load(path):
    with open(path) as f:
        return json.load(f)


def by_case(res):
    """{case: [run, ...]} over repeats, skipping failed runs, in CASE_ORDER."""
    out = {}
    for r in res["runs"]:
        if "epochs" in r:
            out.setdefault(r["case"], []).append(r)
    return {c: out[c] for c in CASE_ORDER if c in out}


def spread(values):
    values = sorted(values)
    return values[0], statistics.median(values), values[-1]


def fmt(values, scale=1.0, digits=1):
    lo, med, hi = spread([v * scale for v in values])
    return "%.*f [%.*f..%.*f]" % (digits, med, digits, lo, digits, hi)


def _flat(path):
    """A counter path's key in train-bench's flattened stats (the path less its command)."""
    return path.split(".", 1)[1]


def _stat(delta, *names):
    for n in names:
        for k, v in delta.items():
            if k == n or k.endswith("." + n):
                return v
    return None


def tiers(res, run_, ep):
    """(source, ram, disk, page cache/other) bytes for one epoch."""
    total = res["dataset_bytes"] * ep["samples"] / res["dataset_files"]
    d = ep.get("epochfs_stats_delta")
    if d:
        src = _stat(d, _flat(admin.STATS_SOURCE_BYTES)) or 0  # served to reads waiting on the source
        ram = _stat(d, _flat(admin.STATS_RAM_HIT_BYTES)) or 0
        disk = _stat(d, _flat(admin.STATS_DISK_HIT_BYTES)) or 0
    else:
        src, ram, disk = ep.get("source_bytes_blkio", 0), 0, 0
    return src, ram, disk, max(0.0, total - src - ram - disk)


def checks(res):
    """The training targets of EVIDENCE.md checked; list of (name, value text, PASS/FAIL)."""
    cases = by_case(res)
    out = []
    co = res.get("compute_only_epoch_s")
    bound = max(co, res["bytes_over_throttle_s"]) if co else None
    if "epochfs-sampler" in cases and bound:
        e1 = [r["epochs"][0]["epoch_s"] for r in cases["epochfs-sampler"]]
        out.append(("epoch 1 with ShuffleAwareSampler <= 1.1 x max(compute-only %.2f s, "
                    "bytes/throttle %.2f s) = %.2f s" % (co, res["bytes_over_throttle_s"], 1.1 * bound),
                    fmt(e1, digits=2) + " s", "PASS" if max(e1) <= 1.1 * bound else
                    ("PASS (median)" if statistics.median(e1) <= 1.1 * bound else "FAIL")))
        later = [e["wait_fraction"] for r in cases["epochfs-sampler"] for e in r["epochs"][1:]]
        out.append(("epochs 2-3 with ShuffleAwareSampler wait <= 2%", fmt(later, 100) + " %",
                    "PASS" if later and max(later) <= 0.02 else "FAIL"))
    if "direct" in cases:
        w = [e["wait_fraction"] for r in cases["direct"] for e in r["epochs"]]
        out.append(("direct waits >= 30% every epoch", fmt(w, 100) + " %",
                    "PASS" if w and min(w) >= 0.30 else "FAIL"))
    return out


def table(res):
    cases = by_case(res)
    lines = ["| case | epoch | epoch time s | data-wait % | samples/s | source device MB (blkio) |",
             "|---|---|---|---|---|---|"]
    for c, runs in cases.items():
        n = max(len(r["epochs"]) for r in runs)
        for i in range(n):
            eps = [r["epochs"][i] for r in runs if len(r["epochs"]) > i]
            lines.append("| %s | %d | %s | %s | %s | %s |" % (
                c, i + 1, fmt([e["epoch_s"] for e in eps], digits=2),
                fmt([e["wait_fraction"] for e in eps], 100),
                fmt([e["samples"] / e["epoch_s"] for e in eps], digits=0),
                fmt([e.get("source_bytes_blkio", 0) for e in eps], 1e-6)))
    return "\n".join(lines)


def plot(res, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(outdir, exist_ok=True)
    cases = by_case(res)
    nep = max(len(r["epochs"]) for runs in cases.values() for r in runs)
    reps = max(len(runs) for runs in cases.values())
    sub = "%d files, %.0f MB, throttle %.1f MB/s, %d repeat(s); bars: median, whiskers: min..max" % (
        res["dataset_files"], res["dataset_bytes"] / 1e6, res["throttle_bps"] / 1e6, reps)
    paths = []

    # 1. data-wait fraction per epoch per case
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(cases)
    for j, (c, runs) in enumerate(cases.items()):
        xs, meds, lo, hi = [], [], [], []
        for i in range(nep):
            v = [100 * r["epochs"][i]["wait_fraction"] for r in runs if len(r["epochs"]) > i]
            a, m, b = spread(v)
            xs.append(i + j * width - 0.4 + width / 2)
            meds.append(m), lo.append(m - a), hi.append(b - m)
        ax.bar(xs, meds, width, yerr=[lo, hi], capsize=3, label=c, color=COLORS.get(c))
    ax.axhline(30, ls="--", lw=0.8, color="#7f7f7f")
    ax.axhline(2, ls=":", lw=0.8, color="#2ca02c")
    ax.set_xticks(range(nep), ["epoch %d" % (i + 1) for i in range(nep)])
    ax.set_ylabel("time waiting for data, % of step time")
    ax.set_title("Data-wait fraction per epoch (page cache dropped before each)\n" + sub, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(os.path.join(outdir, "train-wait-fraction.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    # 2. samples/s over time (first repeat of each case, epochs back to back, 1 s bins)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    batch = res["config"].get("batch", 32)
    for c, runs in cases.items():
        t0, xs, ys = 0.0, [], []
        for e in runs[0]["epochs"]:
            ends = e["step_end_s"]
            nb = int(e["epoch_s"]) + 1
            counts = [0] * nb
            for t in ends:
                counts[min(nb - 1, int(t))] += batch
            xs += [t0 + k + 0.5 for k in range(nb)]
            ys += counts
            t0 += e["epoch_s"]
            ax.axvline(t0, color=COLORS.get(c), lw=0.4, alpha=0.5)
        # 3-bin moving average keeps the lines legible
        sm = [sum(ys[max(0, k - 2):k + 3]) / len(ys[max(0, k - 2):k + 3]) for k in range(len(ys))]
        ax.plot(xs, sm, label=c, color=COLORS.get(c))
    ax.set_xlabel("seconds since the first epoch started (vertical lines: epoch ends)")
    ax.set_ylabel("samples/s (1 s bins, 5-bin moving average)")
    ax.set_title("Training throughput over 3 epochs (repeat 1)\n" + sub.split(";")[0], fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(os.path.join(outdir, "train-samples-per-s.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    # 3. bytes by tier per epoch (stacked; first repeat)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    labels, stacks = [], []
    for c, runs in cases.items():
        for e in runs[0]["epochs"]:
            labels.append("%s e%d" % (c, e["epoch"]))
            stacks.append([v / 1e6 for v in tiers(res, runs[0], e)])
    names = ["source (reads served from it; epochfs: tiers.source.bytes)", "epochfs RAM tier", "epochfs disk tier",
             "page cache / own cache (rest)"]
    tier_colors = ["#d62728", "#2ca02c", "#17becf", "#c7c7c7"]
    bottom = [0.0] * len(labels)
    for k in range(4):
        vals = [s[k] for s in stacks]
        ax.bar(range(len(labels)), vals, 0.7, bottom=bottom, label=names[k], color=tier_colors[k])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(labels)), labels, fontsize=7, rotation=60, ha="right")
    ax.set_ylabel("MB per epoch")
    ax.set_title("Where each epoch's bytes came from (repeat 1)\nepochfs: who served the "
                 "loader's reads (its counters); others: the source device's blkio counter", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(os.path.join(outdir, "train-bytes-by-tier.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


# ----------------------------------------------------------------------------- peers
PEER_FS = ["native", "bindfs", "rclone", "epochfs"]
PEER_COLORS = {"native": "#7f7f7f", "bindfs": "#1f77b4", "rclone": "#ff7f0e", "epochfs": "#9467bd"}


def peer_cells(res):
    """{(fs, workload, state): {T: cell}} of an ``epochbench peers --json`` document."""
    out = {}
    for c in res["cells"]:
        out.setdefault((c["fs"], c["workload"], c["state"]), {})[c["threads"]] = c
    return out


def peers_table(res):
    cells = peer_cells(res)
    ts = res["config"]["threads"]
    lines = ["| filesystem | state | " + " | ".join("files/s T=%d" % t for t in ts) + " | " +
             " | ".join("MB/s T=%d" % t for t in ts) + " | daemon CPU s / 1,000 files T=%s |" % ts[0],
             "|---|---|" + "---|" * (2 * len(ts) + 1)]
    for fs in [f for f in PEER_FS if f in res["config"]["filesystems"]]:
        if fs in res.get("skipped", {}):
            lines.append("| %s | skipped: %s |" % (fs, res["skipped"][fs]))
            continue
        for state in ("cold", "warm"):
            f, m = cells.get((fs, "files", state), {}), cells.get((fs, "shards", state), {})
            row = [fmt(f[t]["files_per_s"], digits=0) if t in f else "-" for t in ts]
            row += [fmt(m[t]["mb_per_s"], digits=0) if t in m else "-" for t in ts]
            cpu = f.get(ts[0], {}).get("daemon_cpu_s_per_1k_files")
            row.append(fmt(cpu, digits=3) if cpu else "-")
            lines.append("| %s | %s | %s |" % (fs, state, " | ".join(row)))
    return "\n".join(lines)


def plot_peers(res, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    os.makedirs(outdir, exist_ok=True)
    cfg, cells = res["config"], peer_cells(res)
    ts = cfg["threads"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    panels = [("files", "files_per_s", "files/s (shuffled whole-file reads, ~110 KB)", True),
              ("shards", "mb_per_s", "MB/s (%d MiB shard files, sequential)" % cfg["shard_mib"], True),
              ("files", "daemon_cpu_s_per_1k_files", "daemon CPU s per 1,000 files", False)]
    for ax, (workload, field, label, log_y) in zip(axes, panels):
        for k, fs in enumerate([f for f in PEER_FS if f in cfg["filesystems"]]):
            if field.startswith("daemon") and fs == "native":
                continue
            for state, style in (("cold", "-"), ("warm", "--")):
                by_t = cells.get((fs, workload, state), {})
                xs = [t for t in ts if t in by_t and by_t[t].get(field)]
                if not xs:
                    continue
                sp = [spread(by_t[t][field]) for t in xs]
                dx = 1 + 0.025 * (k - 1.5)  # spread the whiskers apart (x is log-scaled)
                ax.errorbar([x * dx for x in xs], [m for _, m, _ in sp], yerr=[[m - a for a, m, _ in sp],
                                                             [b - m for _, m, b in sp]],
                            ls=style, marker="o", ms=4, capsize=3, color=PEER_COLORS.get(fs),
                            label="%s %s" % (fs, state))
        ax.set_xscale("log", base=2)
        ax.set_xticks(ts, [str(t) for t in ts])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xlabel("reader threads T")
        ax.set_ylabel(label)
        if log_y:
            ax.set_yscale("log")
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
    axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle("epochbench peers: %d files (%.0f MB), %d x %d MiB shards, %d repeats (median, "
                 "whiskers min..max); load average %.1f before, %.1f after\nsolid: cold (page cache "
                 "dropped, fresh mount, empty caches); dashed: warm (2nd pass on the same mount, page "
                 "cache dropped: the filesystem's own cache serves)"
                 % (cfg["files"], cfg["file_bytes"] / 1e6, cfg["shards"], cfg["shard_mib"],
                    cfg["repeats"], cfg["load_average_before"], cfg["load_average_after"]),
                 fontsize=9)
    fig.tight_layout()
    path = os.path.join(outdir, "peers-matrix.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


# ----------------------------------------------------------------------------- cluster
CLUSTER_SOURCES = [("ram", "RAM tier", "#2ca02c"), ("disk", "disk tier", "#17becf"),
                   ("staging", "staging (prefetched from peers)", "#bcbd22"),
                   ("peer", "peers (the read waited on a UCX fetch)", "#ff7f0e"), ("source", "source", "#d62728")]


def cluster_phases(res):
    """[(label, per-node counter deltas)] of a cluster-bench locality / peer-prefetch result."""
    phases = []
    if "plain" in res:
        phases.append(("DistributedSampler", res["plain"]["per_node"]))
        for row in res.get("locality", []):
            phases.append(("LocalityAwareSampler b=%d" % row["local_batch"], row["per_node"]))
    for key, label in (("without_prefetch", "DistributedSampler,\nno peer prefetch"),
                       ("with_prefetch", "DistributedSampler,\npeer prefetch")):
        if key in res:
            phases.append((label, res[key]["per_node"]))
    if not phases:
        raise ValueError("no per-node counters: expected `tools/bench/cluster-bench locality --json` or "
                         "`tools/bench/cluster-bench peer-prefetch --json` output")
    return phases


def cluster_table(res):
    lines = ["| epoch | node | " + " | ".join(n for _, n, _ in CLUSTER_SOURCES) + " | total MiB |",
             "|---|---|" + "---|" * (len(CLUSTER_SOURCES) + 1)]
    for label, nodes in cluster_phases(res):
        for i, n in enumerate(nodes):
            vals = [n.get(k, 0) / 2**20 for k, _, _ in CLUSTER_SOURCES]
            lines.append("| %s | %d | %s | %.2f |" % (label.replace("\n", " "), i, " | ".join("%.2f" % v for v in vals),
                                                      sum(vals)))
    return "\n".join(lines)


def plot_cluster(docs, outdir):
    """One picture of every measured epoch of every result in ``docs`` (a list)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(outdir, exist_ok=True)
    phases = [("%s\n%d files, %.1f MB" % (label, res["files"], res["dataset_bytes"] / 1e6), nodes)
              for res in docs for label, nodes in cluster_phases(res)]
    nodes = max(len(n) for _, n in phases)
    fig, ax = plt.subplots(figsize=(max(9, 1.9 * len(phases) * nodes / 4 + 3), 4.8))
    xs, labels, group_mid = [], [], []
    for g, (label, per_node) in enumerate(phases):
        base = g * (nodes + 1)
        xs += [base + i for i in range(len(per_node))]
        labels += ["n%d" % i for i in range(len(per_node))]
        group_mid.append((base + (len(per_node) - 1) / 2, label))
    bottom = [0.0] * len(xs)
    for key, name, color in CLUSTER_SOURCES:
        vals = [n.get(key, 0) / 2**20 for _, per_node in phases for n in per_node]
        if not any(vals):
            continue
        ax.bar(xs, vals, 0.8, bottom=bottom, label=name, color=color)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(xs, labels, fontsize=8)
    for x, label in group_mid:
        ax.annotate(label, (x, 0), xytext=(0, -18), textcoords="offset points", ha="center",
                    va="top", fontsize=8, annotation_clip=False)
    ax.set_ylabel("MiB served to the node's readers")
    ax.set_title("Bytes by source per node, the epoch after a warm-up epoch (%d nodes x %d torch ranks, loopback UCX)\n"
                 "before each epoch: RAM tiers emptied, page cache dropped; from each daemon's own "
                 "counters (epochctl stats / peers)" % (docs[0]["nodes"], docs[0]["ranks_per_node"]),
                 fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.subplots_adjust(bottom=0.24)
    path = os.path.join(outdir, "cluster-bytes-by-source.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def main_peers(results, outdir):
    res = load(results)
    print(peers_table(res))
    for p in plot_peers(res, outdir):
        print("wrote", p)


def main_cluster(results, outdir):
    """``results``: one or more cluster-bench JSON paths, drawn side by side."""
    docs = [load(r) for r in results]
    for res in docs:
        print(cluster_table(res))
    for p in plot_cluster(docs, outdir):
        print("wrote", p)


def main(results, outdir):
    res = load(results)
    co = res["compute_only"]
    co = co if isinstance(co, list) else [co]  # older results: one run
    print("compute-only epoch (steps alone, batches preloaded; %d runs interleaved with the "
          "cases): %s s; warm pipeline (decode in the workers, dataset in the page cache): %s s; "
          "throttle %.2f MB/s; bytes/throttle %.2f s = %.2fx compute-only" % (
              len(co), fmt([e["epoch_s"] for e in co], digits=2),
              fmt([e["epoch_s"] for e in res["warm_pipeline"]], digits=2),
              res["throttle_bps"] / 1e6, res["bytes_over_throttle_s"],
              res["bytes_over_throttle_s"] / res["compute_only_epoch_s"]))
    print(table(res))
    for name, value, verdict in checks(res):
        print("%s: %s -> %s" % (name, value, verdict))
    for p in plot(res, outdir):
        print("wrote", p)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
