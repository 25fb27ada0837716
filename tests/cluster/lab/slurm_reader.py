#!/usr/bin/python3
"""The training job's data loading in the lab's Slurm tests, one task per node (srun): this
rank's share of each epoch as torch's DistributedSampler gives it (a seeded permutation per
epoch, padded to a multiple of the world size, every world-th index from the rank), each file
read whole, SHA-1'd and its pages dropped (epochfs_lab.reader.read_one: a later read asks
epochfs again). First waits until the mount's daemon sees all the job's nodes live (`epochctl peers`),
as a loader should before its first epoch. Writes OUT/rank-R.json:
{"rank", "world", "host", "root", "env_mount", "epochs": [[[path, bytes, sha1], ...], ...]}.
Standard library and epochfs_lab.reader (torch is not installed here)."""

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "tools", "bench", "python"))
from epochfs_lab.reader import read_one  # noqa: E402


def distributed_indices(n, rank, world, seed, epoch):
    order = list(range(n))
    random.Random(seed + epoch).shuffle(order)  # torch: randperm with generator seed + epoch
    order += order[:(-n) % world]                  # pad to a multiple of the world size
    return order[rank::world]


def wait_live(epochctl, root, n, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run([epochctl, "peers", root, "--json"], capture_output=True, text=True)
        try:
            if sum(1 for p in json.loads(r.stdout).get("peers", []) if p.get("live")) >= n:
                return
        except ValueError:
            pass
        time.sleep(0.1)
    raise SystemExit("%s: the cluster did not form within %d s" % (root, timeout))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("EPOCHFS_MOUNT"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--epochctl", required=True)
    a = ap.parse_args()
    rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    if not a.data:
        raise SystemExit("no --data and no EPOCHFS_MOUNT")
    wait_live(a.epochctl, a.data, int(os.environ.get("SLURM_JOB_NUM_NODES", world)))
    files = sorted(os.path.relpath(os.path.join(d, f), a.data) for d, _, fs in os.walk(a.data) for f in fs)
    epochs = []
    for epoch in range(a.epochs):
        reads = [read_one(a.data, files[i]) for i in distributed_indices(len(files), rank, world, a.seed, epoch)]
        epochs.append([[r["path"], r.get("bytes"), r.get("sha1", r.get("error"))] for r in reads])
    with open(os.path.join(a.out, "rank-%d.json" % rank), "w") as f:
        json.dump({"rank": rank, "world": world, "host": socket.gethostname(), "root": a.data,
                   "env_mount": os.environ.get("EPOCHFS_MOUNT"), "epochs": epochs}, f)


if __name__ == "__main__":
    main()
