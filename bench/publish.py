"""docs/benchmarks.md and its plots, from one result document of ``python -m bench.suite``.

    .venv/bin/python -m bench.publish [RESULT.json] [--markdown docs/benchmarks.md]
                                      [--images docs/benchmarks]

The suite calls ``publish()`` at the end of a run; the command does the same from a saved
document (by default the newest bench/results/*.json whose "rows" is a list), so the page can
be rewritten without measuring again. The document::

    {"started": ISO time, "finished": ISO time, "quick": bool, "runs": runs per figure,
     "command": str, "machine": {name: value}, "systems": {system: "version / how started"},
     "rows": [Row.to_json(), ...],
     "targets": [{"text": str, "value": float, "bound": float, "met": bool, "note": str}],
     "notes": [str, ...]}

Rows are read back with ``Row.from_json`` and their statistics recomputed from their runs,
so the page and ``bench.rows.ratio`` agree by construction. The page has one section per
``Row.section`` in order of first appearance, each with a table of a line per row name, a
column per system, and a ratio column per peer when odradek is in the section; below it,
where the rows measured them, a table of what they measured beside their figures (latency
percentiles, the produce of a fetch row) and one of the broker's cost. Plots are
drawn on matplotlib's Agg canvas (no display needed), each system in the same colour on every
plot; a plot with nothing to show is neither written nor linked.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import EngFormatter, Formatter, FuncFormatter

from bench.brokers import RESULTS_DIR
from bench.rows import Row, ratio

DOCS_DIR = Path(__file__).resolve().parent.parent / "docs"
ODRADEK = "odradek"
ABSENT = "—"
# A traceback's last line can be long; the table keeps the start, the log has the rest.
ERROR_CHARS = 100
# 900x500 px: room for five systems' bars side by side, small enough to read on the page.
FIGURE_INCHES = (9, 5)
DPI = 100
# A colour per system, the same on every plot.
PALETTE = colormaps["tab10"].colors
# (label, run key) of the latency plot: "value" is the row's p50 in the row's unit, the
# other keys are milliseconds.
PERCENTILES = (("p50", "value"), ("p99", "p99_ms"), ("p99.9", "p999_ms"), ("max", "max_ms"))
MS_PER_UNIT = {"ms": 1.0, "µs": 0.001, "us": 0.001, "s": 1000.0}
# (run key, label) of the broker-cost table of a section.
COST_EXTRAS = (("broker_cpu_s_per_m", "CPU-s/M"), ("rss_mb", "MB RSS"))
# (run key, label) of what a row measured beside its figure, in a table of their own: the
# latency percentiles beside a p50 or p99, the produce beside a fetch, and how busy the
# broker and the background load were beside the many-clients probe.
BESIDE_EXTRAS = (("p50_ms", "ms p50"), ("p99_ms", "ms p99"), ("p999_ms", "ms p99.9"),
                 ("max_ms", "ms max"), ("produce_mb_per_s", "MB/s produced"),
                 ("broker_cpu_s_per_s", "broker cores busy"),
                 ("background_records_per_s", "background records/s"))
# "produce at 5 GB" -> "produce": a data-growth line joins the rows that differ only in size.
AT_SIZE = re.compile(r"\s+at\s+[\d.,]+\s*[KMGT]i?B$")
GROWTH_LINESTYLES = ("-", "--", ":", "-.")

Stat = dict[str, float]


def publish(document: dict[str, Any], markdown_path: Path, image_dir: Path) -> list[Path]:
    """Writes ``markdown_path`` and the plots it links (into ``image_dir``, created if
    missing) and returns the files written. A plot this document has no data for is removed
    from ``image_dir`` rather than left there from an older run."""
    rows = [Row.from_json(row) for row in document.get("rows", [])]
    # The measured systems first, in the document's order, so odradek keeps its colour from
    # one run's page to the next; then the rows' other systems ("machine", ...).
    systems = _unique([*(document.get("systems") or {}), *(row.system for row in rows)])
    colours = {system: PALETTE[index % len(PALETTE)] for index, system in enumerate(systems)}
    image_dir.mkdir(parents=True, exist_ok=True)
    plots = []
    for filename, caption, draw in PLOTS:
        path = image_dir / filename
        figure = draw(rows, colours)
        if figure is None:
            path.unlink(missing_ok=True)
            continue
        FigureCanvasAgg(figure).print_png(path)
        plots.append((caption, path))
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    links = [(caption, Path(os.path.relpath(path, markdown_path.parent)).as_posix())
             for caption, path in plots]
    markdown_path.write_text(_markdown(document, rows, links), encoding="utf-8")
    return [markdown_path, *(path for _, path in plots)]


# --- the page ---------------------------------------------------------------------------


def _markdown(document: dict[str, Any], rows: list[Row], links: list[tuple[str, str]]) -> str:
    lines = ["# odradek benchmarks", "", *_summary(document, rows)]
    lines += _setup(document.get("machine") or {}, document.get("systems") or {})
    lines += _targets(document.get("targets") or [])
    if links:
        lines += ["## At a glance", ""]
        for caption, link in links:
            lines += [f"![{caption}]({link})", ""]
    for section in _unique(row.section for row in rows):
        lines += _section(section, [row for row in rows if row.section == section])
    if document.get("notes"):
        lines += ["## Notes", "", *(f"- {note}" for note in document["notes"]), ""]
    return "\n".join(lines)


def _summary(document: dict[str, Any], rows: list[Row]) -> list[str]:
    systems = list(document.get("systems") or _unique(row.system for row in rows))
    peers = ", ".join(system for system in systems if system != ODRADEK) or "no peer"
    sections = ", ".join(_unique(row.section for row in rows))
    runs = document.get("runs", "?")
    kind = "a quick run (`--quick`)" if document.get("quick") else "a full run"
    return [
        f"odradek measured beside {peers} on one machine from "
        f"{document.get('started', '?')} to {document.get('finished', '?')}: {sections}. "
        f"Command: `{document.get('command', '?')}`, {kind}. Every figure is the median of "
        f"{runs} run{'' if runs == 1 else 's'}, min–max in brackets; ratios compare medians "
        f"measured in the same run. An \"odradek vs X\" column is odradek's median over X's, "
        f"turned so that above 1× means odradek did better.",
        "",
        "_Generated by `python -m bench.publish` from the run's result document "
        "(bench/results/); change the suite, not this page._",
        "",
    ]


def _setup(machine: dict[str, Any], systems: dict[str, str]) -> list[str]:
    """The machine table and the systems list, under a heading of their own: "machine" is
    also a section of rows (the machine's own limits)."""
    if not machine and not systems:
        return []
    lines = ["## Setup", ""]
    if machine:
        body = [[key, str(value)] for key, value in machine.items()]
        lines += ["The machine:", "", *_table(["", ""], body), ""]
    if systems:
        lines += ["The systems:", "", *(f"- **{name}**: {how}" for name, how in systems.items())]
        lines += [""]
    return lines


def _targets(targets: list[dict[str, Any]]) -> list[str]:
    if not targets:
        return []
    marks = {True: "✓", False: "✗"}
    body = [[target.get("text", ""), _optional_number(target.get("value")),
             _optional_number(target.get("bound")), marks.get(target.get("met"), ABSENT),
             target.get("note", "")] for target in targets]
    return ["## Targets", "", *_table(["target", "measured", "bound", "met", "note"], body), ""]


def _section(section: str, rows: list[Row]) -> list[str]:
    """The section's table, its broker-cost table when its rows measured one, and the
    rows' notes."""
    names = _unique(row.name for row in rows)
    systems = _unique(row.system for row in rows)
    by_key: dict[tuple[str, str], Row] = {}
    for row in rows:
        by_key.setdefault((row.name, row.system), row)
    peers = [system for system in systems if system != ODRADEK] if ODRADEK in systems else []
    body = []
    for name in names:
        figures = [_figure(by_key.get((name, system))) for system in systems]
        ours = by_key.get((name, ODRADEK))
        ratios = [_ratio(ours, by_key.get((name, peer))) for peer in peers]
        body.append([name, *figures, *ratios])
    header = ["", *systems, *(f"{ODRADEK} vs {peer}" for peer in peers)]
    lines = [f"## {section[:1].upper()}{section[1:]}", "", *_table(header, body), ""]
    lines += _extras_table("Beside the figures (medians): what each row measured with it.",
                           BESIDE_EXTRAS, names, systems, by_key)
    lines += _extras_table("Broker cost (medians): CPU seconds per million records · resident "
                           "memory.", COST_EXTRAS, names, systems, by_key)
    notes = _unique(f"- {row.name}, {row.system}: {row.note}" for row in rows if row.note)
    return lines + notes + ([""] if notes else [])


def _extras_table(caption: str, extras: tuple[tuple[str, str], ...], names: list[str],
                  systems: list[str], by_key: dict[tuple[str, str], Row]) -> list[str]:
    """The medians of ``extras`` (run key, label), for the rows and systems that measured
    any of them, under ``caption``."""
    cells = {key: _extras(row, extras) for key, row in by_key.items()}
    names = [name for name in names if any(cells.get((name, s)) for s in systems)]
    systems = [system for system in systems if any(cells.get((n, system)) for n in names)]
    if not names:
        return []
    body = [[name, *(cells.get((name, system)) or ABSENT for system in systems)]
            for name in names]
    return [caption, "", *_table(["", *systems], body), ""]


def _extras(row: Row, extras: tuple[tuple[str, str], ...]) -> str:
    return " · ".join(f"{_number(stat['median'])} {label}"
                      for key, label in extras if (stat := row.stat(key)))


def _figure(row: Row | None) -> str:
    """A row's cell: "median unit (min–max)", and the first error when runs failed."""
    if row is None:
        return ABSENT
    stat = row.stat()
    failure = f"failed: {_clip(row.errors[0])}" if row.errors else ""
    if stat is None:
        return failure or ABSENT
    figure = f"{_number(stat['median'])} {row.unit}".rstrip()
    if stat["min"] != stat["max"]:
        figure += f" ({_number(stat['min'])}–{_number(stat['max'])})"
    if failure:
        figure += f"; {len(row.errors)} of {len(row.runs)} runs {failure}"
    return figure


def _ratio(ours: Row | None, peer: Row | None) -> str:
    value = None if ours is None else ratio(ours, peer)
    return ABSENT if value is None else f"{_number(value)}×"


def _clip(text: str) -> str:
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 1] + "…"


