"""Measures what the plugin backends of this Python's environment add to
`import torch` (or another host's import), stock autoload against epload, and
gates it: `python -m epload.bench`, or `epload bench`.

Variants, each run as a whole process of this interpreter in your
environment (below), verified to do its job before it is timed, interleaved
round by round:
  floor           `import torch` with autoload off (TORCH_DEVICE_BACKEND_AUTOLOAD=0)
  stock           PyTorch's own autoload of every installed backend
  epload eager    epload loading every backend at import
  epload lazy     `full` and `paths` validation: backends load on first use
                  (those that declare no device still load at import)
  lazy + first use  with --device DEV (default: the middle generated
                  backend's device): epload lazy, then the first use of DEV
Beside them, epload's own time inside the lazy processes (its trace,
EPLOAD_TRACE), and each variant's counted work in one more warm run:
modules imported, shared objects mapped, stat and open calls (the kernel's,
by `strace -f -c` when strace runs here; else Python-level ones), bytes read.

Environment: the processes inherit yours (PYTHONPATH, LD_LIBRARY_PATH, a
vendor toolkit's variables, the venv, the user site-packages); the bench
sets EPLOAD_* and TORCH_DEVICE_BACKEND_AUTOLOAD per variant and its own
cache directory (XDG_CACHE_HOME), and keeps the working directory off
sys.path.  The report names the variables inherited.  --clean-env runs them
isolated instead (`python -I`, nothing inherited but PATH, HOME, LC_ALL).

--synthetic N[,N...] adds N generated Python backends (each burning
--import-cost MS of CPU when imported) among --distributions M generated
distributions, in a temporary directory put after this environment's
sys.path; it is removed at the end, as is everything else the run makes
(epload's caches included: they live in the same temporary directory).

Another host: --host MODULE --group GROUP models a host that loads nothing
itself: its floor is `import MODULE`, its stock autoload PyTorch's loop over
GROUP (importlib.metadata, each entry point loaded and called with no
argument) right after it, epload's variants EPLOAD_AUTOLOAD_HOSTS=MODULE=GROUP;
a first use is the attribute `MODULE.DEV`.

Gate (exit status 0 met, 1 not met, 2 usage or could not measure):
  --fail-over PCT         epload lazy's (`full`) whole-process added cost,
                          its paired 95% interval, against PCT% of the floor
                          at every size: fails only when the whole interval
                          is over; judged from 7 pairs (--rounds) or more;
                          --quick reports it, never judges
  --baseline OLD.json --fail-regression PCT
                          lazy's in-process added cost must not exceed
                          OLD.json's (an earlier --json of this command) by
                          more than PCT% at any size both measured
  --baseline OLD.json --fail-count-regression
                          no count (modules, shared objects, stat calls,
                          open calls) of a lazy variant may grow over
                          OLD.json's; what grew is named; exit 2 when
                          OLD.json has no counts, or another Python, host
                          version, backend set or way of counting
A target the data cannot judge says why and counts as not met (one that
--quick only reports does not).
"""

from __future__ import annotations

import os
import sys

from . import counts as counting
from . import options, suite_torch
from .envs import SET_BY_BENCH, clean_env, launch, user_env
from .proc import BenchError, capture, log, read_json
from .report import write_report
from .suite_torch import Host, lazy_whole, markdown, target, where

PROG = "epload bench"


