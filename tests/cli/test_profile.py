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
PLOT = SOURCE_DIR / "python" / "epload" / "profile_plot.py"
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")
PHASES = {"cache_key", "stat", "read", "parse", "scan", "resolve", "dlopen", "init",
          "py_import", "py_call", "total", "load", "import"}


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


def test_a_command_that_is_not_python_still_gets_epload_spans(native):
    site, cache, m = native
    p = run("profile", "--json", "--", EPLOAD, "load", "dev0005", "--path", site, "--cache-dir", cache, check=0)
    r = json.loads(p.stdout)
    assert [b["backend"] for b in r["loaded"]] == ["gen_backend_0005"]
    assert [q["name"] for q in r["processes"]] == ["epload"]
    assert r["imports"]["modules"] == 0 and r["imports"]["by_self"] == []


def test_command_that_does_not_use_epload(tmp_path):
    p = run("profile", "--", "/bin/true", check=0)
    assert "no trace was written" in p.stdout
    assert "set EPLOAD_AUTOLOAD_HOSTS=torch" in p.stdout


def leftovers(tmp):
    return sorted(x.name for x in tmp.iterdir())


def test_command_that_is_not_found_exits_127_and_leaves_nothing(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    for command in ("/nonexistent/program", "nosuchcommand-epload"):
        p = run("profile", "--trace", tmp_path / "t.json", "--", command, env=clean_env(TMPDIR=tmp))
        assert p.returncode == 127, (p.stdout, p.stderr)  # as a shell says
        assert f"cannot run '{command}': command not found" in p.stderr
    assert leftovers(tmp) == [] and not (tmp_path / "t.json").exists()


def test_command_that_cannot_be_executed_exits_126(tmp_path):
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\necho hi\n")
    p = run("profile", "--", script)
    assert p.returncode == 126, (p.stdout, p.stderr)
    assert f"cannot run '{script}': Permission denied" in p.stderr


def test_command_killed_by_a_signal_passes_128_plus_n_through(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = run("profile", "--", "/bin/sh", "-c", "kill -9 $$", env=clean_env(TMPDIR=tmp))
    assert p.returncode == 137, (p.stdout, p.stderr)
    assert "/bin/sh -c 'kill -9 $$' was killed by signal 9" in p.stdout
    assert "exit status 137" in p.stdout
    r = json.loads(run("profile", "--json", "--", "/bin/sh", "-c", "kill -TERM $$",
                       env=clean_env(TMPDIR=tmp)).stdout)
    assert r["exit_status"] == 143 and r["signal"] == 15
    assert leftovers(tmp) == []


def test_command_is_echoed_shell_quoted():
    p = run("profile", "--", "/bin/sh", "-c", "exit 4", "it's", "", "plain-word")
    assert p.returncode == 4
    assert "epload profile: /bin/sh -c 'exit 4' 'it'\\''s' '' plain-word exited with status 4" in p.stdout
    r = json.loads(run("profile", "--json", "--", "/bin/sh", "-c", "exit 0").stdout)
    assert r["command"] == "/bin/sh -c 'exit 0'" and r["signal"] is None


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
def test_plot_finds_the_package_through_its_python_from_anywhere(native, tmp_path):
    """An executable with no package beside it (here a copy in a temporary
    directory) runs `python -m epload.profile_plot` with the Python named by
    EPLOAD_PLOT_PYTHON, which finds the package on its path."""
    site, cache, m = native
    exe = tmp_path / "bin" / "epload"
    exe.parent.mkdir()
    exe.write_bytes(EPLOAD.read_bytes())
    exe.chmod(0o755)
    png = tmp_path / "p.png"
    p = subprocess.run([str(exe), "profile", "--path", str(site), "--cache-dir", str(cache),
                        "--no-estimate", "--plot", str(png)],
                       capture_output=True, text=True, timeout=300,
                       env=clean_env(EPLOAD_PLOT_PYTHON=PYTHON, PYTHONPATH=BUILD_DIR / "python"))
    assert p.returncode == 0, p.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_is_a_clear_error(native, tmp_path):
    site, cache, m = native
    # An interpreter whose matplotlib import fails, as when the package is missing.
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    env = clean_env(PYTHONPATH=fake)
    trace = tmp_path / "t.json"
    p = run("profile", "--path", site, "--cache-dir", cache, "--no-estimate", "--plot", tmp_path / "x.png",
            "--trace", trace, env=env)
    assert p.returncode == 1
    assert "matplotlib is not installed" in p.stderr and "pip install matplotlib" in p.stderr
    assert "backends loaded:" in p.stdout  # the report all the same
    validate_trace(trace)                  # and the trace
    assert not (tmp_path / "x.png").exists()
    assert json.loads((tmp_path / "x.plot.json").read_text())["processes"]  # the twin needs no matplotlib
    p = run("profile", "--path", site, "--cache-dir", cache, "--no-estimate", "--plot", tmp_path / "x.png",
            env=clean_env(EPLOAD_PLOT_PYTHON=tmp_path / "nosuchpython"))
    assert p.returncode == 1 and "cannot run" in p.stderr and "EPLOAD_PLOT_PYTHON" in p.stderr


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


# ---- imports ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A virtual environment (no pip) whose site-packages sees the built
    package (a path line, as an editable install has) and holds the .pth
    hook: a Python in which epload is installed."""
    root = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    package = BUILD_DIR / "python"
    (pathlib.Path(site) / "_epload_build.pth").write_text(f"{package}\n")  # before the hook's, by name
    (pathlib.Path(site) / "epload-autoload.pth").write_bytes((package / "epload-autoload.pth").read_bytes())
    return python


# A program that prints what it sees: its output must not change when profiled.
PROBE = r'''
import json, os, sys
import email.message, json.decoder
env = {k: v for k, v in os.environ.items() if k != "EPLOAD_TRACE"}
print(json.dumps({"env": env, "argv": sys.argv[1:], "stdin_tty": sys.stdin.isatty(),
                  "email": "email.message" in sys.modules}, sort_keys=True))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
'''


def import_spans(events):
    return [e for e in events if e["cat"] == "import"]


def test_imports_are_recorded_nested_without_changing_the_command(venv, tmp_path):
    prog = tmp_path / "probe.py"
    prog.write_text(PROBE)
    env = clean_env()
    env.pop("PYTHONPATH", None)  # only what is installed in the venv
    plain = subprocess.run([str(venv), str(prog), "5", "a b"], capture_output=True, text=True, env=env)
    trace = tmp_path / "t.json"
    p = run("profile", "--trace", trace, "--", venv, prog, "5", "a b", env=env)
    assert p.returncode == 5 == plain.returncode
    # The command's own output comes first, unchanged; the report follows.
    assert p.stdout.startswith(plain.stdout) and "to stderr" in p.stderr
    assert "5 'a b' exited with status 5" in p.stdout
    events, _ = validate_trace(trace)
    imports = {e["name"]: e for e in import_spans(events)}
    assert {"email.message", "json", "json.decoder", "email"} <= set(imports), sorted(imports)
    # json.decoder is imported by json, inside its span.
    j, d = imports["json"], imports["json.decoder"]
    assert j["ts"] <= d["ts"] and d["ts"] + d["dur"] <= j["ts"] + j["dur"] + 0.002
    assert "slowest imports by self time" in p.stdout and "slowest imports by cumulative time" in p.stdout
    # Imports only: the report says what to set for epload's own spans.
    assert "set EPLOAD_AUTOLOAD_HOSTS=torch" in p.stdout


def test_json_report_carries_the_imports(venv, tmp_path):
    env = clean_env()
    env.pop("PYTHONPATH", None)
    code = ("import email.message, importlib; importlib.import_module('email.message'); "
            "importlib.import_module('colorsys')")
    p = run("profile", "--json", "--", venv, "-c", code, env=env, check=0)
    r = json.loads(p.stdout)
    imp = r["imports"]
    # import_module's imports are seen (-X importtime misses them); asking
    # for a module loaded already is no import.
    assert "colorsys" in {t["module"] for t in imp["by_self"]}
    assert imp["modules"] == len(imp["by_self"]) > 5
    assert [q["pid"] for q in imp["processes"]] == [q["pid"] for q in r["processes"]]
    by = {t["module"]: t for t in imp["by_self"]}
    em = by["email.message"]
    assert em["count"] == 1 and 0 <= em["self_us"] <= em["cumulative_us"]
    selfs = [t["self_us"] for t in imp["by_self"]]
    assert selfs == sorted(selfs, reverse=True)
    cums = [t["cumulative_us"] for t in imp["by_cumulative"]]
    assert cums == sorted(cums, reverse=True) and len(cums) <= 40
    # Self times add up to the outermost imports' time (to rounding).
    total = sum(q["us"] for q in imp["processes"])
    assert abs(sum(selfs) - total) <= 0.1 * len(selfs) + 1, (sum(selfs), total)


def test_imports_of_subprocesses_and_multiprocessing_spawn_are_merged(venv, tmp_path):
    prog = tmp_path / "many.py"
    prog.write_text(
        "import multiprocessing as mp, subprocess, sys\n"
        "def work():\n    import colorsys\n"
        "if __name__ == '__main__':\n"
        "    subprocess.run([sys.executable, '-c', 'import fractions'], check=True)\n"
        "    workers = [mp.get_context('spawn').Process(target=work) for _ in range(2)]\n"
        "    for w in workers:\n        w.start()\n"
        "    for w in workers:\n        w.join()\n")
    env = clean_env()
    env.pop("PYTHONPATH", None)
    p = run("profile", "--json", "--", venv, prog, env=env, check=0)
    r = json.loads(p.stdout)
    # The program, its subprocess and two workers; multiprocessing may start
    # a helper of its own (its resource tracker), a traced process too.
    assert len(r["processes"]) >= 4, r["processes"]
    by = {t["module"]: t for t in r["imports"]["by_self"]}
    assert by["fractions"]["count"] == 1
    assert by["colorsys"]["count"] == 2
    assert len(r["imports"]["processes"]) == len(r["processes"])


def test_backend_loads_list_the_imports_they_caused(pyenv, venv):
    out, m, env = pyenv
    # This interpreter's first run learns the devices (every backend loads).
    first = json.loads(run("profile", "--json", "--", venv, out / "prog.py", env=env, check=0).stdout)
    assert len(first["loaded"]) == 5
    assert all(b["imports"]["modules"] >= 1 for b in first["loaded"])
    p = run("profile", "--json", "--", venv, out / "prog.py", env=env, check=0)
    r = json.loads(p.stdout)
    (b,) = r["loaded"]
    assert b["backend"] == "gen_backend_0002"
    assert b["imports"] is not None and b["imports"]["modules"] >= 1
    assert "gen_backend_0002" in {d["module"].split(".")[0] for d in b["imports"]["direct"]}
    text = run("profile", "--", venv, out / "prog.py", env=env, check=0).stdout
    assert "imports each backend's load caused" in text and "gen_backend_0002:" in text
    assert "set EPLOAD_AUTOLOAD_HOSTS" not in text  # epload's own spans are there


@pytest.mark.skipif(not has_matplotlib(), reason="python3-matplotlib is not installed")
def test_plot_of_a_command_and_its_twin_hold_the_spans_drawn(venv, tmp_path):
    env = clean_env()
    env.pop("PYTHONPATH", None)
    png, trace = tmp_path / "p.png", tmp_path / "t.json"
    p = run("profile", "--plot", png, "--trace", trace, "--", venv, "-c", "import email.message, json",
            env=env, check=0)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot: {png}" in p.stdout
    twin = json.loads((tmp_path / "p.plot.json").read_text())
    events, _ = validate_trace(trace)
    spans = {(e["pid"], e["name"], e["cat"]): e for e in events}
    (proc,) = twin["processes"]
    t0 = min(e["ts"] for e in events if e["pid"] == proc["pid"])
    assert proc["boxes"]
    for box in proc["boxes"]:  # each box drawn is a span of the trace, where it was
        e = spans[(proc["pid"], box["name"], box["cat"])]
        assert abs(box["start_ms"] - (e["ts"] - t0) / 1000) < 0.002
        assert abs(box["dur_ms"] - e["dur"] / 1000) < 0.002
    names = {b["name"] for b in proc["boxes"]}
    assert "email.message" in names
    assert any(b["label"].startswith("email.message") for b in proc["boxes"])
    assert {r["module"] for r in twin["slowest_cumulative"]} >= {"email.message"}
    assert "epload profile -- " in twin["title"]


def test_discovery_is_labelled_by_what_happened_hit_refresh_or_cold_scan(tmp_path):
    out = tmp_path / "env"
    generate(out, "--kind", "python", "--backends", 3, "--noise", 10)
    host = out / "host"
    host.mkdir()
    (host / "myhost.py").write_text("import epload\nepload.autoload(group='torch.backends', host=__name__)\n")
    (out / "prog.py").write_text("import myhost\n")
    env = clean_env(PYTHONPATH=os.pathsep.join([str(BUILD_DIR / "python"), str(out / "site-packages"),
                                                str(host)]),
                    EPLOAD_CACHE_DIR=out / "cache", EPLOAD_GEN_HOST="myhost")

    def notes():
        r = json.loads(run("profile", "--json", "--", PYTHON, out / "prog.py", env=env, check=0).stdout)
        time.sleep(0.03)
        return [s["note"] for s in r["timeline"] if s["note"].startswith("discovery")]

    assert notes() == ["discovery (cold scan)"]
    assert notes() == ["discovery (index hit)"]
    # One more distribution on the path: the stale index is refreshed, that one read.
    info = out / "site-packages" / "late_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: late-dist\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[other.group]\nx = late:x\n")
    time.sleep(0.03)
    assert notes() == ["discovery (refresh: 1 distribution read again)"]


def test_the_timeline_puts_a_child_process_on_its_parents_time_axis(pyenv, tmp_path):
    out, m, env = pyenv
    prog = tmp_path / "parent.py"
    prog.write_text("import subprocess, sys, time\nimport myhost\ntime.sleep(0.3)\n"
                    f"subprocess.run([sys.executable, {str(out / 'prog.py')!r}], check=True)\n")
    r = json.loads(run("profile", "--json", "--", PYTHON, prog, env=env, check=0).stdout)
    text = run("profile", "--", PYTHON, prog, env=env, check=0).stdout
    assert "ms from the trace's first span, every process on one axis" in text
    # The child's discovery starts after the parent's 0.3 s sleep, on the parent's clock.
    lines = text.split("timeline (", 1)[1].splitlines()
    starts = [float(ln.split()[0]) for ln in lines if "entry_points query" in ln]
    assert len(starts) == 2 and starts[0] < 300 <= starts[1], text
    assert len(r["processes"]) == 2


def test_the_picture_folds_same_extent_spans_and_shares_one_time_axis(tmp_path):
    # A parent process with nested spans of one extent (a host's import and
    # its hook's spans around it), and a child that ran 50 ms later.
    def x(name, cat, ts, dur, pid):
        return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": 1}
    trace = {"traceEvents": [
        x("torch", "import", 1000.0, 10000.0, 7), x("import torch", "total", 1001.0, 9998.0, 7),
        x("body of torch", "total", 1002.0, 9990.0, 7), x("torch.nn", "import", 2000.0, 3000.0, 7),
        x("json", "import", 51000.0, 2000.0, 8), x("json.decoder", "import", 51500.0, 500.0, 8)]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    p = subprocess.run([PYTHON, str(PLOT), str(path), "-o", str(tmp_path / "p.png")],
                       capture_output=True, text=True)
    assert p.returncode in (0, 3), p.stderr  # 3: no matplotlib, the twin written all the same
    twin = json.loads((tmp_path / "p.plot.json").read_text())
    parent, child = twin["processes"]
    top = [b for b in parent["boxes"] if b["depth"] == 0]
    assert [(b["name"], b["folded"]) for b in top] == [("torch", ["import torch", "body of torch"])]
    assert [b["name"] for b in parent["boxes"] if b["depth"] == 1] == ["torch.nn"]
    assert top[0]["label"].startswith("torch ⊃ import torch ⊃ body of torch") or top[0]["label"] == ""
    # One axis: the child's boxes start where it ran, 50 ms after the parent's first span.
    assert child["start_ms"] == 50.0 and child["boxes"][0]["start_ms"] == 50.0
    assert parent["axis_ms"] == child["axis_ms"] == 52.0
