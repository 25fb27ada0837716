"""The model's figure for each epoch of `cluster-lab paper` (docs/LAB.md, "The paper's
experiment"; docs/MODEL.md, "Analytical model"). Standard library only.

The I/O terms (the paper's): D/R for the source, a·D/(pN)·(p−1)/p for a distributed cache,
a·D·b/(pN) for locality-aware loading. The ingest term: reading D through the nodes' FUSE
mounts into the ranks is not free even when every byte is local, so each epoch also pays D/U,
U the rate at which the nodes *together* ingest the dataset. It is measured, not a knob:

    U1 = D / (mean seconds of the p = 1 `cluster` case's epochs 2..E)   (`local` if no cluster;
         a calibration run of p = 1 `cluster` when neither is in the run)

with every byte already in the node's RAM tier (no source, no link). The lab's nodes share one
machine's cores, so together they ingest at most at U1 whatever p is, and in fact slower: p
daemons and 2p reader processes on the same cores cost more CPU per byte (at p = 8 about 1.5x
that of p = 1, docs/LAB.md). So U is measured at each p too:

    U_p = D / (mean seconds of the `owned` epochs at p: every rank reads only its own node's
          files, all in their owner's RAM tier; doc["ingest"])

and the lab's term at p is D/U_p (D/U1 where U_p was not measured; `model_seconds_u1` keeps
the D/U1 figure at every p). On a real cluster each node has its own cores and ingests at U1, so
the term is D/(p·U1), the paper's D/(pU) (`tools/bench/epochfs-model --from-lab` takes U1 as its
per-node U).

The term goes on `direct` (the issue's D/R + D/(pU)) in every epoch and on the cached cases from
epoch 2 (epoch 1 is the source's fill, D/R). `model_seconds_io` keeps the figure without it.
`direct` keeps D/U1: its readers ingest from the source, not through epochfs's RAM tiers.
"""

import json
import statistics

INGEST_CASES = ("cluster", "local")  # p = 1 cases whose epochs 2+ read everything locally


def model_seconds(case, epoch, p, d, r, n_link, cache_per_node, b=None, u=None):
    """Loading time of one epoch: d bytes, r source bytes/s, n_link one node's link payload
    bytes/s (Rc = Rb = p·N), cache_per_node bytes, b the balancing fraction (`locality`), u the
    rate (bytes/s) at which all the nodes together ingest (U1 on the lab, p·U1 on a cluster of
    separate machines); u None: the I/O terms only."""
    ingest = d / u if u else 0.0
    if case == "direct":
        return d / r + ingest
    if epoch == 1:
        return d / r
    a = min(1.0, p * cache_per_node / d)
    if case == "local":  # a node holds what it has read, up to its cache: min(C, (epoch-1)·D/p)
        held = min(cache_per_node, (epoch - 1) * d / p)
        io = max(0.0, 1 - held / d) * d / r
    elif case == "locality":
        io = (1 - a) * d / r + a * d * (b or 0.0) / (p * n_link)
    else:  # cluster, cluster-order
        io = (1 - a) * d / r + a * d / (p * n_link) * (p - 1) / p
    return io + ingest


def ingest_rate(doc):
    """(U1 bytes/s, a dict saying how it was measured) from a paper JSON, or (None, None): the
    p = 1 `cluster` (else `local`) epochs >= 2 of its runs, else its "calibration" runs."""
    d = doc["dataset_bytes"]
    for where, runs in (("runs", doc.get("runs") or []),
                        ("calibration", doc.get("calibration") or [])):
        for case in INGEST_CASES:
            rs = [x for x in runs if x["nodes"] == 1 and x["case"] == case and x["epoch"] >= 2
                  and x["seconds"] > 0]
            if rs:
                mean = statistics.mean(x["seconds"] for x in rs)
                return d / mean, {
                    "from": where, "nodes": 1, "case": case, "epochs": [x["epoch"] for x in rs],
                    "mean_seconds": mean,
                    "cpu_saturated_epochs": [x["epoch"] for x in rs if x.get("cpu_saturated")],
                    "rule": "U1 = D / mean seconds (every byte local); the lab's term D/U1 at "
                            "every p (its nodes share the machine's cores), a cluster's D/(p U1)"}
    return None, None


def ingest_rates_by_nodes(doc):
    """{p: U_p bytes/s} from the file's `owned` epochs (doc["ingest"]), p >= 2."""
    by = {}
    for x in doc.get("ingest") or []:
        if x["seconds"] > 0:
            by.setdefault(x["nodes"], []).append(x["seconds"])
    return {p: doc["dataset_bytes"] / statistics.mean(s) for p, s in by.items()}


