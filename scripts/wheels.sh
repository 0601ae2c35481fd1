#!/usr/bin/env bash
# wheels.sh — the release: one manylinux_2_28_x86_64 and one
# manylinux_2_28_aarch64 wheel per CPython, and the sdist, into dist/.  Runs
# on an x86-64 machine and needs only the interpreters, network and no root:
# everything else comes pinned by SHA-256 from PyPI (Zig as the compiler,
# auditwheel, the build backend, CMake, Ninja: scripts/wheels/*.txt) and from
# the Debian archive apt is configured with (simdjson and mimalloc sources,
# the aarch64 libgcc_s the cross link reads: cmake/*_pin.cmake), into
# build/wheels/ — never from the user's caches, so a commit gives the same
# wheel contents on any machine.
#
#   scripts/wheels.sh                    every CPython 3.10-3.13 found (pyenv's
#                                        versions, then python3.X on PATH)
#   scripts/wheels.sh PYTHON...          those interpreters only
#   EPLOAD_WHEELS_VERSIONS="3.11 3.13"   without arguments: only these versions
#   EPLOAD_WHEELS_ARCHES="x86_64"        only these architectures (default:
#                                        x86_64 aarch64)
#   EPLOAD_WHEELS_OUT=dir                where the wheels go (default dist/)
#   EPLOAD_WHEELS_WORK=dir               tools, sources and build trees
#                                        (default build/wheels/, reused)
#   EPLOAD_JOBS=n                        parallel compile jobs (default nproc)
#
# How: the sdist first (from the committed tree: git archive), then each
# wheel built from that sdist's sources with Zig's clang targeting
# ARCH-linux-gnu.2.28 (glibc 2.28's symbols, libc++ linked in statically),
# simdjson and mimalloc compiled in (EPLOAD_BUNDLED_DEPS=ON), tagged by
# `auditwheel repair`, confirmed by `auditwheel show`; the `epload` command
# under .data/scripts, which auditwheel does not look at, is checked against
# the same policy by scripts/wheels/elf_policy.py.  Any breach fails the run.
# SOURCE_DATE_EPOCH is the commit's time (zip entries, sdist).
#
# aarch64 is cross-built on an x86-64 machine by the same interpreters, so
# what the build would ask the interpreter is given for the target instead:
#   * the extension suffix, .cpython-3XY-aarch64-linux-gnu.so (CPython's for
#     aarch64 Linux): SETUPTOOLS_EXT_SUFFIX for scikit-build-core's
#     SKBUILD_SOABI, PYTHON_MODULE_EXTENSION for pybind11's module suffix;
#   * the wheel's platform, _PYTHON_HOST_PLATFORM=linux-aarch64 (then
#     auditwheel's manylinux_2_28_aarch64);
#   * CMAKE_SYSTEM_NAME/PROCESSOR (a cross build: nothing built is run);
#   * the headers: CPython's are the same for both architectures but for
#     pyconfig.h, and both are LP64, little-endian, with the same type
#     sizes.  Debian 12's python3.11 x86-64 and arm64 pyconfig.h differ in
#     HAVE_GCC_ASM_FOR_X87/X64 (x87 helpers nothing here calls),
#     HAVE_USABLE_WCHAR_T (whether unicodeobject.h includes <wchar.h>) and
#     PY_SUPPORT_TIER only, so the interpreter's own headers serve (Debian's
#     multiarch pyconfig.h picks /usr/include/aarch64-linux-gnu when
#     libpython3.X-dev:arm64 is installed);
#   * the unwinder to link: Debian 12's libgcc_s.so.1 for arm64, pinned
#     (cmake/libgcc_s_pin.cmake);
#   * stripping: the linker's (--strip-all), since the machine's strip may
#     not read aarch64 files; the install's strip is off.
# Its tests need an aarch64 machine or qemu-user: scripts/arm64_check.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${EPLOAD_WHEELS_OUT:-$here/dist}
work=${EPLOAD_WHEELS_WORK:-$here/build/wheels}
jobs=${EPLOAD_JOBS:-$(nproc 2>/dev/null || echo 2)}
glibc=2.28
read -r -a arches <<<"${EPLOAD_WHEELS_ARCHES:-x86_64 aarch64}"
say() { echo "wheels: $*" >&2; }
# pip, quiet but for errors; this machine's index configuration may name
# local directories that do not exist, of which pip warns once per package.
pip_q() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
die() { echo "wheels: $*" >&2; exit 1; }

# ---- the interpreters -------------------------------------------------------
version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
pythons=()
if (($#)); then
  for p in "$@"; do
    v=$(version_of "$p") || die "$p does not run as a Python interpreter"
    case $v in 3.1[0-3]) ;; *) die "$p is Python $v; the wheels are for CPython 3.10-3.13" ;; esac
    pythons+=("$(command -v "$p")")
  done
