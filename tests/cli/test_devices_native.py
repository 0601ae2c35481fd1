"""`epload devices` and `epload load` for what a listing must tell a vendor
and a user: each backend's status (not a column of "unloaded"), the kind a
device was learned with (privateuse1), a footer true to the mode, a crash in
init, native libraries in PyTorch's group, device names that clash (with
PyTorch's own types or between two backends), and the messages of a load
that found nothing.  Real libraries (tests/backends), real dlopen."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
EPLOAD = BUILD_DIR / "epload"
BACKENDS = BUILD_DIR / "tests" / "backends"
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")


def dist(site, name, group, value, lib_variant=None):
    meta = site / f"{name}-1.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (meta / "entry_points.txt").write_text(f"[{group}]\n{name} = {value}\n")
    if lib_variant:
        (site / name).mkdir()
        shutil.copyfile(BACKENDS / f"{lib_variant}.so", site / name / "_native.so")


def run(tmp_path, site, *args, group="torch.backends", check=None, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("EPLOAD_", "TORCH_"))}
    e.update(env or {})
    proc = subprocess.run([str(EPLOAD), *args, "--group", group, "--path", str(site),
                           "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=120, env=e)
    if check is not None:
        assert proc.returncode == check, (proc.stdout, proc.stderr)
    return proc


def test_status_column_says_what_a_listing_knows(tmp_path):
    site = tmp_path / "site"
    dist(site, "npu", "my.backends", "npu._native:tb_init", "tb_npu")
    dist(site, "flaky", "my.backends", "flaky._native:tb_init", "tb_fail")
    run(tmp_path, site, "load", "tfail", group="my.backends", check=1)
    text = run(tmp_path, site, "devices", group="my.backends", check=0).stdout
    rows = {line.split()[0]: line.split() for line in text.splitlines()[1:] if line.strip()}
    assert text.splitlines()[0].split() == ["DEVICE", "BACKEND", "HOW", "KIND", "STATUS"]
    assert rows["tnpu"][-1] == "ok" and rows["tfail"][-2:] == ["last", "failed"], text
    assert "unloaded" not in text.splitlines()[1]
    # The footer speaks of the mode in force.
    assert "tried again at the first use of its device, lazy mode" in text
    eager = run(tmp_path, site, "devices", group="my.backends", check=0, env={"EPLOAD_MODE": "eager"}).stdout
    assert "tried again at every start, eager mode" in eager
    data = json.loads(run(tmp_path, site, "devices", "--json", group="my.backends", check=0).stdout)
    status = {d["device"]: d["status"] for d in data["devices"]}
    assert status["tnpu"] == "ok" and status["tfail"] == "last failed"


def test_learned_kind_is_shown(tmp_path):
    # A Python host whose probe says how its backend provided a device (as
    # the torch front does for the PrivateUse1 name); the command lists it.
    site = tmp_path / "site"
    dist(site, "pyb", "fakehost.backends", "pyb:_autoload")
    (site / "pyb").mkdir()
    (site / "pyb" / "__init__.py").write_text("def _autoload():\n    pass\n")
    code = (
        "import sys, types, epload, epload._autoload as a\n"
        "host = types.ModuleType('fakehost'); sys.modules['fakehost'] = host\n"
        "a.fronts[('fakehost.backends', 'fakehost')] = types.SimpleNamespace(probe=lambda token: None if token is None and False else ([] if token is None else [('pdev', 'privateuse1')]))\n"
        "epload.autoload('fakehost.backends', host=host)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EPLOAD_")}
    env.update(PYTHONPATH=os.pathsep.join([str(site), str(BUILD_DIR / "python")]),
               EPLOAD_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([PYTHON, "-c", code], check=True, env=env, cwd=str(tmp_path), timeout=120)
    text = subprocess.run([str(EPLOAD), "devices", "--group", "fakehost.backends", "--python", PYTHON],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), check=True).stdout
    row = [line.split() for line in text.splitlines() if line.startswith("pdev")]
    assert row and row[0][3] == "privateuse1", text


def test_a_crash_in_init_is_shown_next_time(tmp_path):
    site = tmp_path / "site"
    dist(site, "crash", "my.backends", "crash._native:tb_init", "tb_crash")
    proc = run(tmp_path, site, "load", "tcrash", group="my.backends")
    assert proc.returncode == -11, (proc.stdout, proc.stderr)
    listed = json.loads(run(tmp_path, site, "devices", "--json", group="my.backends", check=0).stdout)
    b = listed["backends"][0]
    assert b["crashed_at"] and b["crashed_at"].startswith("20") and "crashed in init" in b["last_failure"]
    assert listed["devices"][0]["status"] == "crashed " + b["crashed_at"]
    again = run(tmp_path, site, "load", "tcrash", group="my.backends", check=1)
    assert "crashed in init at" in again.stderr and "EPLOAD_ENABLE" in again.stderr
    proc = run(tmp_path, site, "load", "tcrash", group="my.backends", env={"EPLOAD_ENABLE": "crash"})
    assert proc.returncode == -11


def test_native_library_in_torch_backends_is_reported(tmp_path):
    site = tmp_path / "site"
    dist(site, "npu", "torch.backends", "npu._native:tb_init", "tb_npu")
    proc = run(tmp_path, site, "devices", "--json", check=0)
    warnings = json.loads(proc.stdout)["warnings"]
    assert any("native library" in w and "torch.backends" in w and "'npu'" in w for w in warnings), warnings
    assert "epload: warning: backend 'npu': a native library" in proc.stderr


def test_device_name_clashes_are_warned_about_naming_both(tmp_path):
    site = tmp_path / "site"
    dist(site, "vendorx", "torch.backends", "vendorx._native:tb_init", "tb_xpu")
    dist(site, "npu", "torch.backends", "npu._native:tb_init", "tb_npu")
    dist(site, "othernpu", "torch.backends", "othernpu._native:tb_init", "tb_other_npu")
    proc = run(tmp_path, site, "devices", check=0)
    assert "device 'xpu' of backend 'vendorx' is PyTorch's own device type" in proc.stderr
    both = [line for line in proc.stderr.splitlines() if "device 'tnpu' is also provided by backend" in line]
    assert len(both) == 1 and "'npu'" in both[0] and "'othernpu'" in both[0], proc.stderr
    # Another group has no PyTorch types.
    site2 = tmp_path / "site2"
    dist(site2, "vendorx", "my.backends", "vendorx._native:tb_init", "tb_xpu")
    assert "PyTorch" not in run(tmp_path, site2, "devices", group="my.backends", check=0).stderr


def test_a_load_that_finds_nothing_says_so(tmp_path):
    site = tmp_path / "site"
    dist(site, "npu", "my.backends", "npu._native:tb_init", "tb_npu")
    proc = run(tmp_path, site, "load", "nosuch", group="my.backends", check=1)
    assert "loaded 0 backend(s)" not in proc.stdout and "loaded no backend" in proc.stdout


def test_load_of_a_python_backend_says_where_it_loads(tmp_path):
    site = tmp_path / "site"
    dist(site, "foo", "my.backends", "foo:_autoload")
    (site / "foo").mkdir()
    (site / "foo" / "__init__.py").write_text("def _autoload(): pass\n")
    meta = site / "foo-1.0.dist-info" / "entry_points.txt"
    meta.write_text("[my.backends]\nfoo = foo:_autoload\n[epload.devices]\nfoodev = foo\n")
    proc = run(tmp_path, site, "load", "foodev", group="my.backends", check=1)
    assert "it loads in Python, on the first use of the device" in proc.stderr
    assert "EPLOAD_AUTOLOAD_HOSTS=torch" in proc.stderr and "native (C ABI) backends only" in proc.stderr