def parse_args(argv):
    p = options.parser(PROG, __doc__)
    p.add_argument("--host", default="torch", metavar="MODULE",
                   help="the module whose import is measured (torch)")
    p.add_argument("--group", metavar="GROUP",
                   help="the entry-point group it autoloads (torch.backends)")
    p.add_argument("--synthetic", default="0", metavar="N[,N...]",
                   help="generated Python backends, one measurement per count; 0: only what "
                        "is installed (0)")
    p.add_argument("--distributions", type=options.at_least("--distributions", 0), metavar="M",
                   help="generated distributions in all, backends included (default: the "
                        "largest --synthetic + 1,000)")
    p.add_argument("--import-cost", type=options.at_least("--import-cost", 0, float),
                   default=20.0, metavar="MS",
                   help="CPU time each generated backend's import burns, ms (20)")
    p.add_argument("--device", metavar="DEV",
                   help="the device whose first use is measured (default: the middle "
                        "generated backend's; none without --synthetic)")
    options.add_count(p, "--rounds", (7, 3), "timed rounds, interleaved", least=2)
    options.add_count(p, "--warmup", (1, 1), "untimed rounds first", least=0)
    options.add_count(p, "--runs", (9, 5), "runs timed inside the processes (epload's trace)")
    p.add_argument("--quick", action="store_true", help="fewer rounds and runs")
    p.add_argument("--json", metavar="FILE", help="write every figure as JSON")
    p.add_argument("--markdown", metavar="FILE",
                   help="write the report as Markdown; appended when FILE is "
                        "$GITHUB_STEP_SUMMARY (or with --markdown-append)")
    p.add_argument("--markdown-append", action="store_true",
                   help="append the report to --markdown's FILE, not replace it")
    p.add_argument("--clean-env", action="store_true",
                   help="run the processes isolated (`python -I`, nothing of your "
                        "environment inherited) instead of in your environment")
    p.add_argument("--plot", metavar="FILE.png", help="draw the costs (needs matplotlib)")
    p.add_argument("--fail-over", type=options.at_least("--fail-over", 0, float), metavar="PCT",
                   help="gate: lazy's added cost at most PCT%% of the floor")
    p.add_argument("--baseline", metavar="OLD.json", help="an earlier --json, for "
                   "--fail-regression and --fail-count-regression")
    p.add_argument("--fail-regression", type=options.at_least("--fail-regression", 0, float),
                   metavar="PCT", help="gate: lazy's added cost at most PCT%% above OLD.json's")
    p.add_argument("--fail-count-regression", action="store_true",
                   help="gate: no count of a lazy variant above OLD.json's")
    args = p.parse_args(argv)
    for name, (default, quick) in {"rounds": (7, 3), "warmup": (1, 1),
                                   "runs": (9, 5)}.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else default)
    args.sizes = options.parse_sizes(p, args.synthetic, 0, "--synthetic")
    biggest = max(args.sizes)
    if args.distributions is None:
        args.distributions = biggest + 1000 if biggest else 0
    if args.distributions < biggest:
        p.error(f"--distributions {args.distributions} is fewer than --synthetic {biggest}")
    if not all(part.isidentifier() for part in args.host.split(".")):
        p.error(f"--host {args.host!r} is not a module name")
    if args.host != "torch" and not args.group:
        p.error(f"--host {args.host} needs --group GROUP (the entry-point group it autoloads)")
    args.group = args.group or "torch.backends"
    if args.device is not None and not args.device.isidentifier():
        p.error(f"--device {args.device!r} is not a device name")
    against = args.fail_regression is not None or args.fail_count_regression
    if (args.baseline is None) == against:
        p.error("--baseline OLD.json goes with --fail-regression PCT or "
                "--fail-count-regression" if args.baseline else
                "--baseline OLD.json and --fail-regression PCT go together" if
                args.fail_regression is not None else
                "--fail-count-regression needs --baseline OLD.json")
    if args.markdown_append and not args.markdown:
        p.error("--markdown-append needs --markdown FILE")
    if args.baseline:
        args.baseline_data = load_baseline(p, args.baseline)
        check_counted(p, args)
    for option in ("json", "markdown", "plot"):
        check_writable(p, option, getattr(args, option))
    return engine_args(args)


def load_baseline(p, path):
    """OLD.json, checked to be an earlier --json of this command."""
    try:
        data = read_json(path)
    except OSError as e:
        p.error(f"--baseline {path}: {e.strerror}")
    except ValueError as e:
        p.error(f"--baseline {path}: not JSON ({e})")
    if not (isinstance(data, dict) and isinstance(data.get("sizes"), list)
            and all(isinstance(r, dict) and "in_process" in r for r in data["sizes"])):
        p.error(f"--baseline {path}: not the --json of `epload bench`")
    return data


def check_counted(p, args):
    """--fail-count-regression: p.error unless OLD.json holds counts."""
    if args.fail_count_regression and not any(
            "counts" in r.get("stats", {}).get(v, {}) for r in args.baseline_data["sizes"]
            for v in COUNTED_LAZY):
        p.error(f"--baseline {args.baseline}: no counts in it (a --json of an older `epload "
                "bench`): run this version once to make one")


def check_writable(p, option, path):
    """p.error unless ``path`` (if given) can be written."""
    if not path:
        return
    if path == "-" or os.path.isdir(path):
        p.error(f"--{option} {path}: a file name is needed")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        p.error(f"--{option} {path}: no directory {parent}")
    existed = os.path.exists(path)
    try:  # the one sure test: open it for appending (an empty new file is removed)
        with open(path, "a"):
            pass
    except OSError as e:
        p.error(f"--{option} {path}: not writable ({e.strerror})")
    if not existed:
        os.remove(path)


