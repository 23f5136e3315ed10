#!/usr/bin/env bash
# Builds hvrun's libFuzzer targets (tests/fuzz/) with clang, ASan and UBSan into build-fuzz/, then runs
# each for SECONDS, one per core at a time (FUZZ_JOBS), on a temporary copy of its seed corpus (the committed corpus
# does not grow). Prints per target the executions and whether it crashed. A crash, sanitizer report,
# leak, hang over FUZZ_TIMEOUT seconds or RSS over 2 GiB is a crash: its input is copied to tests/fuzz/crashes/<target>/
# and the script exits 1 (after running the other targets).
#   scripts/fuzz.sh SECONDS
#   FUZZ_TARGETS="frame_decoder host_list" (a subset; default: all)
#   FUZZ_TIMEOUT=30: seconds one input may take. Every input here parses in microseconds; the limit is
#   generous because on a loaded 2-core machine a starved process once spent 7 s in ASan's allocator
#   returning memory to the OS, and that is no hang of ours.
#   FUZZ_BUILD_DIR=build-fuzz  JOBS=$(nproc)  FUZZ_BUILD_ALL=1 (build all of hvrun with clang, not only
#   the fuzzers, which compile only the entries and the hvrun sources they need, listed in
#   tests/fuzz/CMakeLists.txt: checks that the whole tree compiles warning-free under clang and the fuzz flags)
# Needs the packages of scripts/setup.sh, plus clang and libclang-rt-14-dev (libFuzzer and the
# sanitizer runtimes), which this script installs as root when missing.
set -euo pipefail

usage() { echo "usage: scripts/fuzz.sh SECONDS   (seconds per target, a positive integer)" >&2; exit 2; }
[[ $# -eq 1 && $1 =~ ^[0-9]+$ && $1 -gt 0 ]] || usage
seconds=$1

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${FUZZ_BUILD_DIR:-$root/build-fuzz}
fuzz_dir=$root/tests/fuzz
# The same list as hvrun::fuzz::kTargets (tests/fuzz/fuzz_entries.hpp) and tests/fuzz/CMakeLists.txt.
targets=(frame_decoder control_message host_list hostfile nic_filter store_protocol slurm_lists probe_message rank_text horovod_pickle elastic_http)
if [[ -n ${FUZZ_TARGETS:-} ]]; then
  for t in $FUZZ_TARGETS; do
    [[ " ${targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: FUZZ_TARGETS: no target '$t' (have: ${targets[*]})" >&2; exit 2; }
  done
  read -r -a targets <<<"$FUZZ_TARGETS"
fi
timeout=${FUZZ_TIMEOUT:-30}
[[ $timeout =~ ^[0-9]+$ && $timeout -gt 0 ]] || { echo "fuzz.sh: FUZZ_TIMEOUT must be a positive integer" >&2; exit 2; }

# shellcheck source=lib/packages.sh
source "$root/scripts/lib/packages.sh"
ensure_packages fuzz.sh clang libclang-rt-14-dev

build_start=$SECONDS
# The compilers are named explicitly: a build directory keeps the compiler it was first configured with.
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DHVRUN_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
if [[ ${FUZZ_BUILD_ALL:-0} == 1 ]]; then
  cmake --build "$build_dir" -j "${JOBS:-$(nproc)}"
else
  cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target hvrun_fuzzers
fi
echo "fuzz.sh: built in $((SECONDS - build_start)) s; running ${#targets[@]} targets for ${seconds} s each"

work=$(mktemp -d "${TMPDIR:-/tmp}/hvrun-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

# One target: its exit status and seconds go to files of its own, read by the loop below.
fuzz_one() { # TARGET
  local t=$1 rc=0 start=$SECONDS
  mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
  cp -R "$fuzz_dir/corpus/$t/." "$work/$t/corpus/"
  local args=(-max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$work/$t/artifacts/")
  [[ -f $fuzz_dir/$t.dict ]] && args+=(-dict="$fuzz_dir/$t.dict")
  "$build_dir/tests/fuzz/fuzz_$t" "${args[@]}" "$work/$t/corpus" >"$work/$t/log" 2>&1 || rc=$?
  echo "$rc" >"$work/$t/rc"
  echo $((SECONDS - start)) >"$work/$t/took"
}

# Each target is one process on one core, so FUZZ_JOBS (default: one per core) run at once: each still
# gets its SECONDS.
jobs_at_once=${FUZZ_JOBS:-$(nproc)}
[[ $jobs_at_once =~ ^[0-9]+$ && $jobs_at_once -gt 0 ]] || { echo "fuzz.sh: FUZZ_JOBS must be a positive integer" >&2; exit 2; }
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs_at_once)); then wait -n || true; running=$((running - 1)); fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait

status=0
summary=()
for t in "${targets[@]}"; do
  rc=$(cat "$work/$t/rc" 2>/dev/null || echo "?")
  took=$(cat "$work/$t/took" 2>/dev/null || echo 0)
  # The final stats when libFuzzer got to print them, else its last status line (#EXECS ...).
  execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$work/$t/log" | tail -n 1)
  [[ -n $execs ]] || execs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$work/$t/log" | tail -n 1)
  # slow-unit-* files are reports, not failures; crash-, leak-, timeout- and oom- ones are.
  found=()
  for f in "$work/$t/artifacts"/*; do
    [[ -f $f && $(basename "$f") != slow-unit-* ]] && found+=("$f")
  done
  if [[ $rc != 0 ]] || ((${#found[@]})); then
    status=1
    echo "---- fuzz_$t: last lines of its log ----" >&2
    tail -n 40 "$work/$t/log" >&2
    if ((${#found[@]})); then
      verdict="CRASHED (exit $rc)"
      mkdir -p "$fuzz_dir/crashes/$t"
      for f in "${found[@]}"; do cp "$f" "$fuzz_dir/crashes/$t/"; done
      echo "---- reproduce: $build_dir/tests/fuzz/fuzz_$t tests/fuzz/crashes/$t/FILE; once fixed, move" \
           "the file to tests/fuzz/regressions/$t/ (replayed by tests/test_fuzz_regressions.cpp) ----" >&2
    else
      verdict="FAILED (exit $rc, no input saved: see its log above)"
    fi
  else
    verdict="no crash"
  fi
  line=$(printf '%-16s %12s execs in %4d s  %s' "$t" "${execs:-?}" "$took" "$verdict")
  echo "$line"
  summary+=("$line")
done

echo "fuzz.sh: summary"
printf '  %s\n' "${summary[@]}"
if ((status)); then echo "fuzz.sh: crashes saved under tests/fuzz/crashes/" >&2; fi
exit "$status"