def apply_model(doc, u1_from=None):
    """Sets every run's "model_seconds_io" (the I/O terms), "model_seconds" (with D/U_p, else
    D/U1, where known) and "model_seconds_u1" (with D/U1), and rates "U1_bytes_per_s",
    "U1_measured", "D_over_U1_s", "U_by_nodes" ({"p": U_p}, U1 at p = 1). Returns U1 or None.
    u1_from: (name, doc) of another run of the same D whose U1 serves when this one has none."""
    d, rates = doc["dataset_bytes"], doc["rates"]
    u, how = ingest_rate(doc)
    if u is None and u1_from:
        name, other = u1_from
        if other["dataset_bytes"] != d:
            raise ValueError("%s: D = %d B, not this file's %d B (U1 depends on D)"
                             % (name, other["dataset_bytes"], d))
        u, how = ingest_rate(other)
        if how:
            how["from"] = name
    by_nodes = ingest_rates_by_nodes(doc)
    rates["U"] = ("measured: U1, the p = 1 ingest rate with every byte local (U1_measured), and"
                  " U_p, the p nodes' together, from `owned` epochs (U_by_nodes); the lab's term"
                  " D/U_p, D/U1 where U_p is not measured" if u else "not measured (no p = 1"
                  " cluster or local epochs 2+ in this file): the term D/U is left out")
    rates["U1_bytes_per_s"], rates["U1_measured"] = u, how
    rates["D_over_U1_s"] = d / u if u else None
    rates["U_by_nodes"] = {str(p): v for p, v in sorted(by_nodes.items())}
    if u:
        rates["U_by_nodes"].setdefault("1", u)
    for x in doc["runs"]:
        args = (x["case"], x["epoch"], x["nodes"], d, rates["source_bytes_per_s"],
                rates["link_payload_bytes_per_s"], x["cache_per_node"], x.get("balance_fraction"))
        up = u if x["case"] == "direct" else by_nodes.get(x["nodes"], u)
        x["model_seconds_io"] = model_seconds(*args)
        x["model_seconds_u1"] = model_seconds(*args, u=u)
        x["model_seconds"] = model_seconds(*args, u=up)
    return u


def from_lab_argv(argv):
    """tools/bench/epochfs-model's --from-lab FILE: argv with it replaced by --D/--R/--N/--U from the
    file (lab_inputs; given later on the line, they still win) and, when U was measured,
    --decode-all (the lab's U is reading the dataset through the mount, which every strategy
    pays), and a line saying so."""
    argv = list(argv)
    if "--from-lab" not in argv:
        return argv, None
    i = argv.index("--from-lab")
    if i + 1 >= len(argv):
        raise SystemExit("epochfs-model: --from-lab needs a FILE")
    path = argv[i + 1]
    measured = lab_inputs(path)
    extra = []
    for k, v in sorted(measured.items()):
        extra += ["--" + k, repr(v)]
    note = "from %s: %s" % (path, ", ".join("%s=%.4g" % kv for kv in sorted(measured.items())))
    if "U" in measured:
        extra.append("--decode-all")
        note += " (U: U1 per node, the lab's p = 1 ingest rate; D/(pU) on every strategy)"
    note += "\n"
    return argv[:i] + extra + argv[i + 2:], note


def lab_inputs(path):
    """Measured inputs from `cluster-lab paper --json FILE` (docs/LAB.md), in samples:
    D = the files; R = D / the mean `direct` epoch (every p, every epoch: the shared source's
    rate as read); N = the median per-node receive rate of `cluster` in epochs 2+ at p >= 2
    (link bytes / p / seconds, in files of the dataset's mean size); U = U1, the rate one node
    ingests the dataset with every byte local (the p = 1 `cluster` epochs 2+, else `local`,
    else the file's calibration run: ingest_rate). The lab's nodes
    share one machine's cores, so there the term is D/U1 at every p; here U1 is one node's U of
    a cluster whose nodes each have their own (D/(p·U1))."""
    with open(path) as f:
        doc = json.load(f)
    files = doc.get("files") or doc["rates"].get("files")
    size = doc["dataset_bytes"] / files
    direct = [r["seconds"] for r in doc["runs"] if r["case"] == "direct"]
    recv = [r["link_bytes"] / r["nodes"] / r["seconds"] for r in doc["runs"]
            if r["case"] == "cluster" and r["epoch"] >= 2 and r["nodes"] >= 2 and r["seconds"] > 0]
    out = {"D": float(files)}
    if direct:
        out["R"] = files / statistics.mean(direct)
    if recv:
        out["N"] = statistics.median(recv) / size
    u, _ = ingest_rate(doc)
    if u:
        out["U"] = u / size
    return out
