"""Locality-aware loading measured on a real cluster: 4 epochfs daemons on loopback (UCX),
2 rank processes per node, a torch DataLoader per rank reading an ImageFolder through its
node's mount. Compares the bytes that cross the network in one epoch for a plain
DistributedSampler and for LocalityAwareSampler (same seed, same epoch, so the same global
batches), from the daemons' own counters. Run as `tools/bench/cluster-bench locality`.

Method (one cluster, one set of rank processes for every phase):
  1. warm-up epoch 0 with the plain sampler: every file is read from the source once, by its
     owner, and lands in the owner's tiers (RAM, and its disk tier, write-through);
  2. before each measured epoch every node's RAM tier is emptied (`epochctl evict --all
     --tier ram`: the copies of other nodes' files, kept in RAM only, go; each node's own
     share stays in its disk tier: the warm cache of a dataset larger than one node) and the
     kernel page cache is dropped;
  3. epoch 1 with the plain sampler, then epoch 1 with LocalityAwareSampler for each local
     batch size; each phase counts, per node, bytes fetched from peers (network) and bytes
     served from the node's own tiers, from `epochctl peers` / `epochctl stats`;
  4. every global batch of every LocalityAwareSampler run must equal, as a multiset, the same
     global batch of the plain run (rebuilt from what the plain ranks actually read).
Needs root (page cache drop, FUSE mounts). Standard library + torch/torchvision.
"""

import json
import multiprocessing
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from epochfs import admin
from .bench_env import drop_caches

NODES = 4
RANKS_PER_NODE = 2


# ---- rank processes ----------------------------------------------------------------------

