"""Checking that each variant does its job before it is timed: the variant
runs once with a probe appended (after the measured work) that prints what
it did as JSON on a marked line, and the suite says what is wrong with that
report; caches still settling get a few more tries."""

from __future__ import annotations

import time

from .proc import BenchError, capture, interleaved, log, marked


class Variants:
    """A start-up suite's variants at one size.  A suite's subclass sets
    ``variants`` (names, report order), ``labels`` {name: label}, ``code``
    {name: what the variant runs}, ``commands`` {name: argv}, ``base`` (the
    environment) and ``envs`` {name: environment} where one differs,
    ``before`` {name: untimed callable before each run}, ``warm`` (variants
    run once first), ``retried`` (variants whose caches may need more tries),
    ``mark`` (the probe's line prefix) and ``where`` (the size, for
    messages); and defines probe_run(v) -> (argv with the probe, env) and
    problems(v, report, stderr) -> [what is wrong]."""

    envs, before, warm = {}, {}, ()

    def check(self, v):
        """Runs variant v once with its probe; returns (the probe's JSON, stderr)."""
        if v in self.before:
            self.before[v]()
        argv, env = self.probe_run(v)
        failure = f"variant {v} ({self.labels[v]}) failed at {self.where}; its code: {self.code[v]}"
        try:
            r, proc = marked(argv, env, self.mark)
        except BenchError as e:
            raise BenchError(f"{failure}\n{e}")
        return r, proc.stderr

    def verified(self, v, attempts):
        """Checks v until problems() is empty, at most ``attempts`` times,
        0.05 s apart (caches settling); returns (report, tries).  Still
        wrong: a BenchError naming the variant, what was wrong, its code and
        the last lines of its stderr."""
        for attempt in range(attempts):
            r, err = self.check(v)
            bad = self.problems(v, r, err)
            if not bad:
                return r, attempt + 1
            time.sleep(0.05)
        tail = "\n".join(err.strip().splitlines()[-8:])
        raise BenchError(f"variant {v} ({self.labels[v]}) did not do its job at {self.where}: "
                         + "; ".join(bad) + f"\nits code: {self.code[v]}"
                         + (f"\n{tail}" if tail else ""))

    def rounds(self, prog, args, work, progress=None, attempts=40):
        """Warms (``warm``), verifies every variant, then times them in
        args.warmup + args.rounds interleaved rounds.  Returns ({variant:
        (probe report, tries)}, interleaved()'s samples)."""
        log(f"{prog}: {self.where}: warming, verifying {len(self.variants)} variants ...")
        for v in self.warm:
            if v in self.commands:
                capture(self.commands[v], self.envs.get(v, self.base))
        verified = {v: self.verified(v, attempts if v in self.retried else 1)
                    for v in self.variants}
        log(f"{prog}: {self.where}: {len(self.variants)} variants x "
            f"{args.warmup + args.rounds} interleaved rounds ...")
        return verified, interleaved(self.commands, self.base, args.rounds, args.warmup, work,
                                     progress=progress, envs=self.envs, before=self.before)


def index_hit(stderr):
    """What is wrong when an epload variant's run (EPLOAD_DEBUG=1) did not
    open its index from the cache: [] on a hit."""
    if "index hit" in stderr:
        return []
    status = [ln for ln in stderr.splitlines() if "epload: index" in ln]
    return ["no index cache hit (" + (status[-1] if status else "no index status") + ")"]
