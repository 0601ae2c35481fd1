"""Many processes on one shared environment: 64 Python processes started at
once against one shipped index (`epload index build --output FILE`,
EPLOAD_INDEX) give importlib's answer, all the same, every one from the
shipped index, and none writes a file into its cache directory."""

import json
import os
import subprocess
import sys

from pyfixtures import PACKAGE_DIR, PYTHON

HERE = os.path.dirname(os.path.abspath(__file__))
GEN_ENV = os.path.join(HERE, '..', '..', 'scripts', 'gen_env.py')
GROUP = 'torch.backends'
PROCESSES = 64

LOOKUP = f'''
import json, importlib.metadata, epload, sys
if "--path" in sys.argv:
    print(json.dumps(sys.path))
    raise SystemExit(0)
eps = {{"epload": sorted([e.name, e.value, e.dist.name] for e in epload.entry_points(group={GROUP!r}))}}
if "--oracle" in __import__("sys").argv:
    eps["importlib"] = sorted([e.name, e.value, e.dist.name]
                              for e in importlib.metadata.entry_points(group={GROUP!r}))
print(json.dumps(eps))
'''


def test_64_processes_share_one_shipped_index_and_write_nothing(tmp_path, epload_bin):
    env_dir = tmp_path / 'env'
    subprocess.run([sys.executable, GEN_ENV, str(env_dir), '--backends', '8', '--noise', '400',
                    '--kind', 'python'], check=True, capture_output=True)
    site = str(env_dir / 'site-packages')
    # A script, not `-c`: its directory, not '' (a relative path), is sys.path[0].
    script = tmp_path / 'work' / 'lookup.py'
    script.parent.mkdir()
    script.write_text(LOOKUP)
    base = {k: v for k, v in os.environ.items() if not k.startswith(('EPLOAD_', 'PYTHON'))}
    base['PYTHONPATH'] = os.pathsep.join([PACKAGE_DIR, site])
    # The index is built when the environment is, for the processes' sys.path.
    paths = json.loads(subprocess.run([PYTHON, str(script), '--path'], env=base, check=True,
                                      capture_output=True, text=True).stdout)
    index = env_dir / 'env.index'
    build = subprocess.run([epload_bin, 'index', 'build', '--output', str(index),
                            *[a for p in paths for a in ('--path', p)]],
                           env=dict(base, EPLOAD_CACHE_DIR=str(tmp_path / 'build-cache')),
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    caches = [tmp_path / 'caches' / str(i) for i in range(PROCESSES)]
    procs = []
    for i, cache in enumerate(caches):  # every process started before any is waited for
        env = dict(base, EPLOAD_INDEX=str(index), EPLOAD_CACHE_DIR=str(cache), EPLOAD_DEBUG='1')
        argv = [PYTHON, str(script)] + (['--oracle'] if i == 0 else [])
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    for out, err, rc in outs:
        assert rc == 0, err
        assert 'index shipped' in err, err  # answered from the shipped index, no scan
    answers = [json.loads(out.strip().splitlines()[-1]) for out, _, _ in outs]
    oracle = answers[0].pop('importlib')
    assert len(oracle) == 8 and all(a == {'epload': oracle} for a in answers)
    written = [str(p) for c in caches if c.exists() for p in c.rglob('*')]
    assert written == [], written
