"""epload's benchmark harness: environments (envs), timed processes (proc),
statistics (stats), targets with budgets and floors (targets), the option
vocabulary (options), variants checked before they are timed (verify) and
reports (report).  The suites (suite_*, demo, gate, ab) are data on top of
it; scripts/bench_*.py, demo.py, ab.py, metadata_ops.py and bench_gate are
their entry points.  Standard library only (matplotlib for --plot)."""