else
  pyenv_root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
  for v in ${EPLOAD_WHEELS_VERSIONS:-3.10 3.11 3.12 3.13}; do
    found=
    # The newest patch release pyenv has, else python3.X on PATH.
    for d in $(ls -d "$pyenv_root"/versions/$v.* 2>/dev/null | sort -V -r); do
      [ -x "$d/bin/python$v" ] && { found=$d/bin/python$v; break; }
    done
    [ -n "$found" ] || found=$(command -v "python$v" 2>/dev/null || true)
    [ -n "$found" ] && pythons+=("$found")
  done
  ((${#pythons[@]})) || die "no CPython 3.10-3.13 found (pyenv versions, python3.X on PATH); name them as arguments"
fi
for arch in "${arches[@]}"; do
  case $arch in x86_64 | aarch64) ;; *) die "EPLOAD_WHEELS_ARCHES: x86_64 or aarch64, not '$arch'" ;; esac
done
((${#arches[@]})) || die "EPLOAD_WHEELS_ARCHES names no architecture"
say "building for: ${pythons[*]} (${arches[*]})"
[ -d "$here/.git" ] || [ -f "$here/.git" ] || die "$here is not a git checkout (the sdist is made from the committed tree)"
command -v git >/dev/null || die "git is not installed (apt-get install git; scripts/setup.sh installs it): the sdist is git archive of HEAD"

# ---- the tools venv: Zig, auditwheel, build (pinned by hash) ---------------
start=$(date +%s)
mkdir -p "$work" "$out"
tools=$work/tools
reqs=$here/scripts/wheels
if ! cmp -s "$reqs/tool-requirements.txt" "$tools/.installed" 2>/dev/null ||
   ! cmp -s "$reqs/build-requirements.txt" "$tools/.installed-build" 2>/dev/null; then
  say "tools venv in $tools (Zig, auditwheel, build; ~150 MB from PyPI)"
  rm -rf "$tools"
  "${pythons[0]}" -m venv "$tools"
  pip_q "$tools/bin/python" -m pip install -q --no-deps --require-hashes -r "$reqs/tool-requirements.txt" \
    -r "$reqs/build-requirements.txt"
  cp "$reqs/tool-requirements.txt" "$tools/.installed"
  cp "$reqs/build-requirements.txt" "$tools/.installed-build"
fi
zig=$("$tools/bin/python" -c 'import ziglang, pathlib; print(pathlib.Path(ziglang.__file__).parent / "zig")')

# Compiler wrappers: CMake wants one executable per language.  Zig's caches
# are the build's own (never ~/.cache/zig).
mkdir -p "$work/bin"
for arch in "${arches[@]}"; do
  for lang in cc c++; do
    printf '#!/bin/sh\nexec "%s" %s -target %s-linux-gnu.%s "$@"\n' "$zig" "$lang" "$arch" "$glibc" >"$work/bin/zig-$arch-$lang"
    chmod +x "$work/bin/zig-$arch-$lang"
  done
done
export ZIG_GLOBAL_CACHE_DIR=$work/zig-cache ZIG_LOCAL_CACHE_DIR=$work/zig-cache

# One unwinder per process: the system's libgcc_s.so.1, not a static copy of
# Zig's libunwind.  A C++ backend (built with g++, libstdc++) that throws out
# of its init unwinds through our frames with libgcc_s; our personality
# routine calling a second, static unwinder on that context crashes the
# process instead of reporting a failed backend.  Named first on the link
# line, libgcc_s defines _Unwind_* before Zig's libunwind.a is searched, so
# no member of it is linked.  The build machine's copy only serves the link
# (its own needs, newer than glibc 2.28, are not ours: allowed undefined);
# the symbols bound are GCC_3.0-GCC_4.2.0, in every manylinux policy.  The
# other architecture's copy is Debian's, pinned (fetched below).
machine=$(uname -m)
declare -A gcc_s=()
if [ "$machine" = x86_64 ] && [[ " ${arches[*]} " == *" x86_64 "* ]]; then
  gcc_s[x86_64]=$(ldconfig -p 2>/dev/null | sed -n 's/.*libgcc_s\.so\.1 (libc6,x86-64) => //p' | head -1)
  [ -n "${gcc_s[x86_64]}" ] || for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64; do
    [ -e "$d/libgcc_s.so.1" ] && { gcc_s[x86_64]=$d/libgcc_s.so.1; break; }
  done
  [ -n "${gcc_s[x86_64]}" ] || die "no libgcc_s.so.1 on this machine to link against (ldconfig -p)"
fi
cross=()  # Debian's names of the architectures built with a pinned libgcc_s
for arch in "${arches[@]}"; do
  [ -n "${gcc_s[$arch]:-}" ] || case $arch in
    x86_64) cross+=(amd64) ;;
    aarch64) cross+=(arm64) ;;
  esac
done

# ---- pinned sources of simdjson and mimalloc (and libgcc_s) -----------------
cmake_bin=$tools/bin/cmake
"$cmake_bin" -DEPLOAD_DEPS_DIR="$work/deps" -DEPLOAD_LIBGCC_S_ARCHES="${cross[*]}" \
  -P "$here/cmake/fetch_bundled.cmake"
for deb_arch in "${cross[@]}"; do
  case $deb_arch in amd64) arch=x86_64 ;; arm64) arch=aarch64 ;; esac
  lib=$work/libgcc_s-$arch
  rm -rf "$lib" && mkdir -p "$lib"
  (cd "$lib" && "$cmake_bin" -E tar xf "$work"/deps/libgcc-s1_*_"$deb_arch".deb data.tar.xz &&
    "$cmake_bin" -E tar xf data.tar.xz "./lib/$arch-linux-gnu/libgcc_s.so.1") ||
    die "cannot unpack libgcc_s.so.1 from $work/deps/libgcc-s1_*_$deb_arch.deb"
  gcc_s[$arch]=$lib/lib/$arch-linux-gnu/libgcc_s.so.1
