"""Peer prefetch measured on a real cluster: 4 epochfs daemons on loopback (UCX), 2 rank
processes per node reading an ImageFolder through their node's mount with an unchanged
torch DistributedSampler + DataLoader. Each daemon follows the ranks' order itself
(zero-change mode, `--order torch-distributed:seed=S,world=8,ranks=2i+2i+1` on node i) and,
ahead of the readers, fetches the upcoming samples other nodes own from their owners into its
staging area (cache/peer_staging.h). Run as `tools/bench/cluster-bench peer-prefetch`.

Method: epoch 0 warms the cluster (every file read once from the source, by its owner, kept in
the owner's tiers); before epoch 1 every node's RAM tier is emptied (the copies of other nodes'
files go, each node's own share stays in its disk tier) and the kernel page cache is dropped;
epoch 1 is measured. A read "found its data on the node" when the daemon served it from its
RAM tier, staging area or disk tier, not from a peer or the source (counted per chunk piece
handed to a FUSE read, from `epochctl stats`). The network cost is the bytes fetched from
peers in that epoch (`epochctl peers`), against the bytes read. `--prefetch-memory` (default
2M here) bounds the in-flight prefetch and the staging area, and so the lead: each rank's
slice of the staging area (1 MiB, about 100 of these files) is far less than its epoch (192
files at the default size), so the measured epoch cannot simply have been staged whole during the
pause between epochs. With `--baseline` the same run is repeated on a cluster without prefetch
(`--prefetch-window 0`). With `--registered` the ranks use `epochfs.torch.ShuffleAwareSampler`
(the same indices, the order registered over the admin socket at each epoch's start) and the
daemons run without `--order`.
"""

import multiprocessing
import os
import shutil
import tempfile
import time

from .locality_bench import (NODES, RANKS_PER_NODE, LoopbackCluster, _delta, _drop_caches,
                             _stop_ranks_and_cluster, _sum, make_image_folder, start_ranks)


def _one_cluster(bindir, root, src, data_bytes, files, seed, local_batch, step_ms, workers, tls,
                 prefetch, prefetch_memory, log, registered=False):
    world = NODES * RANKS_PER_NODE
    extra = ("--prefetch-memory", prefetch_memory) if prefetch else ("--prefetch-window", "0")

    def node_extra(i):
        if not prefetch or registered:
            return ()
        ranks = "+".join(str(r) for r in range(i * RANKS_PER_NODE, (i + 1) * RANKS_PER_NODE))
        return ("--order", "torch-distributed:seed=%d,world=%d,ranks=%s" % (seed, world, ranks))

    ctx = multiprocessing.get_context("fork")
    cluster, procs, conns = None, [], []
    try:
        cluster = LoopbackCluster(bindir, root, src, ram_bytes=max(64 << 20, 2 * data_bytes),
                                  tls=tls, extra=extra, node_extra=node_extra)
        start_ranks(ctx, cluster, world, workers, files, procs, conns)

        def epoch(e):
            before = cluster.counters()
            held_before = _sum(before, "staging_used")
            t0 = time.monotonic()
            for c in conns:
                c.send({"sampler": "registered" if registered else "plain", "epoch": e, "local_batch": local_batch,
                        "seed": seed, "step_ms": step_ms})
            replies = [c.recv() for c in conns]
            secs = time.monotonic() - t0
            after = cluster.counters()
            held = _sum(after, "staging_used")  # staged now: the next epoch's first samples
            return (_delta(after, before), sum(x["bytes"] for x in replies), secs,
                    (held_before, held))

        _, warm_bytes, warm_secs, _ = epoch(0)
        log("%s: warm-up epoch 0, %.1f MiB in %.1f s" % ("prefetch" if prefetch else "baseline",
                                                        warm_bytes / 2**20, warm_secs))
        cluster.empty_ram_tiers()
        _drop_caches()
        d, read, secs, held = epoch(1)
        on_node = _sum(d, "reads_ram") + _sum(d, "reads_disk") + _sum(d, "reads_staging")
        off_node = _sum(d, "reads_peer") + _sum(d, "reads_source")
        total = on_node + off_node
        out = {"prefetch": prefetch, "seconds": round(secs, 3), "bytes_read": read,
               "reads": total, "reads_on_node": on_node,
               "reads_from_staging": _sum(d, "reads_staging"),
               "reads_waiting_on_peers": _sum(d, "reads_peer"),
               "reads_from_source": _sum(d, "reads_source"),
               "on_node_fraction": on_node / total if total else 0.0,
               "peer_bytes": _sum(d, "peer_fetched"), "staged_bytes": _sum(d, "staged"),
               "staging_dropped_unread": _sum(d, "staging_dropped_unread"),
               "staging_refused": _sum(d, "staging_refused"),
               # staged when the epoch began / ended: a head of the epoch's (the next
               # epoch's) order, fetched while the previous epoch (this one) was read
               "staged_at_start_bytes": held[0], "staged_at_end_bytes": held[1],
               "per_node": d}
        out["peer_bytes_fraction"] = out["peer_bytes"] / read if read else 0.0
        log("%s: epoch 1, %d reads, %.1f %% found on the node (%d from staging), peer bytes "
            "%.1f MiB = %.1f %% of %.1f MiB read (%.1f MiB staged at the end), %.1f s"
            % ("prefetch" if prefetch else "baseline", total, 100 * out["on_node_fraction"],
               out["reads_from_staging"], out["peer_bytes"] / 2**20,
               100 * out["peer_bytes_fraction"], read / 2**20, held[1] / 2**20, secs))
        return out
    finally:
        _stop_ranks_and_cluster(conns, procs, cluster)


def run(bindir, files=1536, seed=0, local_batch=32, step_ms=0, workers=0, tls="tcp",
        baseline=False, prefetch_memory="2M", registered=False, workdir=None, log=print):
    root = tempfile.mkdtemp(prefix="epochfs-peerprefetch-", dir=workdir)
    try:
        src = os.path.join(root, "src")
        data_bytes = make_image_folder(src, files)
        result = {"nodes": NODES, "ranks_per_node": RANKS_PER_NODE, "files": files,
                  "dataset_bytes": data_bytes, "seed": seed, "local_batch": local_batch,
                  "step_ms": step_ms, "workers": workers, "ucx_tls": tls,
                  "prefetch_memory": prefetch_memory,
                  "order": "registered (ShuffleAwareSampler)" if registered
                           else "zero-change (--order torch-distributed)"}
        runs = [True, False] if baseline else [True]
        for prefetch in runs:
            sub = os.path.join(root, "prefetch" if prefetch else "baseline")
            os.makedirs(sub)
            result["with_prefetch" if prefetch else "without_prefetch"] = _one_cluster(
                bindir, sub, src, data_bytes, files, seed, local_batch, step_ms, workers, tls,
                prefetch, prefetch_memory, log, registered=registered)
        return result
    finally:
        if not os.environ.get("EPOCHFS_BENCH_KEEP"):
            shutil.rmtree(root, ignore_errors=True)
