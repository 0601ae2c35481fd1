"""scripts/bench_gate: it passes on unchanged code, fails when a real
slowdown pushes a ratio past its threshold (EPLOAD_TEST_SLOWDOWN, a test-only
switch compiled into the epload library only with -DEPLOAD_TEST_HOOKS=ON, as
scripts/setup.sh builds), rewrites a baseline on request, and refuses
bad baselines and options clearly.

The gate runs the real epload_bench of the build under test.  These tests
use one ratio (--only cached_over_cold: the cheapest, a few seconds) and
compare nothing with absolute times: the slowdown spins 20,000 µs per cache
validation, far beyond any noise, and the pass case uses the committed
thresholds, which carry the margin documented in BENCHMARKS.md."""

import json
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
GATE = SOURCE_DIR / "scripts" / "bench_gate"
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")
RATIO = "cached_over_cold"


# The fewest samples a judged run takes (--quick reports, never judges).
JUDGED = ("--rounds", "7", "--repetitions", "7")


def gate(*args, slowdown=None, mode=JUDGED):
    env = dict(os.environ)
    env.pop("EPLOAD_TEST_SLOWDOWN", None)
    if slowdown:
        env["EPLOAD_TEST_SLOWDOWN"] = slowdown
    return subprocess.run([PYTHON, str(GATE), *mode, "--build", str(BUILD_DIR), *args],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def bench_built():
    if not (BUILD_DIR / "bench" / "epload_bench").exists():
        pytest.fail(f"{BUILD_DIR}/bench/epload_bench is not built")


@pytest.fixture(scope="module")
def test_hooks(bench_built):
    cache = (BUILD_DIR / "CMakeCache.txt").read_text()
    if "EPLOAD_TEST_HOOKS:BOOL=ON" not in cache:
        pytest.skip(f"{BUILD_DIR} is built without -DEPLOAD_TEST_HOOKS=ON: no EPLOAD_TEST_SLOWDOWN")


def table_row(stdout, name):
    rows = [line for line in stdout.splitlines() if line.startswith(f"| `{name}`")]
    assert len(rows) == 1, stdout
    return [c.strip() for c in rows[0].strip("|").split("|")]


def test_passes_on_unchanged_code(bench_built, tmp_path):
    out = tmp_path / "gate.json"
    p = gate("--only", RATIO, "--json-out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "## epload benchmark gate (full)" in p.stdout
    row = table_row(p.stdout, RATIO)
    assert row[-1].startswith("pass"), row
    data = json.loads(out.read_text())
    assert set(data["results"]) == {RATIO}
    assert data["results"][RATIO]["value"] <= data["thresholds"][RATIO]
    assert "EPLOAD_TEST_SLOWDOWN" not in p.stdout


def test_fails_when_a_real_slowdown_pushes_the_ratio_past_its_threshold(test_hooks, tmp_path):
    out = tmp_path / "gate.json"
    p = gate("--only", RATIO, "--json-out", str(out), slowdown="validate:20000")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "REGRESSION: cached_over_cold" in p.stderr
    assert "EPLOAD_TEST_SLOWDOWN=validate:20000 is set" in p.stdout
    row = table_row(p.stdout, RATIO)
    assert row[-1].startswith("**FAIL**") and "re-measured" in row[-1], row
    data = json.loads(out.read_text())
    # Confirmed by the second measurement, not a single noisy one.
    assert data["confirmed"][RATIO] > data["thresholds"][RATIO]
    assert data["results"][RATIO]["value"] > data["thresholds"][RATIO]


def test_quick_reports_a_slowdown_and_never_judges_it(test_hooks):
    p = gate("--only", RATIO, slowdown="validate:20000", mode=("--quick",))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "## epload benchmark gate (quick)" in p.stdout
    row = table_row(p.stdout, RATIO)
    assert row[-1] == "reported (--quick: not judged) — past its threshold", row


def test_fewer_than_7_samples_are_never_judged():
    p = gate("--only", RATIO, mode=("--repetitions", "5"))
    assert p.returncode == 2
    assert "a judged run needs --repetitions and --rounds of 7 or more" in p.stderr


def test_a_slowdown_elsewhere_does_not_fail_this_ratio(test_hooks):
    # The switch is specific: slowing backend loads leaves the index ratio alone.
    p = gate("--only", RATIO, slowdown="load:20000")
    assert p.returncode == 0, p.stdout + p.stderr


def test_update_baseline_writes_thresholds_the_gate_then_uses(bench_built, tmp_path):
    baseline = tmp_path / "baseline.json"
    p = gate("--only", RATIO, "--update-baseline", "--update-runs", "2", "--baseline", str(baseline),
             mode=("--quick",))
    assert p.returncode == 0, p.stdout + p.stderr
    data = json.loads(baseline.read_text())
    r = data["ratios"][RATIO]
    assert r["observed"]["runs"] == 2
    assert r["threshold"] >= r["baseline"] * r["margin"] * 0.999
    assert r["threshold"] >= r["observed"]["max"] * 1.25 * 0.999
    assert "--build" not in data["updated"]["command"]
    # A threshold made impossibly tight is a failure, by the same gate.
    r["threshold"] = r["baseline"] / 1000
    baseline.write_text(json.dumps(data))
    p = gate("--only", RATIO, "--baseline", str(baseline), "--no-confirm")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "REGRESSION" in p.stderr


@pytest.mark.parametrize("text,expect", [
    ("{", "is not valid JSON"),
    ('{"ratios": {"cached_over_cold": {}}}', 'needs a positive number "threshold"'),
    ('{"ratios": {"nosuch": {"threshold": 1}}}', "unknown ratio 'nosuch'"),
    ('{"ratios": {}}', "has no threshold for cached_over_cold"),
    ('[]', 'has no "ratios" object'),
])
def test_bad_baselines_are_clear_errors(tmp_path, text, expect):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(text)
    p = gate("--only", RATIO, "--baseline", str(baseline))
    assert p.returncode == 2, p.stdout + p.stderr
    assert expect in p.stderr
    assert str(baseline) in p.stderr


def test_usage_errors(tmp_path):
    p = gate("--only", "nosuch")
    assert p.returncode == 2
    assert "unknown ratio nosuch" in p.stderr
    p = gate("--build", str(tmp_path))
    assert p.returncode == 2
    assert "build first (scripts/setup.sh" in p.stderr


def test_committed_baseline_names_every_ratio():
    data = json.loads((SOURCE_DIR / "bench" / "baseline.json").read_text())
    p = subprocess.run([PYTHON, str(GATE), "--help"], capture_output=True, text=True)
    assert p.returncode == 0
    for name, r in data["ratios"].items():
        assert name in p.stdout
        assert r["threshold"] > r["baseline"] > 0
        assert r["observed"]["max"] < r["threshold"]
