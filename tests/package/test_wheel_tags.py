"""`pip wheel <checkout>` with the build's interpreter: the wheel is tagged
for that interpreter only (cpXY-cpXY-linux_<machine>, never py3-none-any),
holds the package, the extension, the command and the .pth file and nothing
of the C++ development files, and pip of another Python version refuses it."""

import os
import struct
import zipfile

import pytest

from pkgenv import (PYTHON, SOURCE_DIR, WORK, facts, fresh_venv, other_versions,
                    pip_build_options, project_version, run)

BUILDER = facts(PYTHON)


@pytest.fixture(scope="module")
def wheel():
    out = WORK / "wheelhouse"
    for old in out.glob("epload-*.whl") if out.exists() else ():
        old.unlink()
    # In a venv, as a user builds one: Debian's own interpreter may have no
    # pip outside a venv (Debian 13 without python3-pip).
    venv = fresh_venv(BUILDER, "wheel-venv")
    run([venv / "bin" / "python", "-m", "pip", "wheel", "--no-deps", "-w", out,
         *pip_build_options(BUILDER, "wheel"), SOURCE_DIR])
    wheels = list(out.glob("epload-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_is_tagged_for_the_interpreter_that_built_it(wheel):
    tag = "cp%d%d" % BUILDER["version"]
    assert wheel.name == f"epload-{project_version()}-{tag}-{tag}-linux_{BUILDER['machine']}.whl"


def test_the_wheel_holds_package_extension_command_and_hook(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = f"epload-{project_version()}.data"
    assert {"epload/__init__.py", "epload/_native" + BUILDER["ext_suffix"], "epload-autoload.pth",
            f"{data}/scripts/epload"} <= names
    assert not [n for n in names if n.startswith(("include/", "lib/", f"{data}/data/", f"{data}/headers/"))]
    assert not [n for n in names if "/_native" in n and n != "epload/_native" + BUILDER["ext_suffix"]]
    info = zipfile.ZipFile(wheel).getinfo(f"{data}/scripts/epload")
    assert (info.external_attr >> 16) & 0o111, "the command is not executable"


def elf_section_names(data):
    """The section names of a 64-bit little-endian ELF image."""
    assert data[:6] == b"\x7fELF\x02\x01", "not a 64-bit little-endian ELF file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i):
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
    strtab = header(shstrndx)
    names = data[strtab[4]:strtab[4] + strtab[5]]
    return {names[header(i)[0]:names.index(b"\0", header(i)[0])].decode() for i in range(shnum)}


def test_the_wheel_binaries_carry_no_debug_info(wheel):
    # RelWithDebInfo builds with -g; the install strips (pyproject.toml,
    # install.strip): a 2 MB extension, not 30 MB.
    data = f"epload-{project_version()}.data"
    with zipfile.ZipFile(wheel) as z:
        for name in ("epload/_native" + BUILDER["ext_suffix"], f"{data}/scripts/epload"):
            sections = elf_section_names(z.read(name))
            assert ".text" in sections, (name, sorted(sections))
            assert not [s for s in sections if s.startswith(".debug")], (name, sorted(sections))


def test_pip_of_another_python_version_refuses_the_wheel(wheel, tmp_path):
    others = [f for f in other_versions(BUILDER["version"])
              if run([f["executable"], "-m", "pip", "--version"], check=False).returncode == 0]
    if not others:
        pytest.skip(f"no CPython other than {BUILDER['version']} with pip on this machine")
    other = others[0]
    target = tmp_path / "site"
    proc = run([other["executable"], "-m", "pip", "install", "--no-deps", "--target", target, wheel],
               check=False)
    assert proc.returncode != 0, proc.stdout
    assert "is not a supported wheel on this platform" in proc.stderr, proc.stderr
    assert not target.exists() or not os.listdir(target)
