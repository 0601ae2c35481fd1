"""The --plot PNG of a host's start-up (suite_torch, `python -m epload.bench`):
each variant's cost over the floor with the precision it was measured with,
like compared with like in two panels.

Upper panel, whole processes: stock, eager, lazy `full`, lazy `paths` and the
first use, each the paired difference from the floor with its 95% interval
(from 7 pairs: fewer are drawn as a bare median).  Lower panel, inside the
processes: epload's own time in lazy processes (its trace), with its
interquartile range, and the first use timed in-process.  The y axes are
symmetric-log, so a negative difference is drawn below zero, and a point whose
interval holds zero (within noise) is drawn hollow: nothing is left out.
matplotlib is needed (MISSING says how).
"""

from __future__ import annotations

MISSING = "pip install matplotlib"
MIN_PAIRS = 7  # suite_torch.MIN_JUDGE_ROUNDS: fewer pairs give no interval

# Whole-process series: name -> (legend, colour, marker).
WHOLE = {
    "stock": ("stock autoload", "#d62728", "s"),
    "epload-eager": ("epload eager", "#ff7f0e", "^"),
    "epload-lazy": ("epload lazy `full`", "#1f77b4", "o"),
    "epload-lazy-paths": ("epload lazy `paths`", "#2ca02c", "D"),
    "lazy-first-use": ("epload lazy + first device use", "#9467bd", "v"),
}
# In-process series.
INSIDE = {
    "in-process": ("epload lazy `full`: epload's own time (IQR)", "#1f77b4", "o"),
    "first-lazy": ("first device use, lazy (IQR, largest size)", "#9467bd", "v"),
    "first-by-hand": ("its backend by hand + use (IQR, largest size)", "#8c564b", "P"),
}
SERIES = dict(WHOLE, **INSIDE)


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def duration(ms):
    """A signed duration in ms or s, as a reader would say it."""
    return f"{ms / 1000:+,.1f} s" if abs(ms) >= 1000 else f"{ms:+,.1f} ms"


def points(row, name, first=None):
    """(median, low, high, hollow) of a series at one size, or None."""
    if name == "in-process":
        t = row["in_process"]["total"]
        return t["median_ms"], t["q1_ms"], t["q3_ms"], False
    if name in ("first-lazy", "first-by-hand"):
        key = "lazy" if name == "first-lazy" else "by_hand"
        if not first or first.get("backends") != row["backends"] or key not in first:
            return None
        t = first[key]
        return t["median_ms"], t["q1_ms"], t["q3_ms"], False
    s = row["stats"].get(name)
    if not s or "paired" not in s:
        return None
    p = s["paired"]
    if p.get("pairs", MIN_PAIRS) < MIN_PAIRS:
        return p["median_ms"], p["median_ms"], p["median_ms"], True
    return p["median_ms"], p["ci95_ms"][0], p["ci95_ms"][1], p["within_noise"]


# Characters of a title line at fontsize 10.5 across the 11-inch figure.
TITLE_WIDTH = 110


def title(result):
    """The result in one line, whole processes: what stock and lazy add at
    the largest size (the upper panel's figures)."""
    big = result["sizes"][-1]
    host = result["torch"].get("host", "torch")
    floor = big["stats"]["floor"]["median_ms"]
    what = (f"at {big['backends']:,} generated backends" if big["backends"]
            else "with the installed backends")

    def said(name, who):
        p = big["stats"][name]["paired"]
        if p.get("pairs", MIN_PAIRS) < MIN_PAIRS:
            return f"{who} {duration(p['median_ms'])} ({p['pairs']} pairs: no interval)"
        lo, hi = p["ci95_ms"]
        if lo > 0:
            return f"{who} adds {duration(p['median_ms'])} [{duration(lo)}, {duration(hi)}]"
        return (f"{who}: nothing measurable above the noise ({duration(p['median_ms'])} "
                f"[{duration(lo)}, {duration(hi)}])")
    return (f"`import {host}` {what}, whole processes over the {floor / 1000:.2f} s floor: "
            f"{said('stock', 'stock autoload')}; {said('epload-lazy', 'epload lazy')}")


def title_lines(result, width=TITLE_WIDTH):
    """The title, broken between words into lines the figure's width holds."""
    import textwrap
    return "\n".join(textwrap.wrap(title(result), width))


def panel(ax, rows, series, first, offset):
    """Draws ``series`` on ``ax``: {name: [(backends, median, hollow)]}."""
    xs = list(range(len(rows)))
    shift, drawn = 0.06, {}
    for k, (name, (label, colour, marker)) in enumerate(series.items()):
        got = [(x + (k - offset) * shift, p) for x, r in zip(xs, rows)
               if (p := points(r, name, first))]
        if not got:
            continue
        px, med = [x for x, _ in got], [p[0] for _, p in got]
        ax.plot(px, med, ":", color=colour, lw=1.0, alpha=0.6, zorder=2)
        ax.errorbar(px, med, yerr=[[p[0] - p[1] for _, p in got], [p[2] - p[0] for _, p in got]],
                    fmt="none", ecolor=colour, elinewidth=1.2, capsize=4, zorder=3)
        for (x, p) in got:
            ax.plot([x], [p[0]], marker=marker, ms=8, color=colour, zorder=4,
                    markerfacecolor="white" if p[3] else colour, markeredgewidth=1.6)
        ax.plot([], [], marker=marker, color=colour, label=label)
        drawn[name] = [(r["backends"], p[0], p[3]) for r in rows if (p := points(r, name, first))]
    ax.axhline(0, color="black", lw=0.8)
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_xticks(xs, [f"{r['backends']:,}" for r in rows])
    ax.set_xlim(-0.5, len(rows) - 0.5)
    ax.grid(True, which="major", alpha=0.3)
    return drawn


def plot_costs(result, path, budget_pct=1.0):
    """Writes the PNG; ``budget_pct``: a dashed line at that % of the floor
    in the whole-process panel.  Returns what was drawn: {panel: {series:
    [(backends, median, hollow)]}}, and each panel's y label."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows, first = result["sizes"], result.get("first_use")
    host = result["torch"].get("host", "torch")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 10), dpi=110, sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    drawn = {"whole": panel(top, rows, WHOLE, first, 2),
             "inside": panel(bottom, rows, INSIDE, first, 1)}
    top.plot([], [], "o", color="gray", markerfacecolor="white",
             label=f"hollow: interval holds 0, or under {MIN_PAIRS} pairs (no interval)")
    floor = rows[-1]["stats"]["floor"]["median_ms"]
    budget = floor * budget_pct / 100
    top.axhline(budget, color="gray", ls="--", lw=1,
                label=f"{budget_pct:g}% of the floor ({budget:.1f} ms)")
    labels = {"whole": f"whole process: added to `import {host}`\nover the floor, ms "
                       "(paired, 95% CI; symlog)",
              "inside": "inside the processes, ms\n(epload's trace / timed; IQR; symlog)"}
    top.set_ylabel(labels["whole"])
    bottom.set_ylabel(labels["inside"])
    top.set_title("Whole processes: paired differences from the floor", fontsize=9, loc="left")
    bottom.set_title("Inside the processes: not comparable with the panel above", fontsize=9,
                     loc="left")
    bottom.set_xlabel(f"generated backends ({result['config']['import_cost_ms']:g} ms import "
                      "each) beside the installed ones")
    fig.suptitle(title_lines(result), fontsize=10.5)
    for ax in (top, bottom):
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return drawn, labels
