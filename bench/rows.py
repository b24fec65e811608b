"""What every row of ``make bench`` (``python -m bench.suite``) is: one figure of one system,
measured in several runs, kept with all its runs so the report can give the median, the
spread and the ratio against the peers measured in the same run.

A row's runs are dicts: ``value`` is the row's figure (in ``unit``), anything else is a
measured extra worth keeping beside it (``broker_cpu_s``, ``rss_mb``, ``p99_ms`` ...). A
run that failed is ``{"error": "..."}`` and counts in no statistic.
"""

from __future__ import annotations

import statistics
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

Run = dict[str, Any]


@dataclass
class Row:
    section: str  # "machine", "throughput", "latency", "cost", ... (the report's grouping)
    name: str  # "one producer", "loopback TCP", ...
    system: str  # "odradek", "tansu", "redis (appendonly no)", "machine", "client ceiling"
    unit: str  # "records/s", "MB/s", "ms", "µs", "s"
    runs: list[Run] = field(default_factory=list)
    higher_is_better: bool = True
    note: str = ""

    @property
    def good_runs(self) -> list[Run]:
        return [run for run in self.runs if "error" not in run]

    @property
    def errors(self) -> list[str]:
        return [run["error"] for run in self.runs if "error" in run]

    def stat(self, key: str = "value") -> dict[str, float] | None:
        """Median, min and max of ``key`` over the good runs; None when none has it."""
        values = [run[key] for run in self.good_runs
                  if isinstance(run.get(key), (int, float))]
        if not values:
            return None
        return {"median": statistics.median(values), "min": min(values), "max": max(values),
                "runs": len(values)}

    @property
    def median(self) -> float | None:
        summary = self.stat()
        return None if summary is None else summary["median"]

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        keys = sorted({key for run in self.good_runs for key, value in run.items()
                       if isinstance(value, (int, float)) and not isinstance(value, bool)})
        document["summary"] = {key: self.stat(key) for key in keys}
        return document

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Row:
        fields = {key: document[key] for key in
                  ("section", "name", "system", "unit", "runs", "higher_is_better", "note")
                  if key in document}
        return cls(**fields)


def measure(row: Row, runs: int, once: Callable[[], Run]) -> Row:
    """Calls ``once`` ``runs`` times, appending each result (or the error it raised, as
    one line) to ``row.runs``. KeyboardInterrupt is not caught."""
    for _ in range(runs):
        try:
            row.runs.append(once())
        except Exception as exc:  # a failed run is reported, not fatal
            row.runs.append(failed_run(exc))
    return row


def failed_run(exc: Exception) -> Run:
    """A run that raised ``exc``: its error in one line."""
    return {"error": traceback.format_exception_only(exc)[-1].strip().splitlines()[0]}


def ratio(row: Row, peer: Row | None) -> float | None:
    """``row``'s median over ``peer``'s, oriented so that above 1 means ``row`` is better."""
    if peer is None or row.median is None or not peer.median:
        return None
    if row.higher_is_better:
        return row.median / peer.median
    return peer.median / row.median if row.median else None


def number(value: float) -> str:
    """A figure as the reports print it: thousands separated, else 3 significant digits."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def describe(row: Row) -> str:
    """One line for a console: system, name, median (min–max) unit, the broker's CPU per
    million records when measured, and any failed run."""
    summary = row.stat()
    if summary is None:
        figure = "no result"
    else:
        figure = (f"{number(summary['median'])} {row.unit} "
                  f"({number(summary['min'])}–{number(summary['max'])})")
    cpu = row.stat("broker_cpu_s_per_m")
    if cpu is not None:
        figure += f", broker {cpu['median']:.2f} CPU-s per million records"
    if row.errors:
        figure += f"; {len(row.errors)} failed: {row.errors[0]}"
    return f"{row.system:<28} {row.name:<40} {figure}"


def cost_rows(rows: list[Row]) -> list[Row]:
    """The broker's cost as rows of their own, so that they get ratios too: CPU-seconds per
    million records of each system's one-producer and one-consumer runs, and its resident
    memory after producing."""
    derived = []
    for row in rows:
        if row.section != "throughput" or row.name not in ("one producer", "one consumer"):
            continue
        verb = "produced" if row.name == "one producer" else "consumed"
        cpu = Row("cost", f"CPU-s per million records {verb}", row.system, "CPU-s",
                  higher_is_better=False)
        cpu.runs = [{"value": run["broker_cpu_s_per_m"]} for run in row.good_runs
                    if run.get("broker_cpu_s_per_m") is not None]
        derived.append(cpu)
        if row.name == "one producer":
            memory = Row("cost", "resident memory after producing", row.system, "MB",
                         higher_is_better=False)
            memory.runs = [{"value": run["rss_mb"]} for run in row.good_runs
                           if run.get("rss_mb") is not None]
            derived.append(memory)
    return [row for row in derived if row.runs]
