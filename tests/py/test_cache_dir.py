"""The cache directory as a user meets it, through fresh interpreters (`python
-c`, whose sys.path starts with '', the directory it runs in) and the
`epload` command: a first query from a directory never seen before is a hit
on the file the others share and writes nothing; the answer is importlib's
wherever it runs, a directory holding a distribution included; `python` and
`python3` of one environment share a file; only epload's own files are ever
pruned or cleared, however they are named; `index clear` of a directory that
does not exist creates nothing and starts no interpreter.
"""

import json
import os
import shutil
import subprocess
import time

import pytest

from pyfixtures import BUILD_DIR, PYTHON, make_dist, run_py

EPLOAD = os.path.join(BUILD_DIR, 'epload')

# One query in a fresh interpreter, from the directory it runs in: what
# epload and importlib.metadata answer, and the cache's report.
QUERY = '''
import json, sys, importlib.metadata as im
import epload
from epload import _entry_points as e
ours = [(ep.name, ep.value, ep.dist.name) for ep in epload.entry_points(group='g')]
theirs = [(ep.name, ep.value, ep.dist.name) for ep in im.entry_points(group='g')]
print(json.dumps({'ours': ours, 'theirs': theirs, 'head': sys.path[0]}))
'''


def query(tmp_path, cwd, site, python=PYTHON):
    proc = subprocess.run([python, '-c', QUERY], cwd=str(cwd), capture_output=True, text=True,
                          timeout=120, env=env(tmp_path, site))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out['head'] == ''
    assert out['ours'] == out['theirs']
    out['report'] = proc.stderr
    return out


def env(tmp_path, site):
    from pyfixtures import env_for
    return env_for(tmp_path, pythonpath=[site], extra={'EPLOAD_DEBUG': '1'})


def index_files(cache):
    return sorted(n for n in os.listdir(cache) if n.startswith('index-'))


@pytest.fixture
def site(tmp_path):
    s = tmp_path / 'site'
    make_dist(s, 'alpha', entry_points={'g': ['a = alpha:f']})
    make_dist(s, 'beta', entry_points={'g': ['b = beta:f']})
    return s


def test_a_new_working_directory_is_a_hit_and_writes_nothing(tmp_path, site):
    cache = tmp_path / 'cache'
    first = tmp_path / 'dirs' / 'first'
    first.mkdir(parents=True)
    out = query(tmp_path, first, site)
    assert 'index rebuilt' in out['report'], out['report']
    files = index_files(cache)
    assert len(files) == 1
    for i in range(5):
        d = tmp_path / 'dirs' / f'new{i}'
        d.mkdir()
        (d / 'notes.txt').write_text('not a distribution\n')
        out = query(tmp_path, d, site)
        assert 'index hit' in out['report'], out['report']
    assert index_files(cache) == files


def test_a_working_directory_with_a_distribution_is_answered_with_it(tmp_path, site):
    cache = tmp_path / 'cache'
    plain, project = tmp_path / 'plain', tmp_path / 'project'
    plain.mkdir()
    query(tmp_path, plain, site)
    shared = index_files(cache)
    # An editable install leaves its metadata in the project's directory.
    make_dist(project, 'proj', kind='egg-info', entry_points={'g': ['p = proj:f']})
    out = query(tmp_path, project, site)
    assert ['p', 'proj:f', 'proj'] in out['ours']
    assert len(index_files(cache)) == 2
    shutil.rmtree(project / 'proj-1.0.egg-info')
    out = query(tmp_path, project, site)
    assert 'index hit' in out['report'], out['report']
    assert ['p', 'proj:f', 'proj'] not in out['ours']
    assert set(index_files(cache)) >= set(shared)


