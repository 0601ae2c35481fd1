#!/usr/bin/env bash
# arm64_check.sh — the aarch64 release wheel of one Debian release's python3
# on an emulated arm64 Debian: a Debian 12 (bookworm, CPython 3.11) or 13
# (trixie, CPython 3.13) arm64 minbase root with python3-venv, made with
# `debootstrap --foreign` and finished under qemu-user-static.  binfmt_misc
# runs the root's aarch64 programs through qemu: the script mounts it and
# registers qemu for aarch64 ELF files when nothing does yet, and undoes
# both on exit.  Inside the root:
#   1. the cp3XY manylinux_2_28_aarch64 wheel installs into a fresh venv
#      (pip --no-index: the wheel alone; pytest from wheels the host's pip
#      fetched through its own configured index);
#   2. tests/package/installed_probe.py: the `epload` command and the Python
#      API answer as that interpreter's importlib.metadata, the .pth hook
#      loads a pure-Python backend lazily, once;
#   3. the differential tests (tests/py/test_differential*.py and
#      test_entry_points.py) against the installed command and package, that
#      interpreter as the oracle, as tests/package/test_installed_wheels.py
#      runs them;
#   4. a native fixture backend (tests/backends/test_backend.c compiled for
#      aarch64 by the release's Zig, build/wheels/tools) is found and
#      dlopened by the command's C++ loader: by its path, and named with
#      the interpreter's extension suffix (asked of the emulated python).
# Needs root (debootstrap, mount, chroot, binfmt_misc), an x86-64 Debian
# host and network the first time; not run by CI (CONTRIBUTING.md has its
# cost).  Installs debootstrap and qemu-user-static when missing.
#
#   scripts/arm64_check.sh RELEASE [--fresh] [WHEEL]
#     RELEASE   bookworm (or 12) or trixie (or 13)
#     --fresh   make the root anew (otherwise it is made once and reused)
#     WHEEL     default: dist/epload-*-cp3XY-cp3XY-manylinux*_aarch64.whl
#   EPLOAD_ARM64_ROOT=dir      the root (default: arm64-RELEASE-root beside the checkout)
#   EPLOAD_DEBIAN_MIRROR=url   the Debian mirror debootstrap uses (default: its own)
#   EPLOAD_WHEELS_WORK=dir     scripts/wheels.sh's work directory, for Zig
#                              (default: build/wheels)
set -euo pipefail
# One block, read before any of it runs (editing the file during a run
# changes nothing of that run).
{

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
me=arm64_check
say() { echo "$me: $*" >&2; }
die() { echo "$me: $*" >&2; exit 1; }

release=${1:-}
shift || true
case $release in
  bookworm | 12) release=bookworm debian=12 python=3.11 ;;
  trixie | 13) release=trixie debian=13 python=3.13 ;;
  -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) die "first argument: bookworm (or 12) or trixie (or 13), not '${release}'" ;;
esac
fresh=0
if [ "${1:-}" = --fresh ]; then fresh=1; shift; fi
tag=cp${python/./}
wheel=${1:-$(ls "$here"/dist/epload-*-"$tag"-"$tag"-manylinux*_aarch64.whl 2>/dev/null | tail -1)}
[ -n "$wheel" ] && [ -f "$wheel" ] ||
  die "no $tag aarch64 wheel in $here/dist (scripts/wheels.sh makes it); or name one"
wheel=$(realpath "$wheel")
case $(basename "$wheel") in
  *-"$tag"-"$tag"-manylinux*_aarch64.whl) ;;
  *) die "$wheel is not a $tag aarch64 wheel: Debian $debian's python3 is $python" ;;
esac
work=${EPLOAD_WHEELS_WORK:-$here/build/wheels}
zig=$(ls "$work"/tools/lib/python3*/site-packages/ziglang/zig 2>/dev/null | head -1)
[ -x "$zig" ] || die "no Zig in $work/tools (scripts/wheels.sh installs it there)"
root=${EPLOAD_ARM64_ROOT:-$(dirname "$here")/arm64-$release-root}
mirror=${EPLOAD_DEBIAN_MIRROR:-}
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, mount, chroot and binfmt_misc need it)"
[ "$(uname -m)" = x86_64 ] || die "an x86-64 host is expected (this is $(uname -m))"

mkdir -p "$(dirname "$root")"
exec 9>"$root.lock"
flock -n 9 || die "another check is using $root (lock $root.lock held)"
mounted_under() { awk -v r="$root/" 'index($5 "/", r) == 1 { print $5 }' /proc/self/mountinfo; }
stale=$(mounted_under)
[ -z "$stale" ] || die "still mounted under $root (unmount first): $(echo $stale)"

start=$SECONDS phase_start=$SECONDS
times=()
timed() { times+=("$1 $((SECONDS - phase_start)) s"); phase_start=$SECONDS; }
report() { local IFS=,; say "Debian $debian ($release) arm64 took: ${times[*]:-nothing finished}; total $((SECONDS - start)) s"; }