def engine_args(args):
    """The options suite_torch's measurement reads."""
    args.python = sys.executable
    args.fixtures, args.env_dir, args.break_variant, args.keep = [], None, None, False
    args.import_cost_ms, args.first_runs = args.import_cost, args.runs
    args.noise = args.distributions - max(args.sizes) if max(args.sizes) else 0
    args.device = args.device or "auto"
    args.require_device, args.dirty, args.prog = False, False, "epload bench"
    args.host_model = Host(args.host, args.group)
    args.inherit = not args.clean_env
    args.count_method = "strace" if counting.have_strace() else "python"
    return args


def check_host(args, tmp):
    """One clear message when the host cannot be imported, or a backend
    raises under its stock autoload."""
    host = args.host_model
    env = user_env(tmp) if args.inherit else clean_env(tmp)
    flags, prefix = launch(args.inherit)
    code = f"import {host.module}; {host.stock_body}"
    for variables, what in ((host.off, "import"), ({}, "stock autoload")):
        try:
            capture([args.python, *flags, "-X", f"pycache_prefix={args.pycache}", "-c",
                     prefix + (code if what != "import" else f"import {host.module}")],
                    dict(env, **variables, **host.gen))
        except BenchError as e:
            text = str(e).strip().splitlines()
            last = text[-1] if text else ""
            if what == "import" and f"No module named '{host.module.split('.')[0]}'" in last:
                hint = " (pip install torch)" if host.torch else ""
                raise BenchError(f"{args.python} has no module {host.module}{hint}")
            if what == "import":
                raise BenchError(f"`import {host.module}` fails in {args.python}: {last}")
            # The exception's own line, the last (a traceback may quote the source).
            failed = next((ln.split(": ", 1)[-1].strip() for ln in reversed(text)
                           if ln.startswith("RuntimeError: Failed to load the backend")), None)
            cut = next((k for k, ln in enumerate(text) if "direct cause" in ln), len(text))
            cause = next((ln.strip() for ln in reversed(text[:cut])
                          if ln[:1].isalpha() and ": " in ln and not ln.startswith("Traceback")),
                         last)
            raise BenchError(f"{failed or 'stock autoload fails'} (under `import "
                             f"{host.module}`); the backend raised {cause}")


def gate(args, result):
    """The targets --fail-over, --fail-regression and
    --fail-count-regression set, per size."""
    out, host = [], args.host
    for row in result["sizes"]:
        if args.fail_over is not None:
            out.append(lazy_whole(row, args.fail_over, args.rounds, args.quick,
                                  f"epload lazy adds ≤ {args.fail_over:g}% to `import {host}` "
                                  "(whole process)"))
        if args.fail_regression is not None:
            out.append(regression(args, row))
        if args.fail_count_regression:
            out.append(count_regression(args, row))
    return out


# The lazy variants whose counts the count gate compares.
COUNTED_LAZY = ("epload-lazy", "epload-lazy-paths")


def same_setup(args, info):
    """A BenchError (status 2) unless OLD.json has counts and came from the
    same Python, host version, backend set and way of counting."""
    old, path = args.baseline_data, args.baseline
    rows = [r for r in old["sizes"] if all("counts" in r["stats"].get(v, {})
                                           for v in COUNTED_LAZY)]
    if not rows:
        raise BenchError(f"--baseline {path} has no counts (a --json of an `epload bench` "
                         "that counted): run it again to make one")
    was, now = old.get("torch", {}), info
    for key, what in (("python", "Python version"),
                      ("host", "host"), ("torch", f"{now.get('host', 'torch')} version")):
        if was.get(key) != now.get(key):
            raise BenchError(f"--baseline {path} came from another {what} ({was.get(key)}, not "
                             f"{now.get(key)}): its counts do not compare")
    if sorted(map(tuple, was.get("backends", []))) != sorted(map(tuple, now["backends"])):
        raise BenchError(f"--baseline {path} came from another backend set "
                         f"({', '.join(b[0] for b in was.get('backends', [])) or 'none'}; now "
                         f"{', '.join(b[0] for b in now['backends']) or 'none'}): its counts "
                         "do not compare")
    methods = {r["stats"][v]["counts"]["method"] for r in rows for v in COUNTED_LAZY}
    if methods != {args.count_method}:
        raise BenchError(f"--baseline {path} counted calls by {', '.join(sorted(methods))}, "
                         f"this run by {args.count_method}: its counts do not compare")


