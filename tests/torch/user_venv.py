"""A venv of a test's own over the torch venv: its sys.path holds the torch
venv's site-packages (torch and epload as pip installed them) through a .pth
line, and epload's .pth hook, so that what a test installs into it stays
there."""

import os
import pathlib
import shutil
import subprocess

SOURCE = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get('EPLOAD_BUILD_DIR', SOURCE / 'build'))


def site_packages(venv):
    return next((venv / 'lib').glob('python3*/site-packages'))


def make_venv(torch_python, where, layered=True):
    """A venv whose sys.path holds the torch venv's site-packages (``layered``)
    or only the build's epload package, and epload's .pth hook."""
    subprocess.run([torch_python, '-m', 'venv', '--without-pip', str(where)], check=True)
    site = site_packages(where)
    torch_site = subprocess.run([torch_python, '-c', 'import torch, os; '
                                 'print(os.path.dirname(os.path.dirname(torch.__file__)))'],
                                capture_output=True, text=True, check=True).stdout.strip()
    (site / '00-layer.pth').write_text((torch_site if layered else str(BUILD / 'python')) + '\n')
    shutil.copy(SOURCE / 'python' / 'epload-autoload.pth', site / 'epload-autoload.pth')
    return where / 'bin' / 'python'


def install_backend(python, name, body, group='torch.backends', value=None):
    """A distribution ``name`` whose one entry point of ``group`` is ``value``."""
    site = site_packages(pathlib.Path(python).parent.parent)
    (site / f'{name}.py').write_text(body)
    info = site / f'{name}-1.0.dist-info'
    info.mkdir()
    (info / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n')
    (info / 'entry_points.txt').write_text(f'[{group}]\n{name} = {value or name + ":_autoload"}\n')
