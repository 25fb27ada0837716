#!/bin/sh
# Builds the libFuzzer targets with clang-14 (ASan+UBSan) and runs each for
# ${FUZZ_SECONDS:-20} s from tests/fuzz/corpus/<target>/ (new inputs go to a
# scratch copy). Exit non-zero on a crash, leak or sanitizer report.
# Needs: clang-14 libclang-rt-14-dev (plus the project's -dev packages).
set -eu
status=0
here=$(cd "$(dirname "$0")" && pwd)
build=${FUZZ_BUILD_DIR:-$here/../../build-fuzz}
secs=${FUZZ_SECONDS:-20}
CXX=${CXX:-clang++-14} cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="${CXX:-clang++-14}" >/dev/null
ninja -C "$build" >/dev/null
for t in admin_request mount_options; do
  work=$(mktemp -d)
  cp -r "$here/corpus/$t/." "$work/"
  # Requests are capped well below 64 MiB; 512 MiB covers ASan's overhead.
  rc=0
  "$build/fuzz_$t" -max_total_time="$secs" -malloc_limit_mb=512 -rss_limit_mb=1024 \
    -max_len=65536 -print_final_stats=1 "$work" >"$build/fuzz_$t.log" 2>&1 || rc=$?
  rm -rf "$work"
  echo "fuzz_$t: exit $rc, $(grep -c . "$build/fuzz_$t.log") log lines in $build/fuzz_$t.log"
  grep -E 'stat::(number_of_executed_units|peak_rss_mb)' "$build/fuzz_$t.log" || true
  if [ "$rc" -ne 0 ]; then tail -40 "$build/fuzz_$t.log"; status=1; fi
done
exit "${status:-0}"
