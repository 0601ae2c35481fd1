"""Summaries of timed samples: medians, quartiles, marginals, ratios, paired
per-round differences with a bootstrap interval."""

from __future__ import annotations

import random
import statistics


def quartiles(s):
    """(q1, median, q3) of a sample; a single value is all three."""
    if len(s) < 2:
        return s[0], s[0], s[0]
    q = statistics.quantiles(sorted(s), n=4, method="inclusive")
    return q[0], statistics.median(s), q[2]


def summarize(samples):
    """Medians, quartiles and extremes of ns samples, in ms."""
    s = sorted(samples)
    q1, med, q3 = quartiles(s)
    return {"median_ms": med / 1e6, "q1_ms": q1 / 1e6, "q3_ms": q3 / 1e6,
            "min_ms": s[0] / 1e6, "max_ms": s[-1] / 1e6, "runs": len(s)}


def summarize_rounds(raw, reference=None):
    """interleaved()'s samples summarized, with marginals over ``reference``."""
    stats = {n: dict(summarize(v["wall"]), cpu_median_ms=statistics.median(v["cpu"]) / 1e6)
             for n, v in raw.items()}
    if reference is not None:
        ref = stats[reference]
        for s in stats.values():
            s["marginal_ms"] = s["median_ms"] - ref["median_ms"]
            s["marginal_cpu_ms"] = s["cpu_median_ms"] - ref["cpu_median_ms"]
    return stats


def ratio(reference, value):
    """reference ÷ value, or None when value is within noise of zero (<= 0)."""
    return reference / value if value is not None and value > 0 else None


def paired_ci(a, b, resamples=2000, seed=0):
    """Median of a[i] - b[i] with a 95% bootstrap interval (ci95_ms)."""
    d = [x - y for x, y in zip(a, b)]
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(d, k=len(d))) for _ in range(resamples))
    lo, hi = meds[int(0.025 * resamples)] / 1e6, meds[int(0.975 * resamples) - 1] / 1e6
    return {"median_ms": statistics.median(d) / 1e6, "ci95_ms": [lo, hi],
            "within_noise": lo <= 0 <= hi}
