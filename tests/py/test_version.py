"""The version lives in one place, project(epload VERSION ...) in the
top-level CMakeLists.txt: the module and the command both say it."""

import os
import pathlib
import re
import subprocess

import epload

SOURCE_DIR = pathlib.Path(os.environ.get("EPLOAD_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BUILD_DIR = pathlib.Path(os.environ.get("EPLOAD_BUILD_DIR", SOURCE_DIR / "build"))


def project_version():
    text = (SOURCE_DIR / "CMakeLists.txt").read_text()
    return re.search(r"project\(epload VERSION ([0-9.]+)", text).group(1)


def test_module_and_command_give_the_projects_version():
    assert epload.__version__ == project_version()
    out = subprocess.run([str(BUILD_DIR / "epload"), "--version"], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith(f"epload {project_version()} ("), out
