"""Real plugin hosts with EPLOAD_IMPORTLIB=1: pytest and flake8 (from pip's
configured index, in a venv of the build's interpreter, epload from the
build through a .pth file) find their plugins by walking
importlib.metadata.distributions(); with the switch the walk is answered
from epload's index, and every host behaves as without it: pytest running a
fixture `pytest11` plugin, flake8 a fixture `flake8.extension`, `pip list`.
pluggy's own test suite (its sdist, fetched by pip download) passes with the
switch set."""

import pathlib
import re
import subprocess
import sys
import tarfile

import pytest

from pkgenv import BUILD_DIR, PYTHON, WORK, clean_env, facts, fresh_venv, run

PLUGIN = '''
import pytest

def pytest_report_header(config):
    return "fixture plugin loaded"

@pytest.fixture
def from_plugin():
    return 42
'''

CHECKER = '''
class Checker:
    name = "fixture-checker"
    version = "1.0"

    def __init__(self, tree):
        self.tree = tree

    def run(self):
        yield 1, 0, "XFX001 fixture checker ran", type(self)
'''


@pytest.fixture(scope="module")
def venv():
    """A venv with pytest and flake8, epload from the build."""
    f = facts(PYTHON)
    root = fresh_venv(f, "plugin-hosts")
    py = root / "bin" / "python"
    run([py, "-m", "pip", "install", "-q", "pytest", "flake8"], env=clean_env())
    site = pathlib.Path(run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            env=clean_env()).stdout.strip())
    hook = (BUILD_DIR / "python" / "epload-autoload.pth").read_text().strip()
    (site / "epload-build.pth").write_text(f"{BUILD_DIR / 'python'}\n{hook}\n")
    return root


@pytest.fixture(scope="module")
def plugins(tmp_path_factory):
    """A directory holding the two fixture plugins as installed
    distributions, and a project using them."""
    root = tmp_path_factory.mktemp("hosts")
    site = root / "site"
    for dist, module, code, eps in (
            ("fixture_plug", "fixture_plug", PLUGIN, "[pytest11]\nfixture_plug = fixture_plug\n"),
            ("fixture_flake", "fixture_flake", CHECKER,
             "[console_scripts]\nfixture-flake = fixture_flake:main\n\n"
             "[flake8.extension]\nXFX = fixture_flake:Checker\n")):
        info = site / f"{dist}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(eps)
        (info / "RECORD").write_text(f"{module}.py,,\n")
        (site / f"{module}.py").write_text(code)
    project = root / "project"
    project.mkdir()
    (project / "test_a.py").write_text("def test_a(from_plugin):\n    assert from_plugin == 42\n")
    return site, project


def host(venv, plugins, argv, switch, tmp_path):
    site, project = plugins
    env = clean_env(PYTHONPATH=str(site), EPLOAD_CACHE_DIR=str(tmp_path / "cache"))
    if switch:
        env.update(EPLOAD_IMPORTLIB="1", EPLOAD_DEBUG="1")
    proc = subprocess.run([venv / "bin" / argv[0], *argv[1:]], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)
    return proc


def steady(text):
    return re.sub(r" in [0-9.]+s", "", text)


def test_pytest_runs_its_fixture_plugin_with_the_switch(venv, plugins, tmp_path):
    argv = ["pytest", "-p", "no:cacheprovider", "test_a.py"]
    off = host(venv, plugins, argv, False, tmp_path)
    on = host(venv, plugins, argv, True, tmp_path)
    assert off.returncode == 0, off.stdout + off.stderr
    assert "fixture plugin loaded" in off.stdout and "1 passed" in off.stdout
    assert (on.returncode, steady(on.stdout)) == (off.returncode, steady(off.stdout))
    # The walk was answered from the index, not handed back.
    assert "epload: index" in on.stderr and "using importlib" not in on.stderr, on.stderr


def test_flake8_runs_its_fixture_extension_with_the_switch(venv, plugins, tmp_path):
    argv = ["flake8", "test_a.py"]
    off = host(venv, plugins, argv, False, tmp_path)
    on = host(venv, plugins, argv, True, tmp_path)
    assert "XFX001 fixture checker ran" in off.stdout, off.stdout + off.stderr
    assert (on.returncode, on.stdout) == (off.returncode, off.stdout)
    assert "epload: index" in on.stderr and "using importlib" not in on.stderr, on.stderr


def test_pip_list_is_the_same_with_the_switch(venv, plugins, tmp_path):
    argv = ["python", "-m", "pip", "list", "--disable-pip-version-check"]
    off = host(venv, plugins, argv, False, tmp_path)
    on = host(venv, plugins, argv, True, tmp_path)
    assert off.returncode == 0 and "fixture_plug" in off.stdout.replace("-", "_")
    assert (on.returncode, on.stdout) == (off.returncode, off.stdout)


def test_pluggys_own_test_suite_passes_with_the_switch(venv, tmp_path):
    py = venv / "bin" / "python"
    version = run([py, "-c", "import importlib.metadata as m; print(m.version('pluggy'))"],
                  env=clean_env()).stdout.strip()
    cache = WORK / "sdists"
    cache.mkdir(parents=True, exist_ok=True)
    sdist = next(cache.glob(f"pluggy-{version}.tar.gz"), None)
    if sdist is None:
        run([py, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             "--dest", cache, f"pluggy=={version}"], env=clean_env())
        sdist = next(cache.glob(f"pluggy-{version}.tar.gz"))
    with tarfile.open(sdist) as t:
        t.extractall(tmp_path, filter="data") if sys.version_info >= (3, 12) else t.extractall(tmp_path)
    src = tmp_path / f"pluggy-{version}"
    env = clean_env(EPLOAD_IMPORTLIB="1", EPLOAD_CACHE_DIR=str(tmp_path / "cache"),
                    PYTHONPATH=str(src / "src"))
    proc = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "testing"],
                          cwd=src, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert re.search(r"\d+ passed", proc.stdout)
    # The switch was in effect in the suite's process.
    check = subprocess.run([py, "-c", "import importlib.metadata as m; print(m.distributions.__module__)"],
                           env=env, capture_output=True, text=True)
    assert check.stdout.strip() == "epload._distributions"
