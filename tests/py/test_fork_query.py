"""A child forked at any moment can query: os.fork() while other threads of
the parent are inside entry_points() (building and refreshing the index,
with the GIL released and the index's locks taken), then entry_points() in
the child, which must answer and exit 0.  PyTorch's DataLoader and
multiprocessing fork this way on Linux.

The parent's threads change the tree between their queries, so that each of
their queries finds the index stale and refreshes it; the child changes it
too before asking, so that its own query must refresh rather than reuse what
it inherited.  A child that hangs (a lock inherited taken, whose owner does
not exist in the child) is ended by its alarm and fails the test."""

import json
import subprocess

from pyfixtures import PYTHON, env_for, make_dist

FORKER = r'''
import json, os, signal, sys, threading, time, warnings
warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork() of a threaded process
import epload

site, rounds, child_limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, site)
GROUP = "fk.group"
stop = threading.Event()
queries = [0, 0]


def rewrite(n, tag):
    # A new value in one distribution's entry_points.txt: the next query
    # under `full` validation finds the index stale.
    path = os.path.join(site, "fk%04d-1.0.dist-info" % n, "entry_points.txt")
    with open(path + ".tmp", "w") as f:
        f.write("[%s]\nfk%04d = fk%04d:%s\n" % (GROUP, n, n, tag))
    os.replace(path + ".tmp", path)


def worker(k):
    i = 0
    while not stop.is_set():
        rewrite(k * 7 + i % 5, "w%d_%d" % (k, i))
        eps = epload.entry_points(group=GROUP) if i % 2 else epload.entry_points()
        assert len(eps) >= 1
        queries[k] += 1
        i += 1


threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(2)]
for t in threads:
    t.start()
while min(queries) < 2:
    time.sleep(0.005)

results = []
for r in range(rounds):
    time.sleep(0.002 * (r % 7))
    pid = os.fork()
    if pid == 0:
        # The child: alone, with what the parent's threads left behind.
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(child_limit)  # a hang ends here, by SIGALRM
        try:
            name = "child%d" % os.getpid()
            d = os.path.join(site, name + "-1.0.dist-info")
            os.mkdir(d)
            with open(os.path.join(d, "METADATA"), "w") as f:
                f.write("Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n" % name)
            with open(os.path.join(d, "entry_points.txt"), "w") as f:
                f.write("[%s]\n%s = %s:main\n" % (GROUP, name, name))
            eps = epload.entry_points(group=GROUP)
            seen = [ep.dist.name for ep in eps if ep.name == name]
            for p in os.listdir(d):
                os.unlink(os.path.join(d, p))
            os.rmdir(d)
            os._exit(0 if seen == [name] else 2)
        except BaseException:
            import traceback
            traceback.print_exc()
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    results.append(status)
    if status != 0:
        break
stop.set()
for t in threads:
    t.join()
print(json.dumps({"statuses": results, "queries": queries,
                  "signals": [os.WTERMSIG(s) for s in results if os.WIFSIGNALED(s)]}))
'''


def test_a_child_forked_during_refreshes_can_query(tmp_path):
    site = tmp_path / "site"
    # Enough distributions that a refresh takes a while: the parent's threads
    # spend much of their time inside one, with the index's locks taken.
    for n in range(1500):
        make_dist(str(site), "fk%04d" % n, entry_points={"fk.group": [f"fk{n:04d} = fk{n:04d}:main"]})
    rounds, child_limit = 30, 30
    proc = subprocess.run([PYTHON, "-c", FORKER, str(site), str(rounds), str(child_limit)],
                          env=env_for(tmp_path), cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=rounds * (child_limit + 10) + 120)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["signals"], f"a forked child hung and was ended by its alarm: {out}\n{proc.stderr[-2000:]}"
    assert out["statuses"] == [0] * rounds, (out, proc.stderr[-3000:])
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-3000:])
