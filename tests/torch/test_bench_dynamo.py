"""scripts/bench_dynamo.py, the first dynamo-backend discovery after
`import torch`, end to end at a tiny size in the torch venv: every variant
was checked to do its job (the stock names; the floor a passing `full` check
of at least every distribution's file), the floor sits in the same table and
target line as the switch, and the Markdown is what was printed.  Real torch,
real processes; no timing is asserted."""

import json
import os
import pathlib
import subprocess

SOURCE = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get('EPLOAD_BUILD_DIR', SOURCE / 'build'))
BENCH = SOURCE / 'scripts' / 'bench_dynamo.py'


def test_floor_beside_the_switch(torch_python, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('EPLOAD_', 'TORCH_'))}
    env.update(EPLOAD_BUILD_DIR=str(BUILD))
    proc = subprocess.run(['/usr/bin/python3', str(BENCH), '--python', torch_python,
                           '--dists', '30', '--rounds', '1', '--pth-rounds', '1',
                           '--env-dir', str(tmp_path / 'env'), '--json-out', str(tmp_path / 'd.json'),
                           '--md-out', str(tmp_path / 'd.md')],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / 'd.json').read_text())
    variants = data['variants']
    assert list(variants) == ['stock', 'switch', 'switch-paths', 'floor']
    for v in variants.values():
        assert v['median_ms'] > 0 and len(v['samples_ms']) == 1 and v['again_ms'] > 0
    stock = variants['stock']['median_ms']
    assert variants['floor']['ratio'] == stock / variants['floor']['median_ms']
    md = (tmp_path / 'd.md').read_text()
    assert md == proc.stdout
    assert '\n| floor | ' in md
    [target] = [ln for ln in md.splitlines() if ln.startswith('Target: switch ≥ 20× cheaper')]
    switch, floor = variants['switch']['ratio'], variants['floor']['ratio']
    verdict = ('met' if switch >= 20 else 'floor binds' if floor < 20
               else f'not met, floor {floor:.1f}×')
    assert target.startswith(f'Target: switch ≥ 20× cheaper than stock: {verdict} '
                             f'(stock ÷ switch {switch:.1f}×, stock ÷ floor {floor:.1f}×;')
