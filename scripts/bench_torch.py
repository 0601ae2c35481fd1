#!/usr/bin/python3
"""Real PyTorch start-up harness: what `import torch` costs with its device
backends, stock autoload against epload, in a venv holding a real torch.

The interpreter (--python) is a venv's with torch (2.13.0 here), epload with
its `.pth` hook, and the fixture backends of tests/torch/backends (among
them `foo`, a working PrivateUse1 backend).  For each number of generated
backends (--sizes, default 10, 100 and 1,000; 0 = the fixtures alone) one
environment is generated with `scripts/gen_env.py --kind python
--import-cost-ms 20` (each backend's import burns 20 ms of CPU) among --noise
ordinary distributions (default 5,000), and these variants are timed as whole
processes, interleaved round by round in shuffled order
(scripts/harness_common.py):

  floor          `import torch` with TORCH_DEVICE_BACKEND_AUTOLOAD=0: no
                 discovery, no backend: the floor under every other variant
  stock          `import torch`, stock autoload: importlib.metadata finds the
                 torch.backends entry points, every backend is imported and
                 called
  epload-eager   EPLOAD_AUTOLOAD_HOSTS=torch EPLOAD_MODE=eager: the .pth hook
                 turns torch's own loop off and epload loads every backend,
                 in torch's order, discovery from epload's index
  epload-lazy    EPLOAD_MODE=lazy: no backend with a known device is
                 imported (hooks still run); `full` validation
  epload-lazy-paths  the same with EPLOAD_VALIDATE=paths
  epload-lazy-dirty  epload-lazy with a script's directory first on sys.path
                 that changes before every `import torch` (a new file is made
                 there first, as a training script's outputs or an editor's
                 save would): that entry is listed again, the index still hits
  lazy-first-foo epload-lazy, then `torch.ones(2).to("foo")`
  foo-by-hand    autoload off, foo's entry point imported and called by hand,
                 then `torch.ones(2).to("foo")`

Every command is `PY -I -c "import sys; sys.path += [SITE]; <body>"`: -I
keeps PYTHON* variables, the user site and the current directory out, the
venv's site-packages (torch, epload's hook, the fixtures) are processed as
usual, the generated site-packages goes after them.  The variants differ only
in their body and in the EPLOAD_* / TORCH_* variables of their environment
(which the .pth hook reads at interpreter start); every process gets the same
clean base environment with XDG_CACHE_HOME in the run's temporary directory
(epload's index and learned devices).

Before timing, each size is warmed (epload eager learns every backend's
devices) and every variant is checked once with a probe appended: stock and
eager must have imported every generated backend and foo; lazy none of them
(and lazy-first-foo exactly foo, with the tensor on device foo); the epload
variants must hit their index cache (EPLOAD_DEBUG=1, in the check only).  A
variant that does not do its job stops the run with what was wrong.

Time to the first `to("foo")` is also measured inside the processes, at the
largest size (--first-runs pairs, alternating): in a lazy process, the time
of the first `torch.ones(2).to("foo")` (foo is imported by it); by hand
(autoload off), the time of importing and calling foo's entry point plus the
same `to("foo")`: foo's own import cost and the operation.

Reported per size and variant: wall median, IQR, CPU median, the marginal
cost over the floor (median − floor's median) as ms and % of the floor, and
the median of the per-round paired differences with a 95% bootstrap interval
("within noise" when it holds 0).  The targets of issue 26 are set beside the
figures: lazy at the largest size ≤ 1% above the floor (`full`), and within
noise with `paths`; stock's marginal ÷ lazy's ≥ 100× at 100 backends; first
`to("foo")` ≤ foo's own import cost + 1 ms.

`import torch` alone varies by ~100 ms from run to run, so whole-process
differences cannot resolve lazy epload's few ms.  At each size, lazy
processes are therefore also measured from inside (Size.in_process): the .pth
hook's import at interpreter start (-X importtime) plus what epload added
inside `import torch` (the trace's `import torch` span less torch's own body),
and the targets on lazy's added cost use that figure, with the whole-process
interval beside it.  `full`'s budget is set beside the bare cost of its stat
calls (epload_bench), the floor under it.

Output: Markdown on stdout (and --md-out), JSON (--json-out), a PNG of the
marginal cost against the number of backends (--plot, matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_report import LABELS, judge, markdown, plot  # noqa: E402
from harness_common import (  # noqa: E402
    harness_main, write_report, SOURCE_DIR, BenchError, capture, checked_run, clean_env, ensure_env,
    interleaved, log, machine, parse_sizes, retry_check, summarize, summarize_rounds)

GROUP = "torch.backends"
VERIFY_MARK = "EPLOAD-BENCH-TORCH "
TIME_MARK = "EPLOAD-BENCH-FIRST-NS "

# The variants' environment variables (their labels: torch_report.LABELS).
LAZY = {"EPLOAD_AUTOLOAD_HOSTS": "torch", "EPLOAD_MODE": "lazy"}
VARIANTS = {
    "floor": {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    "stock": {},
    "epload-eager": {"EPLOAD_AUTOLOAD_HOSTS": "torch", "EPLOAD_MODE": "eager"},
    "epload-lazy": LAZY,
    "epload-lazy-paths": dict(LAZY, EPLOAD_VALIDATE="paths"),
    "epload-lazy-dirty": LAZY,
    "lazy-first-foo": LAZY,
    "foo-by-hand": {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
}
EPLOAD_VARIANTS = ("epload-eager", "epload-lazy", "epload-lazy-paths", "epload-lazy-dirty", "lazy-first-foo")


# ---------------------------------------------------------------- venv ---

FIXTURE_DIR = os.path.join(SOURCE_DIR, "tests", "torch", "backends")
# The fixture backends that load cleanly under stock autoload (common: the
# module they share).
DEFAULT_FIXTURES = ("common", "foo", "hook", "bar")
TORCH_ENV = os.path.join(SOURCE_DIR, "scripts", "torch_env.py")


def torch_env_python(build, error):
    """The venv's python from scripts/torch_env.py (created once, reused)."""
    if not os.path.isfile(TORCH_ENV):
        error(f"pass --python: {TORCH_ENV}, which makes the venv, is absent")
    proc = subprocess.run([sys.executable, TORCH_ENV, "--build", build, "--python"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        error(f"no venv with torch: scripts/torch_env.py failed (exit {proc.returncode}):\n"
              f"{proc.stderr.strip()[-2000:]}")
    return proc.stdout.strip().splitlines()[-1]

def describe_python(python, env, fixtures):
    """torch's version and location, epload's, the hook, and the backends
    the venv and the fixture directories hold (torch.backends entry points
    without the generated environment)."""
    code = ("import json, os, sys, importlib.metadata as m, importlib.util as u\n"
            f"sys.path += {fixtures!r}\n"
            "import torch\n"
            "eps = [[e.name, e.value, e.dist.name if e.dist else None]"
            " for e in m.entry_points(group='torch.backends')]\n"
            "ep = u.find_spec('epload')\n"
            "hook = [os.path.join(p, 'epload-autoload.pth') for p in sys.path"
            " if os.path.isfile(os.path.join(p, 'epload-autoload.pth'))]\n"
            "print(json.dumps({'torch': torch.__version__,"
            " 'torch_dir': os.path.dirname(torch.__file__),"
            " 'python': sys.version.split()[0], 'executable': sys.executable,"
            " 'prefix': sys.prefix,"
            " 'epload': ep.origin if ep else None, 'hook': hook[0] if hook else None,"
            " 'backends': eps}))\n")
    e = dict(env, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    try:
        proc = capture([python, "-I", "-c", code], e)
    except BenchError as err:
        raise BenchError(f"{python} cannot `import torch`: {err}\nThe harness needs a venv "
                         "with torch==2.13.0, epload and the fixture backends (see --help)")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    if not info["epload"]:
        raise BenchError(f"{python}: epload is not installed in it")
    if not info["hook"]:
        raise BenchError(f"{python}: epload-autoload.pth is not on its sys.path (epload's "
                         ".pth hook): EPLOAD_AUTOLOAD_HOSTS would do nothing")
    return info


# ------------------------------------------------------------ variants ---

class Size:
    """The variants' commands and environments for one generated environment
    (``manifest`` None: the fixture backends alone)."""

    def __init__(self, args, info, manifest, work):
        self.args = args
        self.python = args.python
        self.work = work
        self.base = clean_env(work)
        self.manifest = manifest
        self.site = manifest["search_path"] if manifest else None
        self.paths = args.fixtures + ([self.site] if self.site else [])
        self.gen = manifest["backends"] if manifest else []
        self.n = len(self.gen)
        foo = [b for b in info["backends"] if b[0] == args.foo_backend]
        if not foo:
            raise BenchError(f"the venv holds no torch.backends entry point named "
                             f"{args.foo_backend!r} (found: "
                             f"{', '.join(b[0] for b in info['backends']) or 'none'}); install "
                             "the fixture backends or pass --foo-backend")
        self.fixtures = info["backends"]
        module, _, attr = foo[0][1].partition(":")
        self.foo_module = module.strip()
        call = (f"from {self.foo_module} import {attr.strip()} as _f; _f()" if attr.strip()
                else f"import {self.foo_module}")
        to_foo = f"torch.ones(2).to({args.device!r})"
        script_dir = os.path.join(work, "script-dir")
        os.makedirs(script_dir, exist_ok=True)
        dirty = (f"import os as _o, time as _tm; sys.path.insert(0, {script_dir!r}); "
                 f"open(_o.path.join({script_dir!r}, 'out-%d-%d.log' % (_o.getpid(), _tm.time_ns())), 'w')"
                 ".close(); import torch")
        body = {
            "floor": "import torch",
            "stock": "import torch",
            "epload-eager": "import torch",
            "epload-lazy": "import torch",
            "epload-lazy-paths": "import torch",
            "epload-lazy-dirty": dirty,
            "lazy-first-foo": f"import torch; x = {to_foo}",
            "foo-by-hand": f"import torch; {call}; x = {to_foo}",
        }
        self.variants = [v for v in VARIANTS if body.get(v) is not None]
        self.body = {v: body[v] for v in self.variants}
        self.envs = {v: dict(self.base, **VARIANTS[v]) for v in self.variants}
        broken = args.break_variant
        if broken in self.envs:
            # Test-only sabotage (--break-variant): the verification must
            # catch it.  Loading variants: the generated backends look for a
            # host that does not exist (no device attribute on torch); lazy
            # ones run eagerly; by hand: foo is never called.
            if broken in ("stock", "epload-eager"):
                self.envs[broken]["EPLOAD_GEN_HOST"] = "no_such_host_module"
            elif broken in ("epload-lazy", "epload-lazy-paths"):
                self.envs[broken]["EPLOAD_MODE"] = "eager"
            elif broken == "foo-by-hand":
                self.body[broken] = f"import torch; import {self.foo_module}; x = {to_foo}"
        self.commands = {v: self.argv(self.body[v]) for v in self.variants}
        # In-process time to the first to("foo"), lazy and by hand.
        timed = ("import time as _t; _t0 = _t.perf_counter_ns(); {work}; "
                 f"x = {to_foo}; print({TIME_MARK!r} + str(_t.perf_counter_ns() - _t0))")
        self.first = {
            "lazy": self.argv("import torch; " + timed.format(work="pass")),
            "by-hand": self.argv("import torch; " + timed.format(work=call)),
        }

    def argv(self, body, suffix=""):
        return [self.python, "-I", "-c", f"import sys; sys.path += {self.paths!r}; {body}{suffix}"]

    # -- warming and verification --

    def check(self, v):
        probe = (
            "\nimport json as _j\n"
            "_t = sys.modules.get('torch')\n"
            "_x = globals().get('x')\n"
            "_r = {'modules': sum(1 for k in list(sys.modules) if k.startswith('gen_backend_')),\n"
            "      'devices': sum(1 for k in list(vars(_t)) if k.startswith('dev')"
            " and k[3:].isdigit()),\n"
            f"      'foo': {self.foo_module!r} in sys.modules,\n"
            "      'epload': 'epload' in sys.modules,\n"
            "      'x': None if _x is None else [_x.device.type, _x.cpu().tolist()]}\n"
            f"print({VERIFY_MARK!r} + _j.dumps(_r))\n")
        env = dict(self.envs[v])
        if v in EPLOAD_VARIANTS:
            env["EPLOAD_DEBUG"] = "1"
        return checked_run(self.argv(self.body[v], probe), env, VERIFY_MARK, v,
                           f"variant {v} ({LABELS[v]}) failed at {self.n} generated backends; "
                           f"its code: {self.body[v]}")

    def problems(self, v, r, stderr):
        n, out = self.n, []
        loads_all = v in ("stock", "epload-eager")
        if loads_all:
            if r["modules"] != n or r["devices"] != n:
                out.append(f"imported {r['modules']} of the {n} generated backends, "
                           f"{r['devices']} device attributes on torch")
            if not r["foo"]:
                out.append(f"did not import {self.foo_module}")
        else:
            if r["modules"] or r["devices"]:
                out.append(f"imported {r['modules']} generated backend(s) ({r['devices']} device "
                           "attributes on torch); expected none")
        if v in ("floor", "epload-lazy", "epload-lazy-paths", "epload-lazy-dirty") and r["foo"]:
            out.append(f"imported {self.foo_module}; expected not")
        if v in ("lazy-first-foo", "foo-by-hand"):
            if r["x"] is None or r["x"][0] != self.args.device or r["x"][1] != [1.0, 1.0]:
                out.append(f"torch.ones(2).to({self.args.device!r}) gave {r['x']}")
        if (v in EPLOAD_VARIANTS) != r["epload"]:
            out.append("imported epload" if r["epload"] else "did not import epload")
        if v in EPLOAD_VARIANTS and "index hit" not in stderr:
            status = [ln for ln in stderr.splitlines() if "epload: index" in ln]
            out.append("no index cache hit (" + (status[-1] if status else "no index status")
                       + ")")
        return out

    def warm_and_verify(self, attempts=40):
        """Warms epload's caches (index, learned devices) and checks every
        variant; retries the epload ones while their caches settle (a cache
        written in the clock tick of a change is not trusted at first).  The
        first run is lazy, as a user's first lazy run: it loads every backend
        whose devices are not known yet and learns them, foo's PrivateUse1
        name included (an eager run learns the devices, not that name)."""
        capture(self.commands["epload-lazy"], self.envs["epload-lazy"])
        report = {}
        for v in self.variants:
            tries = attempts if v in EPLOAD_VARIANTS else 1
            r, tried = retry_check(v, LABELS[v], f"{self.n} generated backends", self.body[v],
                                   self.check, self.problems, tries)
            report[v] = dict(r, attempts=tried)
        return report

    def in_process(self, runs):
        """What epload adds inside lazy processes, measured in them rather
        than as a difference of noisy whole-process times: per run, the
        import of epload's .pth hook at interpreter start (``-X importtime``,
        cumulative µs of ``epload._hook``) and, from a trace (EPLOAD_TRACE),
        the `import torch` span less torch's own body ("body of torch"): all
        epload did inside `import torch` (its imports, the native module,
        discovery, matching, the hook backend's load).
        {"pth": [ns], "import_torch": [ns], "in_import": [ns]}."""
        out = {"pth": [], "import_torch": [], "in_import": []}
        env = self.envs["epload-lazy"]
        for k in range(runs):
            proc = capture([self.python, "-X", "importtime"] + self.argv("pass")[1:], env)
            out["pth"].append(hook_import_ns(proc.stderr))
            path = os.path.join(self.work, f"lazy-trace-{k}.json")
            capture(self.commands["epload-lazy"], dict(env, EPLOAD_TRACE=path))
            whole, added = epload_share(path)
            out["import_torch"].append(whole)
            out["in_import"].append(added)
        return out

    def first_use(self, runs):
        """In-process ns of the first to("foo"), lazy and by hand, alternating."""
        out = {"lazy": [], "by-hand": []}
        env = {"lazy": self.envs["lazy-first-foo"], "by-hand": self.envs["foo-by-hand"]}
        for _ in range(runs):
            for k in ("lazy", "by-hand"):
                proc = capture(self.first[k], env[k])
                line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(TIME_MARK)),
                            None)
                if line is None:
                    raise BenchError(f"first use ({k}) printed no time:\n{proc.stdout[-500:]}")
                out[k].append(int(line[len(TIME_MARK):]))
        return out


# ------------------------------------------------------------- analysis ---

def paired_ci(a, b, resamples=2000, seed=0):
    """Median of the per-round differences a[i] - b[i] (ns) with a 95%
    bootstrap interval, in ms."""
    d = [x - y for x, y in zip(a, b)]
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(d, k=len(d))) for _ in range(resamples))
    lo, hi = meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]
    return statistics.median(d) / 1e6, lo / 1e6, hi / 1e6


