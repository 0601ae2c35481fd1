#!/usr/bin/env bash
# setup.sh — install what epload needs (Debian 12 or 13 packages) when it is
# missing, then configure and build into build/.  Idempotent and quiet when
# everything is already there.  Used by scripts/demo.sh and scripts/test.sh.
# Needs nothing but bash, coreutils and apt: on a bare root (no python3,
# compiler, sudo or certificates) it installs everything first, as root or
# through sudo.
#
#   scripts/setup.sh            install missing packages, build
#   scripts/setup.sh --deps-only   install missing packages only
#   EPLOAD_BUILD_DIR=dir ...    build somewhere else (default: build)
#   EPLOAD_JOBS=n ...           parallel build jobs (default: nproc)
#   EPLOAD_DEPS_DIR=dir ...     where downloaded sources are kept (default:
#                               ${XDG_CACHE_HOME:-~/.cache}/epload-build)
#
# Like the packages, the one download a build can use is fetched here, never
# by the build: the source of the simdjson that libsimdjson-dev installs
# (cmake/fetch_deps.cmake), compiled into epload when present.  pip builds
# (`pip install .`) find it in the same default directory.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${EPLOAD_BUILD_DIR:-$here/build}
jobs=${EPLOAD_JOBS:-$(nproc 2>/dev/null || echo 2)}

# Build and test dependencies, then the tools the benchmarks and the
# comparison use (hyperfine, strace, stevedore as a peer, matplotlib for plots).
# ca-certificates: the downloads below and pip's reach https servers; git:
# the release wheels are built from the committed tree (git archive); a bare
# root (debootstrap --variant=minbase, a debian:* container) has none of these.
packages=(ca-certificates git cmake make g++ pkg-config libsimdjson-dev libmimalloc-dev libbenchmark-dev
          libgtest-dev pybind11-dev python3-dev python3-venv python3-pytest hyperfine strace
          python3-stevedore python3-matplotlib)
"$here/scripts/apt_install.sh" setup "${packages[@]}"

# CPython's own importlib.metadata tests come in a package named after the
# interpreter's version, which only the python3 installed just above can tell.
python_version=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
"$here/scripts/apt_install.sh" setup "libpython$python_version-testsuite"

deps=${EPLOAD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/epload-build}
simdjson=$(dpkg-query -W -f='${Version}' libsimdjson-dev | sed 's/^[0-9]*://; s/-[^-]*$//')
cmake -DSIMDJSON_VERSION="$simdjson" -DEPLOAD_DEPS_DIR="$deps" -P "$here/cmake/fetch_deps.cmake"

[ "${1:-}" = "--deps-only" ] && exit 0

# /usr/bin/python3 explicitly: another python3 earlier on PATH must not win.
# EPLOAD_TEST_HOOKS: the bench gate's own tests need EPLOAD_TEST_SLOWDOWN.
cmake -S "$here" -B "$build" -DEPLOAD_PYTHON=/usr/bin/python3 -DEPLOAD_DEPS_DIR="$deps" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEPLOAD_TEST_HOOKS=ON >/dev/null
cmake --build "$build" -j "$jobs"
