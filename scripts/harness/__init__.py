"""epload's benchmark harness: one package that sets up environments
(envs), runs and times whole processes (proc), summarizes samples (stats),
judges targets against budgets and floors (targets), reads the common
options (options), checks that a variant did its job before it is timed
(verify) and writes reports (report).  The suites on top of it (suite_index,
suite_startup, suite_torch, demo, gate, ab) declare their variants,
references and targets as data; scripts/bench_index.py, bench_startup.py,
bench_torch.py, demo.py, ab.py and bench_gate are their entry points.

Only the standard library is used (matplotlib for the optional plots).
"""
