"""`epload index show` names the '' search path (python -c's current
directory) and answers --json; `epload index build --output FILE` of a
sys.path that starts with '' says what to do (PYTHONSAFEPATH=1, or --path)
and works once that is done."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
EPLOAD = str(BUILD_DIR / "epload")
PYTHON = os.environ.get("EPLOAD_PYTHON", "/usr/bin/python3")


def env_for(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "EPLOAD_"))}
    env["EPLOAD_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(extra)
    return env


def epload(tmp_path, *args, **extra):
    return subprocess.run([EPLOAD, *args], env=env_for(tmp_path, **extra), cwd=tmp_path,
                          capture_output=True, text=True)


def truth(tmp_path, **extra):
    p = subprocess.run([PYTHON, "-c", "import sys, json; print(json.dumps(sys.path))"],
                       env=env_for(tmp_path, **extra), cwd=tmp_path, capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def test_show_names_the_current_directory_entry_and_answers_json(tmp_path):
    text = epload(tmp_path, "index", "show", "--python", PYTHON)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    start = lines.index(next(l for l in lines if l.startswith("search paths:")))
    assert lines[start + 1] == "  '' (the current directory)"
    assert all(l.strip() for l in lines), "a blank line in: " + text.stdout

    js = epload(tmp_path, "index", "show", "--json", "--python", PYTHON)
    assert js.returncode == 0, js.stderr
    out = json.loads(js.stdout)
    assert out["search_paths"] == truth(tmp_path) and out["search_paths"][0] == ""
    assert set(out) == {"cache_file", "search_paths", "distributions", "watched_files", "entry_points",
                        "groups", "error"}
    assert out["cache_file"].startswith(str(tmp_path / "cache"))
    assert out["entry_points"] == sum(out["groups"].values()) > 0
    assert f"distributions: {out['distributions']}" in text.stdout

    uncached = json.loads(epload(tmp_path, "index", "show", "--json", "--no-cache", "--python", PYTHON).stdout)
    assert uncached["cache_file"] is None


def test_json_goes_with_show_only(tmp_path):
    p = epload(tmp_path, "index", "path", "--json", "--python", PYTHON)
    assert p.returncode == 2 and "--json goes with 'show' only" in p.stderr, p.stderr


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH is Python 3.11's")
def test_build_output_of_a_sys_path_with_the_current_directory_says_what_to_do(tmp_path):
    out = tmp_path / "env.index"
    p = epload(tmp_path, "index", "build", "--output", str(out), "--python", PYTHON)
    assert p.returncode == 1 and not out.exists()
    assert "relative search path ''" in p.stderr and "PYTHONSAFEPATH=1" in p.stderr, p.stderr
    assert "--path" in p.stderr, p.stderr
    # Done as it says: the index is written, and serves a process started so.
    p = epload(tmp_path, "index", "build", "--output", str(out), "--python", PYTHON, PYTHONSAFEPATH="1")
    assert p.returncode == 0 and p.stdout.startswith(f"wrote {out} ("), p.stderr
    p = epload(tmp_path, "index", "show", "--verbose", "--python", PYTHON, PYTHONSAFEPATH="1",
               EPLOAD_INDEX=str(out))
    assert p.returncode == 0 and "cache shipped" in p.stderr, p.stderr
    # An explicit relative --path: give absolute ones.
    p = epload(tmp_path, "index", "build", "--output", str(out), "--path", "site")
    assert p.returncode == 1 and "give absolute search paths" in p.stderr, p.stderr


def test_the_cache_format_doc_shows_the_head_this_build_writes(tmp_path):
    """docs/cache-format.md's example head has the format and version of a
    cache file the command writes."""
    p = epload(tmp_path, "index", "build", "--python", PYTHON)
    assert p.returncode == 0, p.stderr
    head = json.loads(pathlib.Path(p.stdout.strip()).read_text().splitlines()[0])
    doc = (SOURCE_DIR / "docs" / "cache-format.md").read_text()
    example = re.search(r'^\{"format":"([^"]+)","version":(\d+),', doc, re.M)
    assert example, "no example head in docs/cache-format.md"
    assert (example.group(1), int(example.group(2))) == (head["format"], head["version"])
    assert f"Format version {head['version']} " in doc


def test_a_relative_path_that_does_not_exist_says_where_it_was_looked_for(tmp_path):
    p = epload(tmp_path, "entry-points", "--json", "--path", "site-packages")
    assert p.returncode == 0 and p.stdout == "[]\n"
    assert p.stderr == (f"epload: warning: search path 'site-packages' does not exist in {tmp_path} "
                        "(a relative path is taken from there: give an absolute one)\n"), p.stderr
