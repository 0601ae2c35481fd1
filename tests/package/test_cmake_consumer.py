"""C++ packaging: `cmake --install` of this build tree into a temporary
prefix, then a small consumer (tests/package/consumer/) configured with
find_package(epload) against that prefix alone, built, and run over a
crafted site directory: it opens an index and prints an entry point.  The
installed headers show only the public surface.  And a C++-only configure
that needs none of the test, benchmark or Python tools."""

import re

from pkgenv import BUILD_DIR, SOURCE_DIR, project_version, run

CONSUMER = SOURCE_DIR / "tests" / "package" / "consumer"


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_installed_prefix_builds_and_runs_a_find_package_consumer(tmp_path):
    prefix = tmp_path / "prefix"
    run(["cmake", "--install", BUILD_DIR, "--prefix", prefix])
    for rel in ("include/epload/index.hpp", "include/epload/backend.h", "bin/epload"):
        assert (prefix / rel).is_file(), rel
    assert not_public(prefix / "include") == []
    libdirs = [d for d in ("lib", "lib64") if (prefix / d / "cmake" / "epload" / "epload-config.cmake").is_file()]
    assert libdirs
    # One archive per layer of src/; epload::epload links them all, in order.
    layers = sorted(p.name for p in (prefix / libdirs[0]).glob("libepload_*.a"))
    assert layers == [f"libepload_{n}.a" for n in ("base", "cache", "index", "loader", "profile", "scan")]
    assert run([prefix / "bin" / "epload", "--version"]).stdout.startswith(f"epload {project_version()}")

    # Only the prefix: no path into this checkout or its build tree.
    build = tmp_path / "consumer-build"
    run(["cmake", "-S", CONSUMER, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}",
         "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"])
    run(["cmake", "--build", build])

    site = tmp_path / "site"
    write(site / "vendor_npu-2.1.dist-info" / "METADATA", "Metadata-Version: 2.1\nName: vendor_npu\nVersion: 2.1\n")
    write(site / "vendor_npu-2.1.dist-info" / "entry_points.txt",
          "[torch.backends]\nnpu = vendor_npu:autoload\n")
    proc = run([build / "consumer", "torch.backends", "npu", tmp_path / "cache", site])
    assert proc.stdout == "npu = vendor_npu:autoload (vendor_npu 2.1)\n"
    proc = run([build / "consumer", "torch.backends", "gpu", tmp_path / "cache", site], check=False)
    assert proc.returncode == 1 and "no entry point gpu" in proc.stderr

    # The README's C++ example, as a user pastes it into a main(), builds
    # against the same prefix with warnings as errors.
    example = tmp_path / "readme-example"
    includes, body = readme_cpp_example()
    write(example / "main.cpp", "\n".join(includes) + "\n\nint main() {\n" +
          "".join(f"  {line}\n" for line in body) + "  return 0;\n}\n")
    write(example / "CMakeLists.txt", (CONSUMER / "CMakeLists.txt").read_text()
          .replace("project(epload_consumer", "project(readme_example")
          + "target_compile_options(consumer PRIVATE -Wall -Wextra -Werror -Wno-unused-variable)\n")
    run(["cmake", "-S", example, "-B", tmp_path / "example-build", f"-DCMAKE_PREFIX_PATH={prefix}",
         "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"])
    run(["cmake", "--build", tmp_path / "example-build"])


# What a host or backend author must not find in the installed headers:
# internal namespaces and implementation types, and the switches that exist
# for tests only (base/test_slowdown.hpp, the index builder's hooks).
NOT_PUBLIC = re.compile(r"\bdetail\b|\w*Impl\b|\w+Hooks\b|\btest_\w+|\w*_for_test(?:ing)?\b|"
                        r"\w*[Ss]lowdown\w*|\bSlowPoint\b|\bEPLOAD_TEST\w*")


def not_public(include_dir):
    """Every internal token in the headers under `include_dir`, and every
    quoted #include that names no header installed there, as
    "file:line: what"; empty when the headers are the public surface only."""
    found = []
    headers = sorted(p for p in include_dir.rglob("*") if p.is_file())
    assert headers, f"no headers under {include_dir}"
    for header in headers:
        rel = header.relative_to(include_dir)
        for n, line in enumerate(header.read_text().splitlines(), 1):
            found += [f"{rel}:{n}: {m.group(0)}" for m in NOT_PUBLIC.finditer(line)]
            quoted = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
            if quoted and not (include_dir / quoted.group(1)).is_file():
                found.append(f"{rel}:{n}: includes {quoted.group(1)}, which is not installed")
    return found


def test_the_public_surface_check_finds_each_kind_of_internal_declaration(tmp_path):
    include = tmp_path / "include"
    write(include / "epload" / "clean.hpp", '#include "epload/result.hpp"\nstruct Hook;  // a hook backend\n')
    write(include / "epload" / "result.hpp", "// details of a span: none here\n")
    assert not_public(include) == []
    internals = ["namespace detail {", "struct Impl;", "friend struct detail::IndexBuilderHooks;",
                 "std::unique_ptr<LoaderImpl> m;", "void test_slowdown(SlowPoint p);",
                 "void reset_for_testing();", "#ifdef EPLOAD_TEST_HOOKS", '#include "stamp.hpp"']
    for i, line in enumerate(internals):
        write(include / "epload" / f"bad{i}.hpp", line + "\n")
    found = not_public(include)
    for i in range(len(internals)):
        assert any(f.startswith(f"epload/bad{i}.hpp:1: ") for f in found), (internals[i], found)


def readme_cpp_example():
    """The README's "Quick start: C++ hosts" block: its #include lines and
    its statements."""
    text = (SOURCE_DIR / "README.md").read_text()
    m = re.search(r"## Quick start: C\+\+ hosts\n+```cpp\n(.*?)```", text, re.S)
    assert m, "README.md has no C++ example under 'Quick start: C++ hosts'"
    lines = [line for line in m.group(1).splitlines() if line.strip()]
    includes = [line for line in lines if line.startswith("#include")]
    assert includes and len(includes) < len(lines)
    return includes, [line for line in lines if not line.startswith("#include")]


def test_a_cpp_only_build_needs_neither_googletest_nor_benchmark_nor_pybind11(tmp_path):
    # Configure only: each of those made unfindable, as on a consumer's machine.
    proc = run(["cmake", "-S", SOURCE_DIR, "-B", tmp_path / "b", "-DEPLOAD_BUILD_TESTS=OFF",
                "-DEPLOAD_BUILD_BENCH=OFF", "-DEPLOAD_BUILD_PYTHON=OFF",
                "-DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON", "-DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON",
                "-DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON", "-DCMAKE_DISABLE_FIND_PACKAGE_Python=ON"])
    assert "epload: simdjson" in proc.stdout
    # Tests asked for without the Python front is a clear configure error.
    proc = run(["cmake", "-S", SOURCE_DIR, "-B", tmp_path / "c", "-DEPLOAD_BUILD_PYTHON=OFF",
                "-DEPLOAD_BUILD_TESTS=ON"], check=False)
    assert proc.returncode != 0 and "need EPLOAD_BUILD_PYTHON=ON" in proc.stderr
