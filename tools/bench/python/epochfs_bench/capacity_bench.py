"""Does the cluster hold the dataset at capacity? N epochfs daemons on loopback over one
source, F files of log-normal size (median 100 kB, sigma 0.5: ~110 KB mean, ~30 % over one
128 KiB FUSE read, each one chunk), every node's RAM tier a fraction of the dataset, no disk
tier; every node reads the whole tree once per epoch in its own shuffled order (one reader per
node, all nodes at once), the page cache dropped between epochs. Counted outside the daemons:
source opens with inotify (one open = one read of the file: every file is one chunk), bytes on
the loopback interface (/sys/class/net/lo/statistics/rx_bytes, which is what crosses between
peers here), and each epoch's wall time. With --baseline-bin, the same runs with another build
(e.g. an earlier commit) interleaved round by round; figures are medians over --rounds.

Run as `tools/bench/cluster-bench capacity`; needs root and /dev/fuse.
"""
import concurrent.futures as cf
import ctypes
import math
import os
import random
import shutil
import statistics
import struct
import tempfile
import time

from .locality_bench import LoopbackCluster, _drop_caches

IN_OPEN = 0x20
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


class OpenCounter:
    """Counts IN_OPEN of regular files under the watched directories (inotify)."""

    def __init__(self, dirs):
        self.fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.names = {}
        for d in dirs:
            wd = _libc.inotify_add_watch(self.fd, d.encode(), IN_OPEN)
            if wd < 0:
                raise OSError(ctypes.get_errno(), "inotify_add_watch " + d)
            self.names[wd] = d

    def take(self):
        """{path: opens} since the last call."""
        out = {}
        while True:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return out
            i = 0
            while i < len(buf):
                wd, mask, _cookie, n = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode()
                i += 16 + n
                if name and not mask & 0x40000000:  # IN_ISDIR
                    p = os.path.join(self.names[wd], name)
                    out[p] = out.get(p, 0) + 1

    def close(self):
        os.close(self.fd)


def _lo_bytes():
    with open("/sys/class/net/lo/statistics/rx_bytes") as f:
        return int(f.read())


def make_dataset(src, files, seed=2026):
    """The dataset; returns {path: size}."""
    rng = random.Random(seed)
    sizes = {}
    for c in range(4):
        os.makedirs(os.path.join(src, "class%d" % c), exist_ok=True)
    for i in range(files):
        n = min(max(int(rng.lognormvariate(math.log(100000), 0.5)), 4096), (1 << 20) - 1)
        p = os.path.join(src, "class%d" % (i % 4), "img%d.bin" % i)
        with open(p, "wb") as f:
            f.write(os.urandom(n))
        sizes[p] = n
    return sizes


def _timeouts(cluster):
    """Peer request deadlines missed, summed over the nodes."""
    return sum(p.get("timeouts", 0) for m in cluster.mounts
               for p in cluster.ctl("peers", m)["peers"])


def _read_all(mnt, src, order):
    for p in order:
        with open(os.path.join(mnt, os.path.relpath(p, src)), "rb", buffering=0) as f:
            while f.read(32 << 10):  # as sha1sum: the kernel then sends 128 KiB READs
                pass


def one_run(bindir, root, src, sizes, nodes, ram_bytes, prefetch_memory, epochs, seed):
    """Per epoch: source bytes (inotify), loopback bytes, seconds, peer timeouts."""
    dataset = sum(sizes.values())
    cluster = LoopbackCluster(bindir, root, src, ram_bytes, nodes=nodes, disk=False,
                              extra=("--prefetch-memory", prefetch_memory,
                                     "--prefetch-window", "0"))
    counter = OpenCounter([src] + [os.path.join(src, "class%d" % c) for c in range(4)])
    try:
        out = []
        files = sorted(sizes)
        for e in range(1, epochs + 1):
            orders = []
            for i in range(nodes):
                o = list(files)
                random.Random(seed * 1000 + e * 100 + i).shuffle(o)
                orders.append(o)
            t_before, lo0, t0 = _timeouts(cluster), _lo_bytes(), time.monotonic()
            with cf.ThreadPoolExecutor(nodes) as ex:
                list(ex.map(lambda i: _read_all(cluster.mounts[i], src, orders[i]), range(nodes)))
            secs, lo = time.monotonic() - t0, _lo_bytes() - lo0
            _drop_caches()
            opens = counter.take()
            src_bytes = sum(sizes[p] * n for p, n in opens.items())
            out.append({"epoch": e, "seconds": secs, "source_bytes": src_bytes,
                        "source_fraction": src_bytes / dataset, "link_bytes": lo,
                        "files_read_twice": sum(1 for n in opens.values() if n > 1),
                        "timeouts": _timeouts(cluster) - t_before})
        return out
    finally:
        counter.close()
        cluster.close()


def run(bindir, nodes=4, files=2000, ram_fraction=1 / 3, epochs=3, rounds=3,
        prefetch_memory="8M", baseline_bin=None, workdir=None, log=print):
    root = tempfile.mkdtemp(prefix="epochfs-capacity-", dir=workdir)
    try:
        src = os.path.join(root, "src")
        sizes = make_dataset(src, files)
        dataset = sum(sizes.values())
        ram = int(dataset * ram_fraction)
        log("%d files, %.1f MiB; %d nodes, RAM %.1f MiB each (%.2f D), %d epochs, %d rounds"
            % (files, dataset / 2**20, nodes, ram / 2**20, ram_fraction, epochs, rounds))
        builds = [("epochfs", bindir)] + ([("baseline", baseline_bin)] if baseline_bin else [])
        runs = {name: [] for name, _ in builds}
        for r in range(rounds):
            for name, b in builds:
                work = os.path.join(root, "%s-%d" % (name, r))
                os.makedirs(work)
                res = one_run(b, work, src, sizes, nodes, ram, prefetch_memory, epochs, seed=r + 1)
                runs[name].append(res)
                log("round %d %s: " % (r + 1, name) + "; ".join(
                    "e%d src %.2f D link %.0f MiB %.1f s%s" % (
                        x["epoch"], x["source_fraction"], x["link_bytes"] / 2**20, x["seconds"],
                        " (%d timeouts)" % x["timeouts"] if x["timeouts"] else "")
                    for x in res))
        summary = {}
        for name, rs in runs.items():
            summary[name] = [{
                "epoch": e + 1,
                "source_fraction": statistics.median(x[e]["source_fraction"] for x in rs),
                "link_mib": statistics.median(x[e]["link_bytes"] for x in rs) / 2**20,
                "seconds": statistics.median(x[e]["seconds"] for x in rs),
            } for e in range(epochs)]
        return {"files": files, "dataset_bytes": dataset, "nodes": nodes,
                "ram_fraction": ram_fraction, "epochs": epochs, "rounds": rounds,
                "runs": runs, "median": summary}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def print_table(result):
    print("| build | epoch | source (÷ D) | loopback MiB | seconds |")
    print("|---|---:|---:|---:|---:|")
    for name, rows in result["median"].items():
        for x in rows:
            print("| %s | %d | %.2f | %.0f | %.1f |" % (name, x["epoch"], x["source_fraction"],
                                                       x["link_mib"], x["seconds"]))