def _rank_main(conn, rank, world, node, mount, workers):
    """One training rank: waits for phase commands on `conn`, runs an epoch, answers with
    the indices of every batch it loaded (in order) and the bytes it read."""
    import torch
    from torch.utils.data import DataLoader, DistributedSampler
    from torchvision.datasets import DatasetFolder

    from epochfs.locality import LocalityAwareSampler, mount_placement

    torch.set_num_threads(1)

    def read_bytes(path):
        with open(path, "rb", buffering=0) as f:
            return len(f.read())

    class Files(DatasetFolder):
        def __getitem__(self, index):
            path, _ = self.samples[index]
            return index, read_bytes(path)

    dataset = Files(mount, loader=read_bytes, extensions=(".jpg",))
    conn.send({"samples": len(dataset)})
    while True:
        cmd = conn.recv()
        if cmd is None:
            return
        b = cmd["local_batch"]
        if cmd["sampler"] == "plain":
            sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True,
                                         seed=cmd["seed"])
        elif cmd["sampler"] == "registered":  # DistributedSampler's indices, order registered
            from epochfs.torch import ShuffleAwareSampler
            sampler = ShuffleAwareSampler(dataset, num_replicas=world, rank=rank, shuffle=True,
                                          seed=cmd["seed"], mountpoint=mount)
        else:
            sampler = LocalityAwareSampler(
                dataset, num_replicas=world, rank=rank, shuffle=True, seed=cmd["seed"],
                global_batch_size=b * world, placement=mount_placement(dataset, mount),
                node_of_rank=lambda r: r // RANKS_PER_NODE)
        sampler.set_epoch(cmd["epoch"])
        loader = DataLoader(dataset, sampler=sampler, batch_size=b, num_workers=workers)
        batches, nbytes = [], 0
        step = cmd.get("step_ms", 0) / 1000.0  # a training step's time per batch, if any
        for idx, sizes in loader:
            batches.append(idx.tolist())
            nbytes += int(sizes.sum())
            if step:
                time.sleep(step)
        reply = {"rank": rank, "batches": batches, "bytes": nbytes}
        if cmd["sampler"] == "locality":
            reply["version"] = sampler.placement_version
            reply["predicted"] = {k: v for k, v in sampler.stats().items() if k != "rank_local"}
        conn.send(reply)


# ---- the cluster -------------------------------------------------------------------------

_next_port = [None]


def _free_port():
    """A loopback port below the kernel's ephemeral range: one from bind(0) can be
    handed to another process's outgoing connection before the daemon binds it."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    span = low - 20000
    if span < 1000:
        raise RuntimeError("ip_local_port_range leaves no ports below it for the test cluster")
    if _next_port[0] is None:
        _next_port[0] = random.SystemRandom().randrange(span)
    for _ in range(span):
        port = 20000 + _next_port[0] % span
        _next_port[0] += 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port below the ephemeral range")


def _drop_caches():
    drop_caches(1)  # the page cache only


def make_image_folder(src, files, classes=8, min_kb=4, max_kb=16, seed=1):
    """`files` random-byte .jpg files (sizes uniform in [min_kb, max_kb] KiB) in `classes`
    class directories; returns the total bytes."""
    rnd = random.Random(seed)
    total = 0
    for c in range(classes):
        os.makedirs(os.path.join(src, "class%02d" % c), exist_ok=True)
    for i in range(files):
        n = rnd.randint(min_kb * 1024, max_kb * 1024)
        with open(os.path.join(src, "class%02d" % (i % classes), "img%06d.jpg" % i), "wb") as f:
            f.write(rnd.randbytes(n))
        total += n
    return total


class LoopbackCluster:
    """`nodes` epochfs daemons over one source, one cluster on loopback (UCX_TLS=tls), each
    with a disk tier in root/cacheI unless disk=False. Always unmounts in close()."""

    def __init__(self, bindir, root, src, ram_bytes, tls="tcp", extra=(), node_extra=None,
                 nodes=NODES, disk=True):
        self.epochfs = os.path.join(bindir, "epochfs")
        self.epochctl = os.path.join(bindir, "epochctl")
        self.root, self.src = root, src
        self.mounts = []
        secret = os.path.join(root, "secret")
        with open(os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(os.urandom(24).hex())
        env = dict(os.environ, UCX_TLS=tls)
        for attempt in range(3):
            ports = [_free_port() for _ in range(nodes)]
            peers = ",".join("127.0.0.1:%d" % p for p in ports)
            ok = True
            for i in range(nodes):
                mnt, cache = os.path.join(root, "mnt%d" % i), os.path.join(root, "cache%d" % i)
                os.makedirs(mnt, exist_ok=True)
                if disk:
                    os.makedirs(cache, exist_ok=True)
                r = subprocess.run(
                    [self.epochfs, src, mnt, "--peers", peers, "--listen",
                     "127.0.0.1:%d" % ports[i], "--secret-file", secret,
                     "--ram-cache", str(ram_bytes), *(("--cache-dir", cache) if disk else ()),
                     "--log-file", os.path.join(root, "log%d" % i), "--log-level", os.environ.get("EPOCHFS_BENCH_LOG_LEVEL", "warn"), *extra,
                     *(node_extra(i) if node_extra else ())],
                    env=env, capture_output=True, text=True)
                if r.returncode != 0:
                    ok = False
                    if "cannot listen" not in r.stderr or attempt == 2:
                        self.close()
                        raise RuntimeError("node %d: %s" % (i, r.stderr.strip()))
                    break
                self.mounts.append(mnt)
            if ok:
                break
            self.close()
        deadline = time.monotonic() + 30
        while any(sum(p["live"] for p in self.ctl("peers", m)["peers"]) < nodes
                  for m in self.mounts):
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the daemons did not all connect")
            time.sleep(0.1)

    def ctl(self, cmd, mnt, *extra):
        out = subprocess.run([self.epochctl, cmd, mnt, "--json", *extra], check=True,
                             capture_output=True, text=True)
        return json.loads(out.stdout)

    def counters(self):
        """Per node: network bytes fetched from peers, and bytes served to readers by tier."""
        out = []
        for m in self.mounts:
            st, pe = self.ctl("stats", m), self.ctl("peers", m)

            def count(path):
                return admin.reply_value(st, path, 0)
            out.append({
                "peer_fetched": sum(p["bytes_fetched"] for p in pe["peers"]),
                "peer": count(admin.STATS_PEER_HIT_BYTES),
                "ram": count(admin.STATS_RAM_HIT_BYTES),
                "disk": count(admin.STATS_DISK_HIT_BYTES),
                "staging": count(admin.STATS_STAGING_HIT_BYTES),
                "source": count(admin.STATS_SOURCE_BYTES),
                "staged": count(admin.STATS_STAGING_STAGED_BYTES),
                "staging_dropped_unread": count(admin.STATS_STAGING_EVICTIONS),
                "staging_refused": count(admin.STATS_STAGING_REFUSED),
                "staging_used": count(admin.STATS_STAGING_USED_BYTES),  # a level, not a counter
                # reads (chunk pieces handed to FUSE reads) by where they found their data
                "reads_ram": count(admin.STATS_RAM_HIT_CHUNKS),
                "reads_disk": count(admin.STATS_DISK_HIT_CHUNKS),
                "reads_staging": count(admin.STATS_STAGING_HIT_CHUNKS),
                "reads_peer": count(admin.STATS_PEER_HIT_CHUNKS),
                "reads_source": count(admin.STATS_SOURCE_CHUNKS),
            })
        return out

    def empty_ram_tiers(self):
        for m in self.mounts:
            subprocess.run([self.epochctl, "evict", m, "--all", "--tier", "ram"], check=True,
                           capture_output=True)

    def close(self):
        for m in self.mounts:
            subprocess.run(["fusermount3", "-u", m], capture_output=True)
        self.mounts = []


def start_ranks(ctx, cluster, world, workers, files, procs, conns):
    """One process per rank, rank r on node r // RANKS_PER_NODE, appended to procs and conns
    (the caller stops them, also when this raises); returns once every rank sees `files`."""
    for r in range(world):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_rank_main, args=(child, r, world, r // RANKS_PER_NODE,
                                                 cluster.mounts[r // RANKS_PER_NODE], workers))
        p.start()
        procs.append(p)
        conns.append(parent)
    counts = {c.recv()["samples"] for c in conns}
    if counts != {files}:
        raise RuntimeError("ranks see %s samples, expected %d" % (counts, files))


def _delta(after, before):
    return [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]


def _sum(per_node, key):
    return sum(n[key] for n in per_node)


def global_batches(rank_lists, local_batch):
    """Global batch k = the union of every rank's k-th local batch (sorted multiset)."""
    out = []
    k = 0
    while True:
        gb = []
        for lst in rank_lists:
            gb.extend(lst[k * local_batch:(k + 1) * local_batch])
        if not gb:
            return out
        out.append(sorted(gb))
        k += 1


# ---- the benchmark -----------------------------------------------------------------------

def run(bindir, files=2048, local_batches=(8, 32, 64, 128), seed=0, workers=0, tls="tcp",
        workdir=None, log=print):
    """Runs the whole measurement; returns the result dict (see module docstring)."""
    root = tempfile.mkdtemp(prefix="epochfs-locality-", dir=workdir)
    src = os.path.join(root, "src")
    data_bytes = make_image_folder(src, files)
    world = NODES * RANKS_PER_NODE
    ctx = multiprocessing.get_context("fork")
    cluster, procs, conns = None, [], []
    result = {"nodes": NODES, "ranks_per_node": RANKS_PER_NODE, "files": files,
              "dataset_bytes": data_bytes, "seed": seed, "ucx_tls": tls, "workers": workers}
    try:
        # Each RAM tier can hold the whole dataset; the disk tier keeps the node's own share.
        cluster = LoopbackCluster(bindir, root, src, ram_bytes=max(64 << 20, 2 * data_bytes),
                                  tls=tls, extra=("--prefetch-window", "0"))
        start_ranks(ctx, cluster, world, workers, files, procs, conns)
        # `epochctl placement --json` and the Python client read the same map on every node.
        maps = []
        for m in cluster.mounts:
            ctl_map = cluster.ctl("placement", m)
            version, owners = admin.placement(m)
            maps.append(ctl_map["version"] == version and ctl_map["total"] == files
                        and {e[0]: e[1] for e in ctl_map["entries"]} == owners)
        result["epochctl_placement_matches"] = all(maps)
        result["files_per_owner"] = [sum(1 for o in owners.values() if o == n) for n in range(NODES)]

        def phase(sampler, epoch, local_batch, measured=True):
            if measured:
                cluster.empty_ram_tiers()
                _drop_caches()
            before = cluster.counters()
            t0 = time.monotonic()
            for c in conns:
                c.send({"sampler": sampler, "epoch": epoch, "local_batch": local_batch,
                        "seed": seed})
            replies = sorted((c.recv() for c in conns), key=lambda x: x["rank"])
            secs = time.monotonic() - t0
            d = _delta(cluster.counters(), before)
            read = sum(x["bytes"] for x in replies)
            out = {"sampler": sampler, "epoch": epoch, "local_batch": local_batch,
                   "seconds": round(secs, 3), "bytes_read": read,
                   "remote_bytes": _sum(d, "peer_fetched"),
                   "peer_tier_bytes": _sum(d, "peer"),
                   "local_bytes": _sum(d, "ram") + _sum(d, "disk") + _sum(d, "staging"),
                   "source_bytes": _sum(d, "source"), "per_node": d}
            out["remote_fraction"] = out["remote_bytes"] / read if read else 0.0
            # Reads (chunk pieces served to FUSE reads) found on the node (RAM, disk, staging)
            # versus fetched from a peer or the source, from the daemons' counters.
            out["local_reads"] = _sum(d, "reads_ram") + _sum(d, "reads_disk") + _sum(d, "reads_staging")
            out["remote_reads"] = _sum(d, "reads_peer") + _sum(d, "reads_source")
            n_reads = out["local_reads"] + out["remote_reads"]
            out["local_read_fraction"] = out["local_reads"] / n_reads if n_reads else 0.0
            if sampler != "plain":
                out["placement_versions"] = sorted({x["version"] for x in replies})
                out["predicted"] = replies[0]["predicted"]
            flat = []
            for x in replies:
                flat.append([i for b in x["batches"] for i in b])
            return out, flat

        warm, _ = phase("plain", 0, 32, measured=False)
        result["warmup"] = {k: warm[k] for k in ("seconds", "bytes_read", "remote_bytes",
                                                "source_bytes")}
        log("warm-up epoch 0: %.1f MiB read, %.1f MiB from the source"
            % (warm["bytes_read"] / 2**20, warm["source_bytes"] / 2**20))
        plain, plain_lists = phase("plain", 1, 32)
        result["plain"] = {k: v for k, v in plain.items() if k != "per_node"}
        result["plain"]["per_node"] = plain["per_node"]
        log("plain DistributedSampler, epoch 1: %.1f MiB read, %.1f MiB remote (%.1f %%)"
            % (plain["bytes_read"] / 2**20, plain["remote_bytes"] / 2**20,
               100 * plain["remote_fraction"]))
        rows = []
        for b in local_batches:
            loc, loc_lists = phase("locality", 1, b)
            want = global_batches(plain_lists, b)
            got = global_batches(loc_lists, b)
            loc["global_batches"] = len(got)
            loc["global_batches_identical"] = want == got
            loc["remote_vs_plain"] = (loc["remote_bytes"] / plain["remote_bytes"]
                                      if plain["remote_bytes"] else None)
            rows.append(loc)
            log("LocalityAwareSampler, local batch %3d: %.2f MiB remote (%.2f %% of bytes read)"
                " = %.1f %% of plain's; %d global batches identical as sets: %s"
                % (b, loc["remote_bytes"] / 2**20, 100 * loc["remote_fraction"],
                   100 * (loc["remote_vs_plain"] or 0), len(got), loc["global_batches_identical"]))
        result["locality"] = rows
    finally:
        _stop_ranks_and_cluster(conns, procs, cluster)
        shutil.rmtree(root, ignore_errors=True)
    return result


def print_table(result, out=sys.stdout):
    p = result["plain"]
    out.write("%d nodes x %d ranks, %d files (%.1f MiB), UCX_TLS=%s; epoch 1 after a warm-up epoch,"
              " RAM tiers emptied and page cache dropped before each run\n"
              % (result["nodes"], result["ranks_per_node"], result["files"],
                 result["dataset_bytes"] / 2**20, result["ucx_tls"]))
    out.write("| sampler | local batch | bytes read | remote bytes | remote % of read |"
              " remote vs plain | global batches identical |\n|---|---:|---:|---:|---:|---:|---|\n")
    out.write("| DistributedSampler | any | %d | %d | %.1f %% | 100 %% | - |\n"
              % (p["bytes_read"], p["remote_bytes"], 100 * p["remote_fraction"]))
    for r in result["locality"]:
        out.write("| LocalityAwareSampler | %d | %d | %d | %.2f %% | %.1f %% | %s (%d) |\n"
                  % (r["local_batch"], r["bytes_read"], r["remote_bytes"],
                     100 * r["remote_fraction"], 100 * (r["remote_vs_plain"] or 0),
                     "yes" if r["global_batches_identical"] else "NO", r["global_batches"]))


def _stop_ranks_and_cluster(conns, procs, cluster):
    """Tells every rank process to exit (killing laggards), then stops the daemons."""
    for c in conns:
        try:
            c.send(None)
        except OSError:
            pass
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    if cluster is not None:
        cluster.close()
    time.sleep(0.3)
