"""A backend author's path, as the README gives it: a pure-Python PrivateUse1
backend ``foo`` that declares its PrivateUse1 device
(``foo = "foo:privateuse1"``, the pyproject spelling of ``foo [privateuse1]``),
built by pip from a pyproject into a fresh venv beside torch 2.13 and epload,
then a tensor moved to the device, first thing, with a new cache (the
README's own commands run in package.docs_commands): the tensor arrives, and
the backend is imported at that first use, not at import."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / 'scripts'))

import torch_env  # noqa: E402

PYPROJECT = '''\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "torch-foo"
version = "0.1"

[project.entry-points."torch.backends"]
foo = "torch_foo:_autoload"

[project.entry-points."epload.devices"]
foo = "foo:privateuse1"

[tool.setuptools]
packages = ["torch_foo"]
py-modules = ["epload_torch_fixture"]
'''

# A first use of the device (the fixture device has the kernels of a copy
# to and from it, not those of printing a tensor on it).
FIRST_USE = '''import torch; x = torch.ones(2).to("foo"); print(x.device, x.cpu().tolist())'''


@pytest.fixture(scope='module')
def venv(torch_python, tmp_path_factory):
    """A new venv: torch 2.13.0, epload from the checkout (pip), and the
    backend built by pip from its pyproject."""
    build = pathlib.Path(os.environ.get('EPLOAD_BUILD_DIR', HERE.parent.parent / 'build')).resolve()
    root = tmp_path_factory.mktemp('declared')
    venv = root / 'venv'
    subprocess.run([torch_env.find_python311(), '-m', 'venv', str(venv)], check=True)
    python = venv / 'bin' / 'python'
    torch_env._pip_install(python, torch_env.TORCH_PIN)
    torch_env.install_epload(python, build)
    project = root / 'torch-foo'
    shutil.copytree(HERE / 'backends' / 'foo' / 'torch_foo', project / 'torch_foo')
    shutil.copy(HERE / 'backends' / 'common' / 'epload_torch_fixture.py', project)
    (project / 'pyproject.toml').write_text(PYPROJECT)
    # setuptools is in a 3.11 venv already: no download for the build.
    torch_env._pip_install(python, '--no-build-isolation', str(project))
    return python, root


def run(venv, code, cwd, **extra):
    python, root = venv
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EPLOAD_', 'TORCH_', 'PYTHON'))}
    env.update(EPLOAD_AUTOLOAD_HOSTS='torch', EPLOAD_CACHE_DIR=str(root / 'cache'),
               EPLOAD_TORCH_FIXTURE_LOG=str(root / 'events'), **extra)
    cwd.mkdir(exist_ok=True)
    return subprocess.run([python, '-c', code], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_a_tensor_moves_to_the_device_on_the_first_run_and_later(venv):
    _, root = venv
    for n in range(2):  # the first run, with nothing learned, and the next one
        got = run(venv, FIRST_USE, root / f'cwd{n}')
        assert got.returncode == 0, got.stderr
        assert got.stdout.strip() == 'foo:0 [1.0, 1.0]', got.stdout
    imports = [line for line in (root / 'events').read_text().splitlines() if ' import ' in line]
    assert len(imports) == 2  # once per process


def test_the_backend_is_imported_at_first_use_not_at_import(venv):
    _, root = venv
    got = run(venv, 'import sys, torch\n'
                    'before = "torch_foo" in sys.modules\n'
                    'x = torch.empty(2, device="foo")\n'
                    'print(before, x.device.type, "torch_foo" in sys.modules)', root / 'cwd-use')
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ['False', 'foo', 'True']
