"""What the lab nodes' memory did during an epoch, counted from outside the daemons where it
can be: OOM kills in the nodes' memory cgroups and their peak use (MemoryWatch), and per node
the daemon's figures (its admin socket: the memory watcher's shrinks of the RAM tier, RSS, the
tier's bytes; /proc: its peak RSS) and its readers' peak RSS (daemon_figures,
node_memory_figures). Used by `cluster-lab run` and `paper` (paper.py). Standard library only.
"""

import os
import subprocess


def _memory_cgroups(lab):
    """Each node's memory cgroup directory (v1 .../memory/..., v2 the node's own)."""
    out = []
    for node in lab.nodes:
        dirs = [d for d in node.get("cgroups") or [] if os.path.exists(os.path.join(d, "memory.max"))
                or os.path.exists(os.path.join(d, "memory.limit_in_bytes"))]
        out.append(dirs[-1] if dirs else None)
    return out


class MemoryWatch:
    """Counted from outside the daemons: OOM kills in the nodes' memory cgroups (the kernel
    log's `oom-kill:` lines naming a node's cgroup, by killed task) and each node's peak
    memory use (v1 memory.max_usage_in_bytes, reset at start(); v2 memory.peak)."""

    def __init__(self, lab):
        self.cgroups = _memory_cgroups(lab)
        # The kernel log names the cgroup by its path inside the hierarchy.
        self.names = [None if d is None else "/" + d.split("/memory/", 1)[-1]
                      if "/memory/" in d else d for d in self.cgroups]

    @staticmethod
    def _kernel_log():
        r = subprocess.run(["dmesg"], capture_output=True, text=True)
        return r.stdout.splitlines() if r.returncode == 0 else []

    def start(self):
        self.seen = len(self._kernel_log())
        for d in self.cgroups:
            if d and os.path.exists(os.path.join(d, "memory.max_usage_in_bytes")):
                try:
                    with open(os.path.join(d, "memory.max_usage_in_bytes"), "w") as f:
                        f.write("0")
                except OSError:
                    pass

    def stop(self):
        daemon = other = 0
        for line in self._kernel_log()[self.seen:]:
            if "oom-kill:" not in line:
                continue
            if not any(n and ("oom_memcg=%s," % n) in line or (n and ("oom_memcg=%s/" % n) in line)
                       for n in self.names):
                continue
            if ",task=epochfs," in line:
                daemon += 1
            else:
                other += 1
        peak = 0
        for d in self.cgroups:
            for name in ("memory.max_usage_in_bytes", "memory.peak"):
                try:
                    with open(os.path.join(d, name)) as f:
                        peak = max(peak, int(f.read().split()[0]))
                    break
                except (OSError, ValueError, TypeError, IndexError):
                    continue
        return {"oom_kills_daemon": daemon, "oom_kills_other": other, "memory_peak_bytes": peak}


def peak_rss(pid="self"):
    """A process's peak resident set (/proc/PID/status VmHWM), bytes; None if gone. (Not
    getrusage's ru_maxrss: across exec it keeps the forking parent's size.)"""
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, TypeError):
        pass
    return None


def daemon_figures(lab):
    """Per node, what its daemon says of its memory: worker pid, the watcher's shrinks so far
    (stats.memory.pressure), RSS now and at its peak, the RAM tier's bytes and cap (None for a
    node whose daemon does not answer)."""
    from epochfs import admin
    out = []
    for node in lab.nodes:
        try:
            with admin.AdminClient(node["mountpoint"]) as c:
                pid = c.call({"cmd": admin.CMD_STATUS})["pid"]
                stats = c.call({"cmd": admin.CMD_STATS})
        except (admin.EpochfsError, OSError, KeyError):
            out.append(None)
            continue
        def value(path):
            return admin.reply_value(stats, path)
        out.append({"pid": pid, "shrinks": value(admin.STATS_MEMORY_PRESSURE_SHRINKS),
                    "rss_bytes": value(admin.STATS_MEMORY_RSS_BYTES), "rss_peak_bytes": peak_rss(pid),
                    "ram_used_bytes": value(admin.STATS_RAM_USED_BYTES),
                    "ram_capacity_bytes": value(admin.STATS_RAM_CAPACITY_BYTES)})
    return out


def node_memory_figures(lab, before, after, done):
    """Per node for one epoch: the watcher's shrinks in it, the daemon's figures after it, and
    the largest peak RSS of the node's readers (their last line, epochfs_lab.reader)."""
    out = []
    for node, b, a in zip(lab.nodes, before, after):
        a = a or {}
        shrinks = a.get("shrinks")
        if shrinks is not None and b and b.get("pid") == a.get("pid") and b.get("shrinks") is not None:
            shrinks -= b["shrinks"]  # a restarted worker counts from 0
        readers = [d.get("max_rss_bytes") for name, d in done.items()
                   if name.split(".rank")[0] == node["name"] and d.get("max_rss_bytes")]
        out.append({"node": node["name"], "shrinks": shrinks,
                    "daemon_rss_bytes": a.get("rss_bytes"),
                    "daemon_rss_peak_bytes": a.get("rss_peak_bytes"),
                    "ram_used_bytes": a.get("ram_used_bytes"),
                    "ram_capacity_bytes": a.get("ram_capacity_bytes"),
                    "reader_rss_peak_bytes": max(readers) if readers else None})
    return out
