"""Pictures and the table of `cluster-lab paper`'s JSON (docs/LAB.md, "The paper's experiment"):

    python3 -m epochfs_lab.paper_plot FILE.json --png DIR [--table]

- lab-paper-loading.png: steady-state loading time (mean of epochs 2..E) vs p, measured points
  over the model's lines (solid: with the ingest term D/U_p, dashed: with D/U1 at every p,
  dotted: the I/O terms only), one colour per case; hollow markers: taken with the CPU
  saturated;
- lab-paper-link.png: link bytes per epoch (steady state, in D) per case and p;
- lab-paper-source.png: source bytes per epoch (in D) per case, one panel per p.
matplotlib for the pictures; the table is plain text. The model's figures are recomputed from
the file's rates and runs (epochfs_lab.paper_model.apply_model: U1 from its p = 1 runs, U_p from
its `owned` epochs), so files written before the ingest term get it too; files without `owned`
epochs get D/U1 at every p.
"""

import argparse
import json
import os
import sys

from .paper_model import apply_model

COLOURS = {"direct": "tab:red", "local": "tab:orange", "cluster": "tab:blue",
           "cluster-order": "tab:purple", "locality": "tab:green"}


def steady(doc):
    """{(case, p): {"seconds", "model", "model_u1", "model_io", "link", "source", "saturated"}}
    over epochs >= 2."""
    out = {}
    for r in doc["runs"]:
        if r["epoch"] < 2:
            continue
        k = (r["case"], r["nodes"])
        s = out.setdefault(k, {"seconds": [], "model": [], "model_u1": [], "model_io": [],
                               "link": [], "source": [], "saturated": False})
        s["seconds"].append(r["seconds"])
        s["model"].append(r["model_seconds"])
        s["model_u1"].append(r.get("model_seconds_u1", r["model_seconds"]))
        s["model_io"].append(r.get("model_seconds_io", r["model_seconds"]))
        s["link"].append(r["link_bytes"])
        s["source"].append(r["source_bytes"])
        s["saturated"] |= bool(r["cpu_saturated"])
    for s in out.values():
        for f in ("seconds", "model", "model_u1", "model_io", "link", "source"):
            s[f] = sum(s[f]) / len(s[f])
    return out


