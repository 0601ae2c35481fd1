"""The --plot PNG of a host's start-up (suite_torch, `python -m epload.bench`):
each variant's cost over the floor with the precision it was measured with.

Stock, eager, lazy `paths` and the first use are whole-process paired
differences from the floor with their 95% intervals; epload lazy (`full`)
is epload's own time measured inside the processes (its trace), with its
interquartile range.  The y axis is symmetric-log, so a negative difference
is drawn below zero, and a point whose interval holds zero (within noise) is
drawn hollow: nothing is left out.  matplotlib is needed (MISSING says how).
"""

from __future__ import annotations

MISSING = "pip install matplotlib"

# name -> (legend, colour, marker); "in-process" is lazy's own figure.
SERIES = {
    "stock": ("stock autoload (whole process, paired, 95% CI)", "#d62728", "s"),
    "epload-eager": ("epload eager (whole process, paired, 95% CI)", "#ff7f0e", "^"),
    "in-process": ("epload lazy `full` (in-process: epload's own time, IQR)", "#1f77b4", "o"),
    "epload-lazy-paths": ("epload lazy `paths` (whole process, paired, 95% CI)", "#2ca02c", "D"),
    "lazy-first-use": ("epload lazy + first device use (whole process, paired, 95% CI)",
                       "#9467bd", "v"),
}


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def duration(ms):
    """A signed duration in ms or s, as a reader would say it."""
    return f"{ms / 1000:+,.1f} s" if abs(ms) >= 1000 else f"{ms:+,.1f} ms"


def points(row, name):
    """(median, low, high, within noise) of a series at one size, or None."""
    if name == "in-process":
        t = row["in_process"]["total"]
        return t["median_ms"], t["q1_ms"], t["q3_ms"], False
    s = row["stats"].get(name)
    if not s or "paired" not in s:
        return None
    p = s["paired"]
    return p["median_ms"], p["ci95_ms"][0], p["ci95_ms"][1], p["within_noise"]


# Characters of a title line at fontsize 10.5 across the 11-inch figure.
TITLE_WIDTH = 110


def title(result):
    """The result in one line: what stock and lazy add at the largest size."""
    big = result["sizes"][-1]
    host = result["torch"].get("host", "torch")
    floor = big["stats"]["floor"]["median_ms"]
    lazy = big["in_process"]["total"]["median_ms"]
    stock = big["stats"]["stock"]["paired"]
    what = (f"at {big['backends']:,} generated backends" if big["backends"]
            else "with the installed backends")
    lo, hi = stock["ci95_ms"]
    said = (f"stock autoload adds {duration(stock['median_ms'])}" if lo > 0 else
            f"stock autoload: nothing measurable above the noise ({duration(stock['median_ms'])}"
            f" [{duration(lo)}, {duration(hi)}])")
    return (f"`import {host}` {what}: {said}, epload lazy {duration(lazy)} "
            f"({100 * lazy / floor:.2f}% of the {floor / 1000:.2f} s floor)")


def title_lines(result, width=TITLE_WIDTH):
    """The title, broken between words into lines the figure's width holds."""
    import textwrap
    return "\n".join(textwrap.wrap(title(result), width))


def plot_costs(result, path, budget_pct=1.0):
    """Writes the PNG; ``budget_pct``: a dashed line at that % of the floor.
    Returns what was drawn: {series: [(backends, median, hollow)]}, colours."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = result["sizes"]
    fig, ax = plt.subplots(figsize=(11, 7), dpi=110)
    xs = list(range(len(rows)))
    shift = 0.06
    drawn, colours = {}, []
    for k, (name, (label, colour, marker)) in enumerate(SERIES.items()):
        got = [(x + (k - 2) * shift, p) for x, r in zip(xs, rows) if (p := points(r, name))]
        if not got:
            continue
        px = [x for x, _ in got]
        med = [p[0] for _, p in got]
        precise = name == "in-process"
        ax.plot(px, med, "-" if precise else ":", color=colour, lw=2.4 if precise else 1.0,
                alpha=0.9 if precise else 0.6, zorder=2)
        ax.errorbar(px, med, yerr=[[p[0] - p[1] for _, p in got], [p[2] - p[0] for _, p in got]],
                    fmt="none", ecolor=colour, elinewidth=1.2, capsize=4, zorder=3)
        for (x, p) in got:
            ax.plot([x], [p[0]], marker=marker, ms=8, color=colour, zorder=4,
                    markerfacecolor="white" if p[3] else colour, markeredgewidth=1.6)
        ax.plot([], [], marker=marker, color=colour, label=label)
        drawn[name] = [(r["backends"], p[0], p[3]) for r in rows if (p := points(r, name))]
        colours.append((colour, marker))
    ax.plot([], [], "o", color="gray", markerfacecolor="white",
            label="hollow: interval holds 0 (within noise)")
    floor = rows[-1]["stats"]["floor"]["median_ms"]
    budget = floor * budget_pct / 100
    ax.axhline(budget, color="gray", ls="--", lw=1,
               label=f"{budget_pct:g}% of the floor ({budget:.1f} ms)")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_xticks(xs, [f"{r['backends']:,}" for r in rows])
    ax.set_xlim(-0.5, len(rows) - 0.5)
    ax.set_xlabel(f"generated backends ({result['config']['import_cost_ms']:g} ms import each)"
                  " beside the installed ones")
    host = result["torch"].get("host", "torch")
    ax.set_ylabel(f"added to `import {host}` over the floor, ms (symmetric log)")
    ax.set_title(title_lines(result), fontsize=10.5)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return drawn, colours
