"""The CLI's JSON is valid JSON whatever bytes a path holds: bytes that are
not UTF-8 are written as the lone surrogates Python's surrogateescape makes
of them ("\\udcXX"), so json.loads gives the str importlib.metadata (and
os.listdir) has, and os.fsencode gives the bytes back."""

import json
import os
import pathlib
import shutil
import subprocess

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
EPLOAD = str(BUILD_DIR / "epload")


def test_non_utf8_path_bytes_are_surrogate_escapes(tmp_path):
    lib = BUILD_DIR / "tests" / "backends" / "tb_npu.so"
    assert lib.exists(), f"build the test backends first: {lib}"
    # \xe9\xff: invalid; \xc3\xa9: valid UTF-8 (é), kept as it is; \xed\xa0\x80:
    # an encoded surrogate, which Python's UTF-8 codec refuses too.
    site = os.fsencode(str(tmp_path)) + b"/site\xe9\xff-\xc3\xa9-\xed\xa0\x80"
    os.makedirs(site + b"/pkg")
    shutil.copyfile(lib, site + b"/pkg/mod.so")
    d = site + b"/tbnpu-1.0.dist-info"
    os.makedirs(d)
    with open(d + b"/METADATA", "w") as f:
        f.write("Metadata-Version: 2.1\nName: tbnpu\nVersion: 1.0\n")
    with open(d + b"/entry_points.txt", "w") as f:
        f.write("[torch.backends]\nnpu = pkg.mod:tb_init\n")
    p = subprocess.run([EPLOAD, "devices", "--json", "--no-cache", "--path", site], capture_output=True)
    assert p.returncode == 0, p.stderr
    assert b"\\udce9\\udcff-\xc3\xa9-\\udced\\udca0\\udc80/pkg/mod.so" in p.stdout
    [backend] = json.loads(p.stdout)["backends"]
    assert backend["library"] == os.fsdecode(site + b"/pkg/mod.so")
    assert os.fsencode(backend["library"]) == site + b"/pkg/mod.so"


def test_unusable_shipped_index_is_said_unasked(tmp_path):
    # EPLOAD_INDEX names a file someone meant to be used: missing, corrupt or
    # foreign, it is said on stderr without --verbose, and the answer comes
    # from a scan (or the cache) all the same.
    site = tmp_path / "site"
    d = site / "one-1.0.dist-info"
    d.mkdir(parents=True)
    (d / "entry_points.txt").write_text("[g]\na = m:f\n")
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("not an index\n")
    foreign = tmp_path / "foreign.json"
    subprocess.run([EPLOAD, "index", "build", "--path", str(site), "--output", str(foreign)],
                   check=True, capture_output=True)
    os.chmod(foreign, 0o666)
    for shipped in (tmp_path / "missing.json", corrupt, foreign):
        env = dict(os.environ, EPLOAD_INDEX=str(shipped), EPLOAD_CACHE_DIR=str(tmp_path / "cache"))
        p = subprocess.run([EPLOAD, "entry-points", "--path", str(site)], env=env,
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("g a = m:f"), p.stdout
        assert p.stderr.count("epload: warning: shipped index") == 1, p.stderr
        assert str(shipped) in p.stderr, p.stderr
