#!/usr/bin/python3
"""Draws an epload trace (Chrome trace-event JSON, from EPLOAD_TRACE or
`epload profile --trace`) as a PNG: a timeline with one lane per process
and thread, spans stacked by nesting depth and coloured by phase, and below
it the self time of each phase and the costliest backend loads.

    scripts/plot_trace.py TRACE.json -o OUT.png [--title TEXT]

`epload profile --plot OUT.png` runs this script.  Needs matplotlib
(Debian: python3-matplotlib, for /usr/bin/python3).  Exit status: 0 done,
1 unreadable trace, 2 usage, 3 matplotlib missing.
"""

import argparse
import json
import sys

# One colour per phase (tab10-like, stable across plots).
COLOURS = {
    "total": "#c7c7c7", "cache_key": "#8c564b", "stat": "#1f77b4", "read": "#17becf",
    "parse": "#9467bd", "scan": "#aec7e8", "resolve": "#bcbd22", "load": "#ffbb78",
    "dlopen": "#d62728", "init": "#2ca02c", "py_import": "#e377c2", "py_call": "#98df8a",
}


def load_events(path):
    """Complete events as dicts with start/end in µs, plus process names."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    raw = data["traceEvents"] if isinstance(data, dict) else data
    names, events = {}, []
    for e in raw:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[e["pid"]] = e.get("args", {}).get("name", "")
        elif e.get("ph") == "X":
            events.append({"name": e["name"], "cat": e.get("cat", "total"), "start": float(e["ts"]),
                           "end": float(e["ts"]) + float(e["dur"]), "pid": e["pid"], "tid": e["tid"]})
    return events, names


def nest(events):
    """Assigns each event its depth and self time (per pid/tid: sorted by
    start, longest first; a stack of open spans gives the parent)."""
    lanes = {}
    for e in events:
        lanes.setdefault((e["pid"], e["tid"]), []).append(e)
    for lane in lanes.values():
        lane.sort(key=lambda e: (e["start"], -(e["end"] - e["start"])))
        stack = []
        for e in lane:
            while stack and not (e["start"] >= stack[-1]["start"] and e["end"] <= stack[-1]["end"]):
                stack.pop()
            e["depth"] = len(stack)
            e["self"] = e["end"] - e["start"]
            if stack:
                stack[-1]["self"] -= e["end"] - e["start"]
            stack.append(e)
    return lanes


def lane_rows(lanes, events, names):
    """Lanes top to bottom: processes in order of first activity, threads
    within.  Returns ({lane: (y, depth, label)}, total height)."""
    order = sorted(lanes, key=lambda k: (min(e["start"] for e in events if e["pid"] == k[0]), k[1]))
    rows, y = {}, 0.0
    for key in order:
        depth = max(e["depth"] for e in lanes[key]) + 1
        rows[key] = (y, depth, f"{names.get(key[0], 'pid')} {key[0]}\nthread {key[1]}")
        y += depth + 0.6
    return rows, y


def draw_timeline(ax, lanes, events, rows, height, title, trace):
    """Every lane's spans stacked by nesting depth, coloured by phase and
    named where wide enough; a legend of the phases seen."""
    from matplotlib.patches import Patch
    t0 = min(e["start"] for e in events)
    span_ms = (max(e["end"] for e in events) - t0) / 1000.0
    seen = set()
    for key, lane in lanes.items():
        base = rows[key][0]
        by = {}
        for e in lane:
            by.setdefault((e["cat"], e["depth"]), []).append(
                ((e["start"] - t0) / 1000.0, max((e["end"] - e["start"]) / 1000.0, span_ms * 1e-4)))
        for (cat, d), bars in by.items():
            seen.add(cat)
            ax.broken_barh(bars, (base + d + 0.05, 0.9), facecolors=COLOURS.get(cat, "#7f7f7f"),
                           edgecolor="none")
        for e in lane:  # names on spans wide enough to hold them
            w = (e["end"] - e["start"]) / 1000.0
            label = e["name"].rsplit("/", 1)[-1][:40]  # a file's base name
            if w >= span_ms * 0.0075 * (len(label) + 2):
                ax.text((e["start"] - t0) / 1000.0 + w / 2, base + e["depth"] + 0.5, label,
                        ha="center", va="center", fontsize=7, clip_on=True)
    ax.set_yticks([y + depth / 2.0 for y, depth, _ in rows.values()])
    ax.set_yticklabels([label for _, _, label in rows.values()], fontsize=8)
    ax.set_ylim(height - 0.3, -0.3)  # first lane on top, children below their parents
    ax.set_xlim(0, span_ms * 1.01)
    ax.set_xlabel("ms since the first span")
    ax.set_title(title or f"epload start-up profile: {trace.rsplit('/', 1)[-1]} "
                 f"({len(events)} spans, {span_ms:.1f} ms)", fontsize=10, pad=22)
    ax.legend(handles=[Patch(color=COLOURS.get(c, "#7f7f7f"), label=c) for c in COLOURS if c in seen],
              loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=min(12, len(seen)),
              fontsize=7, frameon=False)


def draw_phases(ax, events):
    """Self time per phase (the enclosing `total` spans excluded: they only wrap)."""
    self_ms = {}
    for e in events:
        if e["cat"] != "total":
            self_ms[e["cat"]] = self_ms.get(e["cat"], 0.0) + max(e["self"], 0.0) / 1000.0
    cats = sorted(self_ms, key=self_ms.get)
    ax.barh(cats, [self_ms[c] for c in cats], color=[COLOURS.get(c, "#7f7f7f") for c in cats])
    ax.set_xlabel("self time, ms (summed over threads)")
    ax.set_title("phases", fontsize=9)
    ax.tick_params(labelsize=8)


def draw_loads(ax, events):
    """The ten costliest backend loads (time summed per backend)."""
    loads = {}
    for e in events:
        if e["cat"] == "load":
            loads[e["name"]] = loads.get(e["name"], 0.0) + (e["end"] - e["start"]) / 1000.0
    top = sorted(loads, key=loads.get, reverse=True)[:10][::-1]
    if top:
        ax.barh(top, [loads[n] for n in top], color=COLOURS["load"])
        ax.set_title(f"costliest backend loads ({len(loads)} loaded)", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no backend loaded", ha="center", va="center", transform=ax.transAxes)
        ax.set_title("backend loads", fontsize=9)
    ax.set_xlabel("ms")
    ax.tick_params(labelsize=8)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="trace-event JSON file")
    p.add_argument("-o", "--output", required=True, help="PNG to write")
    p.add_argument("--title", help="plot title (default: the trace file name)")
    args = p.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"plot_trace.py: matplotlib is not installed for {sys.executable} "
              "(Debian: apt-get install python3-matplotlib)", file=sys.stderr)
        return 3
    try:
        events, names = load_events(args.trace)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"plot_trace.py: cannot read trace {args.trace}: {e}", file=sys.stderr)
        return 1
    if not events:
        print(f"plot_trace.py: {args.trace} holds no spans (was the profiler on?)", file=sys.stderr)
        return 1

    lanes = nest(events)
    rows, y = lane_rows(lanes, events, names)
    fig = plt.figure(figsize=(13, 3.2 + 0.45 * y))
    grid = fig.add_gridspec(2, 2, height_ratios=[max(2.0, 0.45 * y), 2.6], hspace=0.45, wspace=0.35)
    draw_timeline(fig.add_subplot(grid[0, :]), lanes, events, rows, y, args.title, args.trace)
    draw_phases(fig.add_subplot(grid[1, 0]), events)
    draw_loads(fig.add_subplot(grid[1, 1]), events)
    fig.savefig(args.output, dpi=110, bbox_inches="tight")
    print(f"plot_trace.py: wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
