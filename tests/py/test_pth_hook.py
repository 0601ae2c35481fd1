"""Zero code change: epload-autoload.pth in a fresh virtual environment that
sees the built package, turned on for an unmodified host by
EPLOAD_AUTOLOAD_HOSTS, off (and free) without it, and gone with the file.
(`pip install` of the checkout, which puts the same file there, and
`pip uninstall` are tested by tests/package/test_pip_install.py.)
"""

import json
import os
import shutil
import subprocess

import pytest

from pyfixtures import PACKAGE_DIR, PYTHON, env_for, make_backend, make_host


PROBE = '''
import json, sys
before = set(sys.modules)
import fakehost
state = {
    "at_import": sorted(m for m in set(sys.modules) - before if m.startswith("be_")),
    "epload": "epload" in sys.modules,
    "importlib.metadata": "importlib.metadata" in sys.modules,
    "switch": __import__("os").environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD"),
}
try:
    state["dev"] = fakehost.be_adev.__name__
except AttributeError as e:
    state["dev"] = "AttributeError: " + str(e)
state["imported"] = sorted(m for m in set(sys.modules) - before if m.startswith("be_"))
state["events"] = [list(e) for e in fakehost._events]
print(json.dumps(state))
'''


@pytest.fixture
def venv(tmp_path):
    """A virtual environment (no pip) whose site-packages sees the built
    package (a path line, as an editable install has) and holds the hook file;
    the host (PyTorch's own eager loop, unmodified) and two backends installed
    in its site-packages."""
    root = tmp_path / 'venv'
    subprocess.run([PYTHON, '-m', 'venv', '--without-pip', str(root)], check=True)
    python = str(root / 'bin' / 'python')
    site = subprocess.run([python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                          check=True, capture_output=True, text=True).stdout.strip()
    # .pth files run in name order: the path line before the hook's.
    with open(os.path.join(site, '_epload_build.pth'), 'w') as f:
        f.write(PACKAGE_DIR + '\n')
    shutil.copyfile(os.path.join(PACKAGE_DIR, 'epload-autoload.pth'), os.path.join(site, 'epload-autoload.pth'))
    make_host(site, 'pytorch')
    make_backend(site, 'be_a', declare=True)
    make_backend(site, 'be_hook', devices=())
    return python, site


def probe(tmp_path, python, extra=None):
    env = env_for(tmp_path, extra=extra)
    env.pop('PYTHONPATH')  # only what is installed in the environment
    proc = subprocess.run([python, '-c', PROBE], env=env, capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stderr
    state = json.loads(proc.stdout.strip().splitlines()[-1])
    state['stderr'] = proc.stderr
    return state


def test_without_the_variable_nothing_changes(tmp_path, venv):
    python, _ = venv
    out = probe(tmp_path, python)
    assert out['epload'] is False  # the .pth line did not even import epload
    assert out['importlib.metadata'] is True  # the host's own (PyTorch) loop ran
    assert out['at_import'] == ['be_a', 'be_hook']


def test_lazy_without_editing_the_host(tmp_path, venv):
    python, _ = venv
    out = probe(tmp_path, python, {'EPLOAD_AUTOLOAD_HOSTS': 'fakehost'})
    assert out['epload'] is True
    assert out['importlib.metadata'] is False  # the host's eager loop was skipped
    assert out['switch'] is None  # and the user's environment is as it was
    assert out['at_import'] == ['be_hook']  # hooks still run; be_a waits
    assert out['dev'] == 'be_a.be_adev' and out['imported'] == ['be_a', 'be_hook']


def test_eager_mode_and_the_pytorch_switch(tmp_path, venv):
    python, _ = venv
    out = probe(tmp_path, python, {'EPLOAD_AUTOLOAD_HOSTS': 'fakehost', 'EPLOAD_MODE': 'eager'})
    assert out['at_import'] == ['be_a', 'be_hook'] and out['importlib.metadata'] is False
    out = probe(tmp_path, python, {'EPLOAD_AUTOLOAD_HOSTS': 'fakehost',
                                   'TORCH_DEVICE_BACKEND_AUTOLOAD': '0'})
    assert out['at_import'] == [] and out['switch'] == '0'
    assert out['dev'].startswith('AttributeError')


def test_other_group_and_host_list_syntax(tmp_path, venv):
    python, site = venv
    make_backend(site, 'be_g', group='fakehost.plugins', devices=('gdev',))
    out = probe(tmp_path, python, {'EPLOAD_AUTOLOAD_HOSTS': ' other , fakehost=fakehost.plugins '})
    # For another group the host's own torch.backends loop is left alone.
    assert out['importlib.metadata'] is True
    assert 'be_g' in out['at_import']


def test_removing_the_hook_file_reverses_it(tmp_path, venv):
    python, site = venv
    os.unlink(os.path.join(site, 'epload-autoload.pth'))
    out = probe(tmp_path, python, {'EPLOAD_AUTOLOAD_HOSTS': 'fakehost'})
    assert out['epload'] is False and out['at_import'] == ['be_a', 'be_hook']


def test_hook_in_a_site_dir_added_at_run_time(tmp_path):
    # The same .pth processed by site.addsitedir on the build tree.
    make_host(tmp_path / 'h', 'plain')
    make_backend(tmp_path / 's', 'be_a', declare=True)
    env = env_for(tmp_path, pythonpath=[tmp_path / 'h', tmp_path / 's'],
                  extra={'EPLOAD_AUTOLOAD_HOSTS': 'fakehost'})
    code = f'import site; site.addsitedir({PACKAGE_DIR!r})\n' + PROBE
    proc = subprocess.run([PYTHON, '-c', code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out['at_import'] == [] and out['dev'] == 'be_a.be_adev'


def test_host_imported_before_the_hook_is_installed(tmp_path):
    make_host(tmp_path / 'h', 'plain')
    make_backend(tmp_path / 's', 'be_a', declare=True)
    env = env_for(tmp_path, pythonpath=[tmp_path / 'h', tmp_path / 's'],
                  extra={'EPLOAD_AUTOLOAD_HOSTS': 'fakehost'})
    code = ('import fakehost\nfrom epload import _hook\n_hook.install()\n'
            'print(fakehost.be_adev.__name__, [type(f).__name__ for f in __import__("sys").meta_path][0])\n'
            '_hook.uninstall()\n'
            'print([type(f).__name__ for f in __import__("sys").meta_path][0])')
    proc = subprocess.run([PYTHON, '-c', code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ['be_a.be_adev', '_HostFinder', proc.stdout.split()[-1]]
    assert proc.stdout.split()[-1] != '_HostFinder'


IMPORTLIB_PROBE = '''
import json, sys
native_at_start = "epload._native" in sys.modules
import importlib.metadata as md
eps = md.entry_points(group="torch.backends")
walk = [[str(d._path), type(d).__name__, [[e.name, e.value, e.group, e.dist is d] for e in d.entry_points]]
        for d in md.distributions()]
print(json.dumps({"module": md.entry_points.__module__, "native_at_start": native_at_start,
                  "answer": [[e.name, e.value, e.dist.name] for e in eps],
                  "walk_module": md.distributions.__module__, "walk": walk,
                  "distribution": str(md.distribution("be_a")._path)}))
'''


@pytest.mark.parametrize('hosts', [None, 'fakehost'])
def test_importlib_switch_in_a_fresh_interpreter(tmp_path, venv, hosts):
    python, _ = venv
    env = env_for(tmp_path, extra={'EPLOAD_AUTOLOAD_HOSTS': hosts} if hosts else None)
    env.pop('PYTHONPATH')

    def run(**extra):
        proc = subprocess.run([python, '-c', IMPORTLIB_PROBE], env=dict(env, **extra), capture_output=True,
                              text=True, cwd=str(tmp_path), timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr

    off, _ = run()
    on, _ = run(EPLOAD_IMPORTLIB='1')
    assert off['module'] == 'importlib.metadata' and on['module'] == 'epload._entry_points'
    assert on['native_at_start'] is False
    assert on['answer'] == off['answer'] and ['be_a', 'be_a:_autoload', 'be_a'] in on['answer']
    # The walk plugin hosts make: epload's, the same objects and entry points.
    assert off['walk_module'] == 'importlib.metadata' and on['walk_module'] == 'epload._distributions'
    assert on['walk'] == off['walk'] and on['distribution'] == off['distribution']
    assert any(['be_a', 'be_a:_autoload', 'torch.backends', True] in row[2] for row in on['walk'])
    # One on/off table for every switch: yes and on are on, a bad value warns and off applies.
    for value in ('yes', 'On'):
        assert run(EPLOAD_IMPORTLIB=value)[0]['module'] == 'epload._entry_points', value
    for value in ('no', 'false', ''):
        assert run(EPLOAD_IMPORTLIB=value)[0]['module'] == 'importlib.metadata', value
    bad, stderr = run(EPLOAD_IMPORTLIB='maybe')
    assert bad['module'] == 'importlib.metadata'
    assert "EPLOAD_IMPORTLIB='maybe' is not one of 1, true, yes, on, 0, false, no, off: using 0" in stderr


def test_a_host_that_is_no_module_is_a_warning_naming_the_close_ones(tmp_path, venv):
    python, _ = venv
    out = probe(tmp_path, python, {'EPLOAD_AUTOLOAD_HOSTS': 'fakehst'})
    assert ("RuntimeWarning: EPLOAD_AUTOLOAD_HOSTS names 'fakehst', but no module 'fakehst' is installed "
            "for this interpreter (close: fakehost") in out['stderr'], out['stderr']
    assert out['at_import'] == ['be_a', 'be_hook']  # the host's own loop, as without the hook
    out = probe(tmp_path, python, {'EPLOAD_AUTOLOAD_HOSTS': 'fakehost'})
    assert 'RuntimeWarning' not in out['stderr'], out['stderr']


@pytest.mark.parametrize('item', ['fakehost=', ' =fakehost.plugins'])
def test_an_item_without_host_or_group_is_left_out_with_a_warning(tmp_path, venv, item):
    python, _ = venv
    out = probe(tmp_path, python, {'EPLOAD_AUTOLOAD_HOSTS': item})
    assert f"RuntimeWarning: EPLOAD_AUTOLOAD_HOSTS item '{item.strip()}' is not host or host=group" \
        in out['stderr'], out['stderr']
    assert out['at_import'] == ['be_a', 'be_hook']  # not autoloaded by epload: the host's own loop ran
