"""A native library (a backend.h one, no Python module init) registered in
PyTorch's own group, where PyTorch calls every entry point as a Python
callable: epload never loads it as a module.  Lazy: `import torch` works,
with one warning at the user's line, and the library is never mapped;
eager: PyTorch's own error, as stock torch gives; `epload devices` reports
it."""

import json
import os
import pathlib
import shutil
import subprocess

SOURCE = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get('EPLOAD_BUILD_DIR', SOURCE / 'build'))

IMPORT_TORCH = '''
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    line = sys._getframe().f_lineno + 1
    import torch
mine = [[str(w.message), w.filename == '<string>' and w.lineno == line] for w in caught
        if 'vendornpu' in str(w.message)]
with open('/proc/self/maps') as f:
    mapped = 'vendornpu' in f.read()
'''


def native_site(root):
    site = root / 'native-site'
    (site / 'vendornpu').mkdir(parents=True)
    shutil.copyfile(BUILD / 'tests' / 'backends' / 'tb_npu.so', site / 'vendornpu' / '_native.so')
    meta = site / 'vendornpu-1.0.dist-info'
    meta.mkdir()
    (meta / 'METADATA').write_text('Metadata-Version: 2.1\nName: vendornpu\nVersion: 1.0\n')
    (meta / 'entry_points.txt').write_text('[torch.backends]\nvendornpu = vendornpu._native:tb_init\n')
    return site


def test_lazy_import_torch_warns_at_the_users_line_and_never_loads_it(make_env):
    env = make_env('foo')
    site = native_site(env.root)
    path = os.pathsep.join([env.environ()['PYTHONPATH'], str(site)])
    for _ in range(2):  # and the same once the store knows it
        got = env.run(IMPORT_TORCH + 'out(mine=mine, mapped=mapped, foo=str(torch.ones(1).to("foo").device), '
                      'imported="vendornpu._native" in sys.modules)', PYTHONPATH=path)
        assert len(got['mine']) == 1, got['mine']
        message, at_line = got['mine'][0]
        assert at_line and 'native library' in message and 'torch.backends' in message
        assert got['mapped'] is False and got['imported'] is False
        assert got['foo'].startswith('foo')  # the other backends are unharmed


def test_eager_keeps_pytorchs_own_error(make_env):
    env = make_env('foo')
    site = native_site(env.root)
    path = os.pathsep.join([env.environ()['PYTHONPATH'], str(site)])
    got = env.run('out(e=error(lambda: __import__("torch")))', PYTHONPATH=path, EPLOAD_MODE='eager')
    assert got['e']['type'] == 'RuntimeError'
    assert got['e']['message'].startswith('Failed to load the backend extension: vendornpu')
    stock = env.run('out(e=error(lambda: __import__("torch")))', PYTHONPATH=path, EPLOAD_AUTOLOAD_HOSTS=None)
    assert stock['e']['type'] == got['e']['type'] and stock['e']['message'] == got['e']['message']


def test_epload_devices_reports_it(make_env, torch_python):
    env = make_env('foo')
    site = native_site(env.root)
    e = env.environ(PYTHONPATH=os.pathsep.join([env.environ()['PYTHONPATH'], str(site)]))
    proc = subprocess.run([str(pathlib.Path(torch_python).parent / 'epload'), 'devices', '--json',
                           '--python', torch_python], capture_output=True, text=True, env=e, cwd=env.root)
    assert proc.returncode == 0, proc.stderr
    warnings = json.loads(proc.stdout)['warnings']
    assert any("backend 'vendornpu'" in w and 'native library' in w for w in warnings), warnings
    assert "backend 'vendornpu': a native library" in proc.stderr
