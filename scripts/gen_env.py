#!/usr/bin/env python3
"""Runs epload.bench.gen_env (python/epload/bench/gen_env.py; --help), the
environment generator of the harness, the tests and epload_bench."""
import os
import runpy
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench  # noqa: E402

runpy.run_path(os.path.join(_bench.PACKAGE, "gen_env.py"), run_name="__main__")
