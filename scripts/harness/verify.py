"""Checking that each variant does its job before it is timed: the variant
runs once with a probe appended (after the measured work) that prints what
it did as JSON on a marked line, and the suite says what is wrong with that
report; caches still settling get a few more tries."""

from __future__ import annotations

import json
import time

from .proc import BenchError, capture, interleaved, log


def checked_run(argv, env, mark, name, failure):
    """Runs argv once (a variant with its probe) and returns (the JSON the
    probe printed on the line starting with ``mark``, the stderr).  A failed
    run raises BenchError(failure + the error); a run that printed no such
    line, one naming ``name``."""
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


def index_hit(stderr):
    """What is wrong when an epload variant's run (EPLOAD_DEBUG=1) did not
    open its index from the cache: [] on a hit."""
    if "index hit" in stderr:
        return []
    status = [ln for ln in stderr.splitlines() if "epload: index" in ln]
    return ["no index cache hit (" + (status[-1] if status else "no index status") + ")"]


def verified_rounds(prog, n, size, args, work, progress=None):
    """The per-size run the start-up suites share: ``size`` (a suite's Size:
    variants, commands, envs, before, warm_and_verify()) warmed and every
    variant verified, then timed in args.warmup + args.rounds interleaved
    rounds.  Returns (verification report, interleaved()'s samples)."""
    log(f"{prog}: {n:,} backends: warming, verifying {len(size.variants)} variants ...")
    verified = size.warm_and_verify()
    log(f"{prog}: {n:,} backends: {len(size.variants)} variants x "
        f"{args.warmup + args.rounds} interleaved rounds ...")
    raw = interleaved(size.commands, size.base, args.rounds, args.warmup, work,
                      progress=progress, envs=getattr(size, "envs", None),
                      before=getattr(size, "before", None))
    return verified, raw
