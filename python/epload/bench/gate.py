"""epload's CI benchmark gate: ratios measured within one run, compared with
the thresholds committed in bench/baseline.json.

Ratios (smaller is better; both sides from the same run):
{listing}
Exit status: 0 within the thresholds; 1 a regression (confirmed by a second
measurement); 2 could not measure, or a usage error.  --quick reports the
ratios, never judges them (exit 0 unless it cannot measure); a judged run
needs 7 samples or more of each ratio (--rounds, --repetitions).
Method: BENCHMARKS.md.
"""

from __future__ import annotations

import datetime
import os
import statistics
import sys
import time

from . import options
from .envs import SOURCE_DIR, clean_env, config, kept_env, machine
from .proc import BenchError, gbench, interleaved, read_json, write_json
from .report import table, write_report
from .suite_index import Setup

PROG = "bench_gate"
BASELINE = os.path.join(SOURCE_DIR or "", "bench", "baseline.json")
# Distributions for cached_over_cold: below the size at which validation
# splits over two threads (500 watched files), so both sides are one
# thread's CPU plus, for the scan, its helper's (process CPU time).
CACHE_SIZE = 300
# The reference environment of the whole-process ratio.
PROCESS_BACKENDS, PROCESS_NOISE = 1000, 5000

# The ratios: numerator and denominator (Google Benchmark run name, time
# field), or "process" for the whole-process one; the margin of
# --update-baseline (threshold = max(median * margin, max seen * 1.25)),
# larger where the measurement is noisier.
RATIOS = {
    "lazy_over_eager": {
        "what": "lazy / eager start-up, 1,000 native backends (CPU)", "margin": 2.0,
        "num": ("BM_LoaderStartupLazy/1000", "cpu_time"),
        # Manual time: the child's CPU time for create + start.
        "den": ("BM_LoaderStartupEager/1000", "real_time")},
    "cached_over_cold": {
        "what": f"cached (full validation) / cold index, {CACHE_SIZE} distributions (CPU)",
        "num": (f"BM_CacheLoadValidateFull/{CACHE_SIZE}", "cpu_time"),
        "den": (f"BM_ScanCold/{CACHE_SIZE}", "cpu_time"), "margin": 1.6,
        "repetitions_factor": 3},  # sub-millisecond cases: more, equally short repetitions
    "hot_lookup_over_hashmap": {
        "what": "hot lookup / std::unordered_map lookup, 1,000 devices (CPU)", "margin": 2.2,
        "num": ("BM_LoaderHotLookup/1000", "cpu_time"),
        "den": ("BM_HashMapLookup/1000", "cpu_time"),
        # Nanosecond timings shift with whatever shares the core: many short
        # repetitions (cheap here) make the medians steady.
        "repetitions_factor": 4, "min_time": 0.02},
    "epload_over_importlib": {
        "what": f"epload process (warm cache, full) / importlib.metadata marginal, "
                f"{PROCESS_BACKENDS + PROCESS_NOISE:,} distributions (CPU)",
        "process": True, "margin": 2.0},
}
T0 = time.monotonic()
# The fewest samples a ratio is judged from (--quick reports, never judges).
MIN_SAMPLES = 7
REPORTED = "reported (--quick: not judged)"


def log(msg):
    print(f"bench_gate: [{time.monotonic() - T0:5.1f} s] {msg}", file=sys.stderr, flush=True)


def run_gbench(args, names, tmp, repetitions, min_time):
    """epload_bench once for ``names``: {run name: {"real_time", "cpu_time": [ns]}}."""
    # A trailing '/' or end keeps BM_X/1000 from matching BM_X/10000.
    pattern = "^(" + "|".join(n + "(/|$)" for n in names) + ")"
    rows = gbench(args.bench_exe, pattern, dict(os.environ, EPLOAD_BENCH_SIZES=str(CACHE_SIZE)),
                  tmp, repetitions, min_time, ["--benchmark_enable_random_interleaving=true"])
    res = {}
    for b in (b for b in rows if b.get("run_type") == "iteration" and not b.get("error_occurred")):
        # Strip the modifiers Google Benchmark appends (/iterations:5, /real_time, ...).
        key = "/".join(p for p in b["run_name"].split("/") if ":" not in p and p not in
                       ("real_time", "manual_time", "process_time"))
        r = res.setdefault(key, {"real_time": [], "cpu_time": []})
        r["real_time"].append(b["real_ns"])
        r["cpu_time"].append(b["cpu_ns"])
    missing = [n for n in names if n not in res]
    if missing:
        raise BenchError(f"epload_bench reported nothing for {', '.join(missing)} "
                         "(a benchmark failed or was renamed?)")
    return res


