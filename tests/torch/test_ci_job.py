"""README's "Benchmark in CI": the GitHub Actions job's commands, taken from
README.md (not retyped) and run as printed, in order, in a backend's project
directory with a fresh venv's python first on PATH (the checkout and
setup-python steps): the install steps find torch and epload installed (the
torch venv, layered) and install the backend.  Exit codes: 0 in the
unchanged environment (its first run, without a count baseline, then with
the first run's startup.json committed as the baseline), 1 when the backend
is slowed (400 ms at `import torch`, five more modules: both gates fail),
and matplotlib missing is one line, not a failure."""

import json
import os
import pathlib
import subprocess

from user_venv import make_venv

SOURCE = pathlib.Path(__file__).resolve().parents[2]

PYPROJECT = ('[build-system]\nrequires = ["setuptools>=61"]\n'
             'build-backend = "setuptools.build_meta"\n\n'
             '[project]\nname = "torch-ci-backend"\nversion = "1.0"\n\n'
             '[project.entry-points."torch.backends"]\n'
             'ci_backend = "torch_ci_backend:_autoload"\n\n'
             '[tool.setuptools]\npy-modules = ["torch_ci_backend"]\n')
FAST = 'import os\n\n\ndef _autoload():\n    os.environ["TORCH_CI_BACKEND"] = "loaded"\n'
# No device declared: it runs inside `import torch` even under epload lazy.
SLOW = ('import time\n' + ''.join(f'import ci_extra_{k}\n' for k in range(5))
        + '_end = time.process_time() + 0.4\nwhile time.process_time() < _end:\n    pass\n'
        + FAST)


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


def has_matplotlib(python):
    return subprocess.run([str(python), '-c', 'import matplotlib'],
                          capture_output=True).returncode == 0


def test_the_readme_job_runs_as_printed(torch_python, tmp_path):
    install, bench = job_steps()
    assert install.split()[:3] == ['python', '-m', 'pip']
    assert 'python -m epload.bench' in bench and '--fail-over' in bench
    assert '--fail-count-regression' in bench and '$GITHUB_STEP_SUMMARY' in bench
    python = make_venv(torch_python, tmp_path / 'venv')
    project = tmp_path / 'backend'
    project.mkdir()
    (project / 'pyproject.toml').write_text(PYPROJECT)
    (project / 'torch_ci_backend.py').write_text(FAST)
    summary = tmp_path / 'summary.md'
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('EPLOAD_', 'TORCH_', 'PYTHON', 'VIRTUAL_ENV'))}
    env.update(PATH=f'{python.parent}:{env["PATH"]}', GITHUB_STEP_SUMMARY=str(summary))

    def step(script):
        return subprocess.run(['bash', '-eo', 'pipefail', '-c', script], cwd=project, env=env,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=1500)

    proc = step(install)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    # The first run: no count baseline yet; the wall-time gate met.
    proc = step(bench)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((project / 'startup.json').read_text())
    assert [b[0] for b in data['torch']['backends']] == ['ci_backend']
    assert [(t['rule'], t['met']) for t in data['targets']] == [('whole', True)]
    if not has_matplotlib(python):  # matplotlib missing: said in one line, not a failure
        assert 'no plot written: --plot needs matplotlib (pip install matplotlib)' in proc.stderr
        assert not (project / 'startup.png').exists()
    else:
        assert (project / 'startup.png').read_bytes()[:4] == b'\x89PNG'
    # Committed as the baseline: both gates met in the same environment.
    (project / 'startup.json').rename(project / 'startup-baseline.json')
    proc = step(bench)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((project / 'startup.json').read_text())
    assert [(t['rule'], t['met']) for t in data['targets']] == [('whole', True), ('counts', True)]
    # Slowed: 400 ms and five more modules at `import torch`; both gates fail.
    for k in range(5):
        (project / f'ci_extra_{k}.py').write_text('')
    (project / 'torch_ci_backend.py').write_text(SLOW)
    (project / 'pyproject.toml').write_text(PYPROJECT.replace(
        'py-modules = ["torch_ci_backend"]',
        'py-modules = ["torch_ci_backend"' + ''.join(f', "ci_extra_{k}"' for k in range(5)) + ']'))
    proc = step(install)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = step(bench)
    assert proc.returncode == 1, proc.stderr[-3000:]
    data = json.loads((project / 'startup.json').read_text())
    assert [(t['rule'], t['met']) for t in data['targets']] == [('whole', False),
                                                                ('counts', False)]
    md = summary.read_text()  # the three reports, appended
    assert md.startswith('### Real PyTorch 2.13.0') and md.count('### Real PyTorch') == 3
    assert 'NOT MET' in md.rsplit('### Real PyTorch', 1)[1]