def analyse(raw):
    stats = summarize_rounds(raw)
    floor = raw["floor"]
    f, fc = stats["floor"]["median_ms"], stats["floor"]["cpu_median_ms"]
    for v, s in stats.items():
        s["marginal_ms"] = s["median_ms"] - f
        s["marginal_cpu_ms"] = s["cpu_median_ms"] - fc
        s["marginal_pct"] = 100.0 * s["marginal_ms"] / f
        if v != "floor":
            med, lo, hi = paired_ci(raw[v]["wall"], floor["wall"])
            s["paired"] = {"median_ms": med, "ci95_ms": [lo, hi], "within_noise": lo <= 0 <= hi}
            med, lo, hi = paired_ci(raw[v]["cpu"], floor["cpu"])
            s["paired_cpu"] = {"median_ms": med, "ci95_ms": [lo, hi],
                               "within_noise": lo <= 0 <= hi}
    return stats


def epload_share(trace_path):
    """From one lazy process's trace: the `import torch` span the .pth hook
    records and what epload added to it (that span less torch's own body,
    the "body of torch" span inside it), ns."""
    with open(trace_path) as f:
        events = [e for e in json.load(f)["traceEvents"]
                  if e.get("ph") == "X" and e.get("cat") == "total"]
    spans = {}
    for name in ("import torch", "body of torch"):
        found = [e for e in events if e["name"] == name]
        if len(found) != 1:
            raise BenchError(f"{trace_path}: {len(found)} `{name}` spans, not one (an epload "
                             "without the host-body span?)")
        spans[name] = found[0]
    whole, body = spans["import torch"], spans["body of torch"]
    return int(whole["dur"] * 1e3), int((whole["dur"] - body["dur"]) * 1e3)


