"""Command line of tools/bench/cluster-lab: parses each subcommand's options and reports user errors
as one line (exit 2), never a traceback. The work is done by epochfs_lab (up, status),
epochfs_lab.down (down), epochfs_lab.node (exec) and epochfs_lab.bench (bench).
Standard library only.
"""

import argparse
import sys

from . import lab as lab_mod
from .util import ArgParser, LabError, parse_rate, parse_size

USAGE = """cluster-lab: a cluster of epochfs nodes on one machine (docs/LAB.md)

  cluster-lab up --nodes N --data DIR [--link RATE] [--source-bw RATE] [--node-memory SIZE]
                 [--node-cpus F] [--dir DIR] [--slurm] [-- EPOCHFS-OPTIONS...]
  cluster-lab status [--json] [--dir DIR]
  cluster-lab exec NODE CMD...        (NODE: node0 or 0)
  cluster-lab down [--dir DIR]
  cluster-lab fault [--dir DIR] NODE cut|restore|kill|freeze|thaw
  cluster-lab capacity [--files N] [--nodes N] [--epochs N] [--json]
  cluster-lab bench [--link RATE] [--repeats N] [--json]
  cluster-lab run [--sampler distributed|order|locality|owned] [--source] [--ranks-per-node K] [--epochs E]
                  [--compute-ms MS] [--json]
  cluster-lab paper [--nodes 1,2,4,8] [--files N] [--json FILE] [--png DIR]

Every subcommand takes --help. Needs root, /dev/fuse, `ip netns` and cgroups.
"""


def _dir_arg(p):
    p.add_argument("--dir", default=lab_mod.DEFAULT_DIR,
                   help="the lab's directory and state file (default %(default)s; $EPOCHFS_LAB_DIR)")


def _up(argv):
    p = ArgParser(prog="cluster-lab up", description=(
        "Makes N nodes (network, UTS and mount namespaces, a tbf-limited veth on a bridge, memory "
        "and cpu cgroups), copies DIR onto the lab's source (an ext4 loop device with one read "
        "limit shared by all nodes) and starts epochfs on every node with the documented launch "
        "(hostfile, secret, UCX_TLS=tcp). Options after -- go to every epochfs."))
    p.add_argument("--nodes", type=int, required=True, help="number of nodes (1..64)")
    p.add_argument("--data", required=True, help="the dataset directory copied onto the source")
    p.add_argument("--link", default=lab_mod.DEFAULT_LINK,
                   help="each node's link rate, both directions (default %(default)s)")
    p.add_argument("--source-bw", default=lab_mod.DEFAULT_SOURCE_BW,
                   help="the source's read bandwidth for all nodes together (default %(default)s; 0: none)")
    p.add_argument("--node-memory", default=None,
                   help="each node's memory limit (default: host memory / N)")
    p.add_argument("--node-cpus", type=float, default=0.0,
                   help="each node's CPU quota in cores, e.g. 0.5 (default: none, nodes share the host)")
    p.add_argument("--bin", default=None, help="directory of epochfs and epochctl (default: build/bin)")
    p.add_argument("--wait", type=float, default=90, help="seconds to wait for the cluster to form")
    p.add_argument("--slurm", action="store_true", help=(
        "run Slurm on the nodes (slurm-wlm and munge, installed when missing): slurmctld and munged "
        "on node0, a slurmd per node, the epochfs prolog/epilog; no lab epochfs (jobs start it; "
        "options after -- go to the prolog's). Submit with: cluster-lab exec node0 sbatch ..."))
    p.add_argument("--s3", action="store_true", help=(
        "put the dataset in an object store instead: rgw (tests/s3/rgw) on a node of its own behind "
        "a link of --source-bw, the data uploaded to s3://lab/data/, which the nodes mount"))
    _dir_arg(p)
    a, rest = _split_dashdash(p, argv)
    lab = lab_mod.Lab.up(a.data, a.nodes, directory=a.dir, link=parse_rate(a.link),
                         source_bw=0 if a.source_bw == "0" else parse_rate(a.source_bw),
                         node_memory=parse_size(a.node_memory) if a.node_memory else None,
                         node_cpus=a.node_cpus, epochfs_options=rest, bindir=a.bin, wait_s=a.wait,
                         slurm=a.slurm, s3=a.s3)
    _print_status(lab.status())
    return 0