def process_ratio(args, tmp):
    """epload (warm cache, full) CPU ÷ importlib's marginal CPU, interleaved."""
    env = clean_env(tmp)
    if "EPLOAD_TEST_SLOWDOWN" in os.environ:  # the test-only slowdown
        env["EPLOAD_TEST_SLOWDOWN"] = os.environ["EPLOAD_TEST_SLOWDOWN"]
    manifest = kept_env("bench_gate", args.python, os.path.join(tmp, "process-env"),
                        PROCESS_BACKENDS, PROCESS_NOISE, args.group)
    s = Setup(args, manifest["search_path"], os.path.join(tmp, "process-work"), env, None)
    s.check_answers(args.python, env, PROCESS_BACKENDS)
    s.warm(env)
    commands = {"bare": s.py["bare"], "importlib": s.py["importlib"], "full": s.epload["full"]}
    cpu = {n: statistics.median(v["cpu"])
           for n, v in interleaved(commands, env, args.rounds, 1, tmp).items()}
    marginal = cpu["importlib"] - cpu["bare"]
    if marginal <= 0:
        raise BenchError("importlib's marginal CPU time came out <= 0: the measurement is broken")
    return cpu["full"] / marginal, {n: round(v / 1e6, 3) for n, v in cpu.items()}


def measure(args, which, tmp):
    """Measures the ratios in `which`; returns {name: {"value", "detail"}}."""
    out, groups = {}, {}
    # One epload_bench run per (repetitions, min_time) setting.
    for n in (n for n in which if not RATIOS[n].get("process")):
        key = (args.repetitions * RATIOS[n].get("repetitions_factor", 1),
               min(args.min_time, RATIOS[n].get("min_time", args.min_time)))
        groups.setdefault(key, []).append(n)
    for (repetitions, min_time), members in groups.items():
        names = list(dict.fromkeys(RATIOS[n][s][0] for n in members for s in ("num", "den")))
        log(f"Google Benchmark: {', '.join(names)} x {repetitions} repetitions ...")
        res = run_gbench(args, names, tmp, repetitions, min_time)
        for n in members:
            (a, am), (b, bm) = RATIOS[n]["num"], RATIOS[n]["den"]
            num, den = statistics.median(res[a][am]), statistics.median(res[b][bm])
            out[n] = {"value": num / den,
                      "detail": {a: f"{num / 1e3:.3f} us ({am})", b: f"{den / 1e3:.3f} us ({bm})",
                                 "repetitions": len(res[a][am])}}
    if "epload_over_importlib" in which:
        log(f"whole processes: bare, importlib, epload x {args.rounds} interleaved rounds ...")
        value, cpu_ms = process_ratio(args, tmp)
        out["epload_over_importlib"] = {"value": value, "detail": {"cpu_median_ms": cpu_ms,
                                                                    "rounds": args.rounds}}
    return out


def load_baseline(path):
    """The thresholds file, checked."""
    try:
        data = read_json(path)
    except OSError as e:
        raise BenchError(f"cannot read the baseline {path}: {e.strerror}")
    except ValueError as e:
        raise BenchError(f"baseline {path} is not valid JSON: {e}")
    ratios = data.get("ratios") if isinstance(data, dict) else None
    if not isinstance(ratios, dict):
        raise BenchError(f"baseline {path} has no \"ratios\" object")
    for name, r in ratios.items():
        if name not in RATIOS:
            raise BenchError(f"baseline {path}: unknown ratio '{name}' (known: {', '.join(RATIOS)})")
        t = r.get("threshold") if isinstance(r, dict) else None
        if not isinstance(t, (int, float)) or t <= 0:
            raise BenchError(f"baseline {path}: ratio '{name}' needs a positive number \"threshold\"")
    return data


