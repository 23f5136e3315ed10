# Sourced by hvrun's scripts: ensure_packages WHO PACKAGE... installs the Debian packages that are not
# installed yet. As root it uses apt-get (no recommends); otherwise it prints the exact apt-get line
# naming WHO (the calling script) and exits 1. Idempotent: nothing happens when all are installed.
ensure_packages() {
  local who=$1 p
  shift
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "$who: missing packages; install them as root with:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "$who: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# ensure_built WHO BUILD_DIR PROGRAM...: builds hvrun with scripts/setup.sh (BUILD_DIR=BUILD_DIR) when any
# PROGRAM (a path under BUILD_DIR, such as cmd/hvrun) is not there yet; exits 1 naming WHO and the
# program when one is still missing after the build.
ensure_built() {
  local who=$1 build=$2 p
  shift 2
  local scripts
  scripts=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  for p in "$@"; do
    if [[ ! -x $build/$p ]]; then
      echo "$who: hvrun is not built in $build; building it with scripts/setup.sh" >&2
      BUILD_DIR=$build "$scripts/setup.sh"
      break
    fi
  done
  for p in "$@"; do
    [[ -x $build/$p ]] || { echo "$who: error: $build/$p is missing after the build" >&2; exit 1; }
  done
}
