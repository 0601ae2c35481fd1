"""`epload entry-points` for a distribution whose METADATA cannot be decoded
(not UTF-8): importlib.metadata.entry_points() answers (the distribution is
named by its directory), but reading `ep.dist.name` or `ep.dist.version`
raises UnicodeDecodeError.  The command answers too (exit 0), and marks the
two fields as unreadable (`null`, with `dist_error` naming the file), in
JSON and in text, from a scan and from the cache.  importlib itself is the
oracle, run here."""

import json
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
EPLOAD = str(BUILD_DIR / "epload")
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")

ORACLE = r'''
import json, sys
sys.path.insert(0, sys.argv[1])  # -I -S: the standard library besides
import importlib.metadata as md
out = []
for ep in md.entry_points(group="g"):
    row = {"name": ep.name}
    for field in ("name", "version"):
        try:
            row["dist_" + field] = getattr(ep.dist, field)
        except Exception as e:
            row["dist_" + field] = "raises " + type(e).__name__
    out.append(row)
print(json.dumps(out))
'''


def dist(site, dirname, metadata, body):
    d = site / dirname
    d.mkdir(parents=True)
    (d / "METADATA").write_bytes(metadata)
    (d / "entry_points.txt").write_text(body)
    return d


@pytest.fixture
def site(tmp_path):
    site = tmp_path / "site"
    dist(site, "good-1.0.dist-info", b"Metadata-Version: 2.1\nName: good\nVersion: 1.0\n", "[g]\ngood = good:main\n")
    bad = dist(site, "bad-2.0.dist-info", b"Metadata-Version: 2.1\nName: caf\xe9\nVersion: 2.0\n",
               "[g]\nbad = bad:main\nbad2 = bad:other\n")
    dist(site, "nameless-3.0.dist-info", b"Metadata-Version: 2.1\nVersion: 3.0\n", "[g]\nnameless = n:main\n")
    return site, bad / "METADATA"


def oracle(site):
    proc = subprocess.run([PYTHON, "-I", "-S", "-c", ORACLE, str(site)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return {r["name"]: r for r in json.loads(proc.stdout)}


def epload(*args):
    return subprocess.run([EPLOAD, "entry-points", *map(str, args)], capture_output=True, text=True, timeout=120)


def test_importlib_answers_and_raises_only_for_the_dist_fields(site):
    root, _ = site
    want = oracle(root)
    assert want["bad"]["dist_name"] == want["bad"]["dist_version"] == "raises UnicodeDecodeError", want
    assert want["good"]["dist_name"] == "good" and want["nameless"]["dist_name"] is None, want


@pytest.mark.parametrize("cached", [False, True], ids=["scan", "cache"])
def test_json_marks_the_unreadable_fields_and_names_the_file(site, tmp_path, cached):
    root, metadata = site
    cache = ["--cache-dir", tmp_path / "cache"] if cached else ["--no-cache"]
    if cached:
        assert epload("--path", root, *cache).returncode == 0  # writes the cache file
    proc = epload("--path", root, "--json", *cache)
    assert proc.returncode == 0, proc.stderr  # importlib's entry_points() answers
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert sorted(rows) == sorted(oracle(root))
    for name in ("bad", "bad2"):
        row = rows[name]
        assert row["dist"] is None and row["version"] is None, row
        assert row["dist_error"].startswith(f"{metadata}: invalid UTF-8 at byte offset 31"), row
        assert "UnicodeDecodeError" in row["dist_error"], row
    assert rows["good"] == {"group": "g", "name": "good", "value": "good:main", "dist": "good", "version": "1.0"}
    # No Name header: importlib's None, "" as before, and nothing unreadable.
    assert rows["nameless"]["dist"] == "" and "dist_error" not in rows["nameless"], rows["nameless"]
    # Said once on stderr, naming the file, as a warning (the answer stands).
    assert proc.stderr.count(str(metadata)) == 1, proc.stderr
    assert "warning" in proc.stderr and "ep.dist.name" in proc.stderr, proc.stderr


def test_text_marks_the_unreadable_fields(site):
    root, metadata = site
    proc = epload("--path", root, "--no-cache", "--group", "g")
    assert proc.returncode == 0, proc.stderr
    lines = {line.split(" ")[1]: line for line in proc.stdout.splitlines()}
    assert lines["bad"] == "g bad = bad:main  [unreadable METADATA]", lines
    assert lines["good"] == "g good = good:main  [good 1.0]", lines
    assert str(metadata) in proc.stderr, proc.stderr
