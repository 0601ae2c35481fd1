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
  cat <<EOF
usage: scripts/demo.sh [demo.py options]

Runs scripts/setup.sh (installs the missing Debian packages and builds into
${build#"$here"/}/; EPLOAD_BUILD_DIR changes that), then scripts/demo.py:

  1. generates the default environment, 1,000 native backends among 5,000
     ordinary distributions (scripts/gen_env.py out/demo/env --backends 1000
     --noise 5000), or reuses the one a previous run left there;
  2. prints one table of start-up cost (whole processes, interleaved rounds,
     medians): importlib.metadata's group lookup against epload's cold scan
     and cached index (full and paths validation); eager against lazy loading
     (epload load DEVICE --mode eager|lazy) with a cold and a cached index;
     time to first device;
  3. runs scripts/bench_startup.py --quick: 10, 100 and 1,000 Python backends
     (importlib.metadata, stevedore, PyTorch's eager loop, epload eager, lazy
     and paths validation);
  4. runs scripts/bench_torch.py --quick with a real PyTorch (torch==2.13.0,
     installed once into ${build#"$here"/}/torch-venv by scripts/torch_env.py,
     as the torch.* tests do): import torch with autoload off, stock autoload,
     epload eager and lazy, the first to("foo"), with 10, 100 and 1,000
     backends whose import costs 20 ms; --no-torch (or EPLOAD_SKIP_TORCH=1)
     skips it.

Takes one to three minutes once built for steps 1-3, and about five more for
step 4 (longer on the first run, which generates the environments and
installs torch).  Results go to out/demo/: demo.md, demo.json, startup.md,
startup.json, startup.png, torch.md, torch.json, torch.png.  Needs no terminal.
EOF
  if [ -x /usr/bin/python3 ]; then
    echo
    echo "demo.py options:"
    /usr/bin/python3 "$here/scripts/demo.py" --help | sed -n '/^options:/,/^$/p' | tail -n +2
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
