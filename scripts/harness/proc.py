"""Spawning and timing whole processes.

`run_once`: posix_spawn + wait4, stdout to /dev/null, stderr to a file
(quoted if the command fails); wall time around spawn and wait, CPU time the
child's user + sys: small overhead, the same for every command.
`interleaved`: every command once per round, so drift of the machine (load,
CPU frequency, page cache) hits all alike and ratios from one run stay
honest; the order shuffled each round (seeded), as a process started just
after a cache-heavy one is measurably slower and a fixed order gives one
command that penalty every round.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time


class BenchError(Exception):
    """A harness cannot measure: the message says what and what to do."""


def log(message):
    print(message, file=sys.stderr, flush=True)


def run_once(argv, env, stderr_path):
    """Runs argv once with stdout discarded; returns {"wall": ns, "cpu": ns}."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
    ]
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    _, status, ru = os.wait4(pid, 0)
    t1 = time.perf_counter_ns()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        with open(stderr_path, errors="replace") as f:
            err = f.read().strip()
        raise BenchError(f"command failed (exit {code}): {' '.join(argv)}\n{err[-2000:]}")
    return {"wall": t1 - t0, "cpu": int((ru.ru_utime + ru.ru_stime) * 1e9)}


def capture(argv, env):
    """Runs argv once, output captured; a failure is a BenchError."""
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"command failed (exit {proc.returncode}): {' '.join(argv)}\n"
                         f"{proc.stderr.strip()[-2000:]}")
    return proc


def marked(argv, env, mark):
    """Runs argv once, output captured; returns (the JSON its stdout printed
    after ``mark`` at the start of a line, the finished process).  No such
    line is a BenchError."""
    proc = capture(argv, env)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(mark)), None)
    if line is None:
        raise BenchError(f"no {mark.strip()} line from {' '.join(argv)[:300]}\n"
                         f"{proc.stdout[-1000:]}")
    return json.loads(line[len(mark):]), proc


def interleaved(commands, env, rounds, warmup, tmp, progress=None, settle=0, envs=None,
                before=None, after=None, runner=run_once):
    """Times every command once per round, in an order shuffled each round
    (random.Random(0): reproducible).  With ``settle`` = S, each command
    first runs S times untimed right before its timed run (timed after
    itself, in its steady state).  ``envs`` maps a command's name to its own
    environment (default ``env``); ``before`` a name to a callable run
    untimed before each of its runs, ``after`` to one given the path of each
    run's stderr (a check of what the run did).  ``progress(round, total)``
    is called before each round; ``runner(argv, env, stderr_path)`` times one
    run (default: run_once, whole-process wall and CPU time) and returns
    {field: sample}.  Returns {name: {field: [samples of the timed rounds]}}."""
    names = list(commands)
    out = {n: {} for n in names}
    err = os.path.join(tmp, "stderr.txt")
    order = random.Random(0)
    envs, before, after = envs or {}, before or {}, after or {}
    for r in range(warmup + rounds):
        if progress is not None:
            progress(r, warmup + rounds)
        this_round = names[:]
        order.shuffle(this_round)
        for n in this_round:
            for _ in range(settle + 1):
                if n in before:
                    before[n]()
                sample = runner(commands[n], envs.get(n, env), err)
                if n in after:
                    after[n](err)
            for k, x in sample.items():
                if r >= warmup:
                    out[n].setdefault(k, []).append(x)
    return out


