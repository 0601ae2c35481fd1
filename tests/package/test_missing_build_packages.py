"""A build from source on a machine that lacks build packages stops at once
with ONE message naming every missing Debian package and the command that
installs them, not a CMake trace (cmake/build_requirements.cmake): through
pip, as a user meets it, and through CMake for the cases pip cannot make.
Packages are made missing with CMake's own switch
(CMAKE_DISABLE_FIND_PACKAGE_<name>), the compiler by a PATH without one.
The same message on a real machine without them: scripts/wheel_bare_check.sh."""

import os

from pkgenv import PYTHON, SOURCE_DIR, clean_env, facts, fresh_venv, run

HEAD = "epload cannot be built from source here: these build packages are missing:"


def message(text):
    """The missing-packages line and the install command of a build's output."""
    lines = text.splitlines()
    at = [i for i, line in enumerate(lines) if HEAD in line]
    assert len(at) == 1, text[-4000:]
    missing = next(line for line in lines[at[0] + 1:] if line.strip()).split()
    command = [line.strip() for line in lines[at[0]:] if "sudo apt-get install" in line]
    return missing, command[0] if command else None


def test_pip_install_without_simdjson_and_mimalloc_names_both_once():
    f = facts(PYTHON)
    venv = fresh_venv(f, "missing-venv")
    proc = run([venv / "bin" / "python", "-m", "pip", "install", "--no-cache-dir",
                "--config-settings=cmake.define.CMAKE_DISABLE_FIND_PACKAGE_simdjson=ON",
                "--config-settings=cmake.define.CMAKE_DISABLE_FIND_PACKAGE_mimalloc=ON", SOURCE_DIR],
               check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    missing, command = message(out)
    assert missing == ["libsimdjson-dev", "libmimalloc-dev"], out[-3000:]
    assert command == "sudo apt-get install libsimdjson-dev libmimalloc-dev", out[-3000:]
    # One error, ours: no find_package trace, nothing compiled.
    assert out.count("CMake Error") == 1, out[-4000:]
    assert "Could not find a package configuration file" not in out


def test_a_development_configure_names_every_missing_package_at_once(tmp_path):
    proc = run(["cmake", "-S", SOURCE_DIR, "-B", tmp_path / "b", f"-DEPLOAD_PYTHON={facts(PYTHON)['executable']}",
                "-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON", "-DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON",
                "-DCMAKE_DISABLE_FIND_PACKAGE_simdjson=ON", "-DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON"],
               check=False)
    assert proc.returncode != 0
    missing, command = message(proc.stderr)
    assert missing == ["pybind11-dev", "libsimdjson-dev", "libgtest-dev", "libbenchmark-dev"], proc.stderr
    assert command == "sudo apt-get install " + " ".join(missing)
    assert proc.stderr.count("CMake Error") == 1, proc.stderr


def test_without_a_compiler_the_message_comes_before_project(tmp_path):
    # Only cmake itself on PATH: before project() nothing else is searched.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cmake = run(["cmake", "-P", SOURCE_DIR / "tests" / "package" / "cmake_command.cmake"]).stderr.strip()
    os.symlink(cmake, bin_dir / "cmake")  # the binary itself, not a shim that needs PATH
    env = {k: v for k, v in clean_env(PATH=str(bin_dir)).items() if k not in ("CC", "CXX")}
    proc = run([bin_dir / "cmake", "-S", SOURCE_DIR, "-B", tmp_path / "b",
                f"-DEPLOAD_PYTHON={facts(PYTHON)['executable']}"], env=env, check=False)
    assert proc.returncode != 0
    missing, command = message(proc.stderr)
    assert missing[0] == "g++", proc.stderr  # this machine has the rest
    assert command == "sudo apt-get install " + " ".join(missing)
    assert "No CMAKE_CXX_COMPILER could be found" not in proc.stderr
