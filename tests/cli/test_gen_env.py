"""scripts/gen_env.py: determinism, counts, importlib.metadata as the oracle,
the Python backends' behaviour, and argument errors."""

import json
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
GEN = SOURCE_DIR / "scripts" / "gen_env.py"
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")


def gen(out, *args, check=True):
    # These tests cover the generator's common part and the Python kind;
    # other kinds have tests of their own.
    if "--kind" not in args:
        args = (*args, "--kind", "python")
    proc = subprocess.run([PYTHON, str(GEN), str(out), *map(str, args)],
                          capture_output=True, text=True)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def tree(root):
    """{relative path: bytes or None for directories}."""
    result = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            result[os.path.relpath(os.path.join(dirpath, d), root)] = None
        for f in filenames:
            p = os.path.join(dirpath, f)
            result[os.path.relpath(p, root)] = pathlib.Path(p).read_bytes()
    return result


def manifest(out):
    return json.loads((out / "manifest.json").read_text())


def run_python(code, *args, env=None):
    proc = subprocess.run([PYTHON, "-I", "-c", code, *map(str, args)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


ORACLE = """
import json, sys
from importlib.metadata import entry_points, distributions
site, group = sys.argv[1], sys.argv[2]
sys.path.insert(0, site)
eps = entry_points(group=group)
dists = list(distributions(path=[site]))
print(json.dumps({
    "eps": [[ep.name, ep.value, ep.dist.name, ep.dist.version] for ep in eps],
    "dists": len(dists),
    "groups": sorted(entry_points().groups),
}))
"""


def oracle(site, group="torch.backends"):
    return json.loads(run_python(ORACLE, site, group))


def test_same_arguments_give_identical_trees(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    gen(a, "--backends", 30, "--noise", 200, "--seed", 7, "--import-cost-ms", 1.5)
    gen(b, "--backends", 30, "--noise", 200, "--seed", 7, "--import-cost-ms", 1.5)
    assert tree(a / "site-packages") == tree(b / "site-packages")
    ma, mb = manifest(a), manifest(b)
    assert ma.pop("search_path") == str(a / "site-packages")
    assert mb.pop("search_path") == str(b / "site-packages")
    assert ma == mb
    # Same creation order: on one file system the listing orders then agree.
    assert os.listdir(a / "site-packages") == os.listdir(b / "site-packages")


def test_seed_changes_the_layout(tmp_path):
    gen(tmp_path / "a", "--backends", 20, "--noise", 100, "--seed", 1)
    gen(tmp_path / "b", "--backends", 20, "--noise", 100, "--seed", 2)
    assert tree(tmp_path / "a") != tree(tmp_path / "b")


@pytest.mark.parametrize("backends,noise", [(0, 50), (25, 0), (40, 400)])
def test_importlib_finds_exactly_the_backends(tmp_path, backends, noise):
    out = tmp_path / "env"
    gen(out, "--backends", backends, "--noise", noise)
    m = manifest(out)
    site = m["search_path"]
    assert os.path.isabs(site) and site == str(out / "site-packages")
    assert m["kind"] == "python" and m["distributions"] == backends + noise
    assert len(m["backends"]) == backends
    got = oracle(site)
    # Every distribution is one importlib sees (egg-info files and dirs too).
    assert got["dists"] == backends + noise
    expected = {(b["entry_point"], b["value"], b["dist"], b["version"]) for b in m["backends"]}
    assert len(got["eps"]) == backends
    assert {tuple(e) for e in got["eps"]} == expected
    # Devices are distinct and follow the documented pattern.
    devices = [b["device"] for b in m["backends"]]
    assert devices == [f"dev{i:04d}" for i in range(backends)]
    assert all(b["library"] is None for b in m["backends"])


def test_noise_is_varied(tmp_path):
    out = tmp_path / "env"
    gen(out, "--backends", 5, "--noise", 600)
    groups = set(oracle(str(out / "site-packages"))["groups"])
    assert {"console_scripts", "gui_scripts", "pytest11", "flake8.extension"} <= groups
    # Look-alike groups must not count as backends.
    assert "torch.backend" in groups and "torch.backends.extra" in groups
    names = os.listdir(out / "site-packages")
    assert any(n.endswith(".egg-info") and (out / "site-packages" / n).is_dir() for n in names)
    assert any(n.endswith(".egg-info") and (out / "site-packages" / n).is_file() for n in names)
    dist_infos = [n for n in names if n.endswith(".dist-info")]
    without = [n for n in dist_infos
               if not (out / "site-packages" / n / "entry_points.txt").exists()]
    assert 0 < len(without) < len(dist_infos)


def test_custom_group(tmp_path):
    out = tmp_path / "env"
    gen(out, "--backends", 12, "--noise", 30, "--group", "my.plugins")
    site = str(out / "site-packages")
    assert len(oracle(site, "my.plugins")["eps"]) == 12
    assert oracle(site, "torch.backends")["eps"] == []
    assert manifest(out)["group"] == "my.plugins"


BACKEND_CALL = """
import importlib, os, sys, types
site, value = sys.argv[1], sys.argv[2]
sys.path.insert(0, site)
host = types.ModuleType(os.environ.get("EPLOAD_GEN_HOST", "torch"))
sys.modules[host.__name__] = host
module, attr = value.split(":")
mod = importlib.import_module(module)
print(getattr(mod, attr)())
print(repr(getattr(host, mod.DEVICE, None)), mod.AUTOLOAD_CALLS)
"""


def test_python_backend_registers_its_device_on_the_host(tmp_path):
    out = tmp_path / "env"
    gen(out, "--backends", 3, "--noise", 3)
    b = manifest(out)["backends"][1]
    log = tmp_path / "log"
    env = dict(os.environ, EPLOAD_GEN_LOG=str(log))
    env.pop("EPLOAD_GEN_HOST", None)
    lines = run_python(BACKEND_CALL, out / "site-packages", b["value"], env=env).splitlines()
    assert lines == [b["device"], f"<synthetic device {b['device']}> 1"]
    assert log.read_text() == f"import {b['device']}\nautoload {b['device']}\n"

    env["EPLOAD_GEN_HOST"] = "myhost"
    lines = run_python(BACKEND_CALL, out / "site-packages", b["value"], env=env).splitlines()
    assert lines[1] == f"<synthetic device {b['device']}> 1"


def test_backend_without_host_imported_registers_nothing(tmp_path):
    out = tmp_path / "env"
    gen(out, "--backends", 1, "--noise", 0)
    b = manifest(out)["backends"][0]
    code = ("import importlib, sys; sys.path.insert(0, sys.argv[1]);"
            "m = importlib.import_module(sys.argv[2]); print(m._autoload(), 'torch' in sys.modules)")
    assert run_python(code, out / "site-packages", b["package"]).split() == ["dev0000", "False"]


def test_import_cost_is_written_into_the_backend(tmp_path):
    out = tmp_path / "env"
    gen(out, "--backends", 2, "--noise", 0, "--import-cost-ms", 2.5)
    pkg = manifest(out)["backends"][0]["package"]
    assert "_cost_ns = 2500000\n" in (out / "site-packages" / pkg / "__init__.py").read_text()


def test_force_replaces_a_previous_tree(tmp_path):
    out = tmp_path / "env"
    gen(out, "--backends", 10, "--noise", 10)
    proc = gen(out, "--backends", 4, "--noise", 2, check=False)
    assert proc.returncode == 2 and "not empty" in proc.stderr and "--force" in proc.stderr
    gen(out, "--backends", 4, "--noise", 2, "--force")
    assert len(oracle(str(out / "site-packages"))["eps"]) == 4
    assert len(manifest(out)["backends"]) == 4


def test_help_documents_the_backend_contract():
    proc = subprocess.run([PYTHON, str(GEN), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    for word in ("EPLOAD_GEN_HOST", "_autoload", "manifest.json", "--import-cost-ms", "--force"):
        assert word in proc.stdout


@pytest.mark.parametrize("args,message", [
    (["--backends", "-1", "--noise", "0"], "--backends must be between 0"),
    (["--backends", "1", "--noise", "-5"], "--noise must be between 0"),
    (["--backends", "x", "--noise", "0"], "invalid int value"),
    (["--noise", "3"], "--backends"),
    (["--backends", "1", "--noise", "1", "--kind", "fortran"], "invalid choice"),
    (["--backends", "1", "--noise", "1", "--import-cost-ms", "-1"], "--import-cost-ms"),
    (["--backends", "1", "--noise", "1", "--group", "a]b"], "--group"),
    (["--backends", "1", "--noise", "1", "--group", ""], "must not be empty"),
    (["--backends", "1", "--noise", "1", "--group", " x"], "whitespace"),
])
def test_bad_arguments_are_rejected(tmp_path, args, message):
    proc = gen(tmp_path / "out", *args, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not (tmp_path / "out").exists()


def test_out_that_is_a_file_is_rejected(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    proc = gen(f, "--backends", 1, "--noise", 1, check=False)
    assert proc.returncode == 2 and "not a directory" in proc.stderr


def test_unwritable_out_gives_a_clear_error(tmp_path):
    # A path below a regular file cannot be created, even by root.
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    proc = gen(blocker / "out", "--backends", 1, "--noise", 1, check=False)
    assert proc.returncode == 1
    assert "cannot write" in proc.stderr and "blocker" in proc.stderr