def _split_dashdash(p, argv):
    if "--" in argv:
        i = argv.index("--")
        return p.parse_args(argv[:i]), argv[i + 1:]
    return p.parse_args(argv), []


def _status(argv):
    p = ArgParser(prog="cluster-lab status", description=(
        "The source's path and each node's name, address, mountpoint, daemon pid and link rate. "
        "--json: {\"source\": PATH, \"nodes\": [{\"name\", \"address\", \"mountpoint\", \"pid\", "
        "\"link\", ...}, ...], ...}"))
    p.add_argument("--json", action="store_true", help="print JSON")
    _dir_arg(p)
    a = p.parse_args(argv)
    st = lab_mod.Lab.load(a.dir).status()
    if a.json:
        print(lab_mod.dumps(st))
    else:
        _print_status(st)
    return 0


def _print_status(st):
    print("lab %s in %s (%s); source %s (%s files, %.1f MiB, read limit %s, %s)" % (
        st["prefix"], st["dir"], "up" if st["complete"] else "incomplete", st["source"],
        st["source_files"], (st["source_bytes"] or 0) / 2**20, st["source_bw"] or "none",
        st["source_device"]))
    print("%-7s %-12s %-8s %-8s %-6s %-9s %s" % ("node", "address", "pid", "link", "state",
                                                  "memory", "mountpoint"))
    for n in st["nodes"]:
        print("%-7s %-12s %-8s %-8s %-6s %-9s %s%s" % (
            n["name"], n["address"], n["pid"] or "-", n["link"], n["link_state"],
            "%dM" % (n["memory_bytes"] >> 20), n["mountpoint"],
            "" if n["mounted"] or st.get("slurm") else " (not mounted)"))
    if st.get("slurm"):
        print("slurm: SLURM_CONF=%s (slurmctld on node0; submit with: cluster-lab exec node0 sbatch ...)"
              % st["slurm"]["conf"])


def _down(argv):
    p = ArgParser(prog="cluster-lab down", description=(
        "Removes everything the lab in --dir made (processes, mounts, namespaces, veths, bridge, "
        "loop device, cgroups, files), from its state file; also after a crash. Idempotent."))
    _dir_arg(p)
    a = p.parse_args(argv)
    from .down import down
    down(a.dir)
    return 0


def _exec(argv):
    p = ArgParser(prog="cluster-lab exec", description=(
        "Runs CMD inside NODE: its network, UTS and mount namespaces and its cgroups, with "
        "EPOCHFS_LAB_NODE and EPOCHFS_LAB_MOUNT (the node's mountpoint) set. Exits with CMD's status."))
    _dir_arg(p)
    p.add_argument("node", help="node name (node0) or index (0)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="the command and its arguments")
    a = p.parse_args(argv)
    if a.cmd and a.cmd[0] == "--":
        a.cmd = a.cmd[1:]
    if not a.cmd:
        raise LabError("cluster-lab exec: no command given")
    lab = lab_mod.Lab.load(a.dir)
    from .node import exec_in
    exec_in(lab.node(a.node), a.cmd)


def _bench(argv):
    from . import bench as lab_bench
    return lab_bench.main(argv)


def _fault(argv):
    from . import fault as lab_fault
    return lab_fault.main(argv)


def _capacity(argv):
    from . import capacity as lab_capacity
    return lab_capacity.main(argv)


def _run(argv):
    from . import paper as lab_paper
    return lab_paper.main_run(argv)


def _paper(argv):
    from . import paper as lab_paper
    return lab_paper.main_paper(argv)


COMMANDS = {"run": _run, "paper": _paper, "up": _up, "status": _status, "down": _down, "exec": _exec, "bench": _bench,
            "capacity": _capacity, "fault": _fault}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    cmd = COMMANDS.get(argv[0])
    try:
        if cmd is None:
            raise LabError("unknown subcommand %r (one of: %s)" % (argv[0], ", ".join(COMMANDS)))
        return cmd(argv[1:]) or 0
    except LabError as e:
        msg = str(e)
        print(msg if msg.startswith("cluster-lab") else "cluster-lab: " + msg, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cluster-lab: interrupted", file=sys.stderr)
        return 130

