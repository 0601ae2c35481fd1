"""Spawning and timing whole processes (posix_spawn + wait4: wall time, CPU
= the child's user + sys), interleaved round by round in a shuffled order."""

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


def read_json(path):
    with open(path) as f:
        return json.load(f)


def write_json(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


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
    """(The JSON on argv's stdout line starting with ``mark``, the process)."""
    proc = capture(argv, env)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(mark)), None)
    if line is None:
        raise BenchError(f"no {mark.strip()} line from {' '.join(argv)[:300]}\n"
                         f"{proc.stdout[-1000:]}")
    return json.loads(line[len(mark):]), proc


def interleaved(commands, env, rounds, warmup, tmp, progress=None, settle=0, envs=None,
                before=None, after=None, runner=run_once):
    """{name: {field: [samples]}}: every command once per round, in an order
    shuffled each round (a fixed order penalises whoever follows a cache-heavy
    command); per command: ``before``/``after`` untimed callables, ``envs``."""
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
    capture(["strace", "-f", "-c", "-U", "calls,name", "-o", out, "--", *argv], env)
    with open(out) as f:  # "CALLS NAME" lines (strace >= 5.6), then "CALLS total"
        per = {w[1]: int(w[0]) for w in map(str.split, f) if len(w) == 2 and w[0].isdigit()}
    total = per.pop("total", None)
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
    data = read_json(out)
    return {r["command"]: {"median_ms": r["median"] * 1e3, "mean_ms": r["mean"] * 1e3,
                           "stddev_ms": (r.get("stddev") or 0) * 1e3} for r in data["results"]}


def extra_passes(prog, args, commands, env, tmp):
    """The --strace and --hyperfine passes that are on: {pass: {name: figures}}."""
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
    """`--benchmark_min_time=`: 1.8+ wants a unit (`0.2s`), 1.7 refuses one."""
    probe = subprocess.run([bench_exe, "--benchmark_min_time=0s", "--benchmark_list_tests"],
                           capture_output=True)
    return f"--benchmark_min_time={seconds}{'s' if probe.returncode == 0 else ''}"


TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def gbench(bench_exe, pattern, env, tmp, repetitions, min_time, extra=()):
    """epload_bench's cases matching ``pattern``: its JSON rows, plus real_ns/cpu_ns."""
    out = os.path.join(tmp, "gbench.json")
    capture([bench_exe, f"--benchmark_filter={pattern}", f"--benchmark_repetitions={repetitions}",
             gbench_min_time(bench_exe, min_time), *extra,
             f"--benchmark_out={out}", "--benchmark_out_format=json"], env)
    rows = read_json(out)["benchmarks"]
    for b in rows:
        scale = TIME_UNIT_NS[b["time_unit"]]
        b["real_ns"], b["cpu_ns"] = b["real_time"] * scale, b["cpu_time"] * scale
    return rows


def remove_tree(path):
    """rm -rf: faster than shutil.rmtree on thousands of small directories."""
    if subprocess.run(["rm", "-rf", "--", path]).returncode != 0 or os.path.lexists(path):
        import shutil
        shutil.rmtree(path, ignore_errors=True)


def harness_main(suite, argv=None):
    """suite.run(args, tmp)'s status; a BenchError printed as `PROG: message`."""
    prog, args = suite.PROG, suite.parse_args(sys.argv[1:] if argv is None else argv)
    tmp = tempfile.mkdtemp(prefix=f"epload-{prog.removesuffix('.py').replace('_', '-').replace(' ', '-')}-",
                           dir=suite.tmp_base(args) if hasattr(suite, "tmp_base") else None)
    try:
        return suite.run(args, tmp)
    except BenchError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return getattr(e, "status", 1)
    finally:
        if getattr(args, "keep", False):
            print(f"kept {tmp}", file=sys.stderr)
        else:
            remove_tree(tmp)
