"""The start-up harness (scripts/bench_startup.py), the lookup harness
(scripts/bench_index.py) and the main command's driver (scripts/demo.py,
scripts/demo.sh) at tiny sizes, scripts/ab.py, and scripts/sanitize.sh's
argument checks: their outputs exist and are well-formed, every variant is
verified to do its job, and a variant broken on purpose (--break-variant,
test only) stops the run with a message saying what was wrong.  Real environments, real interpreters, real epload;
no timing is asserted."""

import json
import os
import pathlib
import shutil
import struct
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")
STARTUP = SOURCE_DIR / "scripts" / "bench_startup.py"
INDEX = SOURCE_DIR / "scripts" / "bench_index.py"
DEMO = SOURCE_DIR / "scripts" / "demo.py"
DEMO_SH = SOURCE_DIR / "scripts" / "demo.sh"

TINY = ["--noise", "12", "--rounds", "2", "--warmup", "0", "--strace", "off",
        "--hyperfine", "off"]


def have_matplotlib():
    return subprocess.run([PYTHON, "-c", "import matplotlib"], capture_output=True).returncode == 0


def run(script, *args, timeout=600):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EPLOAD_", "TORCH_"))}
    env.update(EPLOAD_BUILD_DIR=str(BUILD_DIR), CI="true")
    return subprocess.run([PYTHON, str(script), *map(str, args)], capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL, timeout=timeout)


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def startup(tmp_path_factory):
    out = tmp_path_factory.mktemp("startup")
    args = ["--sizes", "3,5", *TINY, "--build", BUILD_DIR,
            "--json-out", out / "s.json", "--md-out", out / "s.md"]
    if have_matplotlib():
        args += ["--plot", out / "s.png"]
    proc = run(STARTUP, *args)
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_startup_json_has_every_variant_verified(startup):
    out, _ = startup
    data = json.loads((out / "s.json").read_text())
    assert [r["backends"] for r in data["sizes"]] == [3, 5]
    stevedore = data["config"]["stevedore"] is not None
    for row in data["sizes"]:
        n = row["backends"]
        assert row["distributions"] == n + 12
        expected = {"bare", "importlib", "pytorch-eager", "floor-native", "epload-import",
                    "epload-ep", "epload-ep-paths", "epload-eager", "epload-lazy",
                    "epload-lazy-paths", "epload-lazy-first"} | ({"stevedore"} if stevedore
                                                                  else set())
        assert set(row["stats"]) == expected
        for v, s in row["stats"].items():
            assert s["runs"] == 2
            assert s["median_ms"] > 0 and s["cpu_median_ms"] > 0
            assert s["q1_ms"] <= s["median_ms"] <= s["q3_ms"]
            assert abs(s["marginal_ms"] - (s["median_ms"] - row["stats"]["bare"]["median_ms"])) \
                < 1e-9
        ver = row["verified"]
        # What each variant was checked to have done.
        for v in ("pytorch-eager", "epload-eager"):
            assert ver[v]["modules_imported"] == n and ver[v]["devices_set"] == n
        for v in ("epload-lazy", "epload-lazy-paths"):
            assert ver[v]["modules_imported"] == 0 and ver[v]["devices_set"] == 0
        assert ver["epload-lazy-first"]["modules_imported"] == 1
        assert ver["epload-lazy-first"]["devices_set"] == 1
        for v in ("importlib", "epload-ep", "epload-ep-paths") + (("stevedore",) if stevedore
                                                                 else ()):
            assert ver[v]["found"] == n and ver[v]["modules_imported"] == 0
        assert ver["bare"]["modules_imported"] == 0
        assert ver["floor-native"]["modules_imported"] == 0
        # The variants differ only in the measured statement and the
        # variables the prelude sets.
        cmds = row["commands"]
        assert all(c[:4] == [PYTHON, "-I", "-S", "-c"] and len(c) == 5 for c in cmds.values())
        tails = {v: c[4].split("sys.path += ", 1)[1] for v, c in cmds.items()}
        path_part = {t.split("]", 1)[0] for t in tails.values()}
        assert len(path_part) == 1
        for r in ("importlib", "pytorch-eager"):
            if "epload-ep" in row["ratios"] and r in row["ratios"]["epload-ep"]:
                x = row["ratios"]["epload-ep"][r]["wall"]
                assert x is None or x > 0
    names = [t["variant"] for t in data["targets"]]
    assert names == ["epload-import", "epload-ep", "epload-ep", "epload-ep-paths",
                     "epload-ep-paths", "epload-lazy"]
    assert all(t["backends"] == 5 for t in data["targets"])
    # Every ratio target has its budget (the reference's marginal over the
    # ratio) and its floor: the libraries' load, plus for `full` validation
    # the bare stats shared by the CPUs (epload_bench is built here).
    sb = data["stat_baseline"]
    assert sb["distributions"] == 17 and sb["stats"] > 17 and sb["cpus"] >= 1
    floor_lib = data["sizes"][-1]["stats"]["floor-native"]["marginal_ms"]
    for t in data["targets"][1:]:
        if t["reference"] not in data["sizes"][-1]["stats"]:
            continue  # stevedore not installed
        ref = data["sizes"][-1]["stats"][t["reference"]]["marginal_ms"]
        assert t["budget_ms"] == pytest.approx(ref / t["needed"])
        assert t["floor_libraries_ms"] == floor_lib
        full = t["variant"] in ("epload-ep", "epload-lazy")
        assert ("floor_stats_ms" in t) == full
        stats = sb["cpu_ms"] / sb["cpus"] if full else 0.0
        assert t["floor_ms"] == pytest.approx(floor_lib + stats)
        assert t["reachable"] == (t["budget_ms"] >= t["floor_ms"])


