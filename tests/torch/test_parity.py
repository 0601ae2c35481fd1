"""The differential harness: each scenario of tests/torch/parity/scenarios.py
runs in fresh processes under stock autoload (``TORCH_DEVICE_BACKEND_AUTOLOAD=1``,
no hook: the oracle) and under the hook (``EPLOAD_AUTOLOAD_HOSTS=torch``) for
each declaration form, on a first run (empty cache) and a later one, and
with ``EPLOAD_MODE=eager`` where it matters; what a user can observe is
compared field by field (parity/compare.py).  The only differences allowed
are the closed list of parity/allowed.py.  One test per scenario and run;
``-k <scenario>`` runs one scenario's processes only."""

import json
import os
import pathlib
import subprocess

import pytest

from parity import harness, subinterp
from parity.compare import compare
from parity.scenarios import BY_NAME, SCENARIOS

PROBE = pathlib.Path(__file__).resolve().parents[1] / 'py' / 'subinterp_probe.py'


def _cases():
    for s in SCENARIOS:
        runs = [f'hook-{form}-{run}' for form in s.declarations for run in ('first', 'later')]
        for run in runs + (['eager'] if s.eager else []):
            yield pytest.param(s.name, run, id=f'{s.name}-{run}')


@pytest.fixture(scope='session')
def parity_results(torch_python, request, tmp_path_factory):
    """Every selected scenario's processes, run once, a few at a time."""
    wanted = sorted({item.callspec.params['scenario'] for item in request.session.items
                     if hasattr(item, 'callspec') and 'scenario' in item.callspec.params})
    return harness.run_all(torch_python, wanted, tmp_path_factory.mktemp('parity'))


@pytest.mark.parametrize('scenario,run', list(_cases()))
def test_parity(parity_results, scenario, run):
    results = parity_results[scenario]
    diffs, excused = compare(BY_NAME[scenario], results, run)
    report = '\n'.join([f'{scenario} {run}: {len(diffs)} difference(s) from stock autoload:']
                       + [f'  - {d}' for d in diffs]
                       + ['allowed (tests/torch/parity/allowed.py):'] + [f'  + {e}' for e in excused]
                       + [f'processes: {results[run]["dir"]} (stderr of the hook run below)',
                          results[run]['stderr'][-3000:]])
    assert not diffs, report


@pytest.mark.parametrize('version', subinterp.VERSIONS)
def test_subinterpreter_gets_importlibs_answer(version, torch_python, tmp_path):
    """allowed.REQUIRED['subinterpreter'], on each CPython: 3.11 is the torch
    venv's, the others pyenv's with epload installed from the checkout."""
    if version == '3.11':
        python = torch_python
    else:
        base = subinterp.pyenv_pythons().get(version)
        if base is None:
            pytest.skip(f'no CPython {version} under $(pyenv root)/versions')
        python = subinterp.venv_with_epload(base, os.environ.get('EPLOAD_BUILD_DIR', harness.TORCH_TESTS.parents[1] / 'build'), version)
    dirs = harness.make_site(tmp_path, ['pone', 'afoo', 'phook'], 'kind')
    env = harness.environ(dirs, tmp_path / 'cache', tmp_path / 'events', hook=False, extra={})
    _, oracle = subinterp.run(python, subinterp.ORACLE, [], env)
    assert oracle and len(oracle['answer']) == 3, oracle
    # CPython alone first (no epload switch): a failure there is the interpreter's own.
    alone, _ = subinterp.run(python, subinterp.CHILD, [str(tmp_path / 'alone.json'), 'importlib'], env)
    if alone.returncode != 0:
        pytest.skip(f'{python} fails a subinterpreter without epload (exit {alone.returncode}): '
                    f'{alone.stderr.strip()[-300:]}')
    wrong = []
    for mode, extra in (('direct', {}), ('importlib', {'EPLOAD_IMPORTLIB': '1'})):
        proc, got = subinterp.run(python, subinterp.CHILD, [str(tmp_path / f'{mode}.json'), mode],
                                  dict(env, EPLOAD_AUTOLOAD_HOSTS='torch', **extra))
        if proc.returncode != 0 or got != oracle:
            wrong.append(f'{mode}: exit {proc.returncode}, subinterpreter {got} | importlib {oracle}\n'
                         f'{proc.stderr[-1500:]}')
    # Every kind of subinterpreter the version offers, with epload's native
    # module imported by the main interpreter first or not.
    for order in ('main-first', 'sub-first'):
        try:
            proc = subprocess.run([python, str(PROBE), str(tmp_path), 'torch.backends', order],
                                  env=dict(env, EPLOAD_AUTOLOAD_HOSTS='torch', EPLOAD_IMPORTLIB='1'),
                                  capture_output=True, text=True, timeout=120, cwd=tmp_path)
        except subprocess.TimeoutExpired:
            wrong.append(f'{order}: hung (killed after 120 s)')
            continue
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            wrong.append(f'{order}: exit {proc.returncode}\n{proc.stderr[-1500:]}')
            continue
        report = json.loads(lines[-1])
        wrong.extend(f'{order} {name}: {got} | importlib {report["main"]}'
                     for name, got in report['runs'].items()
                     if got['error'] is not None or got['answer'] != report['main'])
    assert not wrong, f'CPython {version} ({python}):\n' + '\n'.join(wrong)
