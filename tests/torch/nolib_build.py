"""Builds the torch_nolib fixture's extension (tests/torch/backends/nolib):
``libepload_nolib_dep.so`` into a directory of its own, then
``torch_nolib/_nolib<EXT_SUFFIX>`` linked against it (no rpath), so that the
extension's import fails in the dynamic loader unless that directory is on
``LD_LIBRARY_PATH``: the library is built, linked against, and not shipped."""

import json
import os
import pathlib
import subprocess

SRC = pathlib.Path(__file__).resolve().parent / 'nolib_src'
DEP = 'libepload_nolib_dep.so'


def _facts(python):
    code = ('import json, sysconfig; print(json.dumps([sysconfig.get_paths()["include"], '
            'sysconfig.get_config_var("EXT_SUFFIX")]))')
    return json.loads(subprocess.run([python, '-I', '-c', code], check=True, capture_output=True,
                                     text=True).stdout)


def build(python, package_root, lib_dir):
    """Compiles the dependency into ``lib_dir`` and the extension into
    ``package_root/torch_nolib``; returns the extension's path."""
    include, suffix = _facts(python)
    lib_dir = pathlib.Path(lib_dir)
    lib_dir.mkdir(parents=True, exist_ok=True)
    cc = os.environ.get('CC', 'cc')
    subprocess.run([cc, '-shared', '-fPIC', '-O1', '-o', str(lib_dir / DEP), str(SRC / 'dep.c')],
                   check=True)
    ext = pathlib.Path(package_root) / 'torch_nolib' / ('_nolib' + suffix)
    subprocess.run([cc, '-shared', '-fPIC', '-O1', f'-I{include}', '-o', str(ext), str(SRC / '_nolib.c'),
                    f'-L{lib_dir}', '-lepload_nolib_dep'], check=True)
    return ext
