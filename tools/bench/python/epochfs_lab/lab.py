"""The cluster lab: N epochfs nodes on one machine that look like a cluster (docs/LAB.md).

`Lab.up()` makes, in this order, recording each thing in DIR/state.json before making it:
the lab's directories (DIR/ns a private bind mount for the namespace files, DIR/mnt a shared
one for the mountpoints), the job's secret and hostfile, the source (source.py), the cgroups
(cgroup.py), the bridge and per node its network (net.py), namespaces (node.py) and cgroups,
then starts every node's daemon through the documented launch and waits until each sees all
the others. `Lab.load()` opens a lab that is up; `down.down()` removes it.
Standard library only.
"""

import json
import os
import random
import time

from epochfs import admin
from . import cgroup as lab_cgroup, net as lab_net, node as lab_node, object_store as lab_object_store, \
    slurm as lab_slurm, source as lab_source
from epochfs_bench.bench_env import is_mounted
from .dir_opens import DirOpenCounter
from .down import down
from .state import LabState
from .util import REPO, LabError, log, rate_text, read_text, run

DEFAULT_DIR = os.environ.get("EPOCHFS_LAB_DIR", "/var/tmp/epochfs-lab")
DEFAULT_LINK = "200mbit"
DEFAULT_SOURCE_BW = "400mbit"


def find_binary(name, bindir=None):
    """bindir, else $EPOCHFS_BIN_DIR, else this checkout's build/bin, else PATH."""
    for d in (bindir, os.environ.get("EPOCHFS_BIN_DIR"), os.path.join(REPO, "build", "bin")):
        if d and os.access(os.path.join(d, name), os.X_OK):
            return os.path.abspath(os.path.join(d, name))
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if d and os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    raise LabError("%s not found (give --bin DIR, set EPOCHFS_BIN_DIR, or build with tools/build)" % name)


def unavailable_reason():
    """Why a lab cannot be made on this machine, or None."""
    if os.geteuid() != 0:
        return "the lab needs root (namespaces, mounts, cgroups, loop devices)"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as e:
        return "/dev/fuse is not usable: %s" % e
    why = lab_net.check_tools()
    if why:
        return why
    try:
        lab_cgroup.detect()
    except LabError as e:
        return str(e)
    return None


