"""Draws an epload trace (Chrome trace-event JSON, from ``EPLOAD_TRACE`` or
``epload profile --trace``) as a PNG a person reads at a glance: for each
process, an icicle of its start-up against time (every process on the one
axis of the trace's clock: a child is drawn where it ran in its parent's
time; a span nested in another of the same extent is folded into its row) --
the import tree's upper levels, epload's discovery and each backend's load, coloured by kind, the
slowest labelled with their times -- and below, the slowest imports by self
and by cumulative time.

    python -m epload.profile_plot TRACE.json -o OUT.png [--title TEXT]

``epload profile --plot OUT.png`` runs it with the Python of its own
environment.  Beside the PNG it writes OUT.plot.json, the picture's twin:
every box drawn (process, name, kind, start, duration, depth, label) and the
bars of the two tables, so that what the picture shows can be checked and
reused.  The twin needs only the standard library; the PNG needs matplotlib
(``pip install matplotlib``).  Exit status: 0 done, 1 unreadable or empty
trace, 2 usage, 3 matplotlib missing (the twin is written all the same).
"""

import argparse
import json
import sys

MAX_DEPTH = 7          # icicle rows drawn per process (the tree's upper levels)
MAX_PROCESSES = 6      # processes drawn; the rest are named in the title
MIN_WIDTH = 0.0015     # boxes narrower than this share of the process's extent are not drawn
TABLE_ROWS = 15
AXIS_PX = 1250.0       # the icicle's width in pixels (13 in at 110 dpi, minus margins)
CHAR_PX = 6.4          # a 7-point character, with room
SHOWN_MIN = 0.004      # epload's own steps (discovery, a backend's load) are drawn at least this wide
SAME_EXTENT = 0.99     # a span nested in one it fills to this share is the same row (folded)

# Colour per kind of span; imports take their top-level package's colour.
KIND_COLOURS = {
    "host import": "#b0b0b0",   # "import torch" / "body of torch": epload's hook around a host
    "discovery": "#ff7f0e",     # finding the backends: the index, entry points
    "backend load": "#d62728",  # one backend's load and its steps
    "epload": "#c5b0d5",        # other epload spans (a command, the loader's start)
}
PACKAGE_COLOURS = ["#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#bcbd22", "#e377c2",
                   "#aec7e8", "#98df8a", "#c49c94", "#9edae5", "#dbdb8d"]
OTHER_PACKAGES = "#d9d9d9"
DISCOVERY_CATS = {"cache_key", "stat", "read", "parse", "scan"}
LOAD_CATS = {"load", "resolve", "dlopen", "init", "py_import", "py_call"}
DISCOVERY_NAMES = ("entry_points query", "open_index", "index ", "discovery")


def kind_of(event):
    """The kind a span is drawn as: "import", "host import", "discovery",
    "backend load" or "epload"."""
    cat, name = event["cat"], event["name"]
    if cat == "import":
        return "import"
    if cat in LOAD_CATS:
        return "backend load"
    if cat in DISCOVERY_CATS or name.startswith(DISCOVERY_NAMES):
        return "discovery"
    if name.startswith(("import ", "body of ")):
        return "host import"
    return "epload"


