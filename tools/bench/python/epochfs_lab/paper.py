"""`cluster-lab run` and `cluster-lab paper`: the seed paper's experiment (docs/LAB.md,
"The paper's experiment") with real daemons on the lab, beside the model's terms.

`run`: an epoch workload on a lab that is up: K ranks per node (reader processes inside the
node, epochfs_lab.reader --serve, started once and kept across the epochs: epochfs_lab.ranks),
each reading its share of every epoch in the order of
- `distributed`: torch's DistributedSampler, unchanged (a permutation seeded seed+epoch,
  padded to a multiple of the world size, every world-th index from the rank; set_epoch each
  epoch), reproduced in the standard library (torch is not installed here);
- `order`: the same, with each rank's order registered in its node's daemon before the epoch
  (epochfs.admin.register_order, as ShuffleAwareSampler: peer prefetch with the order known);
- `locality`: the paper's locality-aware assignment (epochfs.locality.assign_global_batch,
  what LocalityAwareSampler does per global batch), owners from the daemon's placement map,
  each rank's share registered in its node's daemon as LocalityAwareSampler does on a
  mount_placement (so the samples moved to a node are fetched from their owners ahead);
- `owned`: each rank reads only the files its node owns (the epoch's permutation, each file
  dealt round robin to its owner node's ranks): no byte crosses a link, so the epoch is the
  nodes' ingest alone (the model's U at this p; `paper` runs it after the locality case);
- `direct` (`--source`): DistributedSampler straight from the lab's source, no epochfs.
Per epoch: loading time, source bytes (inotify opens x sizes), link bytes (the nodes' veths),
CPU busy share of the host (/proc/stat) and CPU seconds (the host's, the daemons', the
ranks'), OOM kills in the nodes' memory cgroups (the kernel log: the daemon's workers and other
tasks), the nodes' peak memory, and per node the memory watcher's shrinks of the RAM tier, the
daemon's and the readers' peak RSS (node_memory_figures). With `--compute-ms MS` each rank is
also a training loop (epochfs_lab.reader): steps of local-batch samples that take local batch x
MS with the CPU idle, as on an accelerator, fed through a bounded queue by the rank's reader
threads; per epoch then also the slowest rank's time waiting for reads (`wait_seconds`: the
loading time a training job sees) and in steps (`compute_seconds`).
Standard library only.

`paper`: for each p, a fresh lab per case (direct, local, cluster, cluster-order, locality),
epochs 1..E, and the model's figure for each epoch (epochfs_lab.paper_model: the I/O terms and
the ingest term D/U_p); JSON and (matplotlib) pictures. U1 is measured from the p = 1 `cluster`
case's epochs 2+, run first, or from a calibration run of it when p = 1 or `cluster` is not asked
for; U_p at p >= 2 from INGEST_EPOCHS `owned` epochs on the locality case's lab (else the
cluster-order or cluster case's) after its own epochs, every byte then in its owner's RAM tier
(doc["ingest"]). Each node's daemon gets `--ram-cache` 1.5 D/p (the rule's per-node memory is
the cache's), its node 1.5 D/p + ALLOWANCE (the daemon's own memory and the ranks', measured:
docs/LAB.md).
"""

import argparse
import json
import os
import random
import shutil
import tempfile
import time

from . import node as lab_node, workload as lab_workload
from .memory import MemoryWatch, daemon_figures, node_memory_figures
from .paper_model import INGEST_CASES, apply_model, model_seconds
from .ranks import Ranks
from .lab import Lab
from .down import down
from .util import ArgParser, LabError, log, parse_rate, parse_size

CASES = ("direct", "local", "cluster", "cluster-order", "locality")
# The cases whose lab, once its epochs are done, holds every file in its owner's RAM tier: the
# first of them in a run also measures U_p (`owned` epochs).
INGEST_HOSTS = ("locality", "cluster-order", "cluster")
INGEST_EPOCHS = 2
TCP_PAYLOAD = 1448 / 1514  # what TCP carries of a tbf rate at MTU 1500 (docs/LAB.md)
SATURATED = 0.90           # host CPU busy share above which a figure is marked saturated
# A node's memory beyond its RAM tier: the daemon's own (base, receive pool, guests' extra, the
# watcher's margin) and two readers, measured at p = 8 (docs/LAB.md "Node memory").
ALLOWANCE = 72 << 20


def distributed_indices(n, rank, world, seed, epoch):
    """torch.utils.data.DistributedSampler(shuffle=True, drop_last=False) after set_epoch(epoch),
    as tests/cluster/lab/slurm_reader.py reproduces it."""
    order = list(range(n))
    random.Random(seed + epoch).shuffle(order)
    order += order[:(-n) % world]
    return order[rank::world]


