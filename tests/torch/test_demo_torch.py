"""The README's main command (scripts/demo.py, run by scripts/demo.sh) runs the
real-torch comparison as its step 4: scripts/bench_torch.py --quick in the
torch venv, whose table says which torch it measured (version, where) and
whose files are where the summary says.  Tiny sizes; no timing is asserted."""

import json
import os
import pathlib
import subprocess

SOURCE = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get('EPLOAD_BUILD_DIR', SOURCE / 'build'))
DEMO = SOURCE / 'scripts' / 'demo.py'


def test_demo_runs_the_real_torch_comparison(torch_python, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EPLOAD_', 'TORCH_'))}
    env.update(EPLOAD_BUILD_DIR=str(BUILD), CI='true')
    proc = subprocess.run(
        ['/usr/bin/python3', str(DEMO), '--out', tmp_path, '--build', BUILD, '--backends', '2',
         '--noise', '3', '--rounds', '1', '--warmup', '0', '--phase-runs', '1', '--no-startup',
         '--torch-sizes', '0', '--torch-rounds', '2'],
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=1500)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / 'torch.json').read_text())
    assert data['config']['python'] == torch_python
    assert data['torch']['torch'].startswith('2.13.0')
    assert [r['backends'] for r in data['sizes']] == [0]
    md = (tmp_path / 'torch.md').read_text()
    assert md in proc.stdout
    # Which torch: its version and where it was imported from.
    assert md.startswith('### Real PyTorch 2.13.0')
    assert f"from `{data['torch']['torch_dir']}`" in md
    assert str(BUILD / 'torch-venv') in data['torch']['torch_dir']
    for name in ('torch.md', 'torch.json', 'torch.png'):
        assert str(tmp_path / name) in proc.stdout
