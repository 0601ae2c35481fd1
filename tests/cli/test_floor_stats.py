"""build/bench/_epload_floor_stats, the floor scripts/bench_dynamo.py sets
beside a `full` lookup: it reads the very cache file epload's own lookup
wrote (the same key: search paths and interpreter identity), its check is
still_valid(full) (true on an unchanged environment, false once a watched
file changes, stat'ing every search path and watched file), and bad input
is a clear error.  Real interpreter, real epload, real files; nothing timed."""

import json
import os
import pathlib
import subprocess
import textwrap

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")
GROUP = "floor_test_group"

# Looks `GROUP` up through epload (writing the cache file under `full`), then
# reads that file with the floor module and checks it, touching a watched
# file between two checks when asked.
PROBE = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, {site!r})
    import epload
    names = sorted(ep.name for ep in epload.entry_points(group={group!r}))
    sys.path.insert(0, {floor_dir!r})
    import _epload_floor_stats as floor
    del sys.path[0]
    from epload._entry_points import _INTERPRETER
    index = floor.read(list(sys.path), _INTERPRETER, {group!r})
    out = {{"names": names, "paths": len(sys.path), "first": floor.check(index)}}
    if {touch!r}:
        with open({touch!r}, "a") as f:
            f.write("# changed\\n")
        out["after"] = floor.check(index)
    print(json.dumps(out))
""")


def make_site(root, n=3):
    site = root / "site-packages"
    for i in range(n):
        info = site / f"dist{i}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: dist{i}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[{GROUP}]\nep{i} = mod{i}:obj\n")
    return site


def probe(tmp_path, site, touch="", cache="cache"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EPLOAD_")}
    env.update(PYTHONPATH=str(BUILD_DIR / "python"), XDG_CACHE_HOME=str(tmp_path / cache))
    code = PROBE.format(site=str(site), floor_dir=str(BUILD_DIR / "bench"), group=GROUP,
                        touch=str(touch))
    return subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=env)


def test_floor_checks_what_the_lookup_checks(tmp_path):
    site = make_site(tmp_path)
    touched = site / "dist1-1.0.dist-info" / "entry_points.txt"
    proc = probe(tmp_path, site, touch=touched)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["names"] == ["ep0", "ep1", "ep2"]
    valid, why, stats = out["first"]
    assert valid is True and why == ""
    # Every search path, and at least each distribution's metadata file.
    assert stats >= out["paths"] + 3
    valid, why, _ = out["after"]
    # Named (a stamp newer than the scan) or seen in the stamps' digest.
    assert valid is False and (str(touched) in why or "digest differs" in why), why


def test_floor_bad_input_is_a_clear_error(tmp_path):
    site = make_site(tmp_path)
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(BUILD_DIR / "bench")!r})
        import _epload_floor_stats as floor
        for args in ("not a list", b"", "g"), ([1], b"", "g"), ([{str(site)!r}], b"who", {GROUP!r}):
            try:
                floor.read(*args)
            except (OSError, TypeError) as e:
                print(type(e).__name__, e)
                missing = str(e)
        # A cache file that is not one: said, naming it.
        path = missing.split(": ")[1]
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write("not an index\\n")
        try:
            floor.read([{str(site)!r}], b"who", {GROUP!r})
        except ValueError as e:
            print(type(e).__name__, e)
        try:
            floor.check(None)
        except TypeError as e:
            print(type(e).__name__, e)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EPLOAD_")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "empty"))
    proc = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "TypeError read(): paths must be a list of str (sys.path)"
    assert lines[1] == "TypeError read(): paths[0] is 1, not a str"
    cache_file = f"{tmp_path}/empty/epload/index-"
    assert lines[2].startswith(f"OSError no cache file to check: {cache_file}")
    assert "No such file or directory (a lookup with EPLOAD_VALIDATE=full" in lines[2]
    assert lines[3].startswith(f"ValueError cannot read {cache_file}") and len(lines[3]) > 80
    assert lines[4] == "TypeError check(): the index must be what read() returned, not None"
    assert len(lines) == 5