def load_events(path):
    """Complete events (start/end in µs) and the process names."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    raw = data["traceEvents"] if isinstance(data, dict) else data
    names, events = {}, []
    for e in raw:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[e["pid"]] = e.get("args", {}).get("name", "")
        elif e.get("ph") == "X":
            start = float(e["ts"])
            events.append({"name": str(e["name"]), "cat": e.get("cat", "total"), "start": start,
                           "end": start + float(e["dur"]), "pid": e["pid"], "tid": e["tid"]})
    return events, names


def nest(events):
    """Gives each event its depth, its self time, its row (its depth with
    the spans folded away: one that fills its parent to SAME_EXTENT shares
    the parent's row, and is named in the row's head's "folded") and, for
    imports, the self time without nested imports (per pid/tid: by start,
    longest first; a stack of the open spans gives the parent).  Returns the
    lanes."""
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
            e["folded"], e["head"], e["row"] = [], e, 0
            if stack:
                p = stack[-1]
                if e["end"] - e["start"] >= SAME_EXTENT * (p["end"] - p["start"]):
                    e["head"], e["row"] = p["head"], p["row"]
                    p["head"]["folded"].append(e["name"])
                else:
                    e["row"] = p["row"] + 1
            if stack:
                stack[-1]["self"] -= e["end"] - e["start"]
            if e["cat"] == "import":
                e["import_self"] = e["end"] - e["start"]
                # the same module inside its own import (a parent importing
                # it first): its time is counted in the outer span already
                e["again"] = any(o["cat"] == "import" and o["name"] == e["name"] for o in stack)
                outer = next((o for o in reversed(stack) if o["cat"] == "import"), None)
                if outer is not None:
                    outer["import_self"] -= e["end"] - e["start"]
            stack.append(e)
    return lanes


def import_tables(events):
    """The slowest imports by self and by cumulative time (ms), summed over
    processes: two lists of {module, self_ms, cumulative_ms, count}."""
    by = {}
    for e in events:
        if e["cat"] != "import":
            continue
        t = by.setdefault(e["name"], {"module": e["name"], "self_ms": 0.0, "cumulative_ms": 0.0, "count": 0})
        t["self_ms"] += max(e["import_self"], 0.0) / 1000.0
        t["cumulative_ms"] += 0.0 if e["again"] else (e["end"] - e["start"]) / 1000.0
        t["count"] += 1
    rows = list(by.values())
    for t in rows:
        t["self_ms"], t["cumulative_ms"] = round(t["self_ms"], 3), round(t["cumulative_ms"], 3)
    by_self = sorted(rows, key=lambda t: -t["self_ms"])[:TABLE_ROWS]
    by_cum = sorted(rows, key=lambda t: -t["cumulative_ms"])[:TABLE_ROWS]
    return by_self, by_cum


def package_of(module):
    """What an import is coloured by: its first two name parts (torch.nn,
    torch._C), so that one big package still shows its parts."""
    return ".".join(module.split(".")[:2])


def fits(text, width_ms, extent_ms):
    return width_ms / extent_ms * AXIS_PX >= len(text) * CHAR_PX + 6


def box_label(e, width_ms, extent_ms, labelled_times):
    """The text on a box: its name (the last parts of a dotted module name
    when the whole does not fit) with its time when it is one of the slowest
    and there is room; "" when nothing fits."""
    name = e["name"]
    if e["cat"] == "load":
        name = "load " + name
    if e.get("folded"):  # the spans of the same extent nested in it: one row
        name = " ⊃ ".join([name] + e["folded"])
    candidates = [name]
    parts = name.split(".")
    for k in range(1, len(parts)):
        candidates.append("…" + ".".join(parts[k:]))
    time_text = f" {width_ms:.0f} ms" if width_ms >= 10 else f" {width_ms:.1f} ms"
    for text in candidates:
        if labelled_times and fits(text + time_text, width_ms, extent_ms):
            return text + time_text
        if fits(text, width_ms, extent_ms):
            return text
    return ""


def layout(events, names, title):
    """What the picture draws, as data (the twin): per process the boxes of
    its icicle, and the two import tables."""
    lanes = nest(events)
    pids = {}
    for (pid, tid), lane in lanes.items():
        pids.setdefault(pid, []).append((tid, lane))
    extent = {pid: max(e["end"] for _, l in ls for e in l) - min(e["start"] for _, l in ls for e in l)
              for pid, ls in pids.items()}
    chosen = sorted(pids, key=lambda p: -extent[p])[:MAX_PROCESSES]
    chosen.sort(key=lambda p: min(e["start"] for _, l in pids[p] for e in l))
    # Packages coloured: the top-level packages with the most import time.
    package_ms = {}
    for e in events:
        if e["cat"] == "import":
            key = package_of(e["name"])
            package_ms[key] = package_ms.get(key, 0.0) + max(e["import_self"], 0.0)
    packages = sorted(package_ms, key=lambda p: -package_ms[p])[:len(PACKAGE_COLOURS)]
    slowest = {id(e) for e in sorted((e for e in events if e["row"] <= 3 and e["head"] is e),
                                     key=lambda e: -(e["end"] - e["start"]))[:25]}
    processes = []
    # One axis for every process (the trace's clock, CLOCK_MONOTONIC).
    t0 = min(e["start"] for p in chosen for _, l in pids[p] for e in l)
    axis_ms = max((max(e["end"] for p in chosen for _, l in pids[p] for e in l) - t0) / 1000.0, 1e-3)
    for pid in chosen:
        start_ms = (min(e["start"] for _, l in pids[pid] for e in l) - t0) / 1000.0
        extent_ms = max(extent[pid] / 1000.0, 1e-3)
        boxes = []
        for tid, lane in sorted(pids[pid]):
            for e in lane:
                if e["head"] is not e:
                    continue  # folded into its parent's row
                width = (e["end"] - e["start"]) / 1000.0
                kind = kind_of(e)
                # epload's own steps stay visible however short: a backend's
                # load, the discovery query, a host's import.
                step = e["cat"] == "load" or (e["cat"] == "total" and kind in ("discovery", "host import"))
                if e["row"] >= MAX_DEPTH or (width < axis_ms * MIN_WIDTH and not step):
                    continue
                drawn = max(width, axis_ms * SHOWN_MIN) if step else width
                key = package_of(e["name"])
                boxes.append({"name": e["name"], "cat": e["cat"], "kind": kind, "tid": tid,
                              "package": key if kind == "import" and key in packages else None,
                              "start_ms": round((e["start"] - t0) / 1000.0, 3), "dur_ms": round(width, 3),
                              "drawn_ms": round(drawn, 3), "depth": e["row"], "folded": e["folded"],
                              "label": box_label(e, drawn, axis_ms, id(e) in slowest or step)})
                if step and not boxes[-1]["label"]:  # too narrow: named beside it
                    boxes[-1]["note"] = f"{e['name']} {width:.1f} ms"
        processes.append({"pid": pid, "name": names.get(pid, ""), "extent_ms": round(extent_ms, 3),
                          "start_ms": round(start_ms, 3), "axis_ms": round(axis_ms, 3),
                          "threads": len(pids[pid]), "boxes": boxes})
    by_self, by_cum = import_tables(events)
    more = len(pids) - len(chosen)
    return {"title": title, "processes": processes, "processes_not_drawn": more, "packages": packages,
            "slowest_self": by_self, "slowest_cumulative": by_cum,
            "modules": sum(1 for e in events if e["cat"] == "import")}


def colour(box, packages):
    if box["kind"] != "import":
        return KIND_COLOURS[box["kind"]]
    if box["package"] is None:
        return OTHER_PACKAGES
    return PACKAGE_COLOURS[packages.index(box["package"])]


def draw(plan, out, plt):
    from matplotlib.patches import Patch
    procs = plan["processes"]
    rows = [max([b["depth"] for b in p["boxes"]] + [0]) + 1 for p in procs]
    table_rows = max(len(plan["slowest_self"]), 1)
    heights = [0.9 + 0.32 * r for r in rows] + [0.75 + 0.2 * table_rows]
    fig = plt.figure(figsize=(13, sum(heights) + 1.2))
    grid = fig.add_gridspec(len(procs) + 1, 2, height_ratios=heights, hspace=0.4, wspace=0.45)
    for k, (p, depth) in enumerate(zip(procs, rows)):
        ax = fig.add_subplot(grid[k, :])
        for b in p["boxes"]:
            ax.barh(b["depth"] + 0.5, b["drawn_ms"], left=b["start_ms"], height=0.92,
                    color=colour(b, plan["packages"]), edgecolor="white", linewidth=0.3)
            if b["label"]:
                ax.text(b["start_ms"] + b["drawn_ms"] / 2, b["depth"] + 0.5, b["label"], ha="center",
                        va="center", fontsize=7, clip_on=True)
            elif b.get("note"):
                ax.annotate(b["note"], xy=(b["start_ms"], b["depth"] + 0.5), xytext=(-3, 0),
                            textcoords="offset points", ha="right", va="center", fontsize=7,
                            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": colour(b, plan["packages"])})
        ax.set_ylim(depth, 0)
        ax.set_xlim(0, p["axis_ms"] * 1.005)
        ax.set_yticks([])
        ax.set_ylabel("nesting", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.set_title(f"{p['name'] or 'process'} (pid {p['pid']}): {p['extent_ms']:.0f} ms, from "
                     f"{p['start_ms']:.0f} ms; the upper {depth} levels (a span of its parent's extent "
                     f"folded into its row: A ⊃ B), boxes under {MIN_WIDTH * 100:.2g}% of the width left out",
                     fontsize=8, loc="left")
        if k == len(procs) - 1:
            ax.set_xlabel("ms since the trace's first span (every process on this one axis)", fontsize=8)
    kinds = {b["kind"] for p in procs for b in p["boxes"]}
    handles = [Patch(color=PACKAGE_COLOURS[i], label=f"import {pkg}") for i, pkg in enumerate(plan["packages"][:8])]
    handles += [Patch(color=KIND_COLOURS[k], label=k) for k in KIND_COLOURS if k in kinds]
    if plan["modules"]:
        handles.append(Patch(color=OTHER_PACKAGES, label="other imports"))
    title = plan["title"] or "epload start-up profile"
    if plan["processes_not_drawn"]:
        title += f" ({plan['processes_not_drawn']} shorter process(es) not drawn)"
    fig.suptitle(title, fontsize=10, y=0.995)
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.975), ncol=min(8, len(handles)),
               fontsize=7, frameon=False)
    for col, (key, label) in enumerate((("slowest_self", "self_ms"), ("slowest_cumulative", "cumulative_ms"))):
        ax = fig.add_subplot(grid[len(procs), col])
        rows_ = plan[key][::-1]
        if rows_:
            values = [r[label] for r in rows_]
            ax.barh([r["module"] for r in rows_], values,
                    color=[PACKAGE_COLOURS[plan["packages"].index(package_of(r["module"]))]
                           if package_of(r["module"]) in plan["packages"] else OTHER_PACKAGES for r in rows_])
            for y, v in enumerate(values):
                ax.text(v, y, f" {v:.1f}", va="center", fontsize=6)
            ax.set_xlim(0, max(values) * 1.15)
        else:
            ax.text(0.5, 0.5, "no imports recorded", ha="center", va="center", transform=ax.transAxes)
        what = "self time (nested imports excluded)" if col == 0 else "cumulative time"
        ax.set_title(f"slowest imports by {what}, ms", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.savefig(out, dpi=110, bbox_inches="tight")


def twin_path(png):
    return (png[:-4] if png.lower().endswith(".png") else png) + ".plot.json"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m epload.profile_plot", description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="trace-event JSON file")
    p.add_argument("-o", "--output", required=True, help="PNG to write (its twin: OUT.plot.json)")
    p.add_argument("--title", help="the picture's title")
    args = p.parse_args(argv)
    try:
        events, names = load_events(args.trace)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"epload.profile_plot: cannot read trace {args.trace}: {e}", file=sys.stderr)
        return 1
    if not events:
        print(f"epload.profile_plot: {args.trace} holds no spans (was the profiler on?)", file=sys.stderr)
        return 1
    plan = layout(events, names, args.title)
    twin = twin_path(args.output)
    try:
        with open(twin, "w", encoding="utf-8") as f:
            json.dump(plan, f, indent=1)
            f.write("\n")
    except OSError as e:
        print(f"epload.profile_plot: cannot write {twin}: {e}", file=sys.stderr)
        return 1
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"epload.profile_plot: matplotlib is not installed for {sys.executable}: "
              f"pip install matplotlib (the picture's twin {twin} was written)", file=sys.stderr)
        return 3
    try:
        draw(plan, args.output, plt)
    except OSError as e:
        print(f"epload.profile_plot: cannot write {args.output}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