def progress_line(r, total):
    """Round counter, on a terminal only (no noise in CI logs)."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\r  round {r + 1}/{total}" + ("\n" if r + 1 == total else ""))
        sys.stderr.flush()


STAT_CALLS = ("newfstatat", "fstatat64", "statx", "stat", "lstat", "fstat")


def strace_counts(argv, env, tmp):
    """Total and per-syscall call counts of one run under `strace -f -c`."""
    out = os.path.join(tmp, "strace.txt")
    capture(["strace", "-f", "-c", "-o", out, "--", *argv], env)
    with open(out) as f:
        lines = f.read().splitlines()
    header = next(i for i, line in enumerate(lines) if "syscall" in line and "calls" in line)
    h = lines[header]
    # Columns are right-aligned; slice the "calls" column by its header span.
    start = h.index("usecs/call") + len("usecs/call")
    end = h.index("calls", start) + len("calls")
    per, total = {}, None
    for line in lines[header + 1:]:
        if not line.strip() or line.startswith("---"):
            continue
        name, calls = line.split()[-1], int(line[start:end].strip() or 0)
        if name == "total":
            total = calls
        else:
            per[name] = calls
    return {"total": sum(per.values()) if total is None else total,
            "stat": sum(v for k, v in per.items() if k in STAT_CALLS),
            "openat": per.get("openat", 0), "getdents64": per.get("getdents64", 0),
            "read": per.get("read", 0), "per_syscall": per}


def hyperfine_pass(commands, env, rounds, warmup, tmp):
    """A confirmation pass under `hyperfine -N` (not interleaved)."""
    out = os.path.join(tmp, "hyperfine.json")
    argv = ["hyperfine", "-N", "--style", "none", "--warmup", str(warmup), "--runs", str(rounds),
            "--export-json", out]
    for name, cmd in commands.items():
        argv += ["--command-name", name, " ".join(shlex.quote(a) for a in cmd)]
    capture(argv, env)
    with open(out) as f:
        data = json.load(f)
    return {r["command"]: {"median_ms": r["median"] * 1e3, "mean_ms": r["mean"] * 1e3,
                           "stddev_ms": (r.get("stddev") or 0) * 1e3} for r in data["results"]}


def extra_passes(prog, args, commands, env, tmp):
    """The optional passes over ``commands``: system calls (`strace -f -c`,
    --strace) and a hyperfine -N confirmation (--hyperfine); {pass: {name:
    figures}} of those that ran."""
    out = {}
    if args.strace:
        log(f"{prog}: counting system calls ...")
        out["strace"] = {n: strace_counts(c, env, tmp) for n, c in commands.items()}
    if args.hyperfine:
        log(f"{prog}: hyperfine confirmation pass ...")
        out["hyperfine"] = hyperfine_pass(commands, env, args.rounds, args.warmup, tmp)
    return out


@functools.cache
def gbench_min_time(bench_exe, seconds):
    """`--benchmark_min_time=` for `seconds`, as this Google Benchmark takes it.

    1.8 and later want a unit (`0.2s`; a bare number draws a warning per
    case), 1.7 refuses one (Debian 12 ships 1.7, Debian 13 1.9): the binary is
    asked, since a listing run with the unit fails on 1.7."""
    probe = subprocess.run([bench_exe, "--benchmark_min_time=0s", "--benchmark_list_tests"],
                           capture_output=True)
    return f"--benchmark_min_time={seconds}{'s' if probe.returncode == 0 else ''}"


TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def gbench(bench_exe, pattern, env, tmp, repetitions, min_time, extra=()):
    """Runs epload_bench's cases matching ``pattern``; returns Google
    Benchmark's JSON "benchmarks" list, times converted to ns
    (real_ns, cpu_ns)."""
    out = os.path.join(tmp, "gbench.json")
    capture([bench_exe, f"--benchmark_filter={pattern}", f"--benchmark_repetitions={repetitions}",
             gbench_min_time(bench_exe, min_time), *extra,
             f"--benchmark_out={out}", "--benchmark_out_format=json"], env)
    with open(out) as f:
        rows = json.load(f)["benchmarks"]
    for b in rows:
        scale = TIME_UNIT_NS[b["time_unit"]]
        b["real_ns"], b["cpu_ns"] = b["real_time"] * scale, b["cpu_time"] * scale
    return rows


def remove_tree(path):
    """rm -rf: several times faster than shutil.rmtree on trees of thousands
    of small directories."""
    if subprocess.run(["rm", "-rf", "--", path]).returncode != 0 or os.path.lexists(path):
        import shutil
        shutil.rmtree(path, ignore_errors=True)


def harness_main(prog, parse_args, run, argv=None, tmp_base=None):
    """A harness's main: parses its command line (``argv``, default
    sys.argv[1:]), then returns run(args, tmp)'s exit status, tmp a fresh
    temporary directory (epload-<prog>-*, under ``tmp_base`` if given).  A
    BenchError is printed as `prog: message` (status 1).  tmp is removed at
    the end, or kept and named on stderr when args.keep is set."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    tmp = tempfile.mkdtemp(prefix=f"epload-{prog.removesuffix('.py').replace('_', '-')}-",
                           dir=tmp_base(args) if tmp_base else None)
    try:
        return run(args, tmp)
    except BenchError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return getattr(e, "status", 1)
    finally:
        if getattr(args, "keep", False):
            print(f"kept {tmp}", file=sys.stderr)
        else:
            remove_tree(tmp)
