"""Shared machinery of epload's process-level harnesses (scripts/bench_index.py,
scripts/bench_startup.py, scripts/bench_torch.py, scripts/demo.py): spawning
and timing whole processes, interleaved rounds, summaries, system-call
counts, a hyperfine cross-check, generating environments with
scripts/gen_env.py, checking that a variant did its job, and a harness's
main (harness_main: temporary directory, errors, exit status).

How a command is timed: posix_spawn + wait4, stdout to /dev/null, stderr to a
file (quoted if the command fails).  Wall time is measured around spawn and
wait; CPU time is the child's user + sys from wait4's rusage.  The harness's
own overhead is therefore small and the same for every command.

How a comparison is timed (`interleaved`): every command once per round, so
slow drift of the machine (other load, CPU frequency, page cache) hits every
command alike and ratios computed from one run stay honest; the order is
shuffled each round (seeded: the same for the same commands), so that no
command always runs right after the same other one.  A process started just
after a cache-heavy one (1,000 libraries loaded, 6,000 distributions
scanned) is measurably slower, and a rotated order, which keeps every
command's predecessor, gave one command that penalty in every round and its
neighbour the opposite.  Results are medians and quartiles over the timed
rounds.

Only the standard library is used.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import random
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(HERE)
GEN_ENV = os.path.join(HERE, "gen_env.py")


class BenchError(Exception):
    pass


# ------------------------------------------------------------ processes ---

def run_once(argv, env, stderr_path):
    """Runs argv once with stdout discarded; returns (wall_ns, cpu_ns).
    posix_spawn + wait4 keep the harness's own overhead small and equal for
    every command."""
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
    return t1 - t0, int((ru.ru_utime + ru.ru_stime) * 1e9)


@functools.cache
def gbench_min_time(bench_exe, seconds):
    """`--benchmark_min_time=` for `seconds`, as this Google Benchmark takes it.

    1.8 and later want a unit (`0.2s`; a bare number draws a warning per
    case), 1.7 refuses one (Debian 12 ships 1.7, Debian 13 1.9): the binary is
    asked, since a listing run with the unit fails on 1.7."""
    probe = subprocess.run([bench_exe, "--benchmark_min_time=0s", "--benchmark_list_tests"],
                           capture_output=True)
    return f"--benchmark_min_time={seconds}{'s' if probe.returncode == 0 else ''}"


def capture(argv, env):
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"command failed (exit {proc.returncode}): {' '.join(argv)}\n"
                         f"{proc.stderr.strip()[-2000:]}")
    return proc


def summarize(samples):
    s = sorted(samples)
    q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0]] * 3
    return {"median_ms": statistics.median(s) / 1e6, "q1_ms": q[0] / 1e6, "q3_ms": q[2] / 1e6,
            "min_ms": s[0] / 1e6, "max_ms": s[-1] / 1e6, "runs": len(s)}


def summarize_rounds(raw):
    """interleaved()'s samples summarized: {name: summarize(wall times) plus
    the median CPU time, cpu_median_ms}."""
    return {n: dict(summarize(v["wall"]), cpu_median_ms=statistics.median(v["cpu"]) / 1e6)
            for n, v in raw.items()}


def interleaved(commands, env, runs, warmup, tmp, progress=None, seed=0, settle=0, envs=None):
    """Times every command once per round, in an order shuffled each round
    (random.Random(seed): reproducible), so that no command always follows
    the same one (see the module's docstring).  With ``settle`` = S, each
    command first runs S times untimed, right before its timed run: then
    every command is timed after a run of itself (its steady state: what a
    user who runs only that command sees), not after whichever command the
    shuffle put before it.  Returns {name: {"wall": [...ns], "cpu":
    [...ns]}} for the timed rounds.  ``progress(round_index, total_rounds)``,
    if given, is called before each round.  ``envs`` maps a command's name to
    its own environment (default: ``env``)."""
    names = list(commands)
    out = {n: {"wall": [], "cpu": []} for n in names}
    err = os.path.join(tmp, "stderr.txt")
    order = random.Random(seed)
    for r in range(warmup + runs):
        if progress is not None:
            progress(r, warmup + runs)
        this_round = names[:]
        order.shuffle(this_round)
        for n in this_round:
            e = env if envs is None else envs.get(n, env)
            for _ in range(settle):
                run_once(commands[n], e, err)
            wall, cpu = run_once(commands[n], e, err)
            if r >= warmup:
                out[n]["wall"].append(wall)
                out[n]["cpu"].append(cpu)
    return out


# --------------------------------------------------------------- strace ---

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
        name = line.split()[-1]
        calls = int(line[start:end].strip() or 0)
        if name == "total":
            total = calls
        else:
            per[name] = calls
    if total is None:
        total = sum(per.values())
    stat_family = sum(v for k, v in per.items()
                      if k in ("newfstatat", "fstatat64", "statx", "stat", "lstat", "fstat"))
    return {"total": total, "stat": stat_family, "openat": per.get("openat", 0),
            "getdents64": per.get("getdents64", 0), "read": per.get("read", 0),
            "per_syscall": per}


# ------------------------------------------------------------ hyperfine ---

def hyperfine_pass(commands, env, runs, warmup, tmp):
    """A confirmation pass under `hyperfine -N` (not interleaved)."""
    out = os.path.join(tmp, "hyperfine.json")
    argv = ["hyperfine", "-N", "--style", "none", "--warmup", str(warmup), "--runs", str(runs),
            "--export-json", out]
    for name, cmd in commands.items():
        argv += ["--command-name", name, " ".join(shlex.quote(a) for a in cmd)]
    capture(argv, env)
    with open(out) as f:
        data = json.load(f)
    return {r["command"]: {"median_ms": r["median"] * 1e3, "mean_ms": r["mean"] * 1e3,
                           "stddev_ms": (r.get("stddev") or 0) * 1e3} for r in data["results"]}


# ---------------------------------------------------------- environment ---

def generate(python, out, backends, noise, group, kind="python", extra=()):
    """Runs scripts/gen_env.py into ``out``; returns its manifest."""
    capture([python, GEN_ENV, out, "--backends", str(backends), "--noise", str(noise),
             "--group", group, "--kind", kind, *map(str, extra)], os.environ.copy())
    with open(os.path.join(out, "manifest.json")) as f:
        return json.load(f)


GENERATED_WITH = "generated-with.json"


def _generator_stamp(kind):
    """What an environment depends on: the generator's source (and, for
    native backends, the backend's C source)."""
    h = hashlib.sha256()
    for name in ("gen_env.py",) + (("native_backend.c",) if kind == "native" else ()):
        with open(os.path.join(HERE, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def ensure_env(python, out, backends, noise, group, kind="python", extra=()):
    """The environment gen_env.py would write into ``out`` with these
    arguments: reused when ``out`` holds one generated by the same arguments
    and the same generator source (recorded in OUT/generated-with.json) and it
    is intact; otherwise ``out`` is removed and generated afresh.  gen_env.py
    is deterministic, so a reused tree is the tree it would write.  Returns
    (manifest, reused)."""
    out = os.path.abspath(out)
    want = {"argv": ["--backends", str(backends), "--noise", str(noise), "--group", group,
                     "--kind", kind, *map(str, extra)], "generator": _generator_stamp(kind)}
    stamp_path = os.path.join(out, GENERATED_WITH)
    try:
        with open(stamp_path) as f:
            have = json.load(f)
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        if have == want and manifest.get("search_path") == os.path.join(out, "site-packages") \
                and _intact(manifest):
            return manifest, True
    except (OSError, ValueError):
        pass
    if os.path.lexists(out):
        # Only ever remove what looks like a generated environment.
        if not os.path.isdir(out) or os.path.islink(out) or not (
                not os.listdir(out) or os.path.exists(os.path.join(out, "manifest.json"))
                or os.path.exists(stamp_path)):
            raise BenchError(f"{out} exists and is not an environment generated by "
                             "scripts/gen_env.py; remove it or choose another directory")
        remove_tree(out)
    manifest = generate(python, out, backends, noise, group, kind=kind, extra=extra)
    with open(stamp_path, "w") as f:
        json.dump(want, f, indent=1)
        f.write("\n")
    return manifest, False


def _intact(manifest):
    site = manifest["search_path"]
    for b in manifest.get("backends", []):
        if b.get("library"):
            if not os.path.isfile(b["library"]):
                return False
        elif not os.path.isfile(os.path.join(site, b["package"], "__init__.py")):
            return False
    return True


def remove_tree(path):
    """rm -rf: several times faster than shutil.rmtree on trees of thousands
    of small directories."""
    if subprocess.run(["rm", "-rf", "--", path]).returncode != 0 or os.path.lexists(path):
        import shutil
        shutil.rmtree(path, ignore_errors=True)


def interpreter_path(python, env):
    """sys.path of `python -I -S` (SITE goes in front of it)."""
    proc = capture([python, "-I", "-S", "-c", "import json, sys; print(json.dumps(sys.path))"], env)
    return json.loads(proc.stdout)


def stevedore_location(python, env):
    """The directory python3-stevedore is installed in, or None."""
    proc = subprocess.run(
        [python, "-I", "-c", "import os, stevedore; "
         "print(os.path.dirname(os.path.dirname(stevedore.__file__)))"],
        env=env, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def clean_env(tmp):
    """The environment every timed command gets: nothing inherited that could
    change what is measured (no PYTHON*, EPLOAD_*, TORCH_* variables), and
    XDG_CACHE_HOME inside the run's temporary directory."""
    return {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", tmp), "LC_ALL": "C.UTF-8",
            "XDG_CACHE_HOME": os.path.join(tmp, "xdg-cache")}


def machine():
    return {"cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}


def importlib_same_output(group):
    """Python code that does with importlib.metadata what
    `epload entry-points --group GROUP` does: look the group up and print
    one line per entry point in epload's default format, dist name and
    version included (importlib reads each distribution's METADATA for
    them).  The lookup alone (`entry_points(group=)`) is timed separately."""
    return ("from importlib.metadata import entry_points; w = sys.stdout.write\n"
            f"for e in entry_points(group={group!r}): "
            "w(f'{e.group} {e.name} = {e.value}  [{e.dist.name} {e.dist.version}]\\n')")


def norm(name):
    """A distribution name normalized as importlib compares them."""
    return re.sub(r"[-_.]+", "_", name).lower()


def harness_main(prog, parse_args, run, argv=None):
    """A harness's main: parses its command line (``argv``, default
    sys.argv[1:]), then returns run(args, tmp)'s exit status, tmp a fresh
    temporary directory (epload-<prog>-*).  A BenchError is printed as
    `prog: message` (status 1).  tmp is removed at the end, or kept and named
    on stderr when args.keep is set."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    tmp = tempfile.mkdtemp(prefix=f"epload-{prog.removesuffix('.py').replace('_', '-')}-")
    try:
        return run(args, tmp)
    except BenchError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    finally:
        if getattr(args, "keep", False):
            print(f"kept {tmp}", file=sys.stderr)
        else:
            remove_tree(tmp)


def parse_sizes(p, text, least, what):
    """--sizes TEXT as a sorted list of distinct integers, each >= least;
    p.error (exit 2) otherwise, ``what`` saying what a size must be."""
    try:
        sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        p.error(f"--sizes must be comma-separated integers, got {text!r}")
    if not sizes or any(n < least for n in sizes):
        p.error(f"--sizes: each size must be {what}")
    return sizes


def checked_run(argv, env, mark, name, failure):
    """Runs argv once (a variant with a check appended) and returns (the JSON
    its check printed on the line starting with ``mark``, its stderr).  A
    failed run raises BenchError(failure + the error); a run that printed no
    such line, one naming ``name``."""
    try:
        proc = capture(argv, env)
    except BenchError as e:
        raise BenchError(f"{failure}\n{e}")
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(mark)), None)
    if line is None:
        raise BenchError(f"{name}: the check printed nothing\n{proc.stdout[-1000:]}")
    return json.loads(line[len(mark):]), proc.stderr


def retry_check(v, label, where, code, check, problems, tries):
    """Runs check(v) -> (report, stderr) until problems(v, report, stderr) is
    empty, at most ``tries`` times, 0.05 s apart (caches settling); returns
    (report, attempts).  Still wrong after that: a BenchError naming variant
    v (``label``, at ``where``), what was wrong, its ``code`` and the last
    lines of its stderr."""
    for attempt in range(tries):
        r, err = check(v)
        bad = problems(v, r, err)
        if not bad:
            return r, attempt + 1
        time.sleep(0.05)
    tail = "\n".join(err.strip().splitlines()[-8:])
    raise BenchError(f"variant {v} ({label}) did not do its job at {where}: " + "; ".join(bad)
                     + f"\nits code: {code}" + (f"\n{tail}" if tail else ""))


# --------------------------------------------------------------- report ---

def fmt_ms(v):
    return f"{v:.2f}" if v < 100 else f"{v:.1f}"


def log(message):
    print(message, file=sys.stderr, flush=True)


def write_report(result, report, md_out=None, json_out=None, plot_to=None, plot=None):
    """A harness's outputs: the Markdown report on stdout (and in md_out),
    the result as JSON in json_out, and plot(result, plot_to) if asked."""
    sys.stdout.write(report)
    sys.stdout.flush()
    if md_out:
        with open(md_out, "w") as f:
            f.write(report)
    if json_out:
        with open(json_out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    if plot_to:
        plot(result, plot_to)
