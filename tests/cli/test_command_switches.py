"""The command reads the package's switches by the same rules:
EPLOAD_NO_CACHE on is --no-cache, EPLOAD_DEBUG on reports the cache as
--verbose does, both by the one on/off table (1/true/yes/on,
0/false/no/off/empty; any case), a bad value is a warning naming the
accepted values; a name in EPLOAD_DISABLE / EPLOAD_ENABLE that is no backend
of the group is a warning naming the close ones."""

import json
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))
EPLOAD = str(BUILD_DIR / "epload")


def run(tmp_path, *args, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "EPLOAD_"))}
    env["EPLOAD_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(extra)
    site = tmp_path / "site"
    info = site / "torch_foo-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-foo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[torch.backends]\nfoo = torch_foo:_autoload\n"
                                           "[epload.devices]\nfoo = foo\n")
    return subprocess.run([EPLOAD, *args, "--path", str(site)], env=env, cwd=tmp_path,
                          capture_output=True, text=True)


@pytest.mark.parametrize("value,on", [("1", True), ("yes", True), ("TRUE", True), ("on", True),
                                      ("0", False), ("no", False), ("Off", False), ("", False)])
def test_no_cache_and_debug_follow_the_one_table(tmp_path, value, on):
    p = run(tmp_path, "entry-points", EPLOAD_NO_CACHE=value, EPLOAD_DEBUG=value)
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr
    assert ("epload: cache uncached: cache disabled" in p.stderr) == on, p.stderr
    assert ("epload: cache " in p.stderr) == on, p.stderr
    assert (tmp_path / "cache").exists() != on


def test_a_bad_value_is_a_warning_and_the_default_applies(tmp_path):
    p = run(tmp_path, "entry-points", EPLOAD_NO_CACHE="maybe", EPLOAD_DEBUG="sometimes")
    assert p.returncode == 0
    assert ("epload: warning: EPLOAD_NO_CACHE='maybe' is not one of 1, true, yes, on, 0, false, no, off: "
            "using 0") in p.stderr, p.stderr
    assert "EPLOAD_DEBUG='sometimes' is not one of" in p.stderr
    assert "epload: cache " not in p.stderr and (tmp_path / "cache").exists()


def test_a_disabled_name_that_matches_no_backend_names_the_close_ones(tmp_path):
    p = run(tmp_path, "devices", "--json", EPLOAD_DISABLE="torch_fo")
    assert p.returncode == 0, p.stderr
    assert ("epload: warning: EPLOAD_DISABLE names 'torch_fo', which is no backend of group "
            "'torch.backends' (close: torch-foo)") in p.stderr, p.stderr
    p = run(tmp_path, "devices", "--json", EPLOAD_DISABLE="torch-foo", EPLOAD_ENABLE="foo")
    assert "warning" not in p.stderr, p.stderr
    assert [b["state"] for b in json.loads(p.stdout)["backends"]] == ["disabled"]
