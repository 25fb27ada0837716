#!/bin/sh
# Builds the libFuzzer targets with clang-14 (ASan+UBSan, only the few repo
# sources each needs; tests/fuzz/CMakeLists.txt, separate from the g++ build)
# and runs them side by side for ${FUZZ_SECONDS:-15} s each, starting from
# tests/fuzz/corpus/<target>/ (new inputs go to a scratch copy).
# Exits 0 when every target ran clean, 1 on a crash, leak, sanitizer report,
# broken invariant, oversized allocation or hang, 77 when clang-14/libFuzzer
# is missing (Debian: clang-14 libclang-rt-14-dev).
#   FUZZ_SECONDS=60 tests/fuzz/run.sh       # longer
#   FUZZ_BUILD_DIR=/tmp/f tests/fuzz/run.sh # elsewhere (default: build-fuzz/)
#   FUZZ_TARGETS=list_objects tests/fuzz/run.sh  # only these (built and run)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${FUZZ_BUILD_DIR:-$here/../../build-fuzz}
secs=${FUZZ_SECONDS:-15}
cxx=${FUZZ_CXX:-clang++-14}
targets="${FUZZ_TARGETS:-wire_decoder admin_request mount_options list_objects namespace_image}"

# libFuzzer present? (Debian ships its runtime in libclang-rt-14-dev.)
probe=$(mktemp -d)
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$probe/p.cc"
if ! command -v "$cxx" >/dev/null 2>&1 ||
   ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cc" -o "$probe/p" >/dev/null 2>&1; then
  rm -rf "$probe"
  echo "fuzz: SKIPPED: $cxx with libFuzzer not found (apt-get install clang-14 libclang-rt-14-dev)"
  exit 77
fi
rm -rf "$probe"

start=$(date +%s)
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" >/dev/null
ninja -C "$build" $(printf 'fuzz_%s ' $targets) >"$build/ninja.log" 2>&1 || { cat "$build/ninja.log"; exit 1; }
echo "fuzz: built $targets in $(( $(date +%s) - start )) s"

# Memory bounds: the largest input is the admin request cap (64 KiB); no single
# allocation may exceed it plus a fixed 4 MiB overhead, and the process (with
# ASan's shadow and quarantine) stays under 1 GiB.
max_len=65536
malloc_mb=$(( max_len / 1048576 + 4 + 1 ))
pids=""
for t in $targets; do
  work="$build/corpus-work/$t"
  rm -rf "$work"; mkdir -p "$work"
  cp -r "$here/corpus/$t/." "$work/"
  # timeout: a hang detector (libFuzzer stops itself after $secs).
  timeout $(( secs + 120 )) "$build/fuzz_$t" -max_total_time="$secs" -timeout=20 \
    -malloc_limit_mb="$malloc_mb" -rss_limit_mb=1024 -max_len="$max_len" \
    -print_final_stats=1 -artifact_prefix="$build/$t-" "$work" >"$build/fuzz_$t.log" 2>&1 &
  pids="$pids $!"
done
status=0
set -- $pids
for t in $targets; do
  rc=0
  wait "$1" || rc=$?
  shift
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/fuzz_$t.log")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$build/fuzz_$t.log")
  if [ "$rc" -eq 0 ]; then
    echo "fuzz_$t: ok, ${runs:-?} inputs in $secs s, peak RSS ${rss:-?} MB"
  else
    echo "fuzz_$t: FAILED (exit $rc); log $build/fuzz_$t.log, reproducer $build/$t-crash-* (or -oom-, -timeout-):"
    tail -40 "$build/fuzz_$t.log"
    status=1
  fi
done
echo "fuzz: $( [ $status -eq 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - start )) s (malloc limit $malloc_mb MB, rss limit 1024 MB)"
exit $status
