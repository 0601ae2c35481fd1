"""Measures what the plugin backends of this Python's environment add to
`import torch` (or another host's import), stock autoload against epload, and
gates it: `python -m epload.bench`, or `epload bench`.

Variants, each run as a whole `python -I` process of this interpreter,
verified to do its job before it is timed, interleaved round by round:
  floor           `import torch` with autoload off (TORCH_DEVICE_BACKEND_AUTOLOAD=0)
  stock           PyTorch's own autoload of every installed backend
  epload eager    epload loading every backend at import
  epload lazy     `full` and `paths` validation: backends load on first use
                  (those that declare no device still load at import)
  lazy + first use  with --device DEV (default: the middle generated
                  backend's device): epload lazy, then the first use of DEV
Beside them, epload's own time inside the lazy processes (its trace,
EPLOAD_TRACE): the precise figure for what lazy adds.

--synthetic N[,N...] adds N generated Python backends (each burning
--import-cost MS of CPU when imported) among --distributions M generated
distributions, in a temporary directory put after this environment's
sys.path; it is removed at the end, as is everything else the run makes
(epload's caches included: they live in the same temporary directory).

Another host: --host MODULE --group GROUP models a host that loads nothing
itself: its floor is `import MODULE`, its stock autoload PyTorch's loop over
GROUP (importlib.metadata, each entry point loaded and called with no
argument) right after it, epload's variants EPLOAD_AUTOLOAD_HOSTS=MODULE=GROUP;
a first use is the attribute `MODULE.DEV`.  Processes run isolated (-I:
PYTHONPATH and the user site-packages are ignored).

Gate (exit status 0 met, 1 not met, 2 usage or could not measure):
  --fail-over PCT         epload lazy's added cost (in-process, `full`) must
                          be at most PCT% of the floor at every size; with 7
                          rounds or more the whole-process interval's lower
                          end must be within that too
  --baseline OLD.json --fail-regression PCT
                          lazy's added cost must not exceed OLD.json's (an
                          earlier --json of this command) by more than PCT%
                          at any size both measured
A target the data cannot judge says why and counts as not met.
"""

from __future__ import annotations

import os
import sys

from . import options, suite_torch
from .proc import BenchError, capture, log, read_json
from .report import write_report
from .suite_torch import Host, lazy_added, markdown, target, where

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
                   help="write the report as Markdown (e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the costs (needs matplotlib)")
    p.add_argument("--fail-over", type=options.at_least("--fail-over", 0, float), metavar="PCT",
                   help="gate: lazy's added cost at most PCT%% of the floor")
    p.add_argument("--baseline", metavar="OLD.json", help="an earlier --json, for "
                   "--fail-regression")
    p.add_argument("--fail-regression", type=options.at_least("--fail-regression", 0, float),
                   metavar="PCT", help="gate: lazy's added cost at most PCT%% above OLD.json's")
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
    if (args.baseline is None) != (args.fail_regression is None):
        p.error("--baseline OLD.json and --fail-regression PCT go together")
    if args.baseline:
        args.baseline_data = load_baseline(p, args.baseline)
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
    return args


def check_host(args, tmp):
    """One clear message when the host cannot be imported, or a backend
    raises under its stock autoload."""
    host = args.host_model
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", tmp),
           "XDG_CACHE_HOME": os.path.join(tmp, "xdg-cache")}
    code = f"import {host.module}; {host.stock_body}"
    for variables, what in ((host.off, "import"), ({}, "stock autoload")):
        try:
            capture([args.python, "-I", "-X", f"pycache_prefix={args.pycache}", "-c",
                     code if what != "import" else f"import {host.module}"],
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
    """The targets --fail-over and --fail-regression set, per size."""
    out, host = [], args.host
    for row in result["sizes"]:
        if args.fail_over is not None:
            out.append(lazy_added(row, args.fail_over, args.rounds,
                                  f"epload lazy adds ≤ {args.fail_over:g}% to `import {host}`"))
        if args.fail_regression is not None:
            out.append(regression(args, row))
    return out


def regression(args, row):
    """Lazy's added cost against the baseline's at the same size."""
    old_data, pct = args.baseline_data, args.fail_regression
    text = f"epload lazy's added cost ≤ {pct:g}% above {os.path.basename(args.baseline)}'s"
    new = row["in_process"]["total"]["median_ms"]
    old_host = old_data.get("torch", {}).get("host", "torch")
    old = next((r for r in old_data["sizes"] if r.get("backends") == row["backends"]), None)
    if old_host != args.host:
        return target(text, f"{new:.2f} ms", None, where(row),
                      unjudged=f"not judged: the baseline measured `import {old_host}`")
    if old is None:
        return target(text, f"{new:.2f} ms", None, where(row),
                      unjudged=f"not judged: the baseline has no run at {row['backends']:,} "
                               "generated backends")
    was = old["in_process"]["total"]["median_ms"]
    limit = was * (1 + pct / 100)
    return target(text, f"in-process {new:.2f} ms against {was:.2f} ms "
                        f"({100 * (new - was) / was if was else 0:+.1f}%)",
                  new <= limit, where(row), limit)


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
        log(f"{PROG}: --plot needs matplotlib: {MISSING} (the other outputs are written)")
        plot_to = None
    check_host(args, tmp)
    result, _ = suite_torch.measure(args, tmp, noise_of=lambda n: args.distributions - n)
    result["config"].update(host=args.host, group=args.group, distributions=args.distributions,
                            fail_over=args.fail_over, fail_regression=args.fail_regression,
                            baseline=args.baseline)
    result["targets"] = gate(args, result)
    budget = args.fail_over if args.fail_over is not None else 1.0
    write_report(result, markdown, args.markdown, args.json, plot_to,
                 lambda r, path: plot_costs(r, path, budget))
    if args.plot and not plot_to:
        log(f"{PROG}: no plot written: {MISSING}")
    failed = [t for t in result["targets"] if not t["met"]]
    for t in failed:
        log(f"{PROG}: {'NOT MET' if t['met'] is False else t['unjudged']}: {t['target']} "
            f"({t['where']}): {t['measured']}")
    return 1 if failed else 0


def main(argv=None):
    from .proc import harness_main
    return harness_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