done

# ---- the sdist: the committed tree only --------------------------------------
export SOURCE_DATE_EPOCH=$(git -C "$here" log -1 --format=%ct)
git -C "$here" diff --quiet HEAD -- || say "note: uncommitted changes are not in the release (git archive of HEAD)"
rm -rf "$work/tree" && mkdir -p "$work/tree"
git -C "$here" archive --format=tar HEAD | tar -x -C "$work/tree"
version=$(sed -n 's/^project(epload VERSION \([0-9.]*\).*/\1/p' "$work/tree/CMakeLists.txt")
rm -f "$out"/epload-"$version"*.whl "$out"/epload-"$version".tar.gz
(cd "$work/tree" && "$tools/bin/python" -m build --sdist --no-isolation --outdir "$out" . >/dev/null) ||
  die "the sdist failed (run: cd $work/tree && $tools/bin/python -m build --sdist --no-isolation .)"
sdist=$out/epload-$version.tar.gz
[ -f "$sdist" ] || die "no $sdist after the sdist build"
rm -rf "$work/src" && mkdir -p "$work/src"
tar -xzf "$sdist" -C "$work/src"
src=$work/src/epload-$version

# ---- one wheel per interpreter, from the sdist's sources ---------------------
# No compiler launcher (ccache would key on the wrapper, not Zig), Ninja from
# the build venv, the C++ runtime and both libraries linked in.
unset CMAKE_C_COMPILER_LAUNCHER CMAKE_CXX_COMPILER_LAUNCHER CMAKE_GENERATOR
export CMAKE_BUILD_PARALLEL_LEVEL=$jobs
# The build backend (scikit-build-core, pybind11, CMake, Ninja: all
# pure Python or py3-none) in one directory every interpreter imports it
# from (PYTHONPATH): scikit-build-core clears a build tree last used from
# another installation of itself, so the shared trees below stay only when
# every version runs the same one.  Each interpreter's own venv gives pip.
rm -rf "$work/raw" "$work"/cmake-cp3*-* "$work"/pyconfig-cp3*-* "$work"/build-cp3*  # layouts of earlier runs
benv=$work/build-env
if ! cmp -s "$reqs/build-requirements.txt" "$benv/.installed" 2>/dev/null; then
  rm -rf "$benv"
  pip_q "$tools/bin/python" -m pip install -q --no-deps --require-hashes --target "$benv" \
    -r "$reqs/build-requirements.txt"
  cp "$reqs/build-requirements.txt" "$benv/.installed"
