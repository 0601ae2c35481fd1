"""The suites' outputs: Markdown on stdout (--md-out), JSON, the --plot PNG."""

from __future__ import annotations

import os
import sys

from .proc import write_json


def fmt_ms(v):
    return f"{v:.2f}" if v < 100 else f"{v:.1f}"


def fmt_ratio(r):
    if r is None:
        return "n/a"
    return f"{r:,.0f}×" if r >= 100 else f"{r:.1f}×"


TIMES = ["median ms", "IQR ms", "CPU ms"]  # the columns of times()


def times(s):
    """A summary's cells: median, IQR and CPU time, ms (TIMES)."""
    return [fmt_ms(s["median_ms"]), f"{fmt_ms(s['q1_ms'])}–{fmt_ms(s['q3_ms'])}",
            fmt_ms(s["cpu_median_ms"])]


def table(head, align, rows):
    """A Markdown table; ``align`` one letter a column (l left, r right)."""
    sep = "|" + "".join("---:|" if a == "r" else "---|" for a in align)
    return ["| " + " | ".join(head) + " |", sep] + ["| " + " | ".join(r) + " |" for r in rows]


def load_average(cfg):
    """"1-minute load average X before, Y after" from a result's config."""
    la, lb = cfg.get("load_average_before"), cfg.get("load_average_after")
    return (f"1-minute load average {la[0]:.2f} before" if la else "") + (
        f" and {lb[0]:.2f} after" if la and lb else "")


def write_report(result, markdown, md_out=None, json_out=None, plot_to=None, plot=None,
                 md_append=False):
    """Writes markdown(result) on stdout (and md_out: appended to with
    ``md_append``), the JSON and the plot."""
    result["config"]["load_average_after"] = os.getloadavg()
    report = markdown(result)
    sys.stdout.write(report)
    sys.stdout.flush()
    if md_out:
        with open(md_out, "a" if md_append else "w") as f:
            f.write(report)
    if json_out:
        write_json(json_out, result)
    if plot_to:
        plot(result, plot_to)


SYSCALLS = ("total", "stat", "openat", "getdents64")
SYSCALL_COLUMNS = ["syscalls", "stat", "openat", "getdents64"]  # of syscall_cells


def syscall_cells(sc, hf):
    """Cells: system-call counts (``sc``) and the hyperfine median (``hf``)."""
    return ([f"{sc[k]:,}" for k in SYSCALLS] if sc else [""] * 4) + (
        [fmt_ms(hf["median_ms"]) if hf and "median_ms" in hf else ""] if hf is not None else [])


def plot_marginals(path, rows, labels, reference, xlabel, ylabel, title):
    """A log-log PNG of each variant's marginal cost against the backends;
    returns each variant's (colour, marker)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
    rows = [r for r in rows if r["backends"] > 0]
    # One colour and marker per variant (matplotlib's default cycle repeats
    # its colours after ten lines).
    colours = [plt.get_cmap("tab20")(k) for k in range(0, 20, 2)] + [
        plt.get_cmap("tab20")(k) for k in range(1, 20, 2)]
    markers = "osD^vP*Xh<>p"
    drawn = [v for v in labels if v != reference]
    styles = {}
    for k, v in enumerate(drawn):
        # A marginal at or below zero cannot sit on a log axis: it is drawn
        # at the axis's foot as a hollow marker, not left out.
        pts = [(r["backends"], r["stats"][v]["marginal_ms"]) for r in rows if v in r["stats"]]
        if not pts:
            continue
        colour, marker = colours[k % len(colours)], markers[k % len(markers)]
        styles[v] = (colour, marker)
        up = [(x, y) for x, y in pts if y > 0]
        if up:
            ax.plot([p[0] for p in up], [p[1] for p in up],
                    "--" if v.startswith(("epload", "lazy")) else "-", marker=marker, color=colour,
                    label=labels[v].replace("`", ""))
        down = [x for x, y in pts if y <= 0]
        if down:
            ax.plot(down, [0.01] * len(down), linestyle="none", marker=marker, color=colour,
                    markerfacecolor="white",
                    label=None if up else labels[v].replace("`", "") + " (≤ 0)")
    xs = [r["backends"] for r in rows]
    ax.set(xscale="log", yscale="log", xlabel=xlabel,
           ylabel=ylabel + "\nhollow at 0.01: ≤ 0", title=title)
    ax.set_xticks(xs, [f"{x:,}" for x in xs])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return styles
