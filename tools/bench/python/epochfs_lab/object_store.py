"""The lab's object store (`cluster-lab up --s3`): Ceph's RADOS Gateway, the tests' fixture
(tests/s3/rgw), on a node of its own (`store`: a network namespace on the bridge behind a
tbf-shaped link, like every node's), holding the dataset as s3://lab/data/. The epochfs nodes
mount that prefix through the link; what the store serves is counted by rgw itself (its perf
counters: GETs and their bytes) and on the store's veth, never by the daemons.

`make_store` records the store's namespace, link and fixture in the lab's state before making
them, so `down` removes them (the fixture is stopped by `teardown`; the namespace's processes
are also swept with every other lab process). The upload runs inside the store's namespace
(boto3, 16 threads, through the store's own address), so it never crosses the shaped link.
Standard library only here; boto3 in the uploader (`python3 -m epochfs_lab.object_store`).
"""

import concurrent.futures
import configparser
import json
import os
import sys
import time

from . import net as lab_net
from .util import PYTHON_DIR, REPO, LabError, run

RGW = os.path.join(REPO, "tests", "s3", "rgw")
sys.path.insert(0, os.path.join(REPO, "tests", "s3"))
import rgw_counters  # noqa: E402

STORE_DIR = "store"
BUCKET = "lab"
PREFIX = "data"


def make_store(state, data, index, link_bytes_per_s):
    """The store node (network index `index`, after the epochfs nodes), rgw in it, and every
    file of `data` uploaded to s3://lab/data/; returns the store's entry for the state."""
    ns, host = lab_net.make_node_net(state, index, link_bytes_per_s)
    address = lab_net.node_address(index)
    fixture = os.path.join(state.dir, STORE_DIR)
    if len(os.path.join(fixture, "run", "ceph-client.rgw.asok")) > 107:  # a Unix socket's path
        fixture = "/run/epochfs-lab-%s-store" % state.prefix
        state.record("dir", path=fixture)
    state.record("rgw", dir=fixture)
    run(["ip", "netns", "exec", ns, "/usr/bin/python3", RGW, "start", fixture, "--address", address,
         "--no-https"],
        timeout=300, env=rgw_counters.clean_env())
    st = rgw_counters.state(fixture)
    t0 = time.monotonic()
    out = run(["ip", "netns", "exec", ns, "/usr/bin/python3", "-m", "epochfs_lab.object_store",
               "upload", fixture, data], timeout=1800,
              env=dict(rgw_counters.clean_env(), PYTHONPATH=PYTHON_DIR)).stdout
    uploaded = json.loads(out)
    return {"name": "store", "netns": ns, "host_link": host, "address": address, "fixture": fixture,
            "endpoint": st["endpoint"], "region": st["region"], "credentials_file": st["credentials_file"],
            "profile": st["profile"], "url": "s3://%s/%s" % (BUCKET, PREFIX),
            "link_bytes_per_s": link_bytes_per_s, "files": uploaded["files"], "bytes": uploaded["bytes"],
            "upload_seconds": round(time.monotonic() - t0, 1)}


def mount_options(store):
    """The epochfs options that point a node at the store (the source argument is store["url"])."""
    return ["--s3-endpoint", store["endpoint"], "--s3-region", store["region"],
            "--s3-credentials-file", store["credentials_file"], "--s3-profile", store["profile"]]


def served(store):
    """What rgw has served so far: {"gets": requests, "get_bytes": body bytes}, from its perf
    counters (rgw counts end - start of each range, one byte less per GET)."""
    st = rgw_counters.state(store["fixture"])
    rgw = rgw_counters.perf_dump(st["rgw_asok"])["rgw"]
    return {"gets": rgw["get"], "get_bytes": rgw["get_b"] + rgw["get"]}


class StoreCounters:
    """workload.Counters' twin over the store: rgw's GETs and bytes, each node's link and the
    store's (what it sent), so `since(before)` gives one epoch's figures. `link_bytes` is what
    the nodes received from each other: every byte into a node less what the store sent."""

    def __init__(self, lab):
        self.lab, self.store = lab, lab.doc["store"]

    def begin(self):
        pass

    def snapshot(self):
        return {"links": {n["name"]: lab_net.link_counters(n["host_link"]) for n in self.lab.nodes},
                "store_link": lab_net.link_counters(self.store["host_link"]),
                "served": served(self.store), "time": time.monotonic()}

    def since(self, before):
        after = self.snapshot()
        to_node = {k: after["links"][k]["to_node"] - v["to_node"] for k, v in before["links"].items()}
        store_sent = after["store_link"]["from_node"] - before["store_link"]["from_node"]
        return {"source_bytes": after["served"]["get_bytes"] - before["served"]["get_bytes"],
                "source_gets": after["served"]["gets"] - before["served"]["gets"],
                "store_link_bytes": store_sent, "link_to_nodes": to_node,
                "link_bytes": sum(to_node.values()) - store_sent,
                "seconds": after["time"] - before["time"]}


def summary_line(label, f, dataset_bytes, objects, nodes):
    expected = (nodes - 1) / nodes * f["bytes_read"]
    return ("%s: %.1f s, read %.0f MiB, rgw %d GETs = %.3f x objects, %.3f D; store link %.0f MiB; "
            "peer link %.0f MiB = %.3f of (p-1)/p x read, slowest read %.2f s" % (
                label, f["seconds"], f["bytes_read"] / 2**20, f["source_gets"], f["source_gets"] / objects,
                f["source_bytes"] / dataset_bytes, f["store_link_bytes"] / 2**20, f["link_bytes"] / 2**20,
                f["link_bytes"] / expected if expected else 0, f["max_read_seconds"]))


def teardown(state, say):
    """Stops the store's fixture (rgw, OSD, mon) and removes its directory."""
    for r in state.resources("rgw"):
        if os.path.isdir(r["dir"]):
            run(["/usr/bin/python3", RGW, "stop", r["dir"]], check=False, timeout=120,
                env=rgw_counters.clean_env())
            say("object store %s" % r["dir"])


def _upload(fixture, data):
    """Every file under `data` PUT as data/RELPATH to a new bucket `lab` (inside the store)."""
    import boto3
    from botocore.config import Config
    st = rgw_counters.state(fixture)
    cp = configparser.ConfigParser()
    cp.read(st["credentials_file"])
    s3 = boto3.session.Session(aws_access_key_id=cp[st["profile"]]["aws_access_key_id"],
                               aws_secret_access_key=cp[st["profile"]]["aws_secret_access_key"],
                               region_name=st["region"]).client(
        "s3", endpoint_url=st["endpoint"],
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=16, proxies={}))
    s3.create_bucket(Bucket=BUCKET)
    rel = sorted(os.path.relpath(os.path.join(d, f), data) for d, _, fs in os.walk(data) for f in fs)

    def put(r):
        with open(os.path.join(data, r), "rb") as f:
            body = f.read()
        s3.put_object(Bucket=BUCKET, Key="%s/%s" % (PREFIX, r), Body=body)
        return len(body)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        total = sum(pool.map(put, rel))
    listed = sum(p.get("KeyCount", 0) for p in s3.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=PREFIX + "/"))
    if listed != len(rel):
        raise LabError("the store lists %d objects, %d were uploaded" % (listed, len(rel)))
    print(json.dumps({"files": len(rel), "bytes": total}))


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "upload":
        sys.exit("usage: python3 -m epochfs_lab.object_store upload FIXTURE_DIR DATA_DIR")
    _upload(sys.argv[2], sys.argv[3])
