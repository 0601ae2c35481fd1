"""`epload devices` and `epload load` on environments from
`scripts/gen_env.py --kind native`: what is loaded (checked with strace where
available), every broken-backend error, modes and switches, learned devices.
Real libraries, real dlopen; no timings are asserted."""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
EPLOAD = BUILD_DIR / "epload"
GEN = SOURCE_DIR / "scripts" / "gen_env.py"
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")
# What gen_env.py names the libraries after: the interpreter's first extension suffix.
EXTENSION_SUFFIX = subprocess.run(
    [PYTHON, "-c", "import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])"],
    capture_output=True, text=True, check=True).stdout.strip()


def generate(out, *args):
    proc = subprocess.run([PYTHON, str(GEN), str(out), *map(str, args)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # Stamps from the clock tick of the generation are not remembered
    # ("racy"); let the tick pass so that the learned store is written.
    time.sleep(0.03)
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    out = tmp_path_factory.mktemp("native")
    m = generate(out, "--kind", "native", "--backends", 16, "--noise", 30,
                 "--undeclared-every", 5, "--broken", "--seed", 3)
    return out, m


def run(site, cache, *args, env_extra=None, check=None, strace=None):
    e = dict(os.environ)
    for k in ("TORCH_DEVICE_BACKEND_AUTOLOAD", "EPLOAD_MODE", "EPLOAD_ENABLE",
              "EPLOAD_DISABLE", "EPLOAD_INDEX"):
        e.pop(k, None)
    e.update(env_extra or {})
    cmd = [str(EPLOAD), *map(str, args), "--path", str(site), "--cache-dir", str(cache)]
    if strace:
        cmd = ["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(strace)] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=120)  # a hang fails
    if check is not None:
        assert proc.returncode == check, (proc.stdout, proc.stderr)
    return proc


def by_broken(m):
    return {b["broken"]: b for b in m["backends"] if b["broken"]}


def healthy(m, declared=True):
    return [b for b in m["backends"] if not b["broken"] and b["declared"] == declared]


def test_manifest_describes_native_backends(env):
    out, m = env
    assert m["kind"] == "native"
    assert len(m["backends"]) == 16
    assert set(by_broken(m)) == {"missing_library", "missing_symbol", "missing_dependency",
                                 "init_fails", "truncated", "not_elf", "abi_mismatch"}
    for b in m["backends"]:
        lib = pathlib.Path(b["library"])
        assert lib.name == "_backend" + EXTENSION_SUFFIX
        assert lib.exists() == (b["broken"] != "missing_library")
    # Copies, not links: every library is its own inode.
    inodes = {os.stat(b["library"]).st_ino for b in m["backends"] if pathlib.Path(b["library"]).exists()}
    assert len(inodes) == 15
    assert healthy(m, declared=False), "some backends must be undeclared"


def test_devices_lists_declared_devices_without_loading(env, tmp_path):
    out, m = env
    trace = tmp_path / "trace"
    proc = run(m["search_path"], tmp_path / "c", "devices", "--json", check=0,
               strace=trace if shutil.which("strace") else None)
    data = json.loads(proc.stdout)
    listed = {d["device"]: d for d in data["devices"]}
    for b in healthy(m):
        assert listed[b["device"]]["backend"] == b["entry_point"]
        assert listed[b["device"]]["how"] == "section"
        assert listed[b["device"]]["state"] == "unloaded"
    for b in healthy(m, declared=False):
        assert b["device"] not in listed
    backends = {b["backend"]: b for b in data["backends"]}
    for b in healthy(m, declared=False):
        assert backends[b["entry_point"]]["devices_known"] is False
    for kind, b in by_broken(m).items():
        if kind == "missing_symbol" or kind == "init_fails" or kind == "missing_dependency":
            continue  # only loading tells
        assert backends[b["entry_point"]]["state"] == "failed", kind
        assert b["entry_point"] in backends[b["entry_point"]]["error"]
    if shutil.which("strace"):
        # Read, never loaded: no library was mmap'ed by the loader; at most
        # opened for its ELF section (and then only by the first run).
        text = trace.read_text()
        assert "ld.so.cache" in text or "openat" in text  # strace worked


def test_lazy_load_loads_only_the_provider(env, tmp_path):
    out, m = env
    target = healthy(m)[-1]
    cache = tmp_path / "c"
    run(m["search_path"], cache, "devices", check=0)  # warm the caches
    trace = tmp_path / "trace"
    use_strace = shutil.which("strace") is not None
    proc = run(m["search_path"], cache, "load", target["device"], "--json", check=0,
               strace=trace if use_strace else None)
    data = json.loads(proc.stdout)
    assert data["ok"] and data["mode"] == "lazy"
    assert data["backend"] == target["entry_point"]
    assert [b["backend"] for b in data["loaded"]] == [target["entry_point"]]
    assert data["loaded"][0]["library"] == target["library"]
    assert data["loaded"][0]["dlopen_us"] > 0
    if use_strace:
        # The one library loaded, plus the unreadable ones, whose ELF checks
        # are repeated on every start (they are never remembered as good).
        opened = {line.split('"')[1] for line in trace.read_text().splitlines()
                  if "_backend" + EXTENSION_SUFFIX in line and "ENOENT" not in line}
        unreadable = {by_broken(m)[k]["library"] for k in ("truncated", "not_elf")}
        assert target["library"] in opened
        assert opened - unreadable == {target["library"]}, opened


@pytest.mark.parametrize("how", ["a file", "group-writable", "missing parent"])
def test_unusable_cache_directory_is_worked_around_and_said(env, tmp_path, how):
    out, m = env
    target = healthy(m)[0]
    good = run(m["search_path"], tmp_path / "good", "load", target["device"], check=0)
    if how == "a file":
        cache = tmp_path / "c"
        cache.write_text("not a directory\n")
    elif how == "group-writable":
        # Its paths would be handed to dlopen: never trusted, never written.
        cache = tmp_path / "c"
        cache.mkdir()
        cache.chmod(0o770)
    else:
        cache = tmp_path / "nowhere" / "c"
        (tmp_path / "nowhere").write_text("")
    for _ in range(2):  # every run says it: every run scans
        proc = run(m["search_path"], cache, "load", target["device"], check=0)
        assert proc.stdout.splitlines()[0] == good.stdout.splitlines()[0]  # the same answer
        warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
        assert len(warnings) == 1, proc.stderr
        assert "not cached" in warnings[0] and "working uncached" in warnings[0]
        assert str(cache if how != "missing parent" else cache.parent) in warnings[0]  # where it failed
    if how == "group-writable":
        assert "writable by group or others" in warnings[0]
        assert list(cache.iterdir()) == []  # nothing written into it
    # --verbose gives the whole report instead, once; --no-cache asks for none.
    verbose = run(m["search_path"], cache, "load", target["device"], "--verbose", check=0)
    assert "warning" not in verbose.stderr and "working uncached" in verbose.stderr
    quiet = run(m["search_path"], cache, "load", target["device"], "--no-cache", check=0)
    assert quiet.stderr == ""


def test_search_path_that_does_not_exist_is_warned_about(env, tmp_path):
    out, m = env
    target = healthy(m)[0]
    typo = tmp_path / "no-such-site"
    e = dict(os.environ)
    cmd = [str(EPLOAD), "load", target["device"], "--path", str(typo), "--path", m["search_path"],
           "--cache-dir", str(tmp_path / "c")]
    for _ in range(2):  # scanned, then from the cache: the same warning
        proc = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"device {target['device']}: ready")  # the answer is unchanged
        assert proc.stderr == f"epload: warning: search path '{typo}' does not exist\n"
    # Every search path exists: not a word.
    assert run(m["search_path"], tmp_path / "c", "load", target["device"], check=0).stderr == ""


def test_eager_loads_everything_in_index_order(env, tmp_path):
    out, m = env
    target = healthy(m)[0]
    proc = run(m["search_path"], tmp_path / "c", "load", target["device"], "--mode", "eager",
               "--json", check=0)
    data = json.loads(proc.stdout)
    assert data["ok"] and data["mode"] == "eager"
    loaded = [b["backend"] for b in data["loaded"]]
    # Every backend in index (manifest) order, except those known to be
    # broken without loading them: no library, not a (complete) ELF file,
    # another ABI.  These are never attempted.
    never = {by_broken(m)[k]["entry_point"]
             for k in ("missing_library", "truncated", "not_elf", "abi_mismatch")}
    # Index order is importlib's (directory-listing order), not creation order.
    eps = json.loads(run(m["search_path"], tmp_path / "c", "entry-points", "--group",
                         "torch.backends", "--json", check=0).stdout)
    expected = [ep["name"] for ep in eps if ep["name"] not in never]
    assert loaded == expected
    states = {b["backend"]: b["state"] for b in data["loaded"]}
    for kind, b in by_broken(m).items():
        if b["entry_point"] not in never:
            assert states[b["entry_point"]] == "failed", kind
    for b in healthy(m) + healthy(m, declared=False):
        assert states[b["entry_point"]] == "ready"


@pytest.mark.parametrize("kind,cause", [
    ("missing_library", "library missing"),
    ("missing_symbol", "init symbol 'gen_backend_init_missing' missing"),
    ("missing_dependency", "a library it depends on is missing: libnb_dep.so"),
    ("init_fails", "init failed (returned -1): synthetic failure"),
    ("truncated", "outside the file (truncated?)"),
    ("not_elf", "not an ELF file"),
    ("abi_mismatch", "ABI version mismatch: the library declares backend ABI 99"),
])
def test_broken_backend_errors(env, tmp_path, kind, cause):
    out, m = env
    b = by_broken(m)[kind]
    proc = run(m["search_path"], tmp_path / "c", "load", b["device"], check=1)
    err = proc.stderr
    assert f"backend '{b['entry_point']}'" in err, err
    assert cause in err, err
    assert f"EPLOAD_DISABLE={b['entry_point']}" in err, err
    assert os.path.dirname(b["library"]) in err, err


def test_broken_backends_do_not_break_others(env, tmp_path):
    out, m = env
    for b in healthy(m)[:2] + healthy(m, declared=False)[:1]:
        proc = run(m["search_path"], tmp_path / "c", "load", b["device"], "--json", check=0)
        assert json.loads(proc.stdout)["backend"] == b["entry_point"]


def test_undeclared_device_is_learned(env, tmp_path):
    out, m = env
    target = healthy(m, declared=False)[0]
    cache = tmp_path / "c"
    first = json.loads(run(m["search_path"], cache, "load", target["device"], "--json",
                           check=0).stdout)
    assert first["loaded"][-1]["backend"] == target["entry_point"]
    listed = json.loads(run(m["search_path"], cache, "devices", "--json", check=0).stdout)
    dev = {d["device"]: d for d in listed["devices"]}[target["device"]]
    assert dev["how"] == "learned" and dev["backend"] == target["entry_point"]
    second = json.loads(run(m["search_path"], cache, "load", target["device"], "--json",
                            check=0).stdout)
    assert [b["backend"] for b in second["loaded"]] == [target["entry_point"]]
    # Without a cache nothing is remembered: the search runs again.
    third = json.loads(run(m["search_path"], tmp_path / "c2", "load", target["device"],
                           "--no-cache", "--json", check=0).stdout)
    assert len(third["loaded"]) >= len(first["loaded"])


def test_relative_search_path_is_not_remembered_and_said(env, tmp_path):
    # Relative to the working directory, a search path names another
    # directory from another one: a record of its libraries could send a
    # later process elsewhere, so none is kept, and --verbose says why.
    out, m = env
    target = healthy(m, declared=False)[0]
    site = pathlib.Path(m["search_path"])
    cmd = [str(EPLOAD), "load", target["device"], "--json", "--verbose",
           "--path", site.name, "--cache-dir", str(tmp_path / "c")]
    runs = [subprocess.run(cmd, capture_output=True, text=True, cwd=site.parent, timeout=120)
            for _ in range(2)]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        assert (f"backends under the relative search path '{site.name}' are not remembered"
                in proc.stderr), proc.stderr
    loaded = [[b["backend"] for b in json.loads(p.stdout)["loaded"]] for p in runs]
    assert loaded[0] == loaded[1] and loaded[0][-1] == target["entry_point"]
    assert len(loaded[0]) > 1  # the search for the undeclared device, both times


def test_unknown_device_lists_known_devices(env, tmp_path):
    out, m = env
    proc = run(m["search_path"], tmp_path / "c", "load", "nosuchdevice", check=1)
    assert "no backend provides device 'nosuchdevice'" in proc.stderr
    assert healthy(m)[0]["device"] in proc.stderr
    assert "failed backends" in proc.stderr


def test_switches(env, tmp_path):
    out, m = env
    target = healthy(m)[0]
    proc = run(m["search_path"], tmp_path / "c", "load", target["device"], check=1,
               env_extra={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert "autoload is off" in proc.stderr
    proc = run(m["search_path"], tmp_path / "c", "load", target["device"], check=1,
               env_extra={"EPLOAD_DISABLE": target["entry_point"]})
    assert "disabled by EPLOAD_DISABLE" in proc.stderr
    proc = run(m["search_path"], tmp_path / "c", "load", target["device"], "--json", check=0,
               env_extra={"EPLOAD_MODE": "eager"})
    assert json.loads(proc.stdout)["mode"] == "eager"
    # A bad value is a warning naming the variable and the accepted values;
    # the default (lazy) applies, as in Python.
    proc = run(m["search_path"], tmp_path / "c", "load", target["device"], "--json", check=0,
               env_extra={"EPLOAD_MODE": "sometimes"})
    assert ("epload: warning: EPLOAD_MODE='sometimes' is not one of lazy, eager, off: using lazy\n"
            == proc.stderr)
    assert json.loads(proc.stdout)["mode"] == "lazy"
    proc = run(m["search_path"], tmp_path / "c", "load", target["device"], "--mode", "off", check=1)
    assert "autoload is off" in proc.stderr


def test_usage_errors(env, tmp_path):
    out, m = env
    assert run(m["search_path"], tmp_path / "c", "load", check=2).stderr.count("DEVICE")
    assert "--mode takes" in run(m["search_path"], tmp_path / "c", "load", "x", "--mode", "fast",
                                 check=2).stderr
    assert "unknown argument" in run(m["search_path"], tmp_path / "c", "devices", "--bogus",
                                     check=2).stderr
    # Not a device name: said before anything is opened or loaded.
    for bad in ("", "two words", "x" * 64, "tab\there"):
        for args in (("load", bad), ("profile", "--device", bad)):
            proc = run(m["search_path"], tmp_path / "c", *args, check=2)
            assert "is not a device name" in proc.stderr and proc.stdout == "", (args, proc.stderr)
    assert not (tmp_path / "c").exists()
    for cmd in ("load", "devices"):
        proc = subprocess.run([str(EPLOAD), cmd, "--help"], capture_output=True, text=True)
        assert proc.returncode == 0 and "usage: epload " + cmd in proc.stdout


def test_python_backends_are_reported(tmp_path):
    out = tmp_path / "py"
    m = generate(out, "--kind", "python", "--backends", 3, "--noise", 2)
    proc = run(m["search_path"], tmp_path / "c", "load", m["backends"][0]["device"], check=1)
    assert "Python backend" in proc.stderr
    listed = run(m["search_path"], tmp_path / "c", "devices", check=0).stdout
    assert "Python backend" in listed


def test_loader_created_during_the_index_check_is_kept_only_if_the_index_is(tmp_path):
    # On a cache hit under `full` with enough files for the two-CPU check,
    # `epload load` creates its loader while the check runs; a stale index
    # must not leave that loader in use.
    out = tmp_path / "big"
    m = generate(out, "--kind", "native", "--backends", 8, "--noise", 700, "--seed", 5)
    cache = tmp_path / "c"
    target = m["backends"][3]
    run(m["search_path"], cache, "devices", check=0)  # warm the caches
    time.sleep(0.03)
    data = json.loads(run(m["search_path"], cache, "load", target["device"], "--json",
                          "--verbose", check=0).stdout)
    two_cpus = len(os.sched_getaffinity(0)) >= 2
    assert data["create_overlapped"] is two_cpus
    assert data["ok"] and data["backend"] == target["entry_point"]
    assert [b["backend"] for b in data["loaded"]] == [target["entry_point"]]

    # Another backend now claims the target's device name in place (same
    # size, mtime restored): the cached index is stale, and the loader made
    # from it while it was checked must not answer.
    other = m["backends"][5]
    dist_info = next(pathlib.Path(m["search_path"]).glob(other["dist"].replace("-", "_") + "-*.dist-info"))
    ep_txt = dist_info / "entry_points.txt"
    before = ep_txt.stat()
    text = ep_txt.read_text()
    assert other["entry_point"] in text
    renamed = text.replace(other["entry_point"] + " =", other["entry_point"][:-1] + "Z =")
    assert renamed != text and len(renamed) == len(text)
    ep_txt.write_text(renamed)
    os.utime(ep_txt, ns=(before.st_atime_ns, before.st_mtime_ns))
    proc = run(m["search_path"], cache, "load", other["device"], "--json", "--verbose", check=0)
    data = json.loads(proc.stdout)
    assert data["create_overlapped"] is False, proc.stderr
    assert "refreshed" in proc.stderr and "entry_points.txt" in proc.stderr, proc.stderr
    assert data["backend"] == other["entry_point"][:-1] + "Z"


def test_fifo_in_place_of_the_learned_store_does_not_hang(env, tmp_path):
    out, m = env
    site, cache = m["search_path"], tmp_path / "c"
    run(site, cache, "devices", check=0)  # writes the learned store
    store = next(cache.glob("learned-*.txt"))
    store.unlink()
    os.mkfifo(store, 0o600)  # opening it for reading would wait for a writer
    b = healthy(m)[0]
    proc = run(site, cache, "load", b["device"], "--verbose", check=0)
    assert "not a regular file" in proc.stderr, proc.stderr
    assert store.is_file()  # replaced by a real store, atomically


def test_fifo_named_like_a_library_is_passed_over(tmp_path):
    """importlib's isfile() is false for a FIFO, so it is not the module; the
    resolver must pass it over too, without opening it for good."""
    m = generate(tmp_path / "env", "--kind", "native", "--backends", 2, "--noise", 0)
    b = m["backends"][0]
    os.unlink(b["library"])
    os.mkfifo(b["library"], 0o600)
    proc = run(m["search_path"], tmp_path / "c", "devices", "--json", check=0)
    backends = {x["backend"]: x for x in json.loads(proc.stdout)["backends"]}
    assert backends[b["entry_point"]]["state"] == "failed", backends
    assert "library missing" in backends[b["entry_point"]]["error"], backends
    assert backends[m["backends"][1]["entry_point"]]["state"] == "unloaded", backends


def _fd_limit(n):
    """preexec_fn: the child may open `n` descriptors past stdin, stdout and
    stderr."""
    import resource

    def apply():
        resource.setrlimit(resource.RLIMIT_NOFILE, (3 + n, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    return apply


def test_running_out_of_descriptors_fails_and_caches_nothing(env, tmp_path):
    # A scan that runs out of file descriptors has no answer: it must say so
    # (and what to do), and leave no cache behind whose "cannot read" errors a
    # later run, with descriptors to spare, would serve.
    out, m = env
    site, cache = m["search_path"], tmp_path / "cache"
    base = [str(EPLOAD), "entry-points", "--path", site, "--cache-dir", str(cache), "--json"]
    proc = subprocess.run(base, capture_output=True, text=True, preexec_fn=_fd_limit(1), timeout=120)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Too many open files" in proc.stderr and "ulimit -n" in proc.stderr, proc.stderr
    assert not list(cache.glob("index-*.json")) if cache.exists() else True
    fresh = run(site, tmp_path / "fresh", "entry-points", "--json", "--no-cache", check=0).stdout
    cached = run(site, cache, "entry-points", "--json", check=0).stdout
    assert cached == fresh
    # A warm cache, then an install: the rescan runs out too, and the next
    # run (descriptors to spare) sees the install.
    site2 = tmp_path / "site2"
    shutil.copytree(site, site2, symlinks=True)
    again = [str(EPLOAD), "entry-points", "--path", str(site2), "--cache-dir", str(cache), "--json"]
    assert subprocess.run(again, capture_output=True, timeout=120).returncode == 0
    (site2 / "late-1.0.dist-info").mkdir()
    (site2 / "late-1.0.dist-info" / "entry_points.txt").write_text("[torch.backends]\nlate = late:init\n")
    time.sleep(0.03)
    proc = subprocess.run(again, capture_output=True, text=True, preexec_fn=_fd_limit(1), timeout=120)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Too many open files" in proc.stderr, proc.stderr
    proc = subprocess.run(again, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert '"name":"late"' in proc.stdout
    fresh2 = run(site2, tmp_path / "fresh2", "entry-points", "--json", "--no-cache", check=0).stdout
    assert proc.stdout == fresh2


def _cpu_seconds(pid):
    """User + system CPU time of a running process, from /proc (0 once gone)."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_cache_file_truncated_while_mapped_is_an_explained_bus_error(env, tmp_path):
    if "EPLOAD_TEST_HOOKS:BOOL=ON" not in (BUILD_DIR / "CMakeCache.txt").read_text():
        pytest.skip("built without -DEPLOAD_TEST_HOOKS=ON: no EPLOAD_TEST_SLOWDOWN to hold the run")
    # The CLI reads cache files through mappings of them (src/base/memory.hpp).
    # Another program truncating one in place while a run has it mapped costs
    # that run a SIGBUS, explained on stderr, and nothing more: the next run finds the empty file and rebuilds.  The run is held inside
    # its validation (after the read) by EPLOAD_TEST_SLOWDOWN.
    out, m = env
    site, cache = m["search_path"], tmp_path / "cache"
    want = run(site, cache, "entry-points", "--group", "torch.backends", "--json", check=0).stdout
    (cache_file,) = cache.glob("index-*.json")
    e = dict(os.environ, EPLOAD_TEST_SLOWDOWN="validate:3000000")  # 3 s of CPU, after the read
    proc = subprocess.Popen([str(EPLOAD), "entry-points", "--group", "torch.backends", "--json", "--path", site,
                             "--cache-dir", str(cache)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=e)
    deadline = time.monotonic() + 60
    while _cpu_seconds(proc.pid) < 0.3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # the read takes milliseconds; 0.3 s of CPU is the slowdown
    os.truncate(cache_file, 0)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGBUS, (proc.returncode, stdout, stderr)
    assert "epload: bus error" in stderr and "truncated" in stderr and "run the command again" in stderr, stderr
    again = run(site, cache, "entry-points", "--group", "torch.backends", "--json", "-v", check=0)
    assert again.stdout == want
    assert "rebuilt" in again.stderr and "empty" in again.stderr, again.stderr


def _needed(path):
    """The DT_NEEDED names of an ELF file (readelf -d)."""
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def test_cpp_backend_that_throws_is_a_failed_backend_not_a_crash(tmp_path):
    """A C++ backend brings libstdc++.so; when the CLI carries its own static
    copy (simdjson compiled in, see CMakeLists.txt), the exception crosses
    from one copy to the other.  It must still be caught at the boundary and
    reported with its message, and the process must go on to the next
    device."""
    site = tmp_path / "site"
    for dist, variant in (("thrower", "tb_throw"), ("npu", "tb_npu")):
        (site / dist).mkdir(parents=True)
        shutil.copyfile(BUILD_DIR / "tests" / "backends" / f"{variant}.so", site / dist / "_native.so")
        meta = site / f"{dist}-1.0.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (meta / "entry_points.txt").write_text(f"[torch.backends]\n{dist} = {dist}._native:tb_init\n")
    proc = run(site, tmp_path / "c", "load", "tthrow", check=1)
    assert "backend 'thrower'" in proc.stderr, proc.stderr
    assert "init threw a C++ exception: driver table corrupt" in proc.stderr, proc.stderr
    proc = run(site, tmp_path / "c", "load", "tthrow", "--mode", "eager", "--json", check=1)
    loaded = {b["backend"]: b for b in json.loads(proc.stdout)["loaded"]}
    assert loaded["thrower"]["state"] == "failed", loaded
    assert loaded["npu"]["state"] == "ready", loaded  # the next backend still loads


def test_version_names_how_simdjson_is_linked_and_the_binary_agrees():
    version = subprocess.run([str(EPLOAD), "--version"], capture_output=True, text=True, check=True).stdout
    needed = _needed(EPLOAD)
    assert version.startswith("epload ") and ("compiled in" in version) != ("shared library" in version), version
    assert any(n.startswith("libsimdjson") for n in needed) == ("shared library" in version), (version, needed)
    assert ("libstdc++.so.6" in needed) == ("libstdc++ shared" in version), (version, needed)
    assert ("libstdc++ static" in version) <= ("compiled in" in version), version
