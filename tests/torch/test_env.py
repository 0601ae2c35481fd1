"""scripts/torch_env.py: the venv is made once and reused; when torch cannot
be installed it fails saying so and naming EPLOAD_SKIP_TORCH=1."""

import json
import os
import pathlib
import subprocess
import sys

SOURCE = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = SOURCE / 'scripts' / 'torch_env.py'


def run(*args, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith(('EPLOAD_', 'PIP_'))}
    full.update(env)
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=full, timeout=1200)


def test_reused_when_its_inputs_are_unchanged(torch_python):
    build = pathlib.Path(torch_python).parents[2]
    stamp = build / 'torch-venv' / 'epload-torch-env.json'
    before = stamp.stat().st_mtime_ns
    got = run('--build', str(build), '--python')
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == torch_python and 'creating' not in got.stderr
    assert stamp.stat().st_mtime_ns == before
    assert json.loads(stamp.read_text())['torch'] == 'torch==2.13.0'


def test_torch_that_cannot_be_installed_fails_naming_the_skip_switch(tmp_path):
    # No index, no configuration (so no local wheel directory): pip finds no torch.
    got = run('--build', str(tmp_path), PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX='1',
              PIP_FIND_LINKS=str(tmp_path))
    assert got.returncode == 2
    assert 'cannot install torch==2.13.0' in got.stderr
    assert 'EPLOAD_SKIP_TORCH=1' in got.stderr


def test_skip_switch_is_reported_not_silent(tmp_path):
    got = run('--build', str(tmp_path), EPLOAD_SKIP_TORCH='1')
    assert got.returncode == 0
    assert got.stdout.startswith('EPLOAD_SKIP_TORCH=1: skipped')
    assert not (tmp_path / 'torch-venv').exists()


def test_a_changed_input_makes_the_venv_again(torch_python, tmp_path):
    sys.path.insert(0, str(SOURCE / 'scripts'))
    import torch_env
    build = pathlib.Path(torch_python).parents[2]
    stamp = build / 'torch-venv' / 'epload-torch-env.json'
    wanted = torch_env.inputs(torch_env.find_python311(), build)
    assert torch_env.up_to_date(stamp, wanted)
    for key, value in (('torch', 'torch==2.12.0'), ('base_version', '3.11.0'),
                       ('env_version', 0)):
        changed = tmp_path / f'{key}.json'
        changed.write_text(json.dumps({**wanted, key: value}))
        assert not torch_env.up_to_date(changed, wanted), key
    corrupt = tmp_path / 'corrupt.json'
    corrupt.write_text('{"torch": ')
    assert not torch_env.up_to_date(corrupt, wanted)
    assert not torch_env.up_to_date(tmp_path / 'missing.json', wanted)


def test_epload_is_pip_installed_in_the_venv_and_reinstalled_when_its_sources_change(torch_python,
                                                                                     tmp_path):
    got = subprocess.run([torch_python, '-I', '-c',
                          'import epload, importlib.metadata as m, sysconfig; '
                          'print(m.version("epload")); print(epload.__file__); '
                          'print(sysconfig.get_paths()["platlib"])'],
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    version, where, site = got.stdout.split('\n')[:3]
    assert version and where.startswith(site)  # a real distribution, not a path into the build
    sys.path.insert(0, str(SOURCE / 'scripts'))
    import torch_env
    tree = tmp_path / 'src'
    (tree / 'src').mkdir(parents=True)
    (tree / 'src' / 'a.cpp').write_text('int a;')
    before = torch_env.epload_digest(tree)
    (tree / 'src' / 'a.cpp').write_text('int b;')
    assert torch_env.epload_digest(tree) != before