"$here/scripts/apt_install.sh" "$me" debootstrap qemu-user-static
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
[ -n "$qemu" ] || die "qemu-user-static installs no qemu-aarch64(-static)"

# ---- binfmt_misc: aarch64 ELF files through qemu, for this run -------------
binfmt=/proc/sys/fs/binfmt_misc
entry=epload-qemu-aarch64
mounted=() binfmt_mounted=0 registered=0
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || true; done
  if ((registered)) && [ -e "$binfmt/$entry" ]; then echo -1 >"$binfmt/$entry" || true; fi
  if ((binfmt_mounted)); then umount "$binfmt" || true; fi
}
trap 'report; cleanup' EXIT
if ! mountpoint -q "$binfmt"; then
  mount -t binfmt_misc binfmt_misc "$binfmt"
  binfmt_mounted=1
fi
# A handler already registered for aarch64 (binfmt-support's, systemd's) is
# used as it is; the magic is qemu's own (qemu-binfmt-conf.sh).
magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
existing=$(grep -l '^magic 7f454c460201010000000000000000000200b700' "$binfmt"/* 2>/dev/null | head -1 || true)
if [ -n "$existing" ] && grep -qx enabled "$existing"; then
  say "aarch64 programs run through the registered $(basename "$existing") ($(sed -n 's/^interpreter //p' "$existing"))"
else
  # F: the kernel opens qemu now, so that it serves inside the chroot too.
  printf ':%s:M::%s:%s:%s:F' "$entry" "$magic" "$mask" "$qemu" >"$binfmt/register"
  registered=1
  say "registered $qemu for aarch64 programs ($binfmt/$entry, removed on exit)"
fi

# ---- the root --------------------------------------------------------------
if ((fresh)) && [ -e "$root" ]; then
  say "removing $root (--fresh)"
  rm -rf --one-file-system "$root"
fi
# debootstrap removes $root/debootstrap when it has finished: a root that
# still has it was interrupted, and is made again.
if [ ! -e "$root/etc/debian_version" ] || [ -d "$root/debootstrap" ]; then
  rm -rf --one-file-system "$root"
  say "making a Debian $debian ($release) arm64 minbase root in $root"
  debootstrap --arch=arm64 --foreign --variant=minbase --include=python3-venv,ca-certificates \
    "$release" "$root" ${mirror:+"$mirror"} >"$root.debootstrap.log" 2>&1 ||
    die "debootstrap (first stage) failed; its log: $root.debootstrap.log"
  timed "debootstrap first stage"
  chroot "$root" /debootstrap/debootstrap --second-stage >>"$root.debootstrap.log" 2>&1 ||
    die "debootstrap --second-stage (emulated) failed; its log: $root.debootstrap.log"
  timed "second stage (emulated)"
fi
[ "$(chroot "$root" /usr/bin/uname -m)" = aarch64 ] || die "the root's programs do not run as aarch64"

mnt() { mount "$@"; mounted+=("${@: -1}"); }
mnt -t proc proc "$root/proc"
mnt --bind /dev "$root/dev"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The host's certificate authorities (a proxy's), as debian_check.sh gives
# them, for anything in the root that reaches the network.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" /usr/sbin/update-ca-certificates >/dev/null 2>&1 || true
fi

in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
have=$(in_root python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$have" = "$python" ] || die "the root's python3 is $have, not $python"

# ---- what goes in: the tests of HEAD, the wheel, pytest, the fixture --------
check=$root/epload-check
rm -rf "$check" && mkdir -p "$check/wheels" "$check/src" "$check/site/npu" "$check/site/pkg"
# The tests, and the scripts and harness their fixtures run (scripts/gen_env.py,
# scripts/_bench.py loading python/epload/bench).
git -C "$here" archive HEAD tests scripts python | tar -x -C "$check/src"
cp "$wheel" "$check/wheels/"
# pytest and its dependencies (all pure Python) through the host's pip and its
# configured index, for the root's interpreter version.
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version "$python" \
  --platform manylinux_2_28_aarch64 -d "$check/wheels" pytest 2> >(grep -v "is ignored" >&2) ||
  die "pip download pytest for Python $python failed"
"$zig" cc -target aarch64-linux-gnu.2.28 -shared -fPIC -O2 -fvisibility=hidden \
  -I"$here/include" -I"$here/tests/backends" '-DTB_DECLARE="tnpu","tnpu2"' '-DTB_REG1="tnpu"' \
  '-DTB_REG2="tnpu2"' -o "$check/tb_npu.so" "$here/tests/backends/test_backend.c" ||
  die "Zig could not build the aarch64 fixture backend"
file -b "$check/tb_npu.so" | grep -q 'ARM aarch64' || die "the fixture backend is not an aarch64 file"
timed "inputs"

# ---- 1. the wheel in a fresh venv ------------------------------------------
say "Debian $(cat "$root/etc/debian_version") arm64, Python $python: installing $(basename "$wheel")"
in_root rm -rf /epload-venv
in_root python3 -m venv /epload-venv
in_root /epload-venv/bin/python -m pip install -q --no-index --find-links /epload-check/wheels pytest
out=$(in_root /epload-venv/bin/python -m pip install --no-index --no-deps "/epload-check/wheels/$(basename "$wheel")")
grep -q "Successfully installed epload-" <<<"$out" || die "pip did not install the wheel: $out"
native=$(in_root /epload-venv/bin/python -c 'import epload._native as n; print(n.__file__)')
file -b "$root$native" | grep -q 'ARM aarch64' || die "$native is not an aarch64 file"
timed "venv and install"

# ---- 2. the probe ------------------------------------------------------------
say "installed_probe.py"
probe=$(in_root /epload-venv/bin/python /epload-check/src/tests/package/installed_probe.py /tmp/epload-probe) ||
  die "installed_probe.py failed (above)"
last=$(tail -1 <<<"$probe")
python3 - "$last" <<'EOF' || die "the probe's answer is not as expected: $last"
import json, sys
out = json.loads(sys.argv[1])
assert out["file"].startswith("/epload-venv/"), out
assert out["hook"]["after_use"] == ["import", "init"], out
EOF
say "probe: $last"
timed probe

# ---- 3. the differential tests ---------------------------------------------
say "differential tests against the installed wheel"
mkdir -p "$check/installed"
ln -s /epload-venv/bin/epload "$check/installed/epload"
in_root env EPLOAD_PYTHON=/epload-venv/bin/python EPLOAD_BUILD_DIR=/epload-check/installed \
  EPLOAD_SOURCE_DIR=/epload-check/src PYTHONDONTWRITEBYTECODE=1 \
  sh -c 'cd /tmp && /epload-venv/bin/python -m pytest -q -p no:cacheprovider -rs \
    /epload-check/src/tests/py/test_differential.py /epload-check/src/tests/py/test_differential_random.py \
    /epload-check/src/tests/py/test_entry_points.py' || die "the differential tests failed (above)"
timed "differential tests"

# ---- 4. a native backend through the command's C++ loader -------------------
say "native aarch64 fixture backend through the command"
site=/epload-check/site
cp "$check/tb_npu.so" "$check/site/npu/_native.so"
mkdir -p "$check/site/npu-1.0.dist-info"
printf 'Metadata-Version: 2.1\nName: npu\nVersion: 1.0\n' >"$check/site/npu-1.0.dist-info/METADATA"
printf '[torch.backends]\nnpu = npu._native:tb_init\n' >"$check/site/npu-1.0.dist-info/entry_points.txt"
loaded=$(in_root /epload-venv/bin/epload load tnpu --mode eager --json --path "$site" --cache-dir /tmp/epload-c1)
python3 - "$loaded" <<'EOF' || die "the command did not load the native backend: $loaded"
import json, sys
loaded = {b["backend"]: b["state"] for b in json.loads(sys.argv[1])["loaded"]}
assert loaded == {"npu": "ready"}, loaded
EOF
# Named with the emulated interpreter's extension suffix, found for it.
suffix=$(in_root /epload-venv/bin/python -c 'import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])')
[ "$suffix" = ".cpython-${python/./}-aarch64-linux-gnu.so" ] || die "unexpected extension suffix $suffix"
rm -rf "$check/site/npu" "$check/site/npu-1.0.dist-info"
cp "$check/tb_npu.so" "$check/site/pkg/mod$suffix"
mkdir -p "$check/site/tbnpu-1.0.dist-info"
printf 'Metadata-Version: 2.1\nName: tbnpu\nVersion: 1.0\n' >"$check/site/tbnpu-1.0.dist-info/METADATA"
printf '[torch.backends]\nnpu = pkg.mod:tb_init\n' >"$check/site/tbnpu-1.0.dist-info/entry_points.txt"
devices=$(in_root /epload-venv/bin/epload devices --json --path "$site" --python /epload-venv/bin/python \
  --cache-dir /tmp/epload-c2)
loaded=$(in_root /epload-venv/bin/epload load tnpu --mode eager --json --path "$site" \
  --python /epload-venv/bin/python --cache-dir /tmp/epload-c2)
python3 - "$devices" "$loaded" "$site/pkg/mod$suffix" <<'EOF' || die "the suffixed native backend: $devices $loaded"
import json, sys
[b] = json.loads(sys.argv[1])["backends"]
assert b["kind"] == "native" and b["library"] == sys.argv[3], b
loaded = {b["backend"]: b["state"] for b in json.loads(sys.argv[2])["loaded"]}
assert loaded == {"npu": "ready"}, loaded
EOF
timed "native backend"

in_root /epload-venv/bin/python -m pip uninstall -q -y epload
say "Debian $debian ($release) arm64: all checks passed ($(basename "$wheel"))"
exit
}
