"""`epochbench peers` end to end on a tiny matrix: real bindfs, rclone and epochfs mounts.

Pass criterion: the run exits 0 and its --json document holds, for every filesystem (native,
bindfs, rclone, epochfs), workload (files, shards), T (1, 2) and state (cold, warm), one pass
per repeat with a positive rate and no read error, daemon CPU figures for the three FUSE
filesystems, and afterwards nothing of the run is still mounted and no rclone cache or mount
directory of it is left in /tmp. Skips (77) when not root or bindfs/rclone is missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("EPOCHFS_BIN_DIR", os.path.join(HERE, "../../build/bin"))


def scratch_dirs():
    return {e for e in os.listdir("/tmp") if e.startswith("epochbench-peers-")}


def main():
    if os.geteuid() != 0 or not shutil.which("bindfs") or not shutil.which("rclone"):
        print("skipped: needs root, bindfs and rclone")
        return 77
    before = scratch_dirs()
    with tempfile.TemporaryDirectory(prefix="test-peers-") as tmp:
        out = os.path.join(tmp, "peers.json")
        run = subprocess.run([os.path.join(BIN, "epochbench"), "peers", "--dir", os.path.join(tmp, "src"),
                              "--files", "60", "--classes", "3", "--shards", "2", "--shard-mb", "2",
                              "--threads", "1,2", "--repeats", "2", "--json", out],
                             capture_output=True, text=True, timeout=600)
        print(run.stdout[-3000:])
        assert run.returncode == 0, run.stderr[-3000:]
        with open(out) as f:
            doc = json.load(f)
    assert doc["skipped"] == {}, doc["skipped"]
    cells = {(c["fs"], c["workload"], c["threads"], c["state"]): c for c in doc["cells"]}
    for fs in ("native", "bindfs", "rclone", "epochfs"):
        for workload, field in (("files", "files_per_s"), ("shards", "mb_per_s")):
            for t in (1, 2):
                for state in ("cold", "warm"):
                    c = cells[(fs, workload, t, state)]
                    assert len(c[field]) == 2 and min(c[field]) > 0, c
                    assert c["errors"] == 0, c
                    if fs != "native" and workload == "files":
                        assert len(c["daemon_cpu_s_per_1k_files"]) == 2, c
    # Only this run's scratch directories (another run may be going on beside it). The run
    # removes its scratch directory only once nothing is mounted in it and the rclone cache
    # directories in it are gone, so a leftover mount or cache leaves it behind.
    new = scratch_dirs() - before
    assert not new, new
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
