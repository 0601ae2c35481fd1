#!/usr/bin/env bash
# debian13_check.sh — the Debian 13 (trixie) case of scripts/debian_check.sh,
# kept under its first name: scripts/debian13_check.sh [--fresh] [--no-demo]
# [CTEST ARGS...] is scripts/debian_check.sh trixie with the same arguments.
# EPLOAD_DEBIAN13_ROOT=dir still names the root.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "${EPLOAD_DEBIAN13_ROOT:-}" ]; then
  export EPLOAD_DEBIAN_ROOT=$EPLOAD_DEBIAN13_ROOT
fi
exec "$here/debian_check.sh" trixie "$@"