def _number(value: float) -> str:
    """Thousands separators from 1,000 up, three significant digits below, never an
    exponent (0.000123, not 1.23e-04)."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 999.5:
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    return f"{value:.{max(0, 2 - math.floor(math.log10(abs(value))))}f}"


def _optional_number(value: Any) -> str:
    return _number(value) if isinstance(value, (int, float)) else ABSENT


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    return [_table_line(cells) for cells in [header, ["---"] * len(header), *body]]


def _table_line(cells: list[str]) -> str:
    # A "|" inside a cell would end it; a newline would end the table.
    escaped = (str(cell).replace("|", "\\|").replace("\n", " ") for cell in cells)
    return "| " + " | ".join(escaped) + " |"


def _unique(items: Iterable[str]) -> list[str]:
    """``items`` without repeats, in order of first appearance."""
    return list(dict.fromkeys(items))


# --- the plots --------------------------------------------------------------------------

Colours = dict[str, Any]


# The sections whose records/s and broker CPU per million records the bar charts compare:
# single-record requests cost a thousand times more per record, and the levels of data
# growth have a plot of their own.
BAR_SECTIONS = ("throughput", "C client", "replication")


def _plot_throughput(rows: list[Row], colours: Colours) -> Figure | None:
    chosen = [row for row in rows if row.section in BAR_SECTIONS and row.unit == "records/s"]
    return _bar_chart(chosen, "value", "records/s (median, min–max)", colours, EngFormatter())


def _plot_broker_cost(rows: list[Row], colours: Colours) -> Figure | None:
    chosen = [row for row in rows
              if row.section in BAR_SECTIONS and row.stat("broker_cpu_s_per_m")]
    return _bar_chart(chosen, "broker_cpu_s_per_m",
                      "broker CPU seconds per million records (lower is better)", colours)


def _bar_chart(rows: list[Row], key: str, xlabel: str, colours: Colours,
               formatter: Formatter | None = None) -> Figure | None:
    """Horizontal bars of ``key``, a group per row name (prefixed with its section when
    the name is in several), a bar per system."""
    sections_of: dict[str, set[str]] = {}
    for row in rows:
        sections_of.setdefault(row.name, set()).add(row.section)
    stats = {}
    for row in rows:
        label = row.name if len(sections_of[row.name]) == 1 else f"{row.section}: {row.name}"
        if (stat := row.stat(key)) is not None:
            stats.setdefault((label, row.system), stat)
    if not stats:
        return None
    figure = _new_figure()
    axes = figure.add_subplot()
    systems = _draw_groups(axes, stats, colours, horizontal=True)
    axes.invert_yaxis()  # the first row on top, as in the table
    axes.set_xlabel(xlabel)
    if formatter is not None:
        axes.xaxis.set_major_formatter(formatter)
    _legend(figure, systems, colours)
    return figure


def _plot_latency(rows: list[Row], colours: Colours) -> Figure | None:
    """A panel per latency row: p50, p99, p99.9 and max in ms, a bar per system."""
    panels: dict[str, dict[tuple[str, str], Stat]] = {}
    for row in rows:
        if row.section != "latency" or row.unit not in MS_PER_UNIT:
            continue
        for label, key in PERCENTILES:
            if (stat := row.stat(key)) is not None:
                scale = MS_PER_UNIT[row.unit] if key == "value" else 1.0
                panel = panels.setdefault(row.name, {})
                panel.setdefault((label, row.system), _scaled(stat, scale))
    if not panels:
        return None
    figure = _new_figure()
    shown: list[str] = []
    for index, (name, stats) in enumerate(panels.items()):
        axes = figure.add_subplot(1, len(panels), index + 1,
                                  sharey=figure.axes[0] if figure.axes else None)
        shown += _draw_groups(axes, stats, colours, horizontal=False)
        axes.set_yscale("log")
        axes.yaxis.set_major_formatter(_number_ticks())
        axes.set_title(name)
    figure.axes[0].set_ylabel("end-to-end latency, ms (log scale; median, min–max)")
    _legend(figure, _unique(shown), colours)
    return figure


def _plot_data_growth(rows: list[Row], colours: Colours) -> Figure | None:
    """A line per system (and per measurement, when the section has several) of the median
    against the stored GB of its runs. A fresh broker measured beside a filled one is drawn
    at the filled one's level (``level_gb``), so that the two lines meet where nothing but
    the data stored differs."""
    lines: dict[tuple[str, str], list[tuple[float, Stat]]] = {}
    for row in rows:
        if row.section != "data growth":
            continue
        where = "stored_gb" if row.system == ODRADEK else "level_gb"
        stored, stat = row.stat(where) or row.stat("stored_gb"), row.stat()
        if stored is not None and stat is not None:
            line = lines.setdefault((row.system, AT_SIZE.sub("", row.name)), [])
            line.append((stored["median"], stat))
    if not lines:
        return None
    measurements = _unique(what for _, what in lines)
    figure = _new_figure()
    axes = figure.add_subplot()
    for (system, what), points in lines.items():
        points.sort(key=lambda point: point[0])
        stats = [stat for _, stat in points]
        linestyle = GROWTH_LINESTYLES[measurements.index(what) % len(GROWTH_LINESTYLES)]
        axes.errorbar([stored for stored, _ in points], [stat["median"] for stat in stats],
                      yerr=_spread(stats), color=colours[system], marker="o", capsize=3,
                      linestyle=linestyle,
                      label=system if len(measurements) == 1 else f"{system}: {what}")
    units = _unique(row.unit for row in rows if row.section == "data growth")
    axes.set_xlabel("data stored on the broker, GB")
    axes.set_ylabel(f"{' / '.join(units)} (median, min–max)")
    axes.set_xlim(left=0)
    axes.set_ylim(bottom=0)
    axes.yaxis.set_major_formatter(_number_ticks())
    axes.grid(alpha=0.3)
    axes.legend()
    return figure


def _draw_groups(axes: Axes, stats: dict[tuple[str, str], Stat], colours: Colours,
                 horizontal: bool) -> list[str]:
    """A group of bars per label in ``stats`` (keyed by (label, system)), a bar per system
    at its median with a min–max error bar; returns the systems drawn."""
    groups = _unique(group for group, _ in stats)
    systems = _unique(system for _, system in stats)
    width = 0.8 / len(systems)
    draw = axes.barh if horizontal else axes.bar
    for index, system in enumerate(systems):
        shift = (index - (len(systems) - 1) / 2) * width
        places = [place for place, group in enumerate(groups) if (group, system) in stats]
        chosen = [stats[groups[place], system] for place in places]
        error = {"xerr" if horizontal else "yerr": _spread(chosen)}
        draw([place + shift for place in places], [stat["median"] for stat in chosen], width,
             color=colours[system], capsize=3, **error)
    ticks = axes.set_yticks if horizontal else axes.set_xticks
    ticks(range(len(groups)), groups)
    (axes.xaxis if horizontal else axes.yaxis).grid(True, alpha=0.3)
    return systems


def _spread(stats: list[Stat]) -> list[list[float]]:
    """matplotlib's asymmetric error bars: distances from the median down to the min and up
    to the max."""
    return [[stat["median"] - stat["min"] for stat in stats],
            [stat["max"] - stat["median"] for stat in stats]]


def _scaled(stat: Stat, scale: float) -> Stat:
    return {key: value * scale if key != "runs" else value for key, value in stat.items()}


def _number_ticks() -> FuncFormatter:
    """Tick labels as plain numbers: 0.5, 10, 600,000 (a log axis would say 10^1)."""
    return FuncFormatter(lambda value, _: f"{value:,.0f}" if abs(value) >= 1000 else f"{value:g}")


def _new_figure() -> Figure:
    # "constrained" keeps long tick labels and the outside legend inside the fixed size.
    return Figure(figsize=FIGURE_INCHES, dpi=DPI, layout="constrained")


def _legend(figure: Figure, systems: list[str], colours: Colours) -> None:
    handles = [Patch(color=colours[system], label=system) for system in systems]
    figure.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 5))


# (file name, caption, drawer): the plots in the order the page shows them.
PLOTS: tuple[tuple[str, str, Callable[[list[Row], Colours], Figure | None]], ...] = (
    ("throughput.png", "Throughput, records/s by system", _plot_throughput),
    ("latency.png", "End-to-end latency percentiles by system", _plot_latency),
    ("data_growth.png", "Data growth: each row's median against the GB stored", _plot_data_growth),
    ("broker_cost.png", "Broker CPU seconds per million records", _plot_broker_cost),
)


# --- the command ------------------------------------------------------------------------


def newest_result(directory: Path) -> Path | None:
    """The suite's newest full result document in ``directory``: the latest "started" among
    the JSON files whose "rows" is a list (other benchmarks keep other shapes there) and
    that are not ``--quick`` runs, which are not the published figures."""
    found = []
    for path in directory.glob("*.json"):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:  # a run still writing its file
            continue
        if isinstance(document, dict) and isinstance(document.get("rows"), list) \
                and not document.get("quick"):
            found.append((str(document.get("started", "")), path.name, path))
    return max(found)[2] if found else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.publish",
                                     description="docs/benchmarks.md from a result document")
    parser.add_argument("result", nargs="?", type=Path,
                        help=f"the document (default: the newest in {RESULTS_DIR})")
    parser.add_argument("--markdown", type=Path, default=DOCS_DIR / "benchmarks.md")
    parser.add_argument("--images", type=Path, default=DOCS_DIR / "benchmarks")
    args = parser.parse_args(argv)
    path = args.result or newest_result(RESULTS_DIR)
    if path is None:
        parser.error(f"no result document with rows in {RESULTS_DIR}")
    document = json.loads(path.read_text(encoding="utf-8"))
    for written in publish(document, args.markdown, args.images):
        print(written)


if __name__ == "__main__":
    main()
