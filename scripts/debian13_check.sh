#!/usr/bin/env bash
# debian13_check.sh — run the whole suite on Debian 13 (trixie) from a
# Debian 12 (or any Debian) host: a trixie root made once with debootstrap,
# this checkout's HEAD cloned into it, then scripts/test.sh inside, which
# installs trixie's own packages as it would for a user.  Idempotent: the
# root, its packages and its build tree are reused; the clone is moved to
# the current HEAD (commit first: uncommitted changes are not copied).
# Needs root (debootstrap, mount, chroot) and network for the first run.
# Not run by CI.
#
#   scripts/debian13_check.sh                 the whole suite
#   scripts/debian13_check.sh -R '^unit\.'    extra arguments go to ctest
#   EPLOAD_DEBIAN13_ROOT=dir   the root (default: trixie-root beside the checkout)
#   EPLOAD_JOBS=n, EPLOAD_TEST_JOBS=n, EPLOAD_SKIP_TORCH=1   passed through
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=${EPLOAD_DEBIAN13_ROOT:-$(dirname "$here")/trixie-root}
mirror=${EPLOAD_DEBIAN_MIRROR:-http://deb.debian.org/debian}

[ "$(id -u)" -eq 0 ] || { echo "debian13_check: run as root (debootstrap, mount and chroot need it)" >&2; exit 1; }

# debootstrap removes $root/debootstrap when it has finished: a root that
# still has it was interrupted, and debootstrap is run over it again.
if [ ! -e "$root/etc/debian_version" ] || [ -d "$root/debootstrap" ]; then
  "$here/scripts/apt_install.sh" debian13_check debootstrap
  echo "debian13_check: making a Debian 13 root in $root (a few minutes)" >&2
  debootstrap --variant=minbase trixie "$root" "$mirror"
fi

# The kernel file systems the build and the tests use; unmounted on exit
# (only those mounted here, innermost first).
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || true; done
}
trap cleanup EXIT
for fs in proc sys dev dev/pts; do
  mountpoint -q "$root/$fs" && continue
  case $fs in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sys "$root/sys" ;;
    dev) mount --bind /dev "$root/dev" ;;
    dev/pts) mount --bind /dev/pts "$root/dev/pts" ;;
  esac
  mounted+=("$root/$fs")
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
in_root sh -c 'dpkg-query -W -f="\${Status}" git 2>/dev/null | grep -q "ok installed" ||
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git ca-certificates >/dev/null; }'
# The host's own certificate authorities (a proxy's, under
# /usr/local/share/ca-certificates) go into the root's store, so that pip
# reaches PyPI from the root as it does from the host.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  in_root update-ca-certificates >/dev/null
fi

# The checkout's HEAD, cloned as a user would have it (by the host's git: a
# worktree's .git points outside the checkout, where the root cannot see).
head=$(git -C "$here" rev-parse HEAD)
[ -d "$root/src/.git" ] || git clone -q --no-checkout "$here" "$root/src"
git -C "$root/src" fetch -q "$here" "$head"
git -C "$root/src" checkout -q --force --detach "$head"
echo "debian13_check: Debian $(cat "$root/etc/debian_version"), epload $(git -C "$here" log -1 --format='%h %s' "$head")" >&2

# pip's bundled certificates know nothing of the host's authorities: the
# root's store does (above).
in_root EPLOAD_JOBS="${EPLOAD_JOBS:-2}" EPLOAD_TEST_JOBS="${EPLOAD_TEST_JOBS:-2}" \
  PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
  ${EPLOAD_SKIP_TORCH:+EPLOAD_SKIP_TORCH=$EPLOAD_SKIP_TORCH} \
  bash -c 'cd /src && scripts/test.sh "$@"' test.sh "$@"
