#!/usr/bin/env bash
# wheel_bare_check.sh — the release wheel on a machine with nothing but
# Python: a Debian 13 (trixie) minbase root holding only python3 and
# python3-venv (no compiler, no -dev package, no libmimalloc, no libsimdjson),
# made once with debootstrap and reused.  Inside it:
#   1. the cp313 wheel installs into a fresh venv (pip --no-index: the wheel
#      alone), and tests/package/installed_probe.py passes there: the
#      `epload` command, the Python API against importlib.metadata, the .pth
#      hook with a pure-Python backend; `pip uninstall` leaves nothing;
#   2. `pip install` of the sdist stops with one message naming the missing
#      build packages and the command that installs them (pip fetches the
#      build requirements from PyPI for that: network).
# Needs root (debootstrap, mount, chroot) and network the first time.  Not
# run by CI (see CONTRIBUTING.md for its cost).
#
#   scripts/wheel_bare_check.sh [WHEEL]   default: dist/epload-*-cp313-*.whl
#   EPLOAD_BARE_ROOT=dir   the root (default: wheel-bare-root beside the checkout)
#   EPLOAD_DEBIAN_MIRROR=url   the Debian mirror debootstrap uses (default: its own)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=${EPLOAD_BARE_ROOT:-$(dirname "$here")/wheel-bare-root}
mirror=${EPLOAD_DEBIAN_MIRROR:-}  # empty: debootstrap's own
say() { echo "wheel_bare_check: $*" >&2; }
die() { echo "wheel_bare_check: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, mount and chroot need it)"
wheel=${1:-$(ls "$here"/dist/epload-*-cp313-cp313-manylinux*.whl 2>/dev/null | head -1)}
[ -n "$wheel" ] && [ -f "$wheel" ] || die "no cp313 wheel (scripts/wheels.sh makes dist/); or name one"
sdist=$(ls "$(dirname "$wheel")"/epload-*.tar.gz 2>/dev/null | head -1)
start=$(date +%s)

# debootstrap removes $root/debootstrap when it has finished: a root that
# still has it was interrupted, and is made again.
if [ ! -e "$root/etc/debian_version" ] || [ -d "$root/debootstrap" ]; then
  "$here/scripts/apt_install.sh" wheel_bare_check debootstrap
  say "making a Debian 13 minbase root in $root (a few minutes)"
  debootstrap --variant=minbase trixie "$root" ${mirror:+"$mirror"} >/dev/null
fi

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || true; done
}
trap cleanup EXIT
for fs in proc dev; do
  mountpoint -q "$root/$fs" && continue
  case $fs in
    proc) mount -t proc proc "$root/proc" ;;
    dev) mount --bind /dev "$root/dev" ;;
  esac
  mounted+=("$root/$fs")
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The host's certificate authorities (a proxy's), for pip's sdist step.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi

in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
installed() { in_root dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

want=(python3 python3-venv ca-certificates)
missing=()
for p in "${want[@]}"; do installed "$p" || missing+=("$p"); done
if ((${#missing[@]})); then
  say "installing ${missing[*]} into the root"
  in_root sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${missing[*]} >/dev/null"
fi
in_root update-ca-certificates >/dev/null 2>&1 || true
# Nothing but Python: no compiler, no build package, neither library.
for p in gcc g++ cpp clang libmimalloc2.0 libmimalloc3 libmimalloc-dev libsimdjson-dev libsimdjson25 libsimdjson19 \
         python3-dev libpython3.13-dev; do
  ! installed "$p" || die "the root has $p installed: it must hold nothing but Python (remove $root to start again)"
done
for c in cc gcc g++ c++; do
  ! in_root sh -c "command -v $c" >/dev/null || die "the root has a C compiler ($c)"
done
py=$(in_root python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
case $(basename "$wheel") in *-"$py"-"$py"-*) ;; *) die "$(basename "$wheel") is not for the root's Python ($py)" ;; esac
say "Debian $(cat "$root/etc/debian_version"), $(in_root python3 --version), $(basename "$wheel")"

# ---- 1. the wheel -------------------------------------------------------------
rm -rf "$root/check" && mkdir -p "$root/check"
cp "$wheel" "$here/tests/package/installed_probe.py" "$root/check/"
in_root python3 -m venv /check/venv
in_root sh -c 'cd /check && find venv | sort >before.txt'
in_root /check/venv/bin/pip install -q --no-index "/check/$(basename "$wheel")"
in_root /check/venv/bin/python /check/installed_probe.py /check/work || die "the installed wheel fails (above)"
in_root /check/venv/bin/pip uninstall -q -y epload
in_root sh -c 'cd /check && find venv | grep -v __pycache__ | sort >after.txt && grep -v __pycache__ before.txt | diff - after.txt' ||
  die "pip uninstall left files behind or removed some (diff above)"
say "the wheel: installed, command, API and .pth hook work, uninstall leaves nothing"

# ---- 2. the sdist without build packages ----------------------------------------
if [ -n "$sdist" ]; then
  cp "$sdist" "$root/check/"
  set +e
  out=$(in_root env PIP_CERT=/etc/ssl/certs/ca-certificates.crt /check/venv/bin/pip install --no-cache-dir \
        "/check/$(basename "$sdist")" 2>&1)
  rc=$?
  set -e
  [ $rc -ne 0 ] || die "pip install of the sdist succeeded on a machine without a compiler?"
  msg=$(printf "%s\n" "$out" | grep -A8 "epload cannot be built from source here" || true)
  [ -n "$msg" ] || { printf '%s\n' "$out" | tail -30 >&2; die "the sdist did not stop with the missing-packages message"; }
  printf '%s\n' "$msg" | grep -q "^ *g++ libsimdjson-dev libmimalloc-dev python3-dev$" ||
    { printf '%s\n' "$out" | tail -30 >&2; die "the message does not name every missing package"; }
  printf '%s\n' "$msg" | grep -q "sudo apt-get install g++ libsimdjson-dev libmimalloc-dev python3-dev" ||
    die "the message does not give the install command"
  say "the sdist: stops with one message naming g++ libsimdjson-dev libmimalloc-dev python3-dev"
fi
in_root /check/venv/bin/python -c 'import sys' && rm -rf "$root/check"
say "passed in $(($(date +%s) - start)) s"
