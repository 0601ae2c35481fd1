"""The vendor's path of docs/backends.md, as written: its example (the C
source, the setuptools and the scikit-build-core packaging, taken from the
guide's code blocks) built by pip against ``epload.get_include()`` of the
epload pip installed in the venv, installed beside it, and loaded lazily by
the command, a Python host and a C++ host (built against this build's
libraries), in either order of use.  Runs in the torch layer's venv: the one
where pip installed epload."""

import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get('EPLOAD_BUILD_DIR', SOURCE / 'build'))
GUIDE = SOURCE / 'docs' / 'backends.md'
FLAVORS = ('setuptools', 'scikit-build-core')


def guide_files():
    """{path: text} of every code block of the guide whose info string names
    a file (```c my_npu/_native.c)."""
    blocks = re.findall(r'^```\w+ (\S+)\n(.*?)^```', GUIDE.read_text(), re.S | re.M)
    return dict(blocks)


def ask(python, code):
    return subprocess.run([python, '-c', code], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope='module')
def installed(torch_python, tmp_path_factory):
    """flavor -> the site directory pip installed the example into."""
    root = tmp_path_factory.mktemp('vendor')
    files = guide_files()
    assert {'my_npu/_native.c', 'setuptools/pyproject.toml', 'setuptools/setup.py',
            'scikit-build-core/pyproject.toml', 'scikit-build-core/CMakeLists.txt'} <= set(files)
    missing = [m for m in ('setuptools', 'scikit_build_core')
               if subprocess.run([torch_python, '-c', f'import {m}'], capture_output=True).returncode]
    if missing:  # the build backends, for a build without isolation (epload is on no index here)
        subprocess.run([torch_python, '-m', 'pip', 'install', '-q',
                        *[m.replace('_', '-') for m in missing]], check=True)
    sites = {}
    for flavor in FLAVORS:
        tree = root / flavor
        (tree / 'my_npu').mkdir(parents=True)
        (tree / 'my_npu' / '__init__.py').write_text('')
        (tree / 'my_npu' / '_native.c').write_text(files['my_npu/_native.c'])
        for name, text in files.items():
            if name.startswith(flavor + '/'):
                (tree / name.split('/', 1)[1]).write_text(text)
        site = root / f'site-{flavor}'
        proc = subprocess.run([torch_python, '-m', 'pip', 'install', '-q', '--no-build-isolation', '--no-deps',
                               '--target', str(site), str(tree)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        sites[flavor] = site
    return sites


def environ(site, cache):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EPLOAD_', 'TORCH_', 'PYTHON'))}
    env.update(PYTHONPATH=str(site), EPLOAD_CACHE_DIR=str(cache), PYTHONNOUSERSITE='1')
    return env


PYTHON_HOST = '''
import ctypes, json, sys, types, epload
host = types.ModuleType("myhost")
epload.autoload("myhost.backends", host=host)
lib = sys.modules.get("my_npu._native")
with open("/proc/self/maps") as f:
    before = "my_npu" in f.read()
d = epload.device("npu")
class Table(ctypes.Structure):
    _fields_ = [("magic", ctypes.c_uint), ("ping", ctypes.CFUNCTYPE(ctypes.c_int))]
t = Table.from_address(d.table)
print(json.dumps(dict(type=type(d).__name__, before=before, magic=t.magic, ping=t.ping(),
                      imported="my_npu._native" in sys.modules)))
'''


@pytest.fixture(scope='module')
def cpp_host(tmp_path_factory):
    """A C++ host of this build's libraries: lookup(argv[2]) on search path argv[1]."""
    out = tmp_path_factory.mktemp('cpp')
    src = out / 'host.cpp'
    src.write_text('''
#include <epload/cache.hpp>
#include <epload/loader.hpp>
#include <cstdio>
int main(int, char** argv) {
  epload::CacheOptions co;
  co.search_paths = {argv[1]};
  auto index = epload::open_index(co);
  if (!index) return 2;
  epload::LoaderOptions lo;
  lo.group = "myhost.backends";
  auto loader = epload::Loader::create(*index, lo);
  if (!loader) return 2;
  (*loader)->start();
  auto t = (*loader)->lookup(argv[2]);
  if (!t) { std::fprintf(stderr, "%s\\n", t.error().message.c_str()); return 1; }
  struct Table { unsigned magic; int (*ping)(); };
  std::printf("%d\\n", static_cast<Table*>(*t)->ping());
}
''')
    libs = [f'-lepload_{layer}' for layer in ('loader', 'cache', 'scan', 'index', 'profile', 'base')]
    subprocess.run(['g++', '-std=c++20', '-O1', str(src), '-I', str(SOURCE / 'include'), f'-L{BUILD}', *libs,
                    '-ldl', '-lpthread', '-o', str(out / 'host')], check=True)
    return out / 'host'


@pytest.mark.parametrize('flavor', FLAVORS)
def test_pip_built_the_interpreters_file_name_against_the_shipped_header(installed, torch_python, flavor):
    suffix = ask(torch_python, 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    assert (installed[flavor] / 'my_npu' / ('_native' + suffix)).is_file()
    include = pathlib.Path(ask(torch_python, 'import epload; print(epload.get_include())'))
    assert (include / 'epload' / 'backend.h').is_file() and 'site-packages' in include.parts


@pytest.mark.parametrize('order', [('cli', 'python', 'cpp'), ('python', 'cpp', 'cli'), ('cpp', 'cli', 'python')])
@pytest.mark.parametrize('flavor', FLAVORS)
def test_every_front_loads_it_lazily_in_any_order(installed, torch_python, cpp_host, tmp_path, flavor, order):
    site = installed[flavor]
    env = environ(site, tmp_path / 'cache')
    epload_cmd = str(pathlib.Path(torch_python).parent / 'epload')
    for front in order:
        if front == 'cli':
            listing = json.loads(subprocess.run(
                [epload_cmd, 'devices', '--group', 'myhost.backends', '--python', torch_python, '--json'],
                capture_output=True, text=True, env=env, cwd=tmp_path, check=True).stdout)
            assert [(d['device'], d['how']) for d in listing['devices']] == [('npu', 'section')]
            got = json.loads(subprocess.run(
                [epload_cmd, 'load', 'npu', '--group', 'myhost.backends', '--python', torch_python, '--json'],
                capture_output=True, text=True, env=env, cwd=tmp_path).stdout)
            assert got['ok'] and [b['backend'] for b in got['loaded']] == ['npu'], got
        elif front == 'python':
            proc = subprocess.run([torch_python, '-c', PYTHON_HOST], capture_output=True, text=True, env=env,
                                  cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
            got = json.loads(proc.stdout.splitlines()[-1])
            assert got == {'type': 'NativeDevice', 'before': False, 'magic': 0x6e707531, 'ping': 42,
                           'imported': False}, got
        else:
            proc = subprocess.run([str(cpp_host), str(site), 'npu'], capture_output=True, text=True, env=env)
            assert (proc.returncode, proc.stdout.strip()) == (0, '42'), proc.stderr