def test_one_process_sees_a_distribution_appear_in_its_working_directory(tmp_path, site):
    work = tmp_path / 'work'
    work.mkdir()
    code = '''
    import json, os, sys, importlib.metadata as im
    import epload
    def both():
        ours = [(ep.name, ep.value) for ep in epload.entry_points(group='g')]
        theirs = [(ep.name, ep.value) for ep in im.entry_points(group='g')]
        return ours, theirs
    out = [both()]
    d = os.path.join('w-1.0.dist-info')
    os.mkdir(d)
    open(os.path.join(d, 'METADATA'), 'w').write('Name: w\\nVersion: 1.0\\n')
    open(os.path.join(d, 'entry_points.txt'), 'w').write('[g]\\nw = w:f\\n')
    out.append(both())
    import shutil; shutil.rmtree(d)
    out.append(both())
    print(json.dumps(out))
    '''
    proc = run_py(tmp_path, code, pythonpath=[site], cwd=work)
    steps = json.loads(proc.stdout.strip().splitlines()[-1])
    for ours, theirs in steps:
        assert ours == theirs
    assert ['w', 'w:f'] in steps[1][0] and ['w', 'w:f'] not in steps[2][0]


def test_python_and_python3_of_one_environment_share_the_file(tmp_path, site):
    cache = tmp_path / 'cache'
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    real = os.path.realpath(PYTHON)
    for name in ('python', 'python3'):
        os.symlink(real, bin_dir / name)
    work = tmp_path / 'work'
    work.mkdir()
    query(tmp_path, work, site, python=str(bin_dir / 'python'))
    files = index_files(cache)
    out = query(tmp_path, work, site, python=str(bin_dir / 'python3'))
    assert 'index hit' in out['report'], out['report']
    assert index_files(cache) == files


# ---- which files are epload's ---------------------------------------------------

# Files of other programs named like epload's, in a directory the cache
# shares (EPLOAD_CACHE_DIR set to a project's directory, or $HOME).
THEIRS = {
    'index-en.json': '{"title": "English index"}\n',
    'index-0123456789abcdef.json': '{"format": "another-program"}\n',
    'learned-lessons.txt': 'Lessons learned\n',
    'python-requirements.txt': 'requests==2.31\n',
    'python-0123456789abcdef.txt': 'epload-pytho',  # shorter than the magic
    '.index-notes.json.tmp.AbC123': 'draft\n',
}


def age(path, days):
    t = time.time() - days * 86400
    os.utime(path, (t, t))


def test_look_alike_files_beside_the_cache_survive_pruning_and_clear(tmp_path, site):
    shared = tmp_path / 'project'
    shared.mkdir()
    for name, text in THEIRS.items():
        (shared / name).write_text(text)
        age(shared / name, 400)
    extra = {'EPLOAD_CACHE_DIR': str(shared), 'EPLOAD_DEBUG': '1'}
    # An index file of epload's, unused for 40 days: pruned by the next write.
    run_py(tmp_path, 'import epload; epload.entry_points(group="g")', pythonpath=[tmp_path / 'other'],
           env=extra)
    ours_old = [n for n in os.listdir(shared) if n not in THEIRS]
    assert len(ours_old) == 1 and ours_old[0].startswith('index-'), ours_old
    age(shared / ours_old[0], 40)
    # The Python API writes (a new key) and prunes.
    proc = run_py(tmp_path, 'import epload; epload.entry_points(group="g")', pythonpath=[site], env=extra)
    assert 'index rebuilt' in proc.stderr, proc.stderr
    names = set(os.listdir(shared))
    assert ours_old[0] not in names
    ours_new = names - set(THEIRS)
    assert len(ours_new) == 1
    for name, text in THEIRS.items():
        assert (shared / name).read_text() == text, name
    # The command prunes too (its own index write, and its memo).
    build = subprocess.run([EPLOAD, 'index', 'build', '--path', str(site), '--cache-dir', str(shared)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    for name, text in THEIRS.items():
        assert (shared / name).read_text() == text, name
    ours = set(os.listdir(shared)) - set(THEIRS)
    # And `index clear` removes epload's files only, saying how many.
    clear = subprocess.run([EPLOAD, 'index', 'clear', '--cache-dir', str(shared)],
                           capture_output=True, text=True)
    assert clear.returncode == 0, clear.stderr
    assert clear.stdout.startswith(f'removed {len(ours)} cache file(s) from {shared}'), clear.stdout
    assert sorted(os.listdir(shared)) == sorted(THEIRS)
    for name, text in THEIRS.items():
        assert (shared / name).read_text() == text, name
