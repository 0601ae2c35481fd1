"""The release wheels (scripts/wheels.sh), as files: one per CPython and
architecture it was built for, each tagged manylinux_2_28_x86_64 or
manylinux_2_28_aarch64 (or older) for that interpreter only, `auditwheel
show` within that policy, every binary inside (the `epload` command too,
which auditwheel does not look at) built for that architecture and within
the policy by scripts/wheels/elf_policy.py, no debug info, the package,
extension, command and .pth file and nothing of the C++ development files;
pip of another Python version refuses it.  The wheels are those of $EPLOAD_WHEELS_DIR, else
those package.wheels built into the build directory.  Installing them is
test_installed_wheels.py's."""

import re
import struct
import tarfile
import zipfile

import pytest

from pkgenv import (ELF_POLICY, SOURCE_DIR, facts, other_versions, project_version, release_wheels, run,
                    wheel_arch, wheel_python, wheel_tools)

WHEELS = release_wheels()
TAG = re.compile(r"epload-(?P<version>[^-]+)-(?P<py>cp3\d+)-(?P=py)-manylinux_2_(?P<glibc>\d+)_"
                 r"(?P<arch>x86_64|aarch64)\.whl$")
ELF_MACHINES = {"x86_64": 0x3E, "aarch64": 0xB7}  # e_machine: EM_X86_64, EM_AARCH64


def test_there_is_a_wheel_per_interpreter_and_an_sdist():
    names = [w.name for w in WHEELS]
    assert names, "no release wheels: run scripts/wheels.sh (or ctest -R package.wheels)"
    assert len({TAG.match(n).group("py", "arch") for n in names}) == len(names), names
    sdists = list(WHEELS[0].parent.glob(f"epload-{project_version()}.tar.gz"))
    assert sdists, f"no sdist beside {names}"


@pytest.mark.parametrize("wheel", WHEELS, ids=lambda w: w.name)
def test_the_wheel_is_tagged_manylinux_2_28_or_older_for_one_interpreter(wheel):
    m = TAG.match(wheel.name)
    assert m, wheel.name
    assert m.group("version") == project_version() and int(m.group("glibc")) <= 28, wheel.name


@pytest.mark.parametrize("wheel", WHEELS, ids=lambda w: w.name)
def test_auditwheel_and_the_command_check_are_within_the_policy(wheel):
    tools = wheel_tools()
    arch = wheel_arch(wheel)
    show = run([tools / "auditwheel", "show", wheel]).stdout
    shown = re.search(rf'platform tag:\s+"manylinux_2_(\d+)_{arch}"', show)
    assert shown and int(shown.group(1)) <= 28, show
    # Every ELF file of the wheel, the command under .data/scripts included.
    out = run([tools / "python", ELF_POLICY, f"manylinux_2_28_{arch}", wheel]).stdout
    assert "/scripts/epload: NEEDED" in out and "_native" in out, out
    assert "BREAKS" not in out, out


@pytest.mark.parametrize("wheel", WHEELS, ids=lambda w: w.name)
def test_the_wheel_holds_package_extension_command_and_hook(wheel):
    f = facts(wheel_python(wheel))
    # The interpreter's suffix, for the wheel's architecture (CPython names
    # it in the suffix: .cpython-311-aarch64-linux-gnu.so).
    suffix = f["ext_suffix"].replace(f["machine"], wheel_arch(wheel))
    names = set(zipfile.ZipFile(wheel).namelist())
    data = f"epload-{project_version()}.data"
    assert {"epload/__init__.py", "epload/_native" + suffix, "epload-autoload.pth",
            f"{data}/scripts/epload"} <= names
    # The benchmark harness (`python -m epload.bench`, `epload bench`) and its generator's C source.
    assert {"epload/bench/__main__.py", "epload/bench/suite_torch.py", "epload/bench/gen_env.py",
            "epload/bench/native_backend.c"} <= names
    assert not [n for n in names if n.startswith(("include/", "lib/", f"{data}/data/", f"{data}/headers/"))]
    assert not [n for n in names if "/_native" in n and n != "epload/_native" + suffix]
    info = zipfile.ZipFile(wheel).getinfo(f"{data}/scripts/epload")
    assert (info.external_attr >> 16) & 0o111, "the command is not executable"


