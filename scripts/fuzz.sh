#!/usr/bin/env bash
# fuzz.sh — build the libFuzzer targets of tests/fuzz/ and run each for a
# while on a copy of its seed corpus.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 60 s, every target)
#   scripts/fuzz.sh --help
#
# Installs clang and libclang-rt-14-dev when missing (as setup.sh installs
# packages), configures build-fuzz/ with clang and -DEPLOAD_FUZZ=ON, builds,
# then runs the targets one at a time, pinned to one CPU (EPLOAD_FUZZ_CPU,
# default: the last allowed one).  The committed corpus is never written:
# each run works in build-fuzz/fuzz-work/<target>/ (corpus copy, crash
# files).  Stops at the first crash, leak, sanitizer report or timeout,
# prints the reproducer and how to replay and minimize it, and exits 1.
#
#   EPLOAD_JOBS=n        parallel build jobs (default 2)
#   EPLOAD_FUZZ_ARGS=... extra libFuzzer flags for every run
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${EPLOAD_FUZZ_BUILD_DIR:-$here/build-fuzz}
fuzz_src=$here/tests/fuzz
all_targets=(entry_points metadata cache learned elf zip)

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

seconds=60
targets=()
for a in "$@"; do
  case "$a" in
    -h|--help) usage; exit 0 ;;
    ''|*[!0-9]*)
      if [[ " ${all_targets[*]} " == *" $a "* ]]; then targets+=("$a")
      else echo "fuzz.sh: unknown target or bad seconds '$a' (targets: ${all_targets[*]})" >&2; exit 2; fi ;;
    *) seconds=$a ;;
  esac
done
((${#targets[@]})) || targets=("${all_targets[@]}")

# Per target: the longest input worth trying (a seed is a few KiB at most).
declare -A max_len=([entry_points]=4096 [metadata]=4096 [cache]=16384 [learned]=4096 [elf]=8192 [zip]=4096)
declare -A dict=([cache]=cache.dict [learned]=learned.dict)

# ---- tools -------------------------------------------------------------------
"$here/scripts/setup.sh" --deps-only
"$here/scripts/apt_install.sh" fuzz clang libclang-rt-14-dev

# ---- build -------------------------------------------------------------------
# -g1 (line tables) as in scripts/sanitize.sh: a crash's backtrace, for less compile.
cmake -S "$here" -B "$build" -DEPLOAD_PYTHON=/usr/bin/python3 -DEPLOAD_FUZZ=ON \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null
build_targets=()
for t in "${targets[@]}"; do build_targets+=(--target "fuzz_$t"); done
nice -n 19 cmake --build "$build" -j "${EPLOAD_JOBS:-2}" "${build_targets[@]}"

# ---- run -----------------------------------------------------------------------
cpu=${EPLOAD_FUZZ_CPU:-$(taskset -pc $$ | sed 's/.*: //; s/.*[,-]//')}
export ASAN_OPTIONS=alloc_dealloc_mismatch=0:detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
work=$build/fuzz-work
status=0
for t in "${targets[@]}"; do
  dir=$work/$t
  rm -rf "$dir"
  mkdir -p "$dir/corpus" "$dir/crashes"
  cp "$fuzz_src/corpus/$t/." "$dir/corpus/" -R
  args=(-max_total_time="$seconds" -max_len="${max_len[$t]}" -timeout=10 -rss_limit_mb=2048
        -artifact_prefix="$dir/crashes/" -print_final_stats=1)
  [ -n "${dict[$t]:-}" ] && args+=(-dict="$fuzz_src/${dict[$t]}")
  # shellcheck disable=SC2206
  args+=(${EPLOAD_FUZZ_ARGS:-})
  echo "== fuzz_$t: ${seconds}s on CPU $cpu (corpus copy: $dir/corpus)"
  if ! taskset -c "$cpu" nice -n 19 "$build/tests/fuzz/fuzz_$t" "${args[@]}" "$dir/corpus" \
       </dev/null >"$dir/log" 2>&1; then
    status=1
  fi
  grep -E 'DONE|^stat::(number_of_executed_units|peak_rss_mb)' "$dir/log" || true
  crash=$(ls -t "$dir/crashes/" 2>/dev/null | head -1 || true)
  if ((status)) || [ -n "$crash" ]; then
    status=1
    grep -E 'ERROR|SUMMARY|runtime error|invariant|==[0-9]+==' "$dir/log" | head -20 >&2 || true
    echo "fuzz: fuzz_$t failed; log: $dir/log" >&2
    if [ -n "$crash" ]; then
      echo "fuzz: reproducer: $dir/crashes/$crash" >&2
      echo "fuzz: replay:   $build/tests/fuzz/fuzz_$t $dir/crashes/$crash" >&2
      echo "fuzz: minimize: $build/tests/fuzz/fuzz_$t -minimize_crash=1 -runs=100000 $dir/crashes/$crash" >&2
      echo "fuzz: then add the minimized input to tests/fuzz/corpus/$t/ as a regression" >&2
    fi
    break
  fi
done
exit $status
