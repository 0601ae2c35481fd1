"""`epload profile` and EPLOAD_TRACE, on environments from scripts/gen_env.py:
the report lists exactly the backends that were loaded; trace files are valid
trace-event JSON (required fields, child spans inside their parent on the same
thread, one `load` event per loaded backend, named after it), whether written
by the profile command, by `epload load` or by a Python program; a command's
traces are merged; the eager estimate is measured; --plot draws a PNG; every
bad input is a clear error.  Real libraries, real dlopen, real /usr/bin/python3;
no timing is asserted."""

import json
import os
import pathlib
import re
import subprocess
import time

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
EPLOAD = BUILD_DIR / "epload"
GEN = SOURCE_DIR / "scripts" / "gen_env.py"
PLOT = SOURCE_DIR / "scripts" / "plot_trace.py"
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")
PHASES = {"cache_key", "stat", "read", "parse", "scan", "resolve", "dlopen", "init",
          "py_import", "py_call", "total", "load"}


def generate(out, *args):
    p = subprocess.run([PYTHON, str(GEN), str(out), *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    time.sleep(0.03)  # let the clock tick past the generation (racy stamps are not stored)
    return json.loads((out / "manifest.json").read_text())


def clean_env(**extra):
    e = dict(os.environ)
    for k in ("TORCH_DEVICE_BACKEND_AUTOLOAD", "EPLOAD_MODE", "EPLOAD_ENABLE",
              "EPLOAD_DISABLE", "EPLOAD_INDEX", "EPLOAD_TRACE", "EPLOAD_TEST_SLOWDOWN"):
        e.pop(k, None)
    e.update({k: str(v) for k, v in extra.items()})
    return e


def run(*args, env=None, check=None, cwd=None):
    p = subprocess.run([str(EPLOAD), *map(str, args)], capture_output=True, text=True,
                       env=env or clean_env(), cwd=cwd, timeout=300)
    if check is not None:
        assert p.returncode == check, (p.stdout, p.stderr)
    return p


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    out = tmp_path_factory.mktemp("native")
    m = generate(out, "--kind", "native", "--backends", 12, "--noise", 20, "--seed", 5)
    return out / "site-packages", out / "cache", m


@pytest.fixture(scope="module")
def pyenv(tmp_path_factory):
    out = tmp_path_factory.mktemp("python")
    m = generate(out, "--kind", "python", "--backends", 5, "--noise", 10)
    host = out / "host"
    host.mkdir()
    (host / "myhost.py").write_text(
        "import epload\nepload.autoload(group='torch.backends', host=__name__)\n")  # EPLOAD_MODE or lazy
    (out / "prog.py").write_text(
        "import sys\nimport myhost\nprint('got', myhost.dev0002)\nsys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)\n")
    pythonpath = os.pathsep.join([str(BUILD_DIR / "python"), str(out / "site-packages"), str(host)])
    env = clean_env(PYTHONPATH=pythonpath, EPLOAD_CACHE_DIR=out / "cache", EPLOAD_GEN_HOST="myhost")
    # Devices are learned on a first run (every backend loads once then);
    # from the next run on, lazy mode loads only the backend of the device used.
    for _ in range(2):
        p = subprocess.run([PYTHON, str(out / "prog.py")], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        time.sleep(0.03)
    return out, m, env


def validate_trace(path):
    """Checks a trace file as a viewer would need it; returns its X events."""
    data = json.loads(pathlib.Path(path).read_text())
    assert isinstance(data["traceEvents"], list)
    xs = []
    for e in data["traceEvents"]:
        assert e["ph"] in ("X", "M"), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and "pid" in e and "tid" in e
            continue
        for field in ("name", "cat", "ph", "ts", "dur", "pid", "tid"):
            assert field in e, (field, e)
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["dur"] >= 0 and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["cat"] in PHASES, e
        xs.append(e)
    # Nesting: per thread, each span starts inside the span open before it
    # and then also ends inside it (no partial overlap on one thread).
    lanes = {}
    for e in xs:
        lanes.setdefault((e["pid"], e["tid"]), []).append(e)
    eps = 0.0015  # the file's µs have 3 decimals
    for lane in lanes.values():
        lane.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in lane:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - eps:
                stack.pop()
            if stack:
                parent = stack[-1]
                assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + eps, (e, parent)
            stack.append(e)
    # Per backend: its dlopen/init/py_import/py_call spans lie inside its load span.
    loads = {}
    for e in xs:
        if e["cat"] == "load":
            loads.setdefault(e["name"], []).append(e)
    for e in xs:
        if e["cat"] in ("dlopen", "init", "py_import", "py_call"):
            assert any(l["pid"] == e["pid"] and l["tid"] == e["tid"] and l["ts"] - eps <= e["ts"]
                       and e["ts"] + e["dur"] <= l["ts"] + l["dur"] + eps
                       for l in loads.get(e["name"], [])), e
    return xs, data


def load_names(events):
    return [e["name"] for e in sorted(events, key=lambda e: e["ts"]) if e["cat"] == "load"]


def loaded_in_text(stdout):
    """Backend names from the text report's 'backends loaded' table."""
    lines = stdout.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("backends loaded:")) + 1
    names = []
    for line in lines[i:]:
        if not line.startswith("  "):
            break
        if line.split()[0] != "backend":  # the header
            names.append(line.split()[0])
    return names


# ---- native form ---------------------------------------------------------------

def test_lists_exactly_the_loaded_backends_and_writes_a_valid_trace(native, tmp_path):
    site, cache, m = native
    trace = tmp_path / "t.json"
    p = run("profile", "--path", site, "--cache-dir", cache, "--device", "dev0003",
            "--device", "dev0007", "--no-estimate", "--trace", trace, check=0)
    assert sorted(loaded_in_text(p.stdout)) == ["gen_backend_0003", "gen_backend_0007"], p.stdout
    assert "backends loaded: 2 of 12" in p.stdout
    assert "lookup dev0003" in p.stdout and "ok, backend gen_backend_0003" in p.stdout
    assert re.search(r"system calls counted: stat \d+ open \d+ read \d+ readdir \d+", p.stdout)
    for phase in ("dlopen", "init", "load"):
        assert re.search(rf"^  {phase} +\d+ ", p.stdout, re.M), phase
    events, data = validate_trace(trace)
    assert load_names(events) == ["gen_backend_0003", "gen_backend_0007"]
    assert {e["name"] for e in events if e["cat"] in ("dlopen", "init")} == \
        {"gen_backend_0003", "gen_backend_0007"}
    assert data["otherData"]["stat"] > 0


def test_json_report_matches_the_loader(native):
    site, cache, m = native
    p = run("profile", "--path", site, "--cache-dir", cache, "--device", "dev0001", "--json",
            "--no-estimate", check=0)
    r = json.loads(p.stdout)
    assert [b["backend"] for b in r["loaded"]] == ["gen_backend_0001"]
    assert r["loaded"][0]["state"] == "ready" and r["loaded"][0]["kind"] == "native"
    assert r["lookups"] == [{"device": "dev0001", "ok": True, "backend": "gen_backend_0001",
                             "us": r["lookups"][0]["us"], "error": None}]
    assert r["backends"] == 12 and r["mode"] == "lazy"
    assert r["not_loaded"]["native"] == 11
    assert r["eager_estimate"] is None
    assert {ph["phase"] for ph in r["phases"]} >= {"dlopen", "init", "load"}
    assert set(r["counters"]) == {"stat", "open", "read", "readdir"}


def test_eager_estimate_is_measured_for_the_backends_not_loaded(native):
    site, cache, m = native
    p = run("profile", "--path", site, "--cache-dir", cache, "--device", "dev0004", "--json", check=0)
    r = json.loads(p.stdout)
    est = r["eager_estimate"]
    assert est["backends"] == 11  # every other backend, loaded by the eager child
    assert est["extra_us"] > 0 and est["eager_start_us"] > 0
    assert "measured" in est["method"]
    text = run("profile", "--path", site, "--cache-dir", cache, "--device", "dev0004", check=0).stdout
    assert "eager loading would have cost" in text and "for 11 of them (measured:" in text


def test_eager_mode_loads_and_lists_every_backend(native, tmp_path):
    site, cache, m = native
    trace = tmp_path / "eager.json"
    p = run("profile", "--path", site, "--cache-dir", cache, "--mode", "eager", "--json",
            "--trace", trace, check=0)
    r = json.loads(p.stdout)
    names = sorted(b["entry_point"] for b in m["backends"])
    assert sorted(b["backend"] for b in r["loaded"]) == names
    assert r["eager_estimate"] is None
    events, _ = validate_trace(trace)
    assert sorted(load_names(events)) == names


def test_cold_index_shows_scan_read_and_parse(native, tmp_path):
    site, cache, m = native
    p = run("profile", "--path", site, "--no-cache", "--no-estimate", "--json", check=0)
    r = json.loads(p.stdout)
    phases = {ph["phase"]: ph for ph in r["phases"]}
    assert phases["scan"]["spans"] == 1
    assert phases["read"]["spans"] >= 12 and phases["parse"]["spans"] >= 12
    assert r["index"]["status"] == "uncached (scanned)"
    assert r["loaded"] == []


def test_failed_lookup_is_reported_and_exits_1(native):
    site, cache, m = native
    p = run("profile", "--path", site, "--cache-dir", cache, "--device", "nosuchdev", "--no-estimate")
    assert p.returncode == 1
    assert "lookup nosuchdev" in p.stdout and "FAILED" in p.stdout
    assert "nosuchdev" in p.stderr


# ---- EPLOAD_TRACE from any program -------------------------------------------------

def test_epload_trace_from_the_cli(native, tmp_path):
    site, cache, m = native
    trace = tmp_path / "load.json"
    p = run("load", "dev0005", "--path", site, "--cache-dir", cache, "--json",
            env=clean_env(EPLOAD_TRACE=trace), check=0)
    loaded = [b["backend"] for b in json.loads(p.stdout)["loaded"]]
    events, _ = validate_trace(trace)
    assert load_names(events) == loaded == ["gen_backend_0005"]


def test_epload_trace_percent_p_gives_one_file_per_process(native, tmp_path):
    site, cache, m = native
    pattern = tmp_path / "trace-%p.json"
    run("load", "dev0006", "--path", site, "--cache-dir", cache, env=clean_env(EPLOAD_TRACE=pattern), check=0)
    run("load", "dev0008", "--path", site, "--cache-dir", cache, env=clean_env(EPLOAD_TRACE=pattern), check=0)
    files = sorted(tmp_path.glob("trace-*.json"))
    assert len(files) == 2
    seen = set()
    for f in files:
        events, data = validate_trace(f)
        pid = int(f.stem.split("-")[1])
        assert {e["pid"] for e in events} == {pid}
        seen.update(load_names(events))
    assert seen == {"gen_backend_0006", "gen_backend_0008"}


def test_epload_trace_into_a_missing_directory_says_so(native, tmp_path):
    site, cache, m = native
    p = run("load", "dev0005", "--path", site, "--cache-dir", cache,
            env=clean_env(EPLOAD_TRACE=tmp_path / "no" / "such" / "t.json"), check=0)
    assert "epload: EPLOAD_TRACE: cannot write trace" in p.stderr


def test_epload_trace_from_a_python_program(pyenv, tmp_path):
    out, m, env = pyenv
    trace = tmp_path / "py.json"
    p = subprocess.run([PYTHON, str(out / "prog.py")], capture_output=True, text=True,
                       env=dict(env, EPLOAD_TRACE=str(trace)), timeout=120)
    assert p.returncode == 0, p.stderr
    events, data = validate_trace(trace)
    assert load_names(events) == ["gen_backend_0002"]  # lazy: only the device used
    cats = {e["cat"] for e in events if e["name"] == "gen_backend_0002"}
    assert {"load", "py_import", "py_call"} <= cats
    # The index query of the Python layer is traced natively in the same file.
    assert any(e["name"] == "entry_points query" for e in events)


# ---- a command ----------------------------------------------------------------------

def test_command_form_merges_traces_and_lists_exactly_the_loaded_backends(pyenv, tmp_path):
    out, m, env = pyenv
    trace = tmp_path / "cmd.json"
    p = run("profile", "--trace", trace, "--json", "--", PYTHON, out / "prog.py", env=env, check=0)
    r = json.loads(p.stdout)
    assert [b["backend"] for b in r["loaded"]] == ["gen_backend_0002"]
    assert r["loaded"][0]["kind"] == "python"
    assert r["exit_status"] == 0 and r["problems"] == []
    assert [pr["name"] for pr in r["processes"]] == ["python3"]
    assert "got" in p.stderr  # with --json, the command's stdout goes to stderr
    events, _ = validate_trace(trace)
    assert load_names(events) == ["gen_backend_0002"]

    text = run("profile", "--", PYTHON, out / "prog.py", env=env, check=0).stdout
    assert loaded_in_text(text) == ["gen_backend_0002"], text
    assert "eager estimate: not measured for a command" in text


def test_command_form_eager_estimate_and_exit_status(pyenv):
    out, m, env = pyenv
    p = run("profile", "--json", "--eager-estimate", "--", PYTHON, out / "prog.py", "3", env=env)
    assert p.returncode == 3  # the command's status
    r = json.loads(p.stdout)
    assert r["exit_status"] == 3
    # The eager run (same command, EPLOAD_MODE=eager) loaded the other four too.
    assert r["eager_estimate"] is not None, r
    assert r["eager_estimate"]["backends"] == 4 and r["eager_estimate"]["extra_us"] > 0


def test_command_that_does_not_use_epload(tmp_path):
    p = run("profile", "--", "/bin/true", check=0)
    assert "no trace was written" in p.stdout


def test_command_that_cannot_run():
    p = run("profile", "--", "/nonexistent/program")
    assert p.returncode == 1
    assert "cannot run '/nonexistent/program'" in p.stderr


# ---- plot -------------------------------------------------------------------------------

def has_matplotlib():
    return subprocess.run([PYTHON, "-c", "import matplotlib"], capture_output=True).returncode == 0


@pytest.mark.skipif(not has_matplotlib(), reason="python3-matplotlib is not installed")
def test_plot_writes_a_png(native, tmp_path):
    site, cache, m = native
    png = tmp_path / "p.png"
    p = run("profile", "--path", site, "--cache-dir", cache, "--device", "dev0003", "--no-estimate",
            "--plot", png, check=0)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot: {png}" in p.stdout


@pytest.mark.skipif(not has_matplotlib(), reason="python3-matplotlib is not installed")
def test_plot_finds_its_script_from_a_build_tree_outside_the_checkout(native, tmp_path):
    """An executable with no scripts/ beside it (a build directory elsewhere,
    here a copy in a temporary directory) falls back to the checkout it was
    built from."""
    site, cache, m = native
    exe = tmp_path / "bin" / "epload"
    exe.parent.mkdir()
    exe.write_bytes(EPLOAD.read_bytes())
    exe.chmod(0o755)
    png = tmp_path / "p.png"
    p = subprocess.run([str(exe), "profile", "--path", str(site), "--cache-dir", str(cache),
                        "--no-estimate", "--plot", str(png)],
                       capture_output=True, text=True, env=clean_env(), timeout=300)
    assert p.returncode == 0, p.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_is_a_clear_error(native, tmp_path):
    site, cache, m = native
    # An interpreter whose matplotlib import fails, as when the package is missing.
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    env = clean_env(PYTHONPATH=fake)
    p = run("profile", "--path", site, "--cache-dir", cache, "--no-estimate", "--plot", tmp_path / "x.png",
            env=env)
    assert p.returncode == 1
    assert "matplotlib is not installed" in p.stderr and "python3-matplotlib" in p.stderr
    p = run("profile", "--path", site, "--cache-dir", cache, "--no-estimate", "--plot", tmp_path / "x.png",
            env=clean_env(EPLOAD_PLOT_SCRIPT=tmp_path / "nosuch.py"))
    assert p.returncode == 1 and "plot_trace.py not found" in p.stderr


def test_plot_script_rejects_a_bad_trace(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    p = subprocess.run([PYTHON, str(PLOT), str(bad), "-o", str(tmp_path / "x.png")],
                       capture_output=True, text=True)
    assert p.returncode in (1, 3)  # 3 only where matplotlib is missing
    assert "cannot read trace" in p.stderr or "matplotlib" in p.stderr


# ---- usage -------------------------------------------------------------------------------

@pytest.mark.parametrize("args,expect", [
    (["--mode", "bogus"], "--mode takes lazy, eager or off"),
    (["--"], "'--' must be followed by a command"),
    (["--device", "x", "--", "/bin/true"], "apply to the native form"),
    (["--eager-estimate"], "--eager-estimate applies to a command"),
    (["--bogus"], "unknown argument '--bogus'"),
    (["--trace"], "--trace needs a value"),
])
def test_usage_errors(args, expect):
    p = run("profile", *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert expect in p.stderr


def test_unwritable_trace_is_an_error(native, tmp_path):
    site, cache, m = native
    p = run("profile", "--path", site, "--cache-dir", cache, "--no-estimate", "--trace",
            tmp_path / "no" / "dir" / "t.json")
    assert p.returncode == 1
    assert "cannot write trace" in p.stderr