def _host_memory():
    for line in (read_text("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


class Lab:
    """A lab that is up (or being made): its state document and its nodes."""

    def __init__(self, state):
        self.state = state
        self.doc = state.doc

    @classmethod
    def load(cls, directory=DEFAULT_DIR):
        state = LabState.load(os.path.abspath(directory))
        if state is None:
            raise LabError("no lab in %s (start one with: cluster-lab up)" % os.path.abspath(directory))
        return cls(state)

    @property
    def nodes(self):
        return self.doc["nodes"]

    @property
    def source(self):
        return self.doc["source"]

    @property
    def epochfs(self):
        return self.doc["config"]["epochfs"]

    def node(self, name):
        """A node by name (node0) or index (0)."""
        for n in self.nodes:
            if name in (n["name"], str(n["index"])):
                return n
        raise LabError("no node %r in this lab (nodes: %s)" % (name, ", ".join(n["name"] for n in self.nodes)))

    def cgroups(self):
        return lab_cgroup.LabCgroups(self.state)

    # ---- up -------------------------------------------------------------------------------

    @classmethod
    def up(cls, data, nodes, directory=DEFAULT_DIR, link=DEFAULT_LINK, source_bw=DEFAULT_SOURCE_BW,
           node_memory=None, node_cpus=0.0, epochfs_options=(), bindir=None, wait_s=90, slurm=False,
           s3=False):
        """Makes the lab; on any failure removes what it made and raises. With slurm=True the
        nodes run Slurm (lab_slurm) instead of the lab's own epochfs daemons. With s3=True the
        dataset goes to an object store on a node of its own (object_store.py) behind a link of
        `source_bw`, and the nodes mount s3://lab/data/ instead of the loop-device source."""
        why = unavailable_reason()
        if why:
            raise LabError(why)
        config = cls._config(data, nodes, link, source_bw, node_memory, node_cpus, bindir)
        directory = os.path.abspath(directory)
        created = cls._claim_dir(directory)
        prefix = cls._new_prefix()
        state = LabState.create(directory, prefix)
        state.doc["dir_created"] = created
        if s3 and slurm:
            raise LabError("--s3 and --slurm cannot be combined yet")
        if s3 and not source_bw:
            raise LabError("--s3 needs a --source-bw: the store's link rate")
        state.doc["config"].update(config, options=list(epochfs_options), slurm=slurm, s3=s3)
        lab = cls(state)
        try:
            lab._make(os.path.abspath(data), list(epochfs_options), wait_s)
        except BaseException:
            log("up failed; removing what it made")
            try:
                down(directory, verbose=False)
            except LabError as e:
                log(str(e))
            raise
        return lab

    @staticmethod
    def _config(data, nodes, link, source_bw, node_memory, node_cpus, bindir):
        if not os.path.isdir(data):
            raise LabError("--data %s is not a directory" % data)
        if not 1 <= nodes <= 64:
            raise LabError("--nodes must be 1..64, not %d" % nodes)
        if node_cpus < 0:
            raise LabError("--node-cpus must be positive")
        memory = (node_memory if node_memory else _host_memory() // nodes) // 4096 * 4096  # as the kernel keeps it
        if memory < (64 << 20):
            raise LabError("--node-memory must be at least 64M")
        return {"nodes": nodes, "link_bytes_per_s": link, "source_bw_bytes_per_s": source_bw,
                "node_memory": memory, "node_cpus": node_cpus,
                "epochfs": find_binary("epochfs", bindir), "epochctl": find_binary("epochctl", bindir)}

    @staticmethod
    def _claim_dir(directory):
        if LabState.load(directory) is not None:
            raise LabError("a lab is already up in %s (cluster-lab down --dir %s)" % (directory, directory))
        if os.path.isdir(directory):
            if os.listdir(directory):
                raise LabError("--dir %s exists and is not empty" % directory)
            return False
        os.makedirs(directory)
        return True

    @staticmethod
    def _new_prefix():
        taken = run(["ip", "-o", "link", "show"]).stdout + run(["ip", "netns", "list"]).stdout
        for _ in range(100):
            prefix = "el%04x" % random.SystemRandom().randrange(1 << 16)
            if prefix + "-" not in taken:
                return prefix
        raise LabError("no free lab prefix")

    def _make(self, data, options, wait_s):
        d, cfg = self.state.dir, self.doc["config"]
        self._bind(os.path.join(d, "ns"), "private")
        self._bind(os.path.join(d, "mnt"), "shared")
        self._write_job_files(cfg["nodes"])
        cg = self.cgroups()
        if cfg.get("s3"):  # the store's link is the source's bandwidth
            cg.make_shared(None, 0)
            lab_net.make_bridge(self.state)
            log("starting the object store (rgw) on its own node, uploading %s" % data)
            self.doc["store"] = lab_object_store.make_store(self.state, data, cfg["nodes"],
                                                            cfg["source_bw_bytes_per_s"])
            self.state.save()
        else:
            source = lab_source.make_source(self.state, data, d)
            cg.make_shared(source["dev"], cfg["source_bw_bytes_per_s"])
            lab_net.make_bridge(self.state)
        for i in range(cfg["nodes"]):
            self.nodes.append(self._make_node(i, cg))
            self.state.save()
        # The source's directory opens while the cluster starts (one walk per job).
        opens = None if cfg.get("s3") else DirOpenCounter(self.doc["source"]["path"])
        try:
            if cfg.get("slurm"):
                lab_slurm.start(self, options, wait_s)
            else:
                for node in self.nodes:
                    log("starting epochfs on %s (%s)" % (node["name"], node["address"]))
                    lab_node.start_daemon(self.doc, node, self.epochfs, options)
                self.wait_cluster(wait_s)
            if opens:
                self.doc["start"] = {"source_dirs": opens.dirs, "source_dir_opens": opens.take()}
                log("start: the source's %d directories were opened %d times"
                    % (opens.dirs, self.doc["start"]["source_dir_opens"]))
        finally:
            if opens:
                opens.close()
        self.doc["complete"] = True
        self.state.save()

    def _bind(self, path, propagation):
        os.makedirs(path, exist_ok=True)
        self.state.record("mount", path=path)
        run(["mount", "--bind", path, path])
        run(["mount", "--make-" + propagation, path])

    def _write_job_files(self, n):
        d = self.state.dir
        self.doc["secret"] = os.path.join(d, "secret")
        self.doc["hostfile"] = os.path.join(d, "hostfile")
        fd = os.open(self.doc["secret"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(os.urandom(24).hex() + "\n")
        with open(self.doc["hostfile"], "w") as f:
            f.write("# cluster-lab %s: one line per node, the node id is the line\n" % self.state.prefix)
            f.writelines("%s:%d\n" % (lab_net.node_address(i), lab_net.PORT) for i in range(n))
        self.state.save()

    def _make_node(self, i, cg):
        cfg, d = self.doc["config"], self.state.dir
        name = "node%d" % i
        ns, host = lab_net.make_node_net(self.state, i, cfg["link_bytes_per_s"])
        lab_node.make_namespaces(self.state, d, i, name)
        cg.make_node(i, cfg["node_memory"], cfg["node_cpus"])
        mnt_ns, uts_ns = lab_node.ns_files(d, name)
        home = os.path.join(d, "nodes", name)
        os.makedirs(home, exist_ok=True)
        mountpoint = os.path.join(d, "mnt", name)
        os.makedirs(mountpoint, exist_ok=True)
        return {"name": name, "index": i, "hostname": name, "address": lab_net.node_address(i),
                "netns": ns, "host_link": host, "mnt_ns": mnt_ns, "uts_ns": uts_ns,
                "mountpoint": mountpoint, "log": os.path.join(home, "epochfs.log"),
                "admin_socket": self._admin_socket(home, name), "cgroups": cg.node_dirs(i),
                "link_bytes_per_s": cfg["link_bytes_per_s"], "memory_bytes": cfg["node_memory"],
                "cpus": cfg["node_cpus"]}

    def _admin_socket(self, home, name):
        """DIR/nodes/NODE/admin.sock, or /run/epochfs-lab-PREFIX/NODE.sock when DIR is too
        long for a Unix socket's path (108 bytes)."""
        path = os.path.join(home, "admin.sock")
        if len(path) < 100:
            return path
        short = "/run/epochfs-lab-" + self.state.prefix
        if not any(r["path"] == short for r in self.state.resources("dir")):
            self.state.record("dir", path=short)
            os.makedirs(short, mode=0o700, exist_ok=True)
        return os.path.join(short, name + ".sock")

    # ---- daemons ----------------------------------------------------------------------------

    def peers(self, node, timeout=10):
        with admin.AdminClient(node["mountpoint"], timeout=timeout) as c:
            return c.call({"cmd": admin.CMD_PEERS})

    def live_members(self, node):
        """How many members (itself included) the node's daemon counts as live; 0 if it does
        not answer."""
        try:
            return sum(1 for p in self.peers(node, timeout=3)["peers"] if p.get("live"))
        except (admin.EpochfsError, OSError, KeyError):
            return 0

    def wait_cluster(self, wait_s=90, nodes=None):
        """Waits until every node's daemon sees every node live."""
        nodes = nodes or self.nodes
        deadline = time.monotonic() + wait_s
        while True:
            counts = [self.live_members(n) for n in nodes]
            if all(c == len(self.nodes) for c in counts):
                return
            if time.monotonic() > deadline:
                raise LabError("the cluster did not form within %d s (live members per node: %s; logs: %s)"
                               % (wait_s, counts, ", ".join(n["log"] for n in nodes)))
            time.sleep(0.2)

    def daemon_pids(self, node):
        return lab_node.daemon_pids(node)

    # ---- status -----------------------------------------------------------------------------

    def status(self):
        """{"source": PATH, "nodes": [{"name", "address", "mountpoint", "pid", "link", ...}]}."""
        cfg = self.doc["config"]
        nodes = []
        for n in self.nodes:
            supervisor, worker = self.daemon_pids(n)
            oper = (read_text("/sys/class/net/%s/operstate" % n["host_link"]) or "gone").strip()
            try:
                counters = lab_net.link_counters(n["host_link"])
            except LabError:
                counters = None
            nodes.append({"name": n["name"], "address": n["address"], "mountpoint": n["mountpoint"],
                          "pid": worker, "link": rate_text(n["link_bytes_per_s"]),
                          "supervisor_pid": supervisor, "hostname": n["hostname"],
                          "netns": n["netns"], "host_link": n["host_link"], "link_state": oper,
                          "link_bytes": counters,
                          "mounted": is_mounted(n["mountpoint"]), "memory_bytes": n["memory_bytes"],
                          "cpus": n["cpus"] or None, "cgroups": n["cgroups"], "log": n["log"]})
        src = self.source or {}
        return {"source": src.get("path"), "dir": self.state.dir, "prefix": self.state.prefix,
                "complete": self.doc.get("complete", False), "cgroup": cfg.get("cgroup"),
                "source_bw": rate_text(cfg["source_bw_bytes_per_s"]) if cfg.get("source_bw_bytes_per_s") else None,
                "source_device": src.get("device"), "source_bytes": src.get("bytes"),
                "source_files": src.get("files"), "epochfs": cfg.get("epochfs"),
                "options": cfg.get("options", []), "slurm": self.doc.get("slurm"),
                "store": self.doc.get("store"), "start": self.doc.get("start"), "nodes": nodes}


def dumps(obj):
    return json.dumps(obj, indent=1)
