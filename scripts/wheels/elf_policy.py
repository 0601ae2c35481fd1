#!/usr/bin/env python3
"""Checks ELF files against a manylinux policy, as auditwheel checks a
wheel's extensions; for what auditwheel does not look at (the `epload`
command under the wheel's .data/scripts).

    elf_policy.py POLICY FILE_OR_WHEEL...

POLICY is a manylinux policy name (manylinux_2_28_x86_64 or
manylinux_2_28); the policy itself is auditwheel's own table
(auditwheel/policy/manylinux-policy.json), so both checks judge alike.  A
wheel argument means every ELF file inside it.  Each file must need
(DT_NEEDED) only libraries the policy allows, plus the dynamic loader, and
each versioned symbol it needs (GLIBC_2.17, GLIBCXX_3.4.22, ...) must be one
the policy lists.  Prints one line per file; exits 1 naming every breach.
Runs in scripts/wheels.sh's tools venv (auditwheel, pyelftools).
"""

import io
import json
import pathlib
import sys
import zipfile

import auditwheel
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

LOADERS = {"x86_64": "ld-linux-x86-64.so.2", "aarch64": "ld-linux-aarch64.so.1"}
MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}


def load_policy(name):
    table = pathlib.Path(auditwheel.__file__).parent / "policy" / "manylinux-policy.json"
    base = name
    for arch in LOADERS:
        base = base.removesuffix("_" + arch)
    for policy in json.loads(table.read_text()):
        if base == policy["name"] or base in policy.get("aliases", []):
            return policy
    raise SystemExit(f"elf_policy: no policy {name!r} in {table}")


def needs(data):
    """(machine, NEEDED names, {prefix: {versions}}) of an ELF image."""
    elf = ELFFile(io.BytesIO(data))
    machine = MACHINES.get(elf["e_machine"], elf["e_machine"])
    needed, versions = [], {}
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            needed += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
        elif isinstance(section, GNUVerNeedSection):
            for _, auxes in section.iter_versions():
                for aux in auxes:
                    prefix, _, version = aux.name.partition("_")
                    versions.setdefault(prefix, set()).add(version)
    return machine, needed, versions


def breaches(policy, data):
    machine, needed, versions = needs(data)
    allowed_libs = set(policy["lib_whitelist"]) | {LOADERS.get(machine)}
    allowed = policy["symbol_versions"].get(machine)
    if allowed is None:
        return [f"machine {machine} is not covered by {policy['name']}"], needed, versions
    out = [f"needs {lib}, which {policy['name']} does not allow" for lib in needed if lib not in allowed_libs]
    for prefix, have in sorted(versions.items()):
        extra = sorted(have - set(allowed.get(prefix, [])))
        if extra:
            out.append(f"needs {', '.join(prefix + '_' + v for v in extra)}, beyond {policy['name']}")
    return out, needed, versions


def elf_files(path):
    """(label, bytes) of the file, or of every ELF member of a wheel."""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                data = z.read(name)
                if data[:4] == b"\x7fELF":
                    yield f"{path.name}:{name}", data
    else:
        yield str(path), path.read_bytes()


def newest(versions, prefix):
    have = versions.get(prefix)
    if not have:
        return "-"
    return max(have, key=lambda v: tuple(int(x) if x.isdigit() else 0 for x in v.split(".")))


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    policy = load_policy(argv[0])
    failed = 0
    for arg in argv[1:]:
        for label, data in elf_files(pathlib.Path(arg)):
            bad, needed, versions = breaches(policy, data)
            print(f"{label}: NEEDED {' '.join(needed) or '-'}; newest GLIBC_{newest(versions, 'GLIBC')}"
                  f", GLIBCXX_{newest(versions, 'GLIBCXX')}: {'BREAKS ' + policy['name'] if bad else 'ok'}")
            for b in bad:
                print(f"  {b}", file=sys.stderr)
            failed += bool(bad)
    if failed:
        print(f"elf_policy: {failed} file(s) break {policy['name']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
