#!/usr/bin/env bash
# The collectives library logs only through its own logger "hvrun.collectives" (collectives/include/hvrun/
# communicator.hpp): no code in it reaches spdlog's default logger or registry, which belong to the
# training program. Read from the shared library's undefined symbols (it links the shared libspdlog).
#   collectives_own_logger.sh LIBRARY
set -euo pipefail
lib=${1:?usage: collectives_own_logger.sh LIBRARY}
symbols=$(nm -DC --undefined-only "$lib")
if ! grep -q 'spdlog::logger::' <<<"$symbols"; then
  echo "FAIL: $lib calls no spdlog::logger method, so this check would read nothing"
  exit 1
fi
bad=$(grep -E 'spdlog::(default_logger|set_default_logger|details::registry|get\(|set_level|set_pattern|drop)' \
  <<<"$symbols" || true)
if [[ -n $bad ]]; then
  printf 'FAIL: %s uses spdlog'"'"'s global logging state:\n%s\n' "$lib" "$bad"
  exit 1
fi
echo "collectives_own_logger: $lib logs through its own logger only"
