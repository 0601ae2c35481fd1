#!/usr/bin/env bash
# test.sh — the README's test command: install what is missing, build, and
# run every test (unit.*, fuzz.*, cli.*, python.*, package.*, torch.*, bench.smoke)
# with ctest; torch.* first makes a venv with PyTorch 2.13.0 (EPLOAD_SKIP_TORCH=1 skips it).
# Extra arguments go to ctest, e.g. scripts/test.sh -R '^unit\.'
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${EPLOAD_BUILD_DIR:-$here/build}
"$here/scripts/setup.sh"
cd "$build"
ctest --output-on-failure -j "${EPLOAD_TEST_JOBS:-2}" --timeout 900 "$@"