def test_startup_markdown_tables(startup):
    out, proc = startup
    md = (out / "s.md").read_text()
    assert md == proc.stdout
    assert "#### 3 backends (15 distributions)" in md
    assert "#### 5 backends (17 distributions)" in md
    assert "| variant | median ms | IQR ms | CPU ms | marginal ms |" in md
    for label in ("PyTorch-style eager autoload", "epload lazy autoload, nothing used",
                  "importlib.metadata", "stevedore cached"):
        assert label in md
    assert "#### Start-up targets, at 5 backends (17 distributions)" in md
    assert md.count("| epload `entry_points(group=)`, `full`: ≤ 1/40 of importlib") == 1
    assert "| target | measured (wall) | CPU time | met | budget ms | floor ms | reachable here |" \
        in md
    assert "floor: empty module linked like `epload._native`" in md
    # Every table row has as many cells as its header.
    for block in md.split("\n\n"):
        rows = [ln for ln in block.splitlines() if ln.startswith("|")]
        if rows:
            assert len({ln.count("|") for ln in rows}) == 1, block


@pytest.mark.skipif(not have_matplotlib(), reason="python3-matplotlib is not installed")
def test_startup_plot_is_a_png(startup):
    out, _ = startup
    w, h = png_size(out / "s.png")
    assert w > 400 and h > 300


@pytest.mark.parametrize("variant,message", [
    ("epload-eager", "the host has 0 of the 3 device attributes"),
    ("pytorch-eager", "the host has 0 of the 3 device attributes"),
    ("epload-lazy", "imported 3 backend module(s) at start"),
    ("epload-ep", "found 0 entry points of 'torch.backends'"),
])
def test_startup_verification_stops_a_broken_variant(tmp_path, variant, message):
    proc = run(STARTUP, "--sizes", "3", *TINY, "--build", BUILD_DIR,
               "--json-out", tmp_path / "s.json", "--break-variant", variant)
    assert proc.returncode == 1, proc.stderr
    assert f"variant {variant} " in proc.stderr
    assert "did not do its job at 3 backends" in proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "s.json").exists()
    assert proc.stdout == ""