@pytest.mark.parametrize("wheel", WHEELS, ids=lambda w: w.name)
def test_the_wheel_and_the_sdist_carry_the_licences(wheel):
    """LICENSE and the licences of what the release links in (simdjson,
    mimalloc, the C++ runtime, pybind11), as the checkout has them, and the
    licence in the metadata."""
    z = zipfile.ZipFile(wheel)
    info = f"epload-{project_version()}.dist-info"
    for rel in ["LICENSE", *(f"licenses/{p.name}" for p in (SOURCE_DIR / "licenses").iterdir())]:
        assert z.read(f"{info}/licenses/{rel}") == (SOURCE_DIR / rel).read_bytes(), rel
    metadata = z.read(f"{info}/METADATA").decode()
    assert "\nLicense-Expression: MIT\n" in metadata
    sdist = tarfile.open(wheel.parent / f"epload-{project_version()}.tar.gz")
    names = set(sdist.getnames())
    assert f"epload-{project_version()}/LICENSE" in names
    assert f"epload-{project_version()}/licenses/simdjson.txt" in names


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


@pytest.mark.parametrize("wheel", WHEELS, ids=lambda w: w.name)
def test_the_wheel_binaries_carry_no_debug_info(wheel):
    # The install strips (pyproject.toml, install.strip), whatever the
    # compiler was told.
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            data = z.read(name)
            if data[:4] != b"\x7fELF":
                continue
            sections = elf_section_names(data)
            assert ".text" in sections, (name, sorted(sections))
            assert not [s for s in sections if s.startswith(".debug")], (name, sorted(sections))


@pytest.mark.parametrize("wheel", WHEELS, ids=lambda w: w.name)
def test_every_binary_is_built_for_the_wheels_architecture(wheel):
    want = ELF_MACHINES[wheel_arch(wheel)]
    with zipfile.ZipFile(wheel) as z:
        machines = {name: struct.unpack_from("<H", data, 0x12)[0]
                    for name in z.namelist() if (data := z.read(name))[:4] == b"\x7fELF"}
    assert len(machines) == 2 and set(machines.values()) == {want}, machines  # _native and the command


def pip_install(pip, wheel, target, *options):
    return run([*pip, "install", "--no-deps", "--no-index", *options, "--target", target, wheel], check=False)


@pytest.mark.parametrize("wheel", WHEELS, ids=lambda w: w.name)
def test_pip_of_another_python_version_refuses_the_wheel(wheel, tmp_path):
    mine = facts(wheel_python(wheel))
    others = [f for f in other_versions(mine["version"])
              if run([f["executable"], "-m", "pip", "--version"], check=False).returncode == 0]
    target = tmp_path / "site"
    # A wheel for another architecture is judged for its own platform.
    platform = [] if wheel_arch(wheel) == mine["machine"] else ["--platform", f"manylinux_2_28_{wheel_arch(wheel)}"]
    if platform:
        others = []
    if others:
        proc = pip_install([others[0]["executable"], "-m", "pip"], wheel, target)
    else:
        # One CPython on the machine (a bare Debian 13 has only 3.13): pip
        # itself judges the wheel for another version's tags, and, as the
        # control, installs it for the wheel's own.
        pip = [wheel_tools() / "python", "-m", "pip"]
        other = "3.%d" % (mine["version"][1] + 1 if mine["version"][1] < 13 else 12)
        own = "%d.%d" % mine["version"]
        control = pip_install(pip, wheel, tmp_path / "own", "--only-binary=:all:", *platform, "--python-version", own)
        assert control.returncode == 0, control.stderr
        proc = pip_install(pip, wheel, target, "--only-binary=:all:", *platform, "--python-version", other)
    assert proc.returncode != 0, proc.stdout
    assert "is not a supported wheel on this platform" in proc.stderr, proc.stderr
    assert not target.exists() or not list(target.iterdir())