def global_sequence(n, world, seed, epoch):
    order = list(range(n))
    random.Random(seed + epoch).shuffle(order)
    return order + order[:(-n) % world]


def locality_indices(n, world, ranks_per_node, local_batch, owners, seed, epoch):
    """Per rank: the samples of each global batch (local_batch x world positions of the
    DistributedSampler sequence) that the paper's assignment gives it; b = moved / samples."""
    from epochfs.locality import assign_global_batch
    seq = global_sequence(n, world, seed, epoch)
    g = local_batch * world
    learner_nodes = [r // ranks_per_node for r in range(world)]
    out, moved = [[] for _ in range(world)], 0
    for b in range(0, len(seq), g):
        batch = seq[b:b + g]
        keep, info = assign_global_batch([owners[i] for i in batch], learner_nodes)
        moved += info["moved"]
        for r, positions in enumerate(keep):
            out[r].extend(batch[j] for j in positions)
    return out, moved / len(seq)


def owned_indices(n, world, ranks_per_node, owners, seed, epoch):
    """Per rank: the files its node owns, in the epoch's permutation, dealt round robin among
    the node's ranks; a file owned by no node of the lab (-1) goes round robin to every rank."""
    order = list(range(n))
    random.Random(seed + epoch).shuffle(order)
    nodes = world // ranks_per_node
    out, dealt, spare = [[] for _ in range(world)], [0] * nodes, 0
    for i in order:
        node = owners[i]
        if 0 <= node < nodes:
            out[node * ranks_per_node + dealt[node] % ranks_per_node].append(i)
            dealt[node] += 1
        else:
            out[spare % world].append(i)
            spare += 1
    return out


class CpuBusy:
    """The host's busy share between start() and stop(), from /proc/stat."""

    @staticmethod
    def _read():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return sum(v), idle

    def start(self):
        self.t0 = self._read()

    def stop(self):
        t1 = self._read()
        total, idle = t1[0] - self.t0[0], t1[1] - self.t0[1]
        return 1 - idle / total if total else 0.0


def process_cpu_seconds(pid):
    """User + system CPU seconds of a process (all its threads) so far; None if gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, TypeError, IndexError, ValueError):
        return None


def owners_of(lab, files):
    from epochfs import admin
    _, owners = admin.placement(lab.nodes[0]["mountpoint"])
    return [owners.get(f, -1) for f in files]


def run_epochs(lab, dataset, sampler="distributed", ranks_per_node=2, epochs=3, seed=0,
               threads=4, local_batch=32, direct=False, say=log, compute_ms=0.0):
    """The epochs of one case on a lab that is up; returns one dict of figures per epoch.
    compute_ms > 0: every rank is also a training loop whose steps take local_batch x
    compute_ms with the CPU idle (epochfs_lab.reader)."""
    files = sorted(dataset)
    world = len(lab.nodes) * ranks_per_node
    counters = lab_workload.Counters(lab, lab_workload.source_counter(lab.source["path"]), dataset)
    out = []
    with Ranks(lab, world, ranks_per_node, lambda node: lab.source["path"] if direct else node["mountpoint"],
               threads, compute_ms=compute_ms, local_batch=local_batch) as ranks:
        for e in range(epochs):
            out.append(_epoch(lab, ranks, counters, dataset, files, sampler, ranks_per_node, world,
                              local_batch, seed, e, say))
    return out


def _epoch(lab, ranks, counters, dataset, files, sampler, ranks_per_node, world, local_batch, seed,
           e, say):
    """One epoch of run_epochs: its figures."""
    n = len(files)
    b = None
    if sampler == "locality":
        per_rank, b = locality_indices(n, world, ranks_per_node, local_batch,
                                       owners_of(lab, files), seed, e)
    elif sampler == "owned":
        per_rank = owned_indices(n, world, ranks_per_node, owners_of(lab, files), seed, e)
    else:
        per_rank = [distributed_indices(n, r, world, seed, e) for r in range(world)]
    lab_workload.drop_caches()
    counters.begin()
    cpu = CpuBusy()
    cpu.start()
    memory = MemoryWatch(lab)
    memory.start()
    daemons = daemon_figures(lab)
    daemon_cpu = [process_cpu_seconds(d and d["pid"]) for d in daemons]
    before = counters.snapshot()
    # as ShuffleAwareSampler and LocalityAwareSampler (on a mount_placement) do: the admin
    # socket, no epochctl process
    if sampler in ("order", "locality"):
        from epochfs import admin
        for r in range(world):
            admin.register_order(lab.nodes[r // ranks_per_node]["mountpoint"],
                                 [files[i] for i in per_rank[r]], epoch=e, rank=r)
    reads, done = ranks.epoch([[files[i] for i in per_rank[r]] for r in range(world)])
    fig = counters.since(before)
    busy = cpu.stop()
    daemon_cpu = [(after - c0) if after is not None and c0 is not None else None
                  for after, c0 in zip([process_cpu_seconds(d and d["pid"]) for d in daemons],
                                       daemon_cpu)]
    fig.update(memory.stop())
    fig["nodes_memory"] = node_memory_figures(lab, daemons, daemon_figures(lab), done)
    shrinks = [m["shrinks"] for m in fig["nodes_memory"]]
    fig.update(epoch=e + 1, cpu_busy=busy, cpu_saturated=busy >= SATURATED,
               bytes_read=sum(r.get("bytes", 0) for rs in reads.values() for r in rs),
               reads=sum(len(rs) for rs in reads.values()),
               bad_reads=len(lab_workload.check_reads(reads, dataset)) if _has_sha(dataset) else None,
               balance_fraction=b, cpu_seconds={
                   "busy": busy * fig["seconds"] * (os.cpu_count() or 1),
                   "daemons": sum(c for c in daemon_cpu if c is not None),
                   "ranks": sum(d.get("cpu_s") or 0 for d in done.values())},
               # training loops only: the slowest rank's wait for reads and its steps' time
               wait_seconds=max((d["wait_s"] for d in done.values() if "wait_s" in d), default=None),
               compute_seconds=max((d["compute_s"] for d in done.values() if "compute_s" in d),
                                   default=None))
    say("  epoch %d: %.1f s%s, source %.3f D, link %.1f MiB, cpu %.0f%%%s (CPU s: daemons %.1f, ranks"
        " %.1f); OOM kills: %d daemon, %d other; peak node memory %.1f MiB; RAM tier shrinks per"
        " node %s" % (
            e + 1, fig["seconds"], "" if fig["wait_seconds"] is None else " (steps %.1f s, waiting for"
            " reads %.1f s)" % (fig["compute_seconds"], fig["wait_seconds"]),
            fig["source_bytes"] / sum(s for s, _ in dataset.values()),
            fig["link_bytes"] / 2**20, 100 * busy, " (saturated)" if fig["cpu_saturated"] else "",
            fig["cpu_seconds"]["daemons"], fig["cpu_seconds"]["ranks"],
            fig["oom_kills_daemon"], fig["oom_kills_other"], fig["memory_peak_bytes"] / 2**20,
            shrinks))
    return fig


def _has_sha(dataset):
    return all(h for _, h in dataset.values())


def source_dataset(lab, hashes=False):
    src, out = lab.source["path"], {}
    for d, _, fs in os.walk(src):
        for f in fs:
            path = os.path.join(d, f)
            h = None
            if hashes:
                import hashlib
                with open(path, "rb") as fh:
                    h = hashlib.sha1(fh.read()).hexdigest()
            out[os.path.relpath(path, src)] = (os.path.getsize(path), h)
    return out


# ---- the local case: epochfs on every node, no cluster --------------------------------------

class LocalLab(Lab):
    """A lab whose daemons each get a hostfile naming only themselves: every node caches what
    it reads, nothing is shared."""

    def _make(self, data, options, wait_s):
        """Lab._make, each daemon started with a hostfile of its own node only."""
        from . import net as lab_net
        start = lab_node.start_daemon

        def start_alone(doc, node, epochfs, opts):
            own = os.path.join(self.state.dir, "hostfile-%s" % node["name"])
            with open(own, "w") as f:
                f.write("%s:%d\n" % (node["address"], lab_net.PORT))
            start(dict(doc, hostfile=own), node, epochfs, opts)

        lab_node.start_daemon = start_alone
        try:
            super()._make(data, options, wait_s)
        finally:
            lab_node.start_daemon = start

    def wait_cluster(self, wait_s=90, nodes=None):
        deadline = time.monotonic() + wait_s
        while not all(self.live_members(n) == 1 for n in nodes or self.nodes):
            if time.monotonic() > deadline:
                raise LabError("the local daemons did not come up")
            time.sleep(0.2)


# ---- paper ------------------------------------------------------------------------------------

def paper(node_counts=(1, 2, 4, 8), files=2000, epochs=3, link=25_000_000, source_s=10.5,
          ranks_per_node=2, local_batch=32, threads=4, workdir="/var/tmp", json_path=None,
          cases=CASES, allowance=ALLOWANCE, say=log):
    root = tempfile.mkdtemp(prefix="epochfs-lab-paper-", dir=workdir)
    try:
        data = os.path.join(root, "data")
        dataset = lab_workload.make_dataset(data, files)
        d = sum(s for s, _ in dataset.values())
        r = int(d / source_s)
        n_link = link * TCP_PAYLOAD
        doc = {"dataset_bytes": d, "files": files,
               "rates": {"source_bytes_per_s": r, "link_bytes_per_s": link,
                         "link_payload_bytes_per_s": n_link, "D_over_R_s": d / r,
                         "ranks_per_node": ranks_per_node, "local_batch": local_batch,
                         "reader_threads": threads, "ram_cache": "1.5 D/p (bytes, --ram-cache)",
                         "node_memory": "1.5 D/p + allowance", "disk_tier": None,
                         "node_memory_allowance": allowance,
                         "U": None},
               "runs": [], "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        say("D = %.1f MiB in %d files; source %.1f MiB/s (D/R = %.1f s); links %d bit/s"
            % (d / 2**20, files, r / 2**20, d / r, link * 8))
        t_all = time.monotonic()
        plan = [(p, c) for p in node_counts for c in cases]
        asked = list(plan)
        ingest_host = next((c for c in INGEST_HOSTS if c in cases), None)
        first = next(((1, c) for c in INGEST_CASES if (1, c) in plan), None)
        if first:  # U1 first: the p = 1 case that reads every byte locally in epochs 2+
            plan.remove(first)
        else:
            say("p = 1 cluster (or local) is not in this run: a calibration run of p = 1 "
                "cluster, 3 epochs, first, for U1 (doc[\"calibration\"])")
            first = (1, "cluster")
        for p, case in [first] + plan:
            cache = int(1.5 * d / p)
            memory = cache + allowance
            calibration = (p, case) not in asked
            say("p = %d, %s%s" % (p, case, " (calibration for U1)" if calibration else ""))
            cls = LocalLab if case == "local" else Lab
            opts = ["--ram-cache", str(cache)]
            lab_dir = os.path.join(root, "lab-%d-%s" % (p, case))
            lab = cls.up(data, p, directory=lab_dir, link=link, source_bw=r,
                         node_memory=memory, epochfs_options=opts)
            try:
                from .capacity import daemon_ram_cache
                ram_cache, memory_limit = daemon_ram_cache(lab, lab.nodes[0])
                say("  node0's daemon: RAM tier %.1f MiB of a %.1f MiB memory limit"
                    % (ram_cache / 2**20, memory_limit / 2**20))
                figs = run_epochs(lab, dataset, sampler={"cluster-order": "order", "locality": "locality"}
                                  .get(case, "distributed"), ranks_per_node=ranks_per_node,
                                  epochs=3 if calibration else epochs, threads=threads,
                                  local_batch=local_batch, direct=case == "direct", say=say)
                ingest = []
                if p > 1 and case == ingest_host and not calibration:
                    say("  U_%d: %d epochs with every rank reading its own node's files" % (p, INGEST_EPOCHS))
                    ingest = run_epochs(lab, dataset, sampler="owned", ranks_per_node=ranks_per_node,
                                        epochs=INGEST_EPOCHS, threads=threads,
                                        local_batch=local_batch, say=say)
            finally:
                down(lab.state.dir, verbose=False)
                shutil.rmtree(lab_dir, ignore_errors=True)  # LocalLab's own hostfiles
            for f in figs:
                doc.setdefault("calibration" if calibration else "runs", []).append({
                    "nodes": p, "case": case, "epoch": f["epoch"], "seconds": f["seconds"],
                    "source_bytes": f["source_bytes"], "device_bytes": f["device_bytes"],
                    "link_bytes": f["link_bytes"], "bytes_read": f["bytes_read"],
                    "files_read_twice": f["files_read_twice"], "bad_reads": f["bad_reads"],
                    "balance_fraction": f["balance_fraction"], "cpu_busy": f["cpu_busy"],
                    "cpu_saturated": f["cpu_saturated"], "cpu_seconds": f["cpu_seconds"],
                    "cache_per_node": cache,
                    "oom_kills_daemon": f["oom_kills_daemon"],
                    "oom_kills_other": f["oom_kills_other"],
                    "memory_peak_bytes": f["memory_peak_bytes"],
                    "pressure_shrinks": [m["shrinks"] for m in f["nodes_memory"]],
                    "nodes_memory": f["nodes_memory"],
                    "node_memory": memory, "daemon_ram_cache": ram_cache,
                    "model_seconds_io": model_seconds(case, f["epoch"], p, d, r, n_link, cache,
                                                      f["balance_fraction"])})
            for f in ingest:
                doc.setdefault("ingest", []).append({
                    "nodes": p, "case": "owned", "host_case": case, "epoch": f["epoch"],
                    "seconds": f["seconds"], "source_bytes": f["source_bytes"],
                    "link_bytes": f["link_bytes"], "bytes_read": f["bytes_read"],
                    "bad_reads": f["bad_reads"], "cpu_busy": f["cpu_busy"],
                    "cpu_saturated": f["cpu_saturated"], "cpu_seconds": f["cpu_seconds"]})
            u = apply_model(doc)
            if u and (p, case) == first:
                say("U1 = %.1f MiB/s (D/U1 = %.2f s): the ingest term at p = 1, and at any p"
                    " whose U_p is not measured" % (u / 2**20, d / u))
            if ingest:
                up = doc["rates"]["U_by_nodes"][str(p)]
                say("U_%d = %.1f MiB/s (D/U_%d = %.2f s)" % (p, up / 2**20, p, d / up))
            doc["elapsed_s"] = time.monotonic() - t_all
            if json_path:
                _write_json(json_path, doc)
        return doc
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def main_run(argv):
    ap = ArgParser(prog="cluster-lab run", description=__doc__,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.environ.get("EPOCHFS_LAB_DIR", "/var/tmp/epochfs-lab"))
    ap.add_argument("--sampler", choices=("distributed", "order", "locality", "owned"),
                    default="distributed")
    ap.add_argument("--source", action="store_true", help="read straight from the source (direct)")
    ap.add_argument("--ranks-per-node", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=4, help="reader threads per rank (loader workers)")
    ap.add_argument("--local-batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="check every read's SHA-1 against the source")
    ap.add_argument("--compute-ms", type=float, default=0.0,
                    help="a training step's time per sample, CPU idle (an accelerator's): each rank is "
                         "then a training loop fed by its readers (default 0: the readers alone)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.compute_ms < 0:
        raise LabError("--compute-ms must be >= 0")
    lab = Lab.load(a.dir)
    dataset = source_dataset(lab, hashes=a.check)
    figs = run_epochs(lab, dataset, a.sampler, a.ranks_per_node, a.epochs, a.seed, a.threads,
                      a.local_batch, direct=a.source, compute_ms=a.compute_ms)
    d = sum(s for s, _ in dataset.values())
    if a.json:
        print(json.dumps({"dataset_bytes": d, "nodes": len(lab.nodes), "epochs": figs}, indent=1))
    else:
        for f in figs:
            print("epoch %d: %.2f s%s, source %.3f D, link %.1f MiB, %d reads%s, cpu busy %.0f%%%s" % (
                f["epoch"], f["seconds"], "" if f["wait_seconds"] is None else
                " (steps %.2f s, waiting for reads %.2f s)" % (f["compute_seconds"], f["wait_seconds"]),
                f["source_bytes"] / d, f["link_bytes"] / 2**20, f["reads"],
                "" if f["bad_reads"] is None else ", %d wrong" % f["bad_reads"], 100 * f["cpu_busy"],
                " (saturated)" if f["cpu_saturated"] else ""))
    return 0


def main_paper(argv):
    ap = ArgParser(prog="cluster-lab paper", description=__doc__,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="1,2,4,8")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--link", default="200mbit")
    ap.add_argument("--source-seconds", type=float, default=10.5, help="D/R (default %(default)s)")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--allowance", default="%dM" % (ALLOWANCE >> 20),
                    help="each node's memory beyond its 1.5 D/p RAM tier (default %(default)s)")
    ap.add_argument("--json", dest="json_path", default=None, metavar="FILE")
    ap.add_argument("--png", default=None, metavar="DIR")
    a = ap.parse_args(argv)
    cases = a.cases.split(",")
    if any(c not in CASES for c in cases):
        raise LabError("--cases: one of %s" % ", ".join(CASES))
    doc = paper([int(x) for x in a.nodes.split(",")], a.files, a.epochs, parse_rate(a.link),
                a.source_seconds, threads=a.threads, json_path=a.json_path, cases=cases,
                allowance=parse_size(a.allowance))
    if a.png:
        from . import paper_plot as lab_paper_plot
        lab_paper_plot.plot(doc, a.png)
    if not a.json_path:
        print(json.dumps(doc, indent=1))
    return 0
