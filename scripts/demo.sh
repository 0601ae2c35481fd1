#!/usr/bin/env bash
# demo.sh — the README's main command: install what is missing, build, then
# measure what 1,000 plugin backends among 5,000 installed distributions cost
# a program at start, with importlib.metadata, PyTorch's eager loop and epload,
# and what they cost a real `import torch`.
# The work is done by scripts/demo.py; arguments are passed on to it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${EPLOAD_BUILD_DIR:-$here/build}

usage() {
  cat <<EOF2
usage: scripts/demo.sh [demo.py options]

Runs scripts/setup.sh (installs the missing Debian packages and builds into
${build#"$here"/}/; EPLOAD_BUILD_DIR changes that), then scripts/demo.py, which
takes one to three minutes once built for steps 1-3, and about five more for
step 4 (longer on the first run, which generates the environments and
installs torch).  Results go to out/demo/.  Needs no terminal.

EOF2
  if [ -x /usr/bin/python3 ]; then
    /usr/bin/python3 "$here/scripts/demo.py" --help | sed '1,/^$/d'
  fi
}

for a in "$@"; do
  case "$a" in
    -h|--help) usage; exit 0 ;;
  esac
done

# The build's progress goes to stderr: stdout carries only the results.
"$here/scripts/setup.sh" >&2
exec /usr/bin/python3 "$here/scripts/demo.py" --build "$build" "$@" </dev/null