def hook_import_ns(importtime_stderr):
    """The cumulative import time of ``epload._hook`` (the .pth hook, with
    the epload package it imports) from ``-X importtime`` output, ns."""
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == "epload._hook":
            return int(line.split("|")[1]) * 1000
    raise BenchError("no `epload._hook` import in -X importtime's output: is the .pth hook "
                     "installed and EPLOAD_AUTOLOAD_HOSTS set?\n" + importtime_stderr[-500:])


# ----------------------------------------------------------------- main ---

def parse_args(argv):
    doc = __doc__
    p = argparse.ArgumentParser(prog="bench_torch.py", description=doc.split("\n\n")[0],
                                epilog=doc.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python",
                   help="the interpreter of a venv with torch and epload (with its .pth hook) "
                        "installed (default: the venv scripts/torch_env.py makes under the "
                        "build directory, as the torch.* tests do)")
    p.add_argument("--fixtures", default=",".join(DEFAULT_FIXTURES),
                   help="directories put on sys.path before the generated environment: the "
                        "fixture backends (default: tests/torch/backends/ "
                        + ", ".join(DEFAULT_FIXTURES) + ")")
    p.add_argument("--sizes", default="10,100,1000",
                   help="generated Python backends, comma-separated; 0 = fixtures alone "
                        "(10,100,1000)")
    p.add_argument("--noise", type=int, default=5000, help="ordinary distributions (5000)")
    p.add_argument("--import-cost-ms", type=float, default=20.0,
                   help="CPU time each generated backend's import burns (20)")
    p.add_argument("--rounds", type=int, help="timed rounds per size (11; --quick: 3)")
    p.add_argument("--warmup", type=int, help="untimed rounds first (1; --quick: 0)")
    p.add_argument("--first-runs", type=int, help="in-process first-use pairs (15; --quick: 3)")
    p.add_argument("--quick", action="store_true", help="few rounds, no stat baseline")
    p.add_argument("--foo-backend", default="foo",
                   help="entry-point name of the PrivateUse1 fixture backend (foo)")
    p.add_argument("--device", default="foo", help="its device name (foo)")
    p.add_argument("--build", default=os.environ.get("EPLOAD_BUILD_DIR",
                                                     os.path.join(SOURCE_DIR, "build")),
                   help="epload build directory, for build/bench (floors)")
    p.add_argument("--env-dir", metavar="DIR",
                   help="keep the generated environments here and reuse them (default: a "
                        "temporary directory)")
    p.add_argument("--json-out", metavar="FILE")
    p.add_argument("--md-out", metavar="FILE")
    p.add_argument("--plot", metavar="PNG")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("--break-variant", metavar="NAME",
                   choices=("stock", "epload-eager", "epload-lazy", "epload-lazy-paths",
                            "foo-by-hand"),
                   help="TEST ONLY: sabotage one variant to show the verification stops the run")
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = 3 if args.quick else 11
    if args.warmup is None:
        args.warmup = 0 if args.quick else 1
    if args.first_runs is None:
        args.first_runs = 3 if args.quick else 15
    args.sizes = parse_sizes(p, args.sizes, 0, "0 or more")
    if args.noise < 0 or args.import_cost_ms < 0:
        p.error("--noise and --import-cost-ms must be >= 0")
    if args.rounds < 2 or args.warmup < 0 or args.first_runs < 1:
        p.error("--rounds must be >= 2 (paired intervals), --warmup >= 0, --first-runs >= 1")
    args.build = os.path.abspath(args.build)
    if args.env_dir:
        args.env_dir = os.path.abspath(args.env_dir)
    args.fixtures = [os.path.abspath(os.path.join(FIXTURE_DIR, d)) for d in
                     args.fixtures.split(",") if d.strip()]
    for d in args.fixtures:
        if not os.path.isdir(d):
            p.error(f"--fixtures: no directory {d}")
    if args.python is None:
        args.python = torch_env_python(args.build, p.error)
    if not os.access(args.python, os.X_OK):
        p.error(f"interpreter not found: {args.python}")
    args.python = os.path.abspath(args.python)  # a venv's python: never resolve the symlink
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            p.error(f"--plot needs matplotlib in {sys.executable} (apt-get install "
                    "python3-matplotlib)")
    return args


