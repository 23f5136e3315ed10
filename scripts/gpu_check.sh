#!/usr/bin/env bash
# gpu_check.sh — the NCCL path on a machine with NVIDIA GPUs, in one run of a few minutes (issue 14):
#   1. the GPUs, driver and CUDA runtime (nvidia-smi), the NCCL version hvrun is built against;
#   2. a build with -DHVRUN_WITH_NCCL=ON (scripts/setup.sh into BUILD_DIR, default build-gpu/);
#   3. the [gpu] tests (ctest -L gpu): allreduce, broadcast and allgather on device buffers, one rank
#      per GPU, half and bfloat16 included; the agent's per-process GPU sampling through NVML
#      (GpuUsage, tests/test_gpu_usage.cpp), which skips, and so fails here, when NVML cannot be loaded;
#   4. hvrun -np G -H localhost:G hvrun-allreduce-bench --backend nccl, G = the number of GPUs (one rank
#      per GPU), 8 B to MAX_BYTES, every element of every result checked, with NCCL_DEBUG=INFO so that
#      NCCL's own lines say its version and which network / NIC it uses.
# Writes everything to a log (LOG, default /tmp/hvrun-gpu-check.log) and prints, at the end, a summary
# to paste into docs/BENCHMARKS.md ("## GPU check"); GPU_DOC=docs/BENCHMARKS.md writes it there.
#
# Without a GPU (no nvidia-smi, or it lists none) it prints why and exits 77 (skipped), changing nothing.
# Exit 1 when a step fails or a result is wrong.
#
#   scripts/gpu_check.sh
#   MAX_BYTES=256M STEP_TIMEOUT=240 BUILD_DIR=build-gpu GPU_DOC=docs/BENCHMARKS.md scripts/gpu_check.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build-gpu}
log=${LOG:-/tmp/hvrun-gpu-check.log}
max_bytes=${MAX_BYTES:-1G}
step_timeout=${STEP_TIMEOUT:-240}
doc=${GPU_DOC:-}
readonly section_title="## GPU check"

say() { printf 'gpu_check: %s\n' "$*" | tee -a "$log" >&2; }
fail() { say "FAILED: $*"; exit 1; }
: >"$log"

# ---- 1. the machine ----------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu_check: skipped: nvidia-smi not found (no NVIDIA driver on this machine)" >&2
  exit 77
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if ((gpus == 0)); then
  echo "gpu_check: skipped: nvidia-smi lists no GPU: $(nvidia-smi -L 2>&1 | head -n 1)" >&2
  exit 77
fi
ranks=$((gpus > 8 ? 8 : gpus))
say "$gpus GPU(s); one rank per GPU, $ranks rank(s)"
nvidia-smi -L | tee -a "$log"
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
cuda=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
say "driver $driver, CUDA (driver) $cuda, $model"

# ---- 2. the build ------------------------------------------------------------------------------
start=$SECONDS
BUILD_DIR=$build_dir CMAKE_ARGS="-DHVRUN_WITH_NCCL=ON ${CMAKE_ARGS:-}" \
  timeout "$step_timeout" "$root/scripts/setup.sh" >>"$log" 2>&1 || fail "the build with -DHVRUN_WITH_NCCL=ON (see $log)"
say "built in $((SECONDS - start)) s into $build_dir"
# The nccl.h the build found (collectives/CMakeLists.txt's HVRUN_NCCL_INCLUDE_DIR).
nccl_include=$(sed -n 's/^HVRUN_NCCL_INCLUDE_DIR:PATH=//p' "$build_dir/CMakeCache.txt")
nccl_header=$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH) / { v[$2] = $3 }
  END { if (v["NCCL_MAJOR"] != "") print v["NCCL_MAJOR"] "." v["NCCL_MINOR"] "." v["NCCL_PATCH"] }' \
  "$nccl_include/nccl.h" 2>/dev/null || true)
say "NCCL headers: ${nccl_header:-not found}"

# ---- 3. the [gpu] tests ------------------------------------------------------------------------
start=$SECONDS
ctest_out=$(timeout "$step_timeout" ctest --test-dir "$build_dir" -L gpu -V 2>&1) || {
  printf '%s\n' "$ctest_out" >>"$log"
  fail "ctest -L gpu (see $log)"
}
printf '%s\n' "$ctest_out" >>"$log"
# A [gpu] case that found nothing to run says "skipped: ..."; on a GPU machine that is a failure.
if grep -q 'skipped: ' <<<"$ctest_out"; then
  grep 'skipped: ' <<<"$ctest_out" | head -n 3 | tee -a "$log" >&2
  fail "a [gpu] test skipped on a machine with $gpus GPU(s)"
fi
gpu_tests=$(grep -c 'Passed' <<<"$ctest_out" || true)
say "[gpu] tests: $gpu_tests passed in $((SECONDS - start)) s"

# ---- 4. the NCCL allreduce under hvrun ---------------------------------------------------------
start=$SECONDS
bench_out=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET timeout "$step_timeout" \
  "$build_dir/cmd/hvrun" -np "$ranks" -H "localhost:$ranks" -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS \
  "$build_dir/collectives/hvrun-allreduce-bench" --backend nccl -b 8 -e "$max_bytes" -f 8 -n 20 -w 5 2>&1) || {
  printf '%s\n' "$bench_out" >>"$log"
  fail "hvrun-allreduce-bench --backend nccl (see $log)"
}
printf '%s\n' "$bench_out" >>"$log"
grep -q '# Out of bounds values : 0 OK' <<<"$bench_out" || fail "hvrun-allreduce-bench did not report 0 wrong elements"
nccl_version=$(grep -o 'NCCL version [^ ]*' <<<"$bench_out" | head -n 1 || true)
nccl_net=$(grep -E 'NET/(Socket|IB|Plugin)|Using network' <<<"$bench_out" | sed 's/^\[[0-9]*\]<std[a-z]*>://' | sort -u | head -n 4 || true)
table=$(grep -E '^\[0\]<stdout>:' <<<"$bench_out" | sed 's/^\[0\]<stdout>://' | grep -v '^#$' || true)
say "allreduce bench: $ranks rank(s), done in $((SECONDS - start)) s"

# ---- the summary -------------------------------------------------------------------------------
summary() {
  echo "$section_title"
  echo
  echo "Made by \`scripts/gpu_check.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'), hvrun $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')."
  echo "$gpus × $model, driver $driver, CUDA (driver) $cuda; NCCL headers ${nccl_header:-?}; ${nccl_version:-NCCL version not printed}."
  echo "[gpu] tests: $gpu_tests passed. NCCL's network lines (NCCL_DEBUG=INFO):"
  echo
  echo '```'
  printf '%s\n' "${nccl_net:-(none printed)}"
  echo '```'
  echo
  echo "\`hvrun -np $ranks -H localhost:$ranks hvrun-allreduce-bench --backend nccl -b 8 -e $max_bytes -f 8 -n 20 -w 5\`:"
  echo
  echo '```'
  printf '%s\n' "$table"
  echo '```'
}
echo
summary | tee -a "$log"
if [[ -n $doc ]]; then
  tmp=$(mktemp)
  trap 'rm -f "$tmp"' EXIT
  # Drop an older section (its title up to the next "## " heading), then append the new one.
  awk -v title="$section_title" '$0 == title { skip = 1; next } skip && /^## / { skip = 0 } !skip { print }' "$doc" >"$tmp"
  { cat "$tmp"; echo; summary; } >"$doc"
  say "wrote the section \"${section_title#\#\# }\" of $doc"
fi
say "all checks passed; the log is $log"