def table(doc, out=sys.stdout):
    d = doc["dataset_bytes"]
    w = out.write
    w("| p | case | epoch | seconds | model s | measured / model | model s, I/O only | source (D) |"
      " link (D) | CPU busy |\n")
    w("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in doc["runs"]:
        ratio = "%.2f" % (r["seconds"] / r["model_seconds"]) if r["model_seconds"] > 0.05 else "-"
        w("| %d | %s | %d | %.2f | %.2f | %s | %.2f | %.3f | %.3f | %.0f %%%s |\n" % (
            r["nodes"], r["case"], r["epoch"], r["seconds"], r["model_seconds"], ratio,
            r.get("model_seconds_io", r["model_seconds"]),
            r["source_bytes"] / d, r["link_bytes"] / d, 100 * r["cpu_busy"],
            " **saturated**" if r["cpu_saturated"] else ""))


def summary(doc, out=sys.stdout):
    """One row per (p, case): seconds per epoch, the model's steady state (with D/U_p) and the
    ratio, the ratio to the model with D/U1 at every p, the I/O terms alone,
    source bytes per epoch and link bytes (steady) in D, the RAM-tier shrinks of all nodes per
    epoch (the memory watcher; "-" in files from before it was counted), the highest CPU busy
    share."""
    d = doc["dataset_bytes"]
    w = out.write
    w("| p | case | seconds, epoch 1 / 2 / 3 | model, epochs 2+ | measured / model | "
      "measured / model with D/U1 | I/O only | source (D), epoch 1 / 2 / 3 | link (D), epochs 2+ | "
      "tier shrinks, epoch 1 / 2 / 3 | CPU busy (max) |\n")
    w("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    st = steady(doc)
    seen = []
    for r in doc["runs"]:
        if (r["nodes"], r["case"]) not in seen:
            seen.append((r["nodes"], r["case"]))
    for p, c in seen:
        rs = sorted((r for r in doc["runs"] if r["nodes"] == p and r["case"] == c), key=lambda r: r["epoch"])
        s = st.get((c, p))
        busy = max(r["cpu_busy"] for r in rs)
        sat = [str(r["epoch"]) for r in rs if r["cpu_saturated"]]
        shrinks = " / ".join("-" if r.get("pressure_shrinks") is None
                             else str(sum(n or 0 for n in r["pressure_shrinks"])) for r in rs)
        w("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f %%%s |\n" % (
            p, c, " / ".join("%.1f" % r["seconds"] for r in rs),
            "%.2f" % s["model"] if s else "-",
            "%.2f" % (s["seconds"] / s["model"]) if s and s["model"] > 0.05 else "-",
            "%.2f" % (s["seconds"] / s["model_u1"]) if s and s["model_u1"] > 0.05 else "-",
            "%.2f" % s["model_io"] if s else "-",
            " / ".join("%.3f" % (r["source_bytes"] / d) for r in rs),
            "%.3f" % (s["link"] / d) if s else "-", shrinks, 100 * busy,
            " **saturated** (epoch %s)" % ",".join(sat) if sat else ""))


def plot(doc, directory):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(directory, exist_ok=True)
    d = doc["dataset_bytes"]
    st = steady(doc)
    cases = [c for c in COLOURS if any(k[0] == c for k in st)]
    ps = sorted({k[1] for k in st})
    paths = []

    fig, ax = plt.subplots(figsize=(9.5, 4.8))
    for c in cases:
        xs = [p for p in ps if (c, p) in st]
        ax.plot(xs, [st[(c, p)]["model"] for p in xs], "-", color=COLOURS[c], alpha=0.6,
                label="%s: model" % c)
        ax.plot(xs, [st[(c, p)]["model_u1"] for p in xs], "--", color=COLOURS[c], alpha=0.35)
        ax.plot(xs, [st[(c, p)]["model_io"] for p in xs], ":", color=COLOURS[c], alpha=0.5)
        for p in xs:
            s = st[(c, p)]
            ax.plot([p], [s["seconds"]], "o", color=COLOURS[c],
                    markerfacecolor="none" if s["saturated"] else COLOURS[c], markersize=8)
        ax.plot([], [], "o", color=COLOURS[c], label="%s: measured" % c)
    ax.plot([], [], "o", color="grey", markerfacecolor="none", label="CPU saturated")
    ax.plot([], [], "--", color="grey", label="model with D/U1 at every p")
    ax.plot([], [], ":", color="grey", label="model without the ingest term (I/O only)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ps)
    ax.set_xticklabels([str(p) for p in ps])
    ax.set_xlabel("nodes p (2 ranks each)")
    ax.set_ylabel("loading time per epoch, epochs 2-%d (s)" % max(r["epoch"] for r in doc["runs"]))
    u = doc["rates"].get("D_over_U1_s")
    ax.set_title("Lab: D = %.0f MiB, D/R = %.1f s, links 200 Mbit/s%s" % (
        d / 2**20, doc["rates"]["D_over_R_s"], ", D/U1 = %.2f s" % u if u else ""))
    ax.grid(True, alpha=0.3)
    # Beside the plot, not over it: the points sit in every corner.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    paths.append(os.path.join(directory, "lab-paper-loading.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    width = 0.8 / max(1, len(cases))
    for i, c in enumerate(cases):
        xs = [j + i * width for j, p in enumerate(ps) if (c, p) in st]
        ax.bar(xs, [st[(c, p)]["link"] / d for p in ps if (c, p) in st], width, color=COLOURS[c], label=c)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(ps))])
    ax.set_xticklabels(["p = %d" % p for p in ps])
    ax.set_ylabel("link bytes per epoch, epochs 2+ (D)")
    ax.set_title("Bytes on the nodes' links (veth counters)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(os.path.join(directory, "lab-paper-link.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(ps), figsize=(3 * len(ps), 3.4), sharey=True, squeeze=False)
    epochs = sorted({r["epoch"] for r in doc["runs"]})
    for ax, p in zip(axes[0], ps):
        for i, c in enumerate(cases):
            ys = [next((r["source_bytes"] / d for r in doc["runs"] if r["case"] == c and r["nodes"] == p
                        and r["epoch"] == e), 0) for e in epochs]
            ax.bar([e + (i - len(cases) / 2 + 0.5) * 0.15 for e in epochs], ys, 0.15, color=COLOURS[c],
                   label=c)
        ax.set_title("p = %d" % p)
        ax.set_xlabel("epoch")
        ax.set_xticks(epochs)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("source bytes (D, inotify)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    paths.append(os.path.join(directory, "lab-paper-source.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m epochfs_lab.paper_plot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--png", metavar="DIR")
    ap.add_argument("--table", action="store_true", help="every run's row")
    ap.add_argument("--summary", action="store_true", help="one row per p and case")
    ap.add_argument("--u1-from", metavar="FILE",
                    help="another run's JSON (the same D) whose p = 1 runs give U1 when this one"
                         " has none")
    a = ap.parse_args(argv)
    with open(a.json) as f:
        doc = json.load(f)
    other = None
    if a.u1_from:
        with open(a.u1_from) as f:
            other = (os.path.basename(a.u1_from), json.load(f))
    apply_model(doc, other)
    u = doc["rates"]["U1_measured"]
    sys.stderr.write("U1: %s\n" % ("%.1f MiB/s (D/U1 = %.2f s) from %s: p = 1 %s, epochs %s"
                                   % (doc["rates"]["U1_bytes_per_s"] / 2**20,
                                      doc["rates"]["D_over_U1_s"], u["from"], u["case"],
                                      u["epochs"]) if u else "not measured: the model is the"
                                   " I/O terms only"))
    up = {p: v for p, v in doc["rates"]["U_by_nodes"].items() if p != "1"}
    if up:
        sys.stderr.write("U_p (owned epochs): %s\n" % ", ".join(
            "p = %s %.1f MiB/s (D/U_p = %.2f s)" % (p, v / 2**20, doc["dataset_bytes"] / v)
            for p, v in sorted(up.items(), key=lambda kv: int(kv[0]))))
    if a.table:
        table(doc)
    if a.summary:
        summary(doc)
    if a.png:
        for p in plot(doc, a.png):
            print("wrote %s" % p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
