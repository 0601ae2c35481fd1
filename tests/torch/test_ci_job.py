"""README's "Benchmark in CI": the GitHub Actions job's commands, run as
written, in order, in a backend's project directory with a venv's python
first on PATH (the checkout and setup-python steps), at a small size: the
install steps find torch and epload installed (the torch venv, layered) and
install the backend; the bench step's gate is met and its summary written
to $GITHUB_STEP_SUMMARY."""

import json
import os
import pathlib
import subprocess

from user_venv import make_venv

SOURCE = pathlib.Path(__file__).resolve().parents[2]
# The job's size, and the test's: what is replaced in its commands.
SIZES = ('--synthetic 100', '--synthetic 2 --quick')

BACKEND = {
    'pyproject.toml': '[build-system]\nrequires = ["setuptools>=61"]\n'
                      'build-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "torch-ci-backend"\nversion = "1.0"\n\n'
                      '[project.entry-points."torch.backends"]\n'
                      'ci_backend = "torch_ci_backend:_autoload"\n\n'
                      '[tool.setuptools]\npy-modules = ["torch_ci_backend"]\n',
    'torch_ci_backend.py': 'import os\n\n\ndef _autoload():\n'
                           '    os.environ["TORCH_CI_BACKEND"] = "loaded"\n',
}


def job_steps():
    """The `run:` blocks of README's YAML job, in order."""
    text = (SOURCE / 'README.md').read_text()
    section = text.split('## Benchmark in CI', 1)[1]
    yaml = section.split('```yaml\n', 1)[1].split('```', 1)[0]
    steps, lines = [], yaml.splitlines()
    for k, line in enumerate(lines):
        if line.strip() == 'run: |':
            indent = len(line) - len(line.lstrip())
            block = []
            for more in lines[k + 1:]:
                if more.strip() and len(more) - len(more.lstrip()) <= indent:
                    break
                block.append(more)
            width = min(len(b) - len(b.lstrip()) for b in block if b.strip())
            steps.append('\n'.join(b[width:] for b in block))
        elif line.strip().startswith('run:'):
            steps.append(line.split('run:', 1)[1].strip())
    return steps


def test_the_readme_job_runs_as_written(torch_python, tmp_path):
    steps = job_steps()
    assert [s.split()[:3] for s in steps] == [['python', '-m', 'pip'],
                                               ['python', '-m', 'epload.bench']]
    assert SIZES[0] in steps[1] and '--fail-over' in steps[1]
    assert '$GITHUB_STEP_SUMMARY' in steps[1]
    python = make_venv(torch_python, tmp_path / 'venv')
    project = tmp_path / 'backend'
    project.mkdir()
    for name, body in BACKEND.items():
        (project / name).write_text(body)
    summary = tmp_path / 'summary.md'
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('EPLOAD_', 'TORCH_', 'PYTHON', 'VIRTUAL_ENV'))}
    env.update(PATH=f'{python.parent}:{env["PATH"]}', GITHUB_STEP_SUMMARY=str(summary))
    for step in steps:
        proc = subprocess.run(['bash', '-eo', 'pipefail', '-c', step.replace(*SIZES)],
                              cwd=project, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=1500)
        assert proc.returncode == 0, (step, proc.stdout[-2000:], proc.stderr[-3000:])
    data = json.loads((project / 'startup.json').read_text())
    assert [b[0] for b in data['torch']['backends']] == ['ci_backend']
    assert [r['backends'] for r in data['sizes']] == [2]
    assert [t['met'] for t in data['targets']] == [True]
    md = summary.read_text()
    assert md.startswith('### Real PyTorch 2.13.0')
    assert md.split('\n|', 1)[0].count('\n- **met**: epload lazy adds ≤ 2% to `import torch`') == 1