fi
for py in "${pythons[@]}"; do
  v=$(version_of "$py")
  tag=cp${v/./}
  venv=$work/pip-$tag
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  read -r multiarch include_py < <("$py" -c 'import sysconfig as s; print(s.get_config_var("MULTIARCH") or "-", s.get_config_var("INCLUDEPY"))')
  for arch in "${arches[@]}"; do
    policy=manylinux_${glibc/./_}_$arch
    say "$tag $arch: building with $py"
    t0=$(date +%s)
    link_flags="${gcc_s[$arch]} -Wl,--allow-shlib-undefined"
    # Debian's own interpreters keep pyconfig.h under the multiarch include
    # directory (/usr/include/x86_64-linux-gnu/python3.X), which Zig, bringing
    # its own libc headers, does not search; /usr/include itself must stay out
    # (its glibc headers are newer than the target's).  A directory holding
    # only that one link gives the compiler the file: the target's own when
    # installed, else the interpreter's (see aarch64 above).
    # The directory is passed for every version (empty where not needed), so
    # that every version's compile lines are the same: see the build tree below.
    shim=$work/pyconfig-$arch
    rm -rf "$shim" && mkdir -p "$shim/$arch-linux-gnu"
    if grep -q "<$multiarch/python$v/pyconfig.h>" "$include_py/pyconfig.h" 2>/dev/null; then
      have=/usr/include/$arch-linux-gnu/python$v
      [ -e "$have/pyconfig.h" ] || have=/usr/include/$multiarch/python$v
      ln -s "$have" "$shim/$arch-linux-gnu/python$v"
    fi
    flags=(--config-settings=cmake.define.CMAKE_C_FLAGS="-isystem $shim"
           --config-settings=cmake.define.CMAKE_CXX_FLAGS="-isystem $shim")
    # One CMake tree per architecture, shared by every version: only the
    # extension depends on the interpreter, so the second and later versions
    # compile just its four files, not simdjson, mimalloc, the core and the
    # command again (the extension's suffix: python/CMakeLists.txt).
    cross_env=()
    if [ "$arch" != "$machine" ]; then
      suffix=.cpython-${tag#cp}-$arch-linux-gnu.so
      cross_env=(SETUPTOOLS_EXT_SUFFIX="$suffix" _PYTHON_HOST_PLATFORM="linux-$arch")
      link_flags="$link_flags -Wl,--strip-all"
      flags+=(--config-settings=cmake.define.CMAKE_SYSTEM_NAME=Linux
              --config-settings=cmake.define.CMAKE_SYSTEM_PROCESSOR="$arch"
              --config-settings=install.strip=false)
    fi
    pip_q env "${cross_env[@]}" PATH="$benv/bin:$PATH" PYTHONPATH="$benv" \
      "$venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$work/raw/$tag-$arch" \
      --config-settings=build-dir="$work/cmake-$arch" \
      --config-settings=cmake.define.CMAKE_C_COMPILER="$work/bin/zig-$arch-cc" \
      --config-settings=cmake.define.CMAKE_CXX_COMPILER="$work/bin/zig-$arch-c++" \
      --config-settings=cmake.define.CMAKE_EXE_LINKER_FLAGS="$link_flags" \
      --config-settings=cmake.define.CMAKE_MODULE_LINKER_FLAGS="$link_flags" \
      --config-settings=cmake.define.EPLOAD_BUNDLED_DEPS=ON \
      --config-settings=cmake.define.EPLOAD_DEPS_DIR="$work/deps" "${flags[@]}" \
      "$src" ||
      die "$tag $arch: the build failed (its output is above)"
    raw=$(ls "$work/raw/$tag-$arch"/epload-*.whl)
    # Retag (nothing to graft: auditwheel fails if the wheel needs a library
    # outside the policy), then confirm.
    # auditwheel offers the policies of the machine it runs on; it reads the
    # wheel's ELF files alone, so for another architecture it is told that one.
    PATH=$tools/bin:$PATH "$tools/bin/python" -c 'import platform, sys
m = sys.argv.pop(1); platform.machine = lambda: m
from auditwheel.main import main; sys.argv[0] = "auditwheel"; sys.exit(main())' \
      "$arch" repair --plat "$policy" --only-plat -w "$out" "$raw" ||
      die "$tag $arch: auditwheel repair --plat $policy refused $raw"
    wheel=$(ls "$out"/epload-"$version"-"$tag"-"$tag"-*_"$arch".whl)
    "$tools/bin/auditwheel" show "$wheel" >"$work/show-$tag-$arch.txt" ||
      die "$tag $arch: auditwheel show failed on $wheel"
    # "... is consistent with the following platform tag: "manylinux_2_17_x86_64"":
    # that glibc version must be at most the policy's.
    shown=$(tr '\n' ' ' <"$work/show-$tag-$arch.txt" |
            sed -n 's/.*platform tag: *"manylinux_\([0-9]*\)_\([0-9]*\)_'"$arch"'".*/\1.\2/p')
    [ -n "$shown" ] && [ "$(printf '%s\n' "$shown" "$glibc" | sort -V | tail -1)" = "$glibc" ] ||
      { cat "$work/show-$tag-$arch.txt" >&2; die "$tag $arch: auditwheel show does not put $wheel within $policy"; }
    "$tools/bin/python" "$reqs/elf_policy.py" "$policy" "$wheel" >&2 ||
      die "$tag $arch: $wheel has a binary beyond $policy (above)"
    say "$tag $arch: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB, $(($(date +%s) - t0)) s; auditwheel: manylinux_${shown/./_}_$arch)"
  done
done

say "done in $(($(date +%s) - start)) s: $out"
(cd "$out" && ls -l epload-"$version"* >&2)
