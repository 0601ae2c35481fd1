"""The checkout's harness: the package epload.bench (python/epload/bench/, the
one installed with the wheel), imported from this checkout as `epload_bench`
without importing epload itself, whose built parts live in the build tree.
The scripts bench_*.py, demo.py, ab.py, metadata_ops.py and bench_gate run its
suites; gen_env.py its environment generator."""

import importlib
import importlib.util
import os
import sys

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "python", "epload", "bench")


def package():
    """The harness package, loaded once from PACKAGE."""
    if "epload_bench" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "epload_bench", os.path.join(PACKAGE, "__init__.py"),
            submodule_search_locations=[PACKAGE])
        module = importlib.util.module_from_spec(spec)
        sys.modules["epload_bench"] = module
        spec.loader.exec_module(module)
    return sys.modules["epload_bench"]


def main(suite):
    """Runs the suite module ``suite`` of the harness; its exit status."""
    package()
    proc = importlib.import_module("epload_bench.proc")
    return proc.harness_main(importlib.import_module(f"epload_bench.{suite}"))