def test_startup_first_device_broken_fails_clearly(tmp_path):
    proc = run(STARTUP, "--sizes", "3", *TINY, "--build", BUILD_DIR,
               "--break-variant", "epload-lazy-first")
    assert proc.returncode == 1
    assert "variant epload-lazy-first (epload lazy + first device) failed at 3 backends" \
        in proc.stderr
    assert "AttributeError" in proc.stderr


@pytest.mark.parametrize("args,message", [
    (["--sizes", "0"], "each size must be at least 1"),
    (["--sizes", "a,b"], "comma-separated integers"),
    (["--noise", "-1"], "--noise must be >= 0"),
    (["--import-cost-ms", "-1"], "--import-cost-ms must be >= 0"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--break-variant", "nope"], "invalid choice"),
])
def test_startup_usage_errors(args, message):
    proc = run(STARTUP, *args, "--build", BUILD_DIR)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_startup_without_a_build_says_what_to_do(tmp_path):
    proc = run(STARTUP, "--build", tmp_path)
    assert proc.returncode == 2
    assert f"no built epload package in {tmp_path}/python" in proc.stderr


def test_startup_env_dir_reused(tmp_path):
    args = ["--sizes", "2", *TINY, "--rounds", "1", "--build", BUILD_DIR,
            "--env-dir", tmp_path / "envs"]
    first = run(STARTUP, *args)
    assert first.returncode == 0, first.stderr
    assert "reusing" not in first.stderr
    stamp = tmp_path / "envs" / "python-2-12" / "generated-with.json"
    assert json.loads(stamp.read_text())["argv"][:4] == ["--backends", "2", "--noise", "12"]
    second = run(STARTUP, *args)
    assert second.returncode == 0, second.stderr
    assert "reusing the environment generated earlier" in second.stderr
    # A damaged environment is generated again, not reused.
    site = tmp_path / "envs" / "python-2-12" / "site-packages"
    victim = next(site.glob("gen_backend_*/__init__.py"))
    victim.unlink()
    third = run(STARTUP, *args)
    assert third.returncode == 0, third.stderr
    assert "reusing" not in third.stderr
    assert victim.exists()


# ---- bench_index.py ------------------------------------------------------------

def test_index_harness_reports_budgets_against_floors(tmp_path):
    out = tmp_path / "i.json"
    proc = run(INDEX, "--quick", "--backends", "6", "--noise", "30", "--scaling-sizes", "",
               "--strace", "off", "--hyperfine", "off", "--build", BUILD_DIR,
               "--json-out", out, "--keep")
    assert proc.returncode == 0, proc.stderr
    kept = pathlib.Path(proc.stderr.rsplit("kept ", 1)[1].strip())  # --keep: the list is in it
    try:
        check_index_harness_floors(json.loads(out.read_text()), proc.stdout)
    finally:
        shutil.rmtree(kept)


def check_index_harness_floors(data, md):
    stats = data["main"]["stats"]
    assert {"true", "bare", "importlib", "floor-exe", "floor-full", "epload-exe", "cold", "full",
            "paths"} <= set(stats)
    floor = str(BUILD_DIR / "bench" / "epload_floor")
    cmds = data["main"]["commands"]
    assert cmds["floor-exe"] == [floor]
    assert cmds["floor-full"][:2] == [floor, "--stat"]
    # The list holds what `full` stats: every search path, then every
    # watched file (one per distribution at least), each under its path.
    listed = pathlib.Path(cmds["floor-full"][2]).read_bytes().splitlines()
    search = data["main"]["search_path"]
    assert [ln for ln in listed if ln.endswith(b"\t")] == [p.encode() + b"\t" for p in search]
    watched = [ln.split(b"\t") for ln in listed if not ln.endswith(b"\t")]
    assert len(watched) >= 36 and data["floor_stats"] == len(listed)
    assert all(d.decode() in search and r for d, r in watched)
    # One distribution at least once each (36 = --backends + --noise).
    metadata = {r.split(b"/")[0] for _, r in watched}
    assert len(metadata) == 36, sorted(metadata)
    ran = subprocess.run(cmds["floor-full"], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith(f"{len(listed)} stat calls, ")
    imp = data["main"]["derived"]["importlib_marginal_ms"]
    fl = data["floors"]
    assert set(fl) == {"cold", "full", "paths"}
    for mode, f in fl.items():
        target = data["main"]["ratios"][mode]["target"]
        assert f["budget_ms"] == pytest.approx(imp / target)
        assert f["floor"] == ("floor-full" if mode == "full" else "floor-exe")
        assert f["floor_ms"] == stats[f["floor"]]["median_ms"]
        assert f["reachable"] == (f["budget_ms"] >= f["floor_ms"])
    assert "### The targets' budgets against their floors (same rounds)" in md
    assert "floor: linked like epload, exits at once (`bench/epload_floor`)" in md
    assert f"`epload_floor --stat`: the same {len(listed):,} stat calls on two CPUs" in md
    for block in md.split("\n\n"):
        rows = [ln for ln in block.splitlines() if ln.startswith("|")]
        if rows:
            assert len({ln.count("|") for ln in rows}) == 1, block


def test_index_harness_bad_floor_exe(tmp_path):
    proc = run(INDEX, "--floor-exe", tmp_path / "nope", "--build", BUILD_DIR)
    assert proc.returncode == 2
    assert "--floor-exe" in proc.stderr and "not an executable" in proc.stderr


@pytest.mark.parametrize("args,code,message", [
    (["--stat"], 2, "usage: epload_floor [--stat LIST]"),
    (["--bogus", "x"], 2, "usage: epload_floor [--stat LIST]"),
    (["--stat", "/nonexistent/list"], 1, "epload_floor: cannot open /nonexistent/list"),
])
def test_floor_exe_bad_arguments(args, code, message):
    proc = subprocess.run([str(BUILD_DIR / "bench" / "epload_floor"), *args],
                          capture_output=True, text=True)
    assert proc.returncode == code
    assert message in proc.stderr


def test_floor_exe_help():
    proc = subprocess.run([str(BUILD_DIR / "bench" / "epload_floor"), "--help"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("usage: epload_floor [--stat LIST]")


def test_floor_exe_stats_what_its_list_names(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x")
    lst = tmp_path / "list"
    lst.write_bytes(b"%s\t\n%s\tf\n%s\tmissing\n" % ((str(tmp_path / "d").encode(),) * 3))
    proc = subprocess.run([str(BUILD_DIR / "bench" / "epload_floor"), "--stat", str(lst)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "3 stat calls, 1 of them for names that do not exist\n"
    lst.write_bytes(b"no tab here\n")
    proc = subprocess.run([str(BUILD_DIR / "bench" / "epload_floor"), "--stat", str(lst)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "a line without a tab: no tab here" in proc.stderr


def test_floor_programs_load_epload_libraries_and_do_nothing():
    """The floors are linked like what they stand under: the same shared
    libraries (ldd), and they do nothing (exit 0; an empty module)."""
    def needed(path):
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=True)
        return {ln.split()[0] for ln in out.stdout.splitlines() if "=>" in ln}
    exe = BUILD_DIR / "bench" / "epload_floor"
    assert needed(exe) == needed(BUILD_DIR / "epload")
    assert subprocess.run([str(exe)], capture_output=True).returncode == 0
    module = next((BUILD_DIR / "bench").glob("_epload_floor.*.so"))
    native = next((BUILD_DIR / "python" / "epload").glob("_native.*.so"))
    assert needed(module) == needed(native)
    proc = subprocess.run([PYTHON, "-I", "-S", "-c",
                           f"import sys; sys.path.insert(0, {str(module.parent)!r}); "
                           "import _epload_floor as m; "
                           "print(sorted(k for k in vars(m) if not k.startswith('__')))"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ---- demo.py / demo.sh ----------------------------------------------------------

@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    args = ["--out", out, "--build", BUILD_DIR, "--backends", "6", "--noise", "15",
            "--rounds", "2", "--warmup", "0", "--phase-runs", "1",
            "--startup-sizes", "2", "--startup-noise", "8", "--startup-rounds", "1",
            "--no-torch"]  # step 4 (real torch) is tested in tests/torch/test_demo_torch.py
    proc = run(DEMO, *args)
    assert proc.returncode == 0, proc.stderr
    return out, proc, args


def test_demo_outputs(demo):
    out, proc, _ = demo
    data = json.loads((out / "demo.json").read_text())
    assert set(data["stats"]) == {"bare", "importlib", "importlib-same", "cold", "full", "paths", "eager-cold",
                                  "eager-cached", "eager-paths", "lazy-cold", "lazy-cached",
                                  "lazy-paths"}
    assert all(s["runs"] == 2 for s in data["stats"].values())
    ph = data["phases"]
    for v in ("eager-cold", "eager-cached", "eager-paths"):
        assert ph[v]["backends_loaded"] == 6
    for v in ("lazy-cold", "lazy-cached", "lazy-paths"):
        assert ph[v]["backends_loaded"] == 1
        assert ph[v]["total_us"] >= ph[v]["index_us"] > 0
    manifest = json.loads((out / "env" / "manifest.json").read_text())
    assert manifest["kind"] == "native" and len(manifest["backends"]) == 6
    device = manifest["backends"][3]["device"]
    assert data["config"]["device"] == device
    assert ph["lazy-cached"]["provider"] == manifest["backends"][3]["entry_point"]
    md = (out / "demo.md").read_text()
    assert md in proc.stdout
    assert "**Entry-point lookup**" in md and "**Backend loading**" in md
    assert f"`epload load {device}`" in md
    for block in md.split("\n\n"):
        rows = [ln for ln in block.splitlines() if ln.startswith("|")]
        if rows:
            assert len({ln.count("|") for ln in rows}) == 1, block
    # Step 3 ran, and the files are where the summary says.
    startup = json.loads((out / "startup.json").read_text())
    assert [r["backends"] for r in startup["sizes"]] == [2]
    assert (out / "startup.md").read_text() in proc.stdout
    if have_matplotlib():
        png_size(out / "startup.png")
    for name in ("demo.md", "demo.json", "startup.md", "startup.json", "startup.png"):
        assert str(out / name) in proc.stdout
    assert "Real-PyTorch comparison skipped (--no-torch or EPLOAD_SKIP_TORCH=1)." in proc.stdout


def test_demo_reuses_its_environment(demo):
    out, _, args = demo
    before = (out / "env" / "generated-with.json").stat().st_mtime_ns
    proc = run(DEMO, *args, "--no-startup")
    assert proc.returncode == 0, proc.stderr
    assert "reusing the environment generated earlier" in proc.stderr
    assert (out / "env" / "generated-with.json").stat().st_mtime_ns == before
    # Other arguments: generated again.
    proc = run(DEMO, *[a if a != "6" else "7" for a in map(str, args)], "--no-startup")
    assert proc.returncode == 0, proc.stderr
    assert "reusing" not in proc.stderr
    assert len(json.loads((out / "env" / "manifest.json").read_text())["backends"]) == 7


def test_demo_unknown_device(tmp_path):
    proc = run(DEMO, "--out", tmp_path, "--build", BUILD_DIR, "--backends", "2", "--noise", "3",
               "--rounds", "1", "--no-startup", "--device", "nosuch")
    assert proc.returncode == 1
    assert "--device nosuch: no generated backend provides it" in proc.stderr


def test_demo_never_removes_a_directory_it_did_not_generate(tmp_path):
    mine = tmp_path / "env" / "notes.txt"
    mine.parent.mkdir()
    mine.write_text("keep me")
    proc = run(DEMO, "--out", tmp_path, "--build", BUILD_DIR, "--backends", "2", "--noise", "3",
               "--rounds", "1", "--no-startup")
    assert proc.returncode == 1
    assert f"{tmp_path}/env exists and is not an environment generated by" in proc.stderr
    assert mine.read_text() == "keep me"


def test_demo_without_a_build_says_what_to_do(tmp_path):
    proc = run(DEMO, "--out", tmp_path, "--build", tmp_path / "nothing")
    assert proc.returncode == 2
    assert "/nothing/epload: build first" in proc.stderr and "scripts/demo.sh" in proc.stderr


def test_demo_sh_help_runs_nothing():
    proc = subprocess.run([str(DEMO_SH), "--help"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=dict(os.environ, CI="true"), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: scripts/demo.sh")
    assert "out/demo" in proc.stdout and "--startup-sizes" in proc.stdout
    assert "setup:" not in proc.stderr


# ---- scripts/sanitize.sh -------------------------------------------------------

SANITIZE = SOURCE_DIR / "scripts" / "sanitize.sh"


def test_sanitize_help_prints_its_usage():
    for flag in ("-h", "--help"):
        proc = subprocess.run([str(SANITIZE), flag], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("sanitize.sh — build the unit tests with sanitizers")
        assert "scripts/sanitize.sh thread     one sanitizer set" in proc.stdout
        assert "#" not in proc.stdout and "set -euo" not in proc.stdout
        assert "==" not in proc.stdout and proc.stderr == ""


@pytest.mark.parametrize("sets,message", [
    (["--bogus"], "unknown sanitizer set '--bogus'"),
    (["adress"], "unknown sanitizer set 'adress': expected a comma list of address, undefined, "
                 "thread, leak"),
    (["address,"], "unknown sanitizer set 'address,'"),
    ([""], "unknown sanitizer set ''"),
    (["thread", "address,undefined,memory"], "unknown sanitizer set 'address,undefined,memory'"),
    (["thread,address"], "'thread,address': thread cannot be combined with address or leak"),
])
def test_sanitize_refuses_a_bad_set_before_building(sets, message):
    before = sorted(p.name for p in SOURCE_DIR.glob("build-san-*"))
    proc = subprocess.run([str(SANITIZE), *sets], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr
    assert proc.stdout == ""
    assert sorted(p.name for p in SOURCE_DIR.glob("build-san-*")) == before


# ---- scripts/ab.py ------------------------------------------------------------

AB = SOURCE_DIR / "scripts" / "ab.py"


def test_ab_times_commands_side_by_side():
    proc = run(AB, "--rounds", "4", "--warmup", "1", "--", "/bin/true", "--",
               str(BUILD_DIR / "epload"), "--version")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("A: median ") and lines[0].endswith("/bin/true"), proc.stdout
    assert lines[1].startswith("B: median ") and "paired vs A" in lines[1], proc.stdout
    assert "ratio to A" in lines[1], proc.stdout


def test_ab_settle_times_each_command_right_after_runs_of_itself(tmp_path):
    # Each command writes its letter; with --settle 2 every timed run comes
    # right after two untimed runs of the same command, in every round.
    log = tmp_path / "log"
    cmds = [["/bin/sh", "-c", f"echo {c} >> {log}"] for c in "AB"]
    proc = run(AB, "--rounds", "3", "--warmup", "0", "--settle", "2", "--", *cmds[0], "--", *cmds[1])
    assert proc.returncode == 0, proc.stderr
    letters = log.read_text().split()
    assert sorted(letters) == ["A"] * 9 + ["B"] * 9, letters
    for i in range(0, len(letters), 3):
        assert len(set(letters[i:i + 3])) == 1, letters


@pytest.mark.parametrize("args, code, message", [
    ([], 2, "usage: ab.py"),
    (["--settle", "-1", "--", "/bin/true", "--", "/bin/true"], 2, "--settle"),
    (["--", "/bin/true"], 2, "at least two"),
    (["--", "no-such-command-here", "--", "/bin/true"], 2, "command not found"),
    (["--rounds", "0", "--", "/bin/true", "--", "/bin/true"], 2, "--rounds"),
    (["--rounds", "2", "--", "/bin/true", "--", "/bin/false"], 1, "command failed (exit 1): /bin/false"),
])
def test_ab_bad_input(args, code, message):
    proc = run(AB, *args)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert message in proc.stderr, proc.stderr