def fmt(v):
    return "-" if v is None else (f"{v:.4f}" if v < 10 else f"{v:.1f}")


def markdown(result):
    """The gate's summary: each ratio against its baseline and threshold."""
    slow, cfg, confirmed = os.environ.get("EPLOAD_TEST_SLOWDOWN"), result["config"], \
        result["confirmed"]
    rows = [[f"`{n}` — {RATIOS[n]['what']}", fmt(r["value"]),
             fmt(result["baseline"][n].get("baseline")),
             fmt(result["thresholds"][n]), result["verdicts"][n]
             + (f" (re-measured: {fmt(confirmed[n])})" if n in confirmed else "")]
            for n, r in result["results"].items()]
    return "\n".join(
        [f"## epload benchmark gate ({'quick' if result['quick'] else 'full'})", ""]
        + ([f"**EPLOAD_TEST_SLOWDOWN={slow} is set: a test-only slowdown is injected; these "
            "figures are not epload's.**", ""] if slow else [])
        + table(["ratio", "measured", "baseline", "threshold", "verdict"], "lrrrl", rows)
        + ["", "Smaller is better; a ratio fails above its threshold (bench/baseline.json). "
               f"{os.cpu_count()} CPUs, load average {cfg['load_average_after'][0]:.1f} at the "
               f"end; {cfg['repetitions']} repetitions, {cfg['rounds']} process rounds; "
               f"{result['seconds']:.0f} s; {cfg['started']}."]) + "\n"


def update_baseline(args, tmp):
    runs = args.update_runs
    seen = {n: [] for n in args.only}
    for k in range(runs):
        log(f"baseline run {k + 1} of {runs} ...")
        for n, r in measure(args, args.only, tmp).items():
            seen[n].append(r["value"])
    try:
        data = read_json(args.baseline)
    except (OSError, ValueError):
        data = {}
    data.setdefault("format", 1)
    ratios = data.setdefault("ratios", {})
    for n, values in seen.items():
        med, margin = statistics.median(values), RATIOS[n]["margin"]
        ratios[n] = {"what": RATIOS[n]["what"], "baseline": round(med, 6),
                     "threshold": round(max(med * margin, max(values) * 1.25), 6),
                     "margin": margin, "observed": {
                         "runs": len(values), "min": round(min(values), 6),
                         "max": round(max(values), 6), "mode": "quick" if args.quick else "full"}}
    shown = [a for k, a in enumerate(sys.argv[1:])
             if not (a.startswith("--build") or (k > 0 and sys.argv[k] == "--build"))]
    data["updated"] = {"date": datetime.date.today().isoformat(), "machine": machine(),
        "command": " ".join(["scripts/bench_gate"] + shown),
        "rule": "threshold = max(baseline * margin, max observed * 1.25)"}
    write_json(args.baseline + ".tmp", data)
    os.replace(args.baseline + ".tmp", args.baseline)
    for n in seen:
        r = ratios[n]
        print(f"{n}: baseline {fmt(r['baseline'])}, threshold {fmt(r['threshold'])} "
              f"(observed {fmt(r['observed']['min'])}..{fmt(r['observed']['max'])} over {runs} runs)")
    print(f"wrote {args.baseline}")
    return 0


def tmp_base(args):
    """/dev/shm when a writable tmpfs with room (~20,000 small files), else None."""
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
        if os.access(shm, os.W_OK) and st.f_bavail * st.f_frsize > (1 << 30):
            with open("/proc/mounts") as f:
                if any(line.split()[1:3] == [shm, "tmpfs"] for line in f):
                    return shm
    except OSError:
        pass
    return None