def generated_env(args, tmp, n):
    """The generated environment of ``n`` backends (made once, reused with
    --env-dir): its manifest, or None for the fixtures alone."""
    if n == 0:
        return None
    where = os.path.join(args.env_dir or os.path.join(tmp, "envs"),
                         f"python-{n}-{args.noise}-cost{args.import_cost_ms:g}")
    log(f"bench_torch: {n:,} generated backends among {args.noise:,} distributions in "
        f"{where} ...")
    manifest, reused = ensure_env(
        "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable,
        where, n, args.noise, GROUP, kind="python",
        extra=("--import-cost-ms", args.import_cost_ms))
    if reused:
        log("bench_torch:   (reusing the environment generated earlier)")
    return manifest


def measure_size(args, info, tmp, n):
    """One size: its variants verified, timed in interleaved rounds, and
    lazy epload measured inside its processes.  Returns (row, size)."""
    work = os.path.join(tmp, f"size-{n}")
    os.makedirs(work)
    size = Size(args, info, generated_env(args, tmp, n), work)
    log(f"bench_torch: {n:,} backends: warming, verifying {len(size.variants)} variants ...")
    verified = size.warm_and_verify()
    log(f"bench_torch: {n:,} backends: {len(size.variants)} variants x "
        f"{args.warmup + args.rounds} interleaved rounds ...")
    raw = interleaved(size.commands, size.base, args.rounds, args.warmup, work, envs=size.envs)
    row = {"backends": n, "fixtures": len(size.fixtures),
           "distributions": n + (args.noise if n else 0),
           "stats": analyse(raw), "verified": verified, "commands": size.commands,
           "environments": {v: VARIANTS[v] for v in size.variants}}
    log(f"bench_torch: {n:,} backends: epload's own time in lazy processes, "
        f"{args.first_runs} runs ...")
    ip = size.in_process(args.first_runs)
    row["in_process"] = {
        "runs": args.first_runs, **{k: summarize(v) for k, v in ip.items()},
        "total": summarize([a + b for a, b in zip(ip["pth"], ip["in_import"])])}
    return row, size


