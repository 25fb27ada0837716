"""Faults on a lab node, injected from outside as a failing cluster would see them: the node's
link cut at the bridge (`ip link set down` on its veth's bridge end) and restored, its worker
daemon SIGKILLed (the supervisor starts a new one on the same mount), its worker frozen
(SIGSTOP) and thawed (SIGCONT). `cluster-lab fault NODE ACTION` runs one by hand.
Standard library only.
"""

import os
import signal
import time

from . import net as lab_net
from .util import ArgParser, LabError, log

ACTIONS = ("cut", "restore", "kill", "freeze", "thaw")


def _worker(lab, node):
    _, worker = lab.daemon_pids(node)
    if worker is None:
        raise LabError("no epochfs worker runs on %s" % node["name"])
    return worker


def cut_link(lab, node):
    lab_net.set_link(node["host_link"], up=False)


def restore_link(lab, node):
    lab_net.set_link(node["host_link"], up=True)


def kill_worker(lab, node):
    """SIGKILLs the node's worker; returns its pid."""
    pid = _worker(lab, node)
    os.kill(pid, signal.SIGKILL)
    return pid


def wait_new_worker(lab, node, old_pid, timeout=30):
    """The pid of the worker the supervisor started after old_pid died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, pid = lab.daemon_pids(node)
        if pid and pid != old_pid:
            return pid
        time.sleep(0.1)
    raise LabError("no new worker on %s within %d s (log: %s)" % (node["name"], timeout, node["log"]))


def freeze(lab, node):
    """SIGSTOPs the node's worker; returns its pid."""
    pid = _worker(lab, node)
    os.kill(pid, signal.SIGSTOP)
    return pid


def thaw(lab, node, pid=None):
    os.kill(pid or _worker(lab, node), signal.SIGCONT)


def main(argv):
    from .lab import DEFAULT_DIR, Lab
    ap = ArgParser(prog="cluster-lab fault", description=__doc__.split("`cluster-lab fault")[0])
    ap.add_argument("--dir", default=DEFAULT_DIR, help="the lab's directory (default %(default)s)")
    ap.add_argument("node", help="node name (node0) or index (0)")
    ap.add_argument("action", choices=ACTIONS, help="cut/restore the link, kill the worker, freeze/thaw it")
    a = ap.parse_args(argv)
    lab = Lab.load(a.dir)
    node = lab.node(a.node)
    if a.action == "cut":
        cut_link(lab, node)
    elif a.action == "restore":
        restore_link(lab, node)
    elif a.action == "kill":
        old = kill_worker(lab, node)
        log("%s: worker %d killed; new worker %d" % (node["name"], old, wait_new_worker(lab, node, old)))
    elif a.action == "freeze":
        log("%s: worker %d frozen" % (node["name"], freeze(lab, node)))
    else:
        thaw(lab, node)
    return 0
