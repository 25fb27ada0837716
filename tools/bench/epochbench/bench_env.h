// `epochbench env`: the benchmark environment every benchmark of the project
// uses, kept up by one process for as long as its client needs it. It copies a
// dataset onto a ThrottledSource (an ext4 image on a loop device, direct I/O
// on the backing file, reads capped by the kernel's block-I/O controller for
// the processes in its cgroup) and then serves one command per line on stdin,
// one JSON reply per line on stdout:
//
//   join PID        put process PID (and the threads it makes later) in the
//                   throttled cgroup          -> {"ok":true}
//   leave PID       move it back to where this process was
//   read-bytes      bytes the members read from the device so far
//                                             -> {"ok":true,"bytes":N}
//   drop-caches     sync; echo 3 > /proc/sys/vm/drop_caches
//   mount CASE [ARG...]
//                   mount CASE (bindfs, rclone, epochfs; case_mount.h) over the
//                   source's root, with ARGs after `epochfs SOURCE MNT`, and put
//                   its daemon(s) in the throttled cgroup
//                                             -> {"ok":true,"id":N,"dir":MNT,"pids":[...]}
//   unmount ID      unmount it and wait for its daemon to exit
//   quit            tear down (also at end of input, and on SIGINT/SIGTERM/SIGHUP)
//
// A failed command replies {"ok":false,"error":MESSAGE} and changes nothing.
// The first line on stdout, once the source is ready, describes it:
//   {"ok":true,"pid":P,"root":MOUNT,"data":MOUNT/SUBDIR,"loop_device":"/dev/loopN",
//    "device":"MAJ:MIN","image":FILE,"cgroup":DIR,"mechanism":"cgroup v1 blkio",
//    "read_bps":N,"bytes":B,"files":F}
// (bytes and files: the copy's). --room SIZE leaves that much free space on
// the source for files the client writes there itself (tools/bench/shard-bench).
// Or, if it could not be made, {"ok":false,"error":MESSAGE} (exit 1, nothing
// left behind). Because the environment lives exactly as long as this process
// and its stdin, a client that dies leaves nothing behind (its end of the pipe
// closes). tools/bench/python/epochfs_bench/bench_env.py is such a client.
// Needs root, mkfs.ext4, losetup, mount and cp.
#pragma once

#include <cstdint>
#include <string>

namespace epochfs::bench {

struct EnvOptions {
  std::string data;             // the dataset tree to copy onto the source
  std::string read_bps;         // "100M": the read cap of the cgroup's members
  std::string subdir = "data";  // the copy lands at ROOT/SUBDIR (not ROOT: ext4's lost+found)
  std::string epochfs;          // the epochfs of `mount epochfs` (empty: next to epochbench)
  std::string room = "0";       // free space left for files the client writes there itself
};

// Runs the environment until quit / end of input; the exit code.
int runBenchEnv(const EnvOptions& options);

}  // namespace epochfs::bench
