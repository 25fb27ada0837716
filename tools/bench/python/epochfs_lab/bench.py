"""`cluster-lab bench`: the peer transport against a lab link, in one run.

Two lab nodes joined by RATE links (default 1gbit, tbf on both ends of each veth), a dataset of
--files files of exactly 1 MiB (one chunk each). For each integrity mode (MAC on: the default
`--peer-integrity mac`; MAC off: `checksum`) a lab is made, node1 reads the files it owns so
they are warm in its RAM tier, then --repeats times, interleaved:

- `ucx_perftest -t ucp_am_bw -s 1048576` from node1 (client, the sender) to node0 (server)
  between the two namespaces with UCX_TLS=tcp, the daemons' transport;
- peer fetch: node0's RAM tier emptied (admin `evict`), the page cache dropped, then node0 reads
  the files node1 owns with --threads reader threads: every chunk crosses the link as a peer
  fetch (request, 1 MiB reply, MAC or checksum verified). Rate = bytes read / the readers'
  time; the bytes on node0's veth over the same time are given beside it.

Each figure is the median of the repeats, in MB/s (10^6 B/s, as the link rate) and as a
fraction of the link rate; with TCP over a 1500-byte MTU at most 1448/1514 = 95.6 % of the
link can be payload. The host's CPU use during each measurement is recorded: a figure taken
while the CPU was saturated (>= 90 % of all cores busy) is marked so (docs/LAB.md).
Needs root, /dev/fuse, `ip netns`, ucx_perftest. Standard library only.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from epochfs import admin
from . import net as lab_net, node as lab_node, workload as lab_workload
from .lab import Lab
from .down import down
from .util import ArgParser, LabError, log, parse_rate, rate_text

CHUNK = 1 << 20
SATURATED = 0.90


class CpuMeter:
    """Busy fraction of all cores between start() and stop() (/proc/stat)."""

    @staticmethod
    def _sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + v[4]
        return sum(v), idle

    def start(self):
        self.t0, self.i0 = self._sample()
        return self

    def stop(self):
        t1, i1 = self._sample()
        return 1 - (i1 - self.i0) / max(1, t1 - self.t0)


def make_dataset(root, files):
    os.makedirs(root, exist_ok=True)
    for i in range(files):
        with open(os.path.join(root, "chunk%05d.bin" % i), "wb") as f:
            f.write(os.urandom(CHUNK))


def perftest(lab, server, client, iters, port=17711):
    """MB/s of ucp_am_bw, 1 MiB messages, client -> server, UCX_TLS=tcp (the nodes' env)."""
    args = ["-t", "ucp_am_bw", "-s", str(CHUNK), "-n", str(iters), "-p", str(port)]
    srv = lab_node.popen(server, ["ucx_perftest"] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        cpu = CpuMeter().start()
        r = lab_node.run_in(client, ["ucx_perftest", server["address"]] + args, timeout=300)
        busy = cpu.stop()
    finally:
        try:
            srv.wait(timeout=30)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
    for line in r.stdout.splitlines():
        if line.startswith("Final:"):
            # columns: Final: iters latency(typical avg overall) bandwidth MB/s (avg overall)
            # msgrate; ucx_perftest's MB is 2^20 bytes.
            return float(line.split()[6]) * (1 << 20) / 1e6, busy
    raise LabError("ucx_perftest printed no Final line: %s" % (r.stdout + r.stderr)[-500:])


def owned_by(lab, node_index):
    _, owners = admin.placement(lab.nodes[0]["mountpoint"])
    return sorted(p for p, o in owners.items() if o == node_index)


def peer_fetch(lab, reader, files, threads):
    """MB/s of reading `files` on the reader node with its RAM tier empty, and the bytes its
    link carried to it meanwhile."""
    with admin.AdminClient(reader["mountpoint"]) as c:
        c.call({"cmd": admin.CMD_EVICT, "all": True, "tier": "ram"})
    lab_workload.drop_caches()
    before = lab_net.link_counters(reader["host_link"])["to_node"]
    cpu = CpuMeter().start()
    handles = lab_workload.start_readers(lab, {reader["name"]: files}, threads)
    out = lab_workload.collect(handles)[reader["name"]]
    busy = cpu.stop()
    link = lab_net.link_counters(reader["host_link"])["to_node"] - before
    bad = [r["path"] for r in out if r.get("bytes") != CHUNK]
    if bad:
        raise LabError("peer fetch read wrong sizes: %s" % bad[:5])
    seconds = max(r["start"] + r["seconds"] for r in out) - min(r["start"] for r in out)
    return sum(r["bytes"] for r in out) / seconds / 1e6, link / seconds / 1e6, busy


def run_mode(data, workdir, integrity, link, repeats, threads, iters, say):
    lab = Lab.up(data, 2, directory=os.path.join(workdir, "lab-" + integrity), link=link, source_bw=0,
                 node_memory=4 << 30, epochfs_options=["--peer-integrity", integrity,
                                                       "--prefetch-window", "0", "--ram-cache", "1G"])
    try:
        node0, node1 = lab.nodes
        files = owned_by(lab, 1)
        lab_workload.collect(lab_workload.start_readers(lab, {"node1": files}, 4))  # warm at the owner
        rows = []
        for r in range(repeats):
            row = {}
            steps = ("perftest", "fetch") if r % 2 == 0 else ("fetch", "perftest")
            for step in steps:
                if step == "perftest":
                    row["perftest_mb_s"], row["perftest_cpu"] = perftest(lab, node0, node1, iters)
                else:
                    row["fetch_mb_s"], row["fetch_wire_mb_s"], row["fetch_cpu"] = peer_fetch(lab, node0, files, threads)
            rows.append(row)
            say("%s repeat %d: ucp_am_bw %.1f MB/s (CPU %.0f %%), peer fetch %.1f MB/s payload, %.1f MB/s "
                "on the wire (CPU %.0f %%)" % (integrity, r + 1, row["perftest_mb_s"], 100 * row["perftest_cpu"],
                                              row["fetch_mb_s"], row["fetch_wire_mb_s"], 100 * row["fetch_cpu"]))
        return {"integrity": integrity, "files": len(files), "rows": rows}
    finally:
        down(lab.state.dir, verbose=False)


def summarize(mode, link):
    med = {k: statistics.median(r[k] for r in mode["rows"]) for k in mode["rows"][0]}
    rate = link / 1e6
    med["perftest_of_link"] = med["perftest_mb_s"] / rate
    med["fetch_of_link"] = med["fetch_mb_s"] / rate
    med["fetch_of_perftest"] = med["fetch_mb_s"] / med["perftest_mb_s"]
    med["saturated"] = max(max(r["perftest_cpu"], r["fetch_cpu"]) for r in mode["rows"]) >= SATURATED
    mode["median"] = med
    return med


def run(link=125_000_000, files=256, repeats=3, threads=8, iters=600, modes=("mac", "checksum"),
        workdir="/var/tmp", say=log):
    root = tempfile.mkdtemp(prefix="epochfs-lab-bench-", dir=workdir)
    try:
        data = os.path.join(root, "data")
        make_dataset(data, files)
        out = {"link": rate_text(link), "link_mb_s": link / 1e6, "files": files, "threads": threads,
               "perftest_iters": iters, "modes": []}
        for m in modes:
            mode = run_mode(data, root, m, link, repeats, threads, iters, say)
            summarize(mode, link)
            out["modes"].append(mode)
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def print_table(out):
    print("link %s (%.0f MB/s), 2 nodes, 1 MiB chunks, %d reader threads; medians of %d repeats" % (
        out["link"], out["link_mb_s"], out["threads"], len(out["modes"][0]["rows"])))
    print("| integrity | ucp_am_bw MB/s | of link | peer fetch MB/s | of link | of ucp_am_bw | on the wire MB/s | CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for m in out["modes"]:
        x = m["median"]
        print("| %s | %.1f | %.1f %% | %.1f | %.1f %% | %.1f %% | %.1f | %s |" % (
            m["integrity"], x["perftest_mb_s"], 100 * x["perftest_of_link"], x["fetch_mb_s"],
            100 * x["fetch_of_link"], 100 * x["fetch_of_perftest"], x["fetch_wire_mb_s"],
            "saturated" if x["saturated"] else "%.0f %% / %.0f %%" % (100 * x["perftest_cpu"], 100 * x["fetch_cpu"])))


def main(argv):
    ap = ArgParser(prog="cluster-lab bench", description=__doc__.split("Needs root")[0],
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--link", default="1gbit", help="the nodes' link rate (default %(default)s)")
    ap.add_argument("--files", type=int, default=256, help="1 MiB files in the dataset (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=8, help="reader threads on node0 (default %(default)s)")
    ap.add_argument("--iters", type=int, default=600, help="ucx_perftest -n (default %(default)s)")
    ap.add_argument("--integrity", default="mac,checksum", help="modes to run (default %(default)s)")
    ap.add_argument("--workdir", default="/var/tmp")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    modes = tuple(a.integrity.split(","))
    if set(modes) - {"mac", "checksum"} or a.files < 4 or a.repeats < 1:
        raise LabError("cluster-lab bench: --integrity takes mac and/or checksum; --files >= 4; --repeats >= 1")
    if not shutil.which("ucx_perftest"):
        raise LabError("ucx_perftest not found (Debian: ucx-utils)")
    out = run(parse_rate(a.link), a.files, a.repeats, a.threads, a.iters, modes, a.workdir)
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print_table(out)
    return 0