def first_use(args, size):
    """In-process time of the first to("foo"), lazy and by hand."""
    log(f"bench_torch: first to({args.device!r}), in-process, {args.first_runs} pairs ...")
    f = size.first_use(args.first_runs)
    first = {"backends": size.n, "runs": args.first_runs, "lazy": summarize(f["lazy"]),
             "by_hand": summarize(f["by-hand"]), "commands": size.first}
    first["lazy_ms"] = first["lazy"]["median_ms"]
    first["by_hand_ms"] = first["by_hand"]["median_ms"]
    return first


def stat_floor(args, tmp, distributions):
    """The bare cost of `full`'s stat calls (epload_bench), or None."""
    bench_exe = os.path.join(args.build, "bench", "epload_bench")
    if args.quick or not os.access(bench_exe, os.X_OK):
        return None
    log("bench_torch: the bare cost of `full`'s stat calls (epload_bench) ...")
    from bench_index import stat_baseline
    b = stat_baseline(bench_exe, distributions, clean_env(tmp), tmp, False,
                      which="StatBaseline")["StatBaseline"]
    return {"cpu_ms": b["cpu_ms"], "stats": b.get("stats", 0), "cpus": os.cpu_count() or 1}


def run(args, tmp):
    # The fixtures are copied: their imports write __pycache__ there, not
    # into the source tree.
    fixtures = []
    for d in args.fixtures:
        fixtures.append(os.path.join(tmp, "fixtures", os.path.basename(d)))
        shutil.copytree(d, fixtures[-1], ignore=shutil.ignore_patterns("__pycache__"))
    args.fixtures = fixtures
    info = describe_python(args.python, clean_env(tmp), args.fixtures)
    log(f"bench_torch: torch {info['torch']} in {info['torch_dir']}")
    result = {"config": {
        "sizes": args.sizes, "noise": args.noise, "import_cost_ms": args.import_cost_ms,
        "rounds": args.rounds, "warmup": args.warmup, "first_runs": args.first_runs,
        "python": args.python, "machine": machine(), "load_average_before": os.getloadavg(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}, "torch": info, "sizes": []}
    first = None
    for n in args.sizes:
        row, size = measure_size(args, info, tmp, n)
        result["sizes"].append(row)
        if n == args.sizes[-1]:
            first = result["first_use"] = first_use(args, size)
    largest = args.sizes[-1]
    stat_base = stat_floor(args, tmp, largest + args.noise) if largest > 0 else None
    if stat_base:
        result["stat_baseline"] = stat_base
    result["targets"] = judge(result["sizes"], first, stat_base, args.rounds)
    result["config"]["load_average_after"] = os.getloadavg()
    write_report(result, markdown(result), args.md_out, args.json_out, args.plot, plot)
    return 0


def main(argv=None):
    return harness_main("bench_torch.py", parse_args, run, argv)


if __name__ == "__main__":
    sys.exit(main())
