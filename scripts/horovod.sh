#!/usr/bin/env bash
# Installs the real Horovod that the Horovod tests run (tests/test_horovod.cpp): Debian's python3-torch
# and what Horovod imports, and Horovod 0.28.1 (PyTorch + Gloo, built for that torch) unpacked from
# ../shared/horovod/horovod-*.tar.xz (beside the repository) into /opt/horovod. Idempotent: a stamp
# names the tarball installed, and nothing is unpacked again while it matches.
#   exit 0   installed (or already was)
#   exit 77  no tarball: nothing installed, and the Horovod tests skip, saying so
#   exit 1   a failure (as a user with packages missing: the apt-get line to run as root)
#   HVRUN_HOROVOD_TARBALLS=DIR  where to look instead of ../shared/horovod
#   HVRUN_HOROVOD_DIR=DIR       where to install instead of /opt/horovod (the tests read it too)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
from=${HVRUN_HOROVOD_TARBALLS:-$root/../shared/horovod}
dest=${HVRUN_HOROVOD_DIR:-/opt/horovod}

shopt -s nullglob
tarballs=("$from"/horovod-*.tar.xz)
if ((${#tarballs[@]} == 0)); then
  echo "horovod.sh: no horovod-*.tar.xz in $from; Horovod is not installed and the Horovod tests will skip"
  exit 77
fi
tarball=${tarballs[-1]}

# shellcheck source=lib/packages.sh
source "$root/scripts/lib/packages.sh"
ensure_packages horovod.sh python3-torch python3-cloudpickle python3-psutil python3-yaml python3-packaging \
  python3-cffi python3-torchvision xz-utils

stamp="$(basename "$tarball") $(stat -c %s "$tarball")"
if [[ -f $dest/.hvrun-installed && $(<"$dest/.hvrun-installed") == "$stamp" ]]; then
  exit 0
fi
echo "horovod.sh: installing $(basename "$tarball") into $dest"
# Unpacked beside the destination, then moved into place: a half-unpacked tree is never used.
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$dest.new.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -xJf "$tarball" -C "$tmp"
echo "$stamp" >"$tmp/.hvrun-installed"
chmod 755 "$tmp"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
PYTHONPATH=$dest/site /usr/bin/python3 -c 'import horovod.torch' ||
  { echo "horovod.sh: $dest was unpacked, but /usr/bin/python3 cannot import horovod.torch from it" >&2; exit 1; }