def count_regression(args, row):
    """The counts of the lazy variants against the baseline's at the same size."""
    text = f"no count of epload lazy above {os.path.basename(args.baseline)}'s"
    old = next((r for r in args.baseline_data["sizes"] if r.get("backends") == row["backends"]),
               None)
    if old is None:
        return dict(target(text, "-", None, where(row),
                           unjudged=f"not judged: the baseline has no run at "
                                    f"{row['backends']:,} generated backends"), rule="counts")
    grew = {v: counting.grown(old["stats"][v]["counts"], row["stats"][v]["counts"])
            for v in COUNTED_LAZY}
    grew = {v: g for v, g in grew.items() if g}
    c = row["stats"]["epload-lazy"]["counts"]
    measured = ("; ".join(f"{row['labels'].get(v, v)}: {', '.join(g)}" for v, g in grew.items())
                or f"none grew ({c['modules']:,} modules, {c['shared_objects']:,} shared "
                   f"objects, {c['stat_calls']:,} stat and {c['open_calls']:,} open calls)")
    return dict(target(text, measured, not grew, where(row)), rule="counts", grew=grew)


def regression(args, row):
    """Lazy's added cost against the baseline's at the same size."""
    old_data, pct = args.baseline_data, args.fail_regression
    text = f"epload lazy's added cost ≤ {pct:g}% above {os.path.basename(args.baseline)}'s"
    new = row["in_process"]["total"]["median_ms"]
    old_host = old_data.get("torch", {}).get("host", "torch")
    old = next((r for r in old_data["sizes"] if r.get("backends") == row["backends"]), None)
    if old_host != args.host:
        return dict(target(text, f"{new:.2f} ms", None, where(row),
                           unjudged=f"not judged: the baseline measured `import {old_host}`"),
                    rule="regression")
    if old is None:
        return dict(target(text, f"{new:.2f} ms", None, where(row),
                           unjudged=f"not judged: the baseline has no run at "
                                    f"{row['backends']:,} generated backends"),
                    rule="regression")
    was = old["in_process"]["total"]["median_ms"]
    limit = was * (1 + pct / 100)
    t = dict(target(text, f"in-process {new:.2f} ms against {was:.2f} ms "
                          f"({100 * (new - was) / was if was else 0:+.1f}%)",
                    new <= limit, where(row), limit), rule="regression")
    if args.quick:
        t.update(met=None, unjudged="reported, not judged (--quick)", reported=True)
    return t


def environment(args, result):
    """What the processes inherited (names only) and what the bench set."""
    if not args.inherit:
        return {"mode": "clean", "inherited": sorted(clean_env("/"))}
    seen = sorted({k for row in result["sizes"] for e in row["environments"].values() for k in e}
                  | {"TORCH_DEVICE_BACKEND_AUTOLOAD"})
    return {"mode": "inherited",
            "inherited": sorted(k for k in os.environ if not k.startswith(SET_BY_BENCH)),
            "set": seen, "not_inherited": sorted(k for k in os.environ
                                                 if k.startswith(SET_BY_BENCH))}


def tmp_base(args):
    return None


def run(args, tmp):
    args.pycache = os.path.join(tmp, "pycache")
    try:
        return measure_and_report(args, tmp)
    except BenchError as e:
        e.status = 2  # could not measure
        raise


def measure_and_report(args, tmp):
    from .plot import MISSING, have_matplotlib, plot_costs
    plot_to = args.plot
    if plot_to and not have_matplotlib():
        plot_to = None
    check_host(args, tmp)
    if args.fail_count_regression:
        args.check_info = lambda info: same_setup(args, info)
    result, _ = suite_torch.measure(args, tmp, noise_of=lambda n: args.distributions - n)
    result["config"].update(host=args.host, group=args.group, distributions=args.distributions,
                            fail_over=args.fail_over, fail_regression=args.fail_regression,
                            fail_count_regression=args.fail_count_regression,
                            baseline=args.baseline, quick=args.quick)
    result["environment"] = environment(args, result)
    result["targets"] = gate(args, result)
    budget = args.fail_over if args.fail_over is not None else 1.0
    append = args.markdown_append or bool(
        args.markdown and os.environ.get("GITHUB_STEP_SUMMARY")
        and os.path.abspath(args.markdown) == os.path.abspath(os.environ["GITHUB_STEP_SUMMARY"]))
    write_report(result, markdown, args.markdown, args.json, plot_to,
                 lambda r, path: plot_costs(r, path, budget), md_append=append)
    if args.plot and not plot_to:
        log(f"{PROG}: no plot written: --plot needs matplotlib ({MISSING}); the other "
            "outputs are written")
    failed = [t for t in result["targets"] if not t["met"] and not t.get("reported")]
    for t in failed:
        log(f"{PROG}: {'NOT MET' if t['met'] is False else t['unjudged']}: {t['target']} "
            f"({t['where']}): {t['measured']}")
    return 1 if failed else 0


def main(argv=None):
    from .proc import harness_main
    return harness_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
