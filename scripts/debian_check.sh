#!/usr/bin/env bash
# debian_check.sh — run the README's two commands, scripts/demo.sh then
# scripts/test.sh, in a Debian 12 (bookworm) or 13 (trixie) root as a new
# user would: a minbase root made with debootstrap (what a debian:bookworm or
# debian:trixie container holds: no python3, compiler, sudo or certificates),
# this checkout's HEAD cloned into it, and nothing else installed beforehand:
# the commands install what they need themselves.  Runs on any Debian host.
#
#   scripts/debian_check.sh RELEASE [--fresh] [--no-demo] [CTEST ARGS...]
#     RELEASE     bookworm (or 12) or trixie (or 13)
#     --fresh     remove the root and make it again with debootstrap; without
#                 it the root, its packages and its build tree are reused
#     --no-demo   run scripts/test.sh only
#     CTEST ARGS  go to scripts/test.sh, e.g. -R '^unit\.'
#   EPLOAD_DEBIAN_ROOT=dir     the root (default: RELEASE-root beside the checkout)
#   EPLOAD_DEBIAN_MIRROR=url   the Debian mirror debootstrap uses (default: its own)
#   EPLOAD_TORCH_WHEELS=dir    local wheels for pip, bind-mounted read-only into
#                              the root (default: the host's pip find-links)
#   EPLOAD_JOBS=n, EPLOAD_TEST_JOBS=n, EPLOAD_SKIP_TORCH=1   passed through
#
# The clone is moved to the current HEAD: commit first, uncommitted changes
# are not copied.  The real-torch steps (demo step 4, the torch.* tests) run
# when a local torch 2.13.0 wheel fits the release's python3 (pip finds it
# through PIP_FIND_LINKS); otherwise they are skipped with EPLOAD_SKIP_TORCH=1
# and the reason is printed: pip would otherwise download a CUDA build of
# several GB.  Needs root (debootstrap, mount, chroot) and network to Debian's
# mirror and PyPI.  Not run by CI (see CONTRIBUTING.md for what it costs).
set -euo pipefail
# The whole script is one block, read before any of it runs: it runs for an
# hour from the checkout, where editing it must not change what runs.
{

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
me=debian_check
die() { echo "$me: $*" >&2; exit 1; }

release=${1:-}
shift || true
case $release in
  bookworm | 12) release=bookworm debian=12 python=3.11 ;;
  trixie | 13) release=trixie debian=13 python=3.13 ;;
  -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "first argument: bookworm (or 12) or trixie (or 13), not '${release}'" ;;
esac
fresh=0 demo=1
while (($#)); do
  case $1 in
    --fresh) fresh=1 ;;
    --no-demo) demo=0 ;;
    *) break ;;  # the rest goes to ctest
  esac
  shift
done

root=${EPLOAD_DEBIAN_ROOT:-$(dirname "$here")/$release-root}
mirror=${EPLOAD_DEBIAN_MIRROR:-}
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, mount and chroot need it)"

# One check per root at a time: a second would share its mounts and build.
mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock -n 9 || die "another check is using $root (lock $root.lock held)"

# Anything still mounted under the root (a check killed before its clean-up)
# would be deleted through by --fresh, or hidden by the mounts below.
mounted_under() { awk -v r="$root/" 'index($5 "/", r) == 1 { print $5 }' /proc/self/mountinfo; }
stale=$(mounted_under)
[ -z "$stale" ] || die "still mounted under $root (unmount first): $(echo $stale)"

phase_start=$SECONDS
times=()
timed() { times+=("$1 $((SECONDS - phase_start)) s"); phase_start=$SECONDS; }

if ((fresh)) && [ -e "$root" ]; then
  echo "$me: removing $root (--fresh)" >&2
  rm -rf --one-file-system "$root"
fi
# debootstrap removes $root/debootstrap when it has finished: a root that
# still has it was interrupted, and debootstrap is run over it again.
if [ ! -e "$root/etc/debian_version" ] || [ -d "$root/debootstrap" ]; then
  "$here/scripts/apt_install.sh" "$me" debootstrap
  echo "$me: making a Debian $debian ($release) minbase root in $root" >&2
  debootstrap --variant=minbase "$release" "$root" ${mirror:+"$mirror"} >"$root.debootstrap.log" 2>&1 ||
    die "debootstrap failed; its log: $root.debootstrap.log"
  timed debootstrap
