"""Each variant checked before it is timed: run once with a probe appended
that prints what it did as JSON; the suite says what is wrong with it."""

from __future__ import annotations

import time

from .proc import BenchError, capture, interleaved, log, marked


class Variants:
    """A suite's variants at one size.  Subclasses set variants, labels, code,
    commands, base, mark, where (envs, before, warm, retried: optional) and define
    probe_run(v) -> (argv, env) and problems(v, report, stderr) -> [str]."""

    envs, before, warm = {}, {}, ()

    def verified(self, v, attempts):
        """Runs v with its probe until problems() is empty (caches settling):
        (the probe's JSON, tries)."""
        for attempt in range(attempts):
            if v in self.before:
                self.before[v]()
            try:
                r, proc = marked(*self.probe_run(v), self.mark)
            except BenchError as e:
                raise BenchError(f"variant {v} ({self.labels[v]}) failed at {self.where}; "
                                 f"its code: {self.code[v]}\n{e}")
            err = proc.stderr
            bad = self.problems(v, r, err)
            if not bad:
                return r, attempt + 1
            time.sleep(0.05)
        tail = "\n".join(err.strip().splitlines()[-8:])
        raise BenchError(f"variant {v} ({self.labels[v]}) did not do its job at {self.where}: "
                         + "; ".join(bad) + f"\nits code: {self.code[v]}"
                         + (f"\n{tail}" if tail else ""))

    def rounds(self, prog, args, work, progress=None, attempts=40):
        """Warms, verifies every variant, times them: (verified, samples)."""
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
    """[] when an EPLOAD_DEBUG=1 run hit its index cache, else what happened."""
    if "index hit" in stderr:
        return []
    status = [ln for ln in stderr.splitlines() if "epload: index" in ln]
    return ["no index cache hit (" + (status[-1] if status else "no index status") + ")"]
