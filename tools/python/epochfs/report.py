"""Plots for tools/train-bench results (``tools/train-bench report RESULTS.json --png DIR``).

Draws, from the JSON that ``train-bench matrix`` writes:
  wait_fraction.png   data-wait fraction per epoch per case (bars: median over repeats,
                      error bars min..max)
  samples_per_s.png   samples/s over time, per case (lines; first repeat, 1 s bins)
  bytes_by_tier.png   bytes by tier per epoch (stacked bars; first repeat): for epochfs the
                      daemon's own counters (source / RAM / disk tier / page cache = the rest),
                      for the other cases the source device's blkio counter and the rest
and prints a table (median [min..max] over repeats) and the issue 8 done-when checks.
Needs matplotlib (python3-matplotlib) for the pictures only.
"""

import json
import os
import statistics
import sys

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
        src = _stat(d, "tiers.source.bytes") or 0  # served to reads that waited on the source
        ram = _stat(d, "tiers.ram.hit_bytes") or 0
        disk = _stat(d, "tiers.disk.hit_bytes") or 0
    else:
        src, ram, disk = ep.get("source_bytes_blkio", 0), 0, 0
    return src, ram, disk, max(0.0, total - src - ram - disk)


def checks(res):
    """The issue 8 done-when checks; list of (name, value text, PASS/FAIL)."""
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
