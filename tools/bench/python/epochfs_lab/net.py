"""The cluster lab's network: one bridge in the main namespace, and per node a network
namespace joined to it by a veth pair (``PREFIX-hI`` on the bridge, ``eth0`` in the node) with
an address in 10.99.0.0/24 and a tbf rate limit on both ends (tbf shapes egress only, so the
host end limits what the node receives and the node end what it sends). Link counters and
the link cut of the fault tests read and set the host end, from outside the node.

Names all start with the lab's prefix, so `down` can sweep what a crash left unrecorded
without touching anything else. Standard library only.
"""

import os
import shutil
import subprocess

from .util import LabError, rate_text, read_text, run

SUBNET = "10.99.0"
PREFIX_LEN = 24
PORT = 7711


def node_address(index):
    return "%s.%d" % (SUBNET, 11 + index)


def bridge_name(prefix):
    return prefix + "-br"


def host_link(prefix, index):
    return "%s-h%d" % (prefix, index)


def netns_name(prefix, index):
    return "%s-n%d" % (prefix, index)


def netns_path(name):
    return os.path.join("/run/netns", name)


TOOLS = ("ip", "tc", "nsenter", "unshare", "mount", "umount", "losetup", "mkfs.ext4", "debugfs")


def check_tools():
    """Why the lab cannot be made here for want of a tool or of `ip netns`, or None."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return "missing tools: %s (iproute2, util-linux, e2fsprogs)" % ", ".join(missing)
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if r.returncode != 0:
        return "`ip netns` does not work here: %s" % (r.stderr.strip() or "exit %d" % r.returncode)
    return None


def make_bridge(state):
    name = bridge_name(state.prefix)
    state.record("bridge", name=name)
    run(["ip", "link", "add", name, "type", "bridge"])
    run(["ip", "link", "set", name, "up"])
    return name


def tbf_burst(bytes_per_s):
    """tbf's bucket: at least 32 KiB, else 4 ms of the rate (1gbit: 500 kB)."""
    return max(32 << 10, bytes_per_s // 250)


def shape(dev, bytes_per_s, netns=None):
    """Replaces dev's root qdisc with a tbf of the given rate."""
    cmd = ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate_text(bytes_per_s),
           "burst", str(tbf_burst(bytes_per_s)), "latency", "20ms"]
    run((["ip", "netns", "exec", netns] if netns else []) + cmd)


def make_node_net(state, index, bytes_per_s):
    """The node's namespace, its veth on the bridge, its address and its shaped link."""
    ns, host = netns_name(state.prefix, index), host_link(state.prefix, index)
    state.record("netns", name=ns)
    run(["ip", "netns", "add", ns])
    state.record("link", name=host)
    run(["ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "link", "set", host, "master", bridge_name(state.prefix), "up"])
    in_ns = ["ip", "-n", ns]
    run(in_ns + ["addr", "add", "%s/%d" % (node_address(index), PREFIX_LEN), "dev", "eth0"])
    run(in_ns + ["link", "set", "eth0", "up"])
    run(in_ns + ["link", "set", "lo", "up"])
    shape(host, bytes_per_s)
    shape("eth0", bytes_per_s, netns=ns)
    return ns, host


def link_counters(host):
    """{"to_node": bytes, "from_node": bytes} of a node's link, read on the bridge side of its
    veth (what the host end transmits reaches the node)."""
    base = "/sys/class/net/%s/statistics/" % host
    tx, rx = read_text(base + "tx_bytes"), read_text(base + "rx_bytes")
    if tx is None or rx is None:
        raise LabError("link %s is gone (is the lab up?)" % host)
    return {"to_node": int(tx), "from_node": int(rx)}


def set_link(host, up):
    """Cuts (up=False) or restores a node's link at the bridge, as pulling its cable would."""
    run(["ip", "link", "set", host, "up" if up else "down"])


def _existing(kind_args, prefix):
    r = subprocess.run(["ip", "-o"] + kind_args, capture_output=True, text=True)
    names = []
    for line in r.stdout.splitlines():
        if kind_args[0] == "link":  # "7: name@if6: <...>"
            name = line.split(":")[1].strip().split("@")[0]
        else:  # "name (id: 3)"
            name = line.split()[0]
        if name.startswith(prefix + "-"):
            names.append(name)
    return names


def teardown(state, say):
    """Deletes the lab's namespaces, veths and bridge: recorded ones and any carrying its
    prefix. Deleting a namespace deletes its end of a veth, and so the pair."""
    prefix = state.prefix
    netns = {r["name"] for r in state.resources("netns")} | set(_existing(["netns", "list"], prefix))
    for ns in sorted(netns):
        if os.path.exists(netns_path(ns)):
            run(["ip", "netns", "del", ns], check=False)
            say("network namespace %s" % ns)
    links = {r["name"] for r in state.resources("link") + state.resources("bridge")}
    for name in sorted(links | set(_existing(["link", "show"], prefix))):
        if os.path.exists("/sys/class/net/" + name):
            run(["ip", "link", "del", name], check=False)
            say("link %s" % name)
