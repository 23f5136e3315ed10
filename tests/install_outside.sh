#!/usr/bin/env bash
# The installed package works for a program outside hvrun's tree: `cmake --install` into a scratch prefix,
# an outside CMake project (tests/outside_project) built with find_package(hvrun CONFIG) and
# hvrun::collectives, and the C example built with pkg-config alone, both run under the INSTALLED hvrun.
# Also checks what the prefix holds and that the library's public link interface is itself alone.
#   install_outside.sh BUILD_DIR SOURCE_DIR [EXTRA_FLAGS]   (EXTRA_FLAGS: the sanitizer flags of a
#   sanitized build, which the outside programs need too)
set -euo pipefail
build=$1 src=$2 flags=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; exit 1; }
p=$tmp/prefix
for f in bin/hvrun bin/hvrun-agent bin/hvrun-allreduce-bench include/hvrun/communicator.hpp include/hvrun/collectives.h \
  include/hvrun/data_type.hpp include/hvrun/error.hpp share/doc/hvrun/README.md share/doc/hvrun/LICENSE \
  share/man/man1/hvrun.1 share/bash-completion/completions/hvrun; do
  [[ -e $p/$f ]] && ok "installed $f" || fail "missing $f"
done
lib=$(dirname "$(find "$p" -name 'libhvrun_collectives.so' | head -n 1)")
[[ -e $lib/libhvrun_collectives.so ]] && ok "installed libhvrun_collectives.so in ${lib#"$p"/}" || fail "no libhvrun_collectives.so"
pc=$(find "$p" -name hvrun-collectives.pc | head -n 1)
[[ -n $pc ]] && ok "installed ${pc#"$p"/}" || fail "no hvrun-collectives.pc"
targets=$(find "$p" -name hvrunTargets.cmake | head -n 1)
if grep -q INTERFACE_LINK_LIBRARIES "$targets"; then
  fail "hvrun::collectives carries link dependencies: $(grep INTERFACE_LINK_LIBRARIES "$targets")"
else ok "hvrun::collectives has nothing but itself on its link interface"; fi
# The public headers name nothing that is not installed.
if grep -hE '#include "' "$p"/include/hvrun/* | grep -v '"hvrun/' ; then fail "a public header includes a private one"; else
  ok "public headers include only <hvrun/...> and the standard library"; fi

# An outside CMake project.
cmake -S "$src/tests/outside_project" -B "$tmp/outside" -G Ninja -DCMAKE_PREFIX_PATH="$p" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$tmp/cfg.log" 2>&1 || { cat "$tmp/cfg.log"; exit 1; }
cmake --build "$tmp/outside" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
out=$("$p/bin/hvrun" -np 3 -H localhost:3 "$tmp/outside/outside_allreduce" 2>&1) && rc=0 || rc=$?
n=$(grep -c 'sum, broadcast 2.5 and allgather ok' <<<"$out" || true)
if ((rc == 0 && n == 3)); then ok "outside CMake project: 3 ranks under the installed hvrun"; else
  fail "outside CMake project under the installed hvrun: exit $rc, $n of 3 ranks ok: $out"; fi

# The C example with pkg-config only.
libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=libdir hvrun-collectives)
# shellcheck disable=SC2046,SC2086 # pkg-config's output and the flags are word lists
cc -std=c11 -Wall -Werror $flags "$src/collectives/examples/allreduce_example.c" -o "$tmp/c_example" \
  $(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs hvrun-collectives) -Wl,-rpath,"$libdir" ||
  fail "the C example does not build with pkg-config's flags"
if [[ -x $tmp/c_example ]]; then
  out=$("$p/bin/hvrun" -np 2 -H localhost:2 "$tmp/c_example" 2>&1) && rc=0 || rc=$?
  ((rc == 0)) && ok "C example (pkg-config) under the installed hvrun" || fail "C example: exit $rc: $out"
fi

if ((fails)); then
  echo "install_outside: $fails check(s) failed"
  exit 1
fi
echo "install_outside: all checks passed"
