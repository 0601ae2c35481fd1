"""Subinterpreters of every CPython 3.10-3.13 on this machine get importlib's
answer from an epload installed from the checkout (`pip install <checkout>`
into a venv of that interpreter), never a hang: directly
(`epload.entry_points`) and through EPLOAD_IMPORTLIB=1's patched
`importlib.metadata.entry_points`, with the native module imported by the
main interpreter first or not, in each kind of subinterpreter the version
offers (tests/py/subinterp_probe.py).  An interpreter that is not installed
is skipped, by name."""

import glob
import json
import os

import pytest

from pkgenv import SOURCE_DIR, clean_env, facts, fresh_venv, pip_install_checkout, run

VERSIONS = ('3.10', '3.11', '3.12', '3.13')
PROBE = SOURCE_DIR / 'tests' / 'py' / 'subinterp_probe.py'


def interpreter(version):
    """pyenv's newest CPython `version`, else Debian's /usr/bin/python3 when
    it is that version; None when neither is there."""
    root = os.environ.get('PYENV_ROOT', os.path.expanduser('~/.pyenv'))
    found = sorted(glob.glob(os.path.join(root, 'versions', version + '.*', 'bin', 'python' + version)),
                   key=lambda p: [int(x) for x in p.split('/versions/')[1].split('/')[0].split('.')
                                  if x.isdigit()])
    candidates = found[-1:] + ['/usr/bin/python3']
    for exe in candidates:
        f = facts(exe)
        if f and f['implementation'] == 'cpython' and f['version'] == tuple(map(int, version.split('.'))):
            return f
    return None


@pytest.mark.parametrize('version', VERSIONS)
def test_subinterpreters_get_importlibs_answer(version, tmp_path):
    f = interpreter(version)
    if f is None:
        pytest.skip(f'SKIPPED LOUDLY: no CPython {version} on this machine (pyenv or /usr/bin/python3)')
    root = fresh_venv(f, 'subinterp-venv')
    python = root / 'bin' / 'python'
    pip_install_checkout(python, f)
    site = tmp_path / 'site' / 'shapes_dist-1.0.dist-info'
    site.mkdir(parents=True)
    (site / 'METADATA').write_text('Metadata-Version: 2.1\nName: shapes-dist\nVersion: 1.0\n')
    (site / 'entry_points.txt').write_text('[shapes.group]\none = shapes_mod:one\n')
    for order in ('main-first', 'sub-first'):
        proc = run([python, PROBE, tmp_path, 'shapes.group', order], timeout=300, cwd=tmp_path,
                   env=clean_env(PYTHONPATH=str(tmp_path / 'site'), EPLOAD_IMPORTLIB='1', EPLOAD_DEBUG='1',
                                 EPLOAD_CACHE_DIR=str(tmp_path / 'cache')))
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        assert report['main'] == [['one', 'shapes_mod:one', 'shapes.group']], report
        assert report['runs'] and report['function'] == 'epload._entry_points', report
        for name, got in report['runs'].items():
            assert got['error'] is None and got['answer'] == report['main'], (version, order, name, got)
            assert got['function'] == 'epload._entry_points', (version, order, name, got)
