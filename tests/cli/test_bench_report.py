"""The harness's report reads right at a glance (epload.bench: suite_torch's
Markdown and plot.py's picture, report.plot_marginals for the start-up
suite), on results made of real samples summarized by the harness's own
statistics: whole-process rounds as noisy as a loaded machine gives (a lazy
difference below zero, a `paths` one within noise), lazy's in-process figure.
Every target gets its sentence before any table; every point is drawn."""

import random
import struct
import subprocess
import sys

import pytest

from epload.bench import plot as bench_plot
from epload.bench import report, stats, suite_torch

ADDED_MS = {"floor": 0, "stock": 20.5, "epload-eager": 20.3, "epload-lazy": 0.012,
            "epload-lazy-paths": 0.0002, "epload-lazy-dirty": 0.013, "lazy-first-use": 0.035,
            "by-hand": 0.022}  # per generated backend for stock and eager, else seconds


def result(rounds, sizes=(10, 100, 1000), noise_ms=300):
    rng = random.Random(7)
    rows = []
    for n in sizes:
        raw = {}
        for v, a in ADDED_MS.items():
            add = a * n if v in ("stock", "epload-eager") else a * 1000
            raw[v] = {k: [int((1500 + add + rng.gauss(0, noise_ms)) * 1e6) for _ in range(rounds)]
                      for k in ("wall", "cpu")}
        ip = {"pth": [3.0e6] * 5, "import_torch": [1.5e9] * 5, "in_import": [9.0e6] * 5}
        row = {"backends": n, "fixtures": 3, "distributions": n + 5000,
               "stats": suite_torch.analyse(raw), "labels": {v: v for v in ADDED_MS},
               "in_process": {"runs": 5, **{k: stats.summarize(v) for k, v in ip.items()},
                              "total": stats.summarize([12.0e6] * 5)}}
        rows.append(row)
    first = {"backends": sizes[-1], "runs": 5, "use": 'to("foo")', "provider": "foo",
             "lazy_ms": 22.5, "by_hand_ms": 22.0, "lazy": stats.summarize([22.5e6] * 5),
             "by_hand": stats.summarize([22.0e6] * 5)}
    out = {"config": {"sizes": list(sizes), "noise": 5000, "import_cost_ms": 20,
                      "rounds": rounds, "warmup": 0, "python": "/venv/bin/python",
                      "machine": {"cpus": 2}, "load_average_before": [3.0, 3.0, 3.0]},
           "torch": {"torch": "2.13.0", "torch_dir": "/venv/torch", "python": "3.11.2",
                     "epload": "/venv/epload", "backends": [["foo", "torch_foo:_a", "foo"]]},
           "sizes": rows, "first_use": first}
    out["targets"] = suite_torch.judge(rows, first, None, rounds)
    return out


@pytest.mark.parametrize("rounds", [3, 7])
def test_the_markdown_opens_with_one_sentence_per_target(rounds):
    r = result(rounds)
    md = suite_torch.markdown(r)
    opening = md.split("\n|", 1)[0]
    sentences = [ln for ln in opening.splitlines() if ln.startswith("- **")]
    assert len(sentences) == len(r["targets"]) == 5
    for line, t in zip(sentences, r["targets"]):
        verdict = line[4:].split("**", 1)[0]
        assert verdict == ("met" if t["met"] else "NOT MET" if t["met"] is False
                           else t["unjudged"])
    # Lazy's added cost is judged on its in-process figure with any rounds;
    # whole-process targets only with 7.
    assert sentences[0].startswith("- **met**: lazy `import torch` (`full`)")
    assert (r["targets"][1]["met"] is None) == (rounds < 7)


def test_a_within_noise_difference_says_so_in_the_table():
    md = suite_torch.markdown(result(3))
    rows = [ln for ln in md.splitlines() if ln.startswith("| epload-lazy |")]
    assert rows and all("(noise)" in ln for ln in rows)


def have_matplotlib():
    return subprocess.run([sys.executable, "-c", "import matplotlib"]).returncode == 0


@pytest.mark.skipif(not have_matplotlib(), reason="matplotlib is not installed")
def test_the_picture_draws_every_point_with_its_precision(tmp_path):
    r = result(3)
    path = tmp_path / "torch.png"
    drawn, styles = bench_plot.plot_costs(r, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24])[0] > 800
    assert set(drawn) == {"stock", "epload-eager", "in-process", "epload-lazy-paths",
                          "lazy-first-use"}
    for name, pts in drawn.items():
        assert [p[0] for p in pts] == [10, 100, 1000], name  # nothing dropped
    # Lazy is its in-process figure; negatives and within-noise points stay.
    assert [p[1] for p in drawn["in-process"]] == [12.0, 12.0, 12.0]
    whole = [p for n in ("epload-lazy-paths", "lazy-first-use") for p in drawn[n]]
    assert any(p[1] < 0 for p in whole) and any(p[2] for p in whole)
    assert len(set(styles)) == len(styles) and len({c for c, _ in styles}) == len(styles)
    title = bench_plot.title(r)
    assert title.startswith("`import torch` at 1,000 generated backends: stock autoload adds +")
    assert "epload lazy +12.0 ms" in title
    # Drawn in lines the figure holds, every word kept.
    lines = bench_plot.title_lines(r).split("\n")
    assert len(lines) > 1 and all(len(line) <= bench_plot.TITLE_WIDTH for line in lines)
    assert " ".join(lines) == title


@pytest.mark.skipif(not have_matplotlib(), reason="matplotlib is not installed")
def test_the_startup_picture_gives_each_variant_its_own_colour(tmp_path):
    labels = {f"v{k}": f"variant {k}" for k in range(12)}
    rows = [{"backends": n, "stats": {v: {"marginal_ms": (k - 2) * n / 10}
                                      for k, v in enumerate(labels)}} for n in (10, 100)]
    styles = report.plot_marginals(tmp_path / "s.png", rows, labels, "v0", "x", "y", "t")
    assert set(styles) == set(labels) - {"v0"}
    assert len({c for c, _ in styles.values()}) == len(styles)  # v1's ≤ 0 points drawn too
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"