def parse_args(argv):
    p = options.parser(PROG, __doc__, {n: r["what"] for n, r in RATIOS.items()})
    options.add_common(p, rounds=(15, 7), warmup=(1, 1), outputs=False)
    p.add_argument("--only", action="append", default=[], metavar="RATIO",
                   help="measure only these ratios (repeatable or comma-separated)")
    p.add_argument("--baseline", default=BASELINE, help="thresholds file (bench/baseline.json)")
    options.add_count(p, "--repetitions", (9, 5), "Google Benchmark repetitions")
    p.add_argument("--no-confirm", action="store_true",
                   help="fail at once, without re-measuring a ratio past its threshold")
    p.add_argument("--update-baseline", action="store_true",
                   help="measure the ratios --update-runs times, rewrite the thresholds")
    options.add_count(p, "--update-runs", (5, 5), "runs of --update-baseline", quick=False)
    p.add_argument("--json-out", metavar="FILE", help="also write the results as JSON")
    args = options.finish(p, p.parse_args(argv))
    only = [n.strip() for o in args.only for n in o.split(",") if n.strip()]
    bad = [n for n in only if n not in RATIOS]
    if bad:
        p.error(f"--only: unknown ratio {', '.join(bad)} (known: {', '.join(RATIOS)})")
    args.only = only or list(RATIOS)
    if not args.quick and not args.update_baseline and (
            args.repetitions < MIN_SAMPLES or ("epload_over_importlib" in args.only
                                               and args.rounds < MIN_SAMPLES)):
        p.error(f"a judged run needs --repetitions and --rounds of {MIN_SAMPLES} or more "
                "(--quick reports, never judges)")
    args.min_time = 0.05 if args.quick else 0.2
    args.bench_exe = os.path.join(args.build, "bench", "epload_bench")
    args.group = "torch.backends"
    options.need_built(p, *([args.bench_exe] if any(not RATIOS[n].get("process")
                                                    for n in args.only) else []),
                       *([args.epload] if "epload_over_importlib" in args.only else []))
    return args


def run(args, tmp):
    """The gate; every error on the way is "could not measure" (status 2)."""
    os.environ["TMPDIR"] = tmp  # epload_bench generates its environments there too
    try:
        return update_baseline(args, tmp) if args.update_baseline else judge(args, tmp)
    except BenchError as e:
        e.status = 2
        raise


def judge(args, tmp):
    """Measures, confirms what is past its threshold, reports; 1 on a regression."""
    t0 = time.monotonic()
    baseline = load_baseline(args.baseline)
    missing = [n for n in args.only if n not in baseline["ratios"]]
    if missing:
        raise BenchError(f"baseline {args.baseline} has no threshold for {', '.join(missing)} "
                         "(scripts/bench_gate --update-baseline --only NAME adds one)")
    results = measure(args, args.only, tmp)
    thresholds = {n: baseline["ratios"][n]["threshold"] for n in results}
    verdicts, confirmed = {}, {}
    over = [n for n, r in results.items() if r["value"] > thresholds[n]]
    if args.quick:
        over = []
    if over and not args.no_confirm:
        # One more measurement of what failed: a noisy moment fails one
        # measurement, a regression fails both.
        log(f"past threshold: {', '.join(over)}; measuring again to confirm ...")
        confirmed = {n: r["value"] for n, r in measure(args, over, tmp).items()}
    for n, r in results.items():
        t = thresholds[n]
        failed = r["value"] > t and (args.no_confirm or confirmed.get(n, r["value"]) > t)
        verdicts[n] = REPORTED + (" — past its threshold" if r["value"] > t else "") \
            if args.quick else "**FAIL**" if failed else (
                "pass" if r["value"] <= t else "pass (noise)")
    result = {"config": config(args, repetitions=args.repetitions),
              "results": results, "confirmed": confirmed, "verdicts": verdicts,
              "thresholds": thresholds, "baseline": baseline["ratios"], "quick": args.quick,
              "seconds": time.monotonic() - t0}
    write_report(result, markdown, json_out=args.json_out)
    failed = [n for n, v in verdicts.items() if v == "**FAIL**"]
    if failed:
        print(f"bench_gate: REGRESSION: {', '.join(failed)} past the threshold in {args.baseline}",
              file=sys.stderr)
        return 1
    return 0