fi

# The kernel file systems the build and the tests use, and the local wheel
# directory (read-only); unmounted on exit, innermost first.
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || true; done
}
trap cleanup EXIT
mnt() { mount "$@"; mounted+=("${@: -1}"); }  # a failed mount stops the check (set -e)
mnt -t proc proc "$root/proc"
mnt -t sysfs sys "$root/sys"
mnt --bind /dev "$root/dev"
mnt --bind /dev/pts "$root/dev/pts"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

# The host's own certificate authorities (a proxy's, under
# /usr/local/share/ca-certificates) are put where the root's ca-certificates
# package takes them from when setup.sh installs it, so that apt, cmake and
# pip reach the network from the root as they do from the host.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  [ ! -x "$root/usr/sbin/update-ca-certificates" ] ||
    chroot "$root" /usr/sbin/update-ca-certificates >/dev/null
fi

# The real-torch steps need torch 2.13.0 for the release's python3.  pip
# takes it from a local wheel directory when one holds a file for that
# interpreter; anything else would make pip download a CUDA build.
wheels=${EPLOAD_TORCH_WHEELS:-${PIP_FIND_LINKS:-$(python3 -m pip config get global.find-links 2>/dev/null || true)}}
wheels=${wheels%% *}  # the first of a list
[ -z "$wheels" ] || [ ! -d "$wheels" ] || wheels=$(realpath "$wheels")
tag=cp${python/./}
torch_env=()
if [ "${EPLOAD_SKIP_TORCH:-}" = 1 ]; then
  torch_env=(EPLOAD_SKIP_TORCH=1)
  echo "$me: torch steps skipped: EPLOAD_SKIP_TORCH=1 was set" >&2
elif [ -z "$wheels" ] || ! compgen -G "$wheels/torch-2.13.0*-$tag-$tag-*.whl" >/dev/null; then
  torch_env=(EPLOAD_SKIP_TORCH=1)
  echo "$me: torch steps skipped (EPLOAD_SKIP_TORCH=1): Debian $debian's python3 is $python and" \
    "no local torch 2.13.0 wheel for $tag is in '${wheels:-(no wheel directory: set EPLOAD_TORCH_WHEELS)}'" >&2
else
  mkdir -p "$root$wheels"
  mnt --bind -o ro "$wheels" "$root$wheels"
  mount -o remount,bind,ro "$root$wheels"  # older mounts ignore ro on the first call
  torch_env=(PIP_FIND_LINKS="$wheels")
  echo "$me: torch steps run with $(cd "$wheels" && echo torch-2.13.0*-"$tag"-*.whl) from $wheels" >&2
fi

# The checkout's HEAD, cloned as a user would have it (by the host's git: a
# worktree's .git points outside the checkout, where the root cannot see).
head=$(git -C "$here" rev-parse HEAD)
[ -d "$root/src/.git" ] || git clone -q --no-checkout "$here" "$root/src"
git -C "$root/src" fetch -q "$here" "$head"
git -C "$root/src" checkout -q --force --detach "$head"
echo "$me: Debian $(cat "$root/etc/debian_version"), epload $(git -C "$here" log -1 --format='%h %s' "$head")" >&2

# A clean environment, as a login would give; pip's bundled certificates know
# nothing of the host's authorities, the root's store does (above).
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    EPLOAD_JOBS="${EPLOAD_JOBS:-2}" EPLOAD_TEST_JOBS="${EPLOAD_TEST_JOBS:-2}" \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt "${torch_env[@]}" "$@"
}
report() { local IFS=,; echo "$me: Debian $debian ($release) took: ${times[*]:-nothing finished}" >&2; }
trap 'report; cleanup' EXIT

if ((demo)); then
  echo "$me: scripts/demo.sh" >&2
  in_root bash -c 'cd /src && scripts/demo.sh'
  timed demo.sh
fi
echo "$me: scripts/test.sh $*" >&2
in_root bash -c 'cd /src && scripts/test.sh "$@"' test.sh "$@"
timed test.sh
echo "$me: Debian $debian ($release): python3 is $(in_root python3 -c 'import sys; print(sys.version.split()[0])')" >&2
exit
}
