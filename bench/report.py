"""The results table (absolute numbers, odradek/Tansu ratios, targets) and the JSON file."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

# (workload, result key, label, higher is better)
METRICS = [
    ("produce", "records_per_s", "records/s", True),
    ("produce", "mb_per_s", "MB/s", True),
    ("consume", "records_per_s", "records/s", True),
    ("consume", "mb_per_s", "MB/s", True),
    ("latency", "p50_ms", "p50 ms", False),
    ("latency", "p99_ms", "p99 ms", False),
    ("latency", "p999_ms", "p99.9 ms", False),
]


@dataclass(frozen=True)
class Target:
    workload: str
    key: str
    text: str
    kind: str  # "ratio>=" (odradek/tansu) or "odradek<=" (absolute)
    bound: float

    def check(self, odradek: float | None, tansu: float | None) -> str:
        if self.kind == "ratio>=":
            ratio = _ratio(odradek, tansu)
            return "n/a" if ratio is None else ("PASS" if ratio >= self.bound else "FAIL")
        if odradek is None:
            return "n/a"
        return "PASS" if odradek <= self.bound else "FAIL"


TARGETS = [
    Target("produce", "records_per_s", ">= 1x Tansu", "ratio>=", 1.0),
    Target("consume", "records_per_s", ">= 3x Tansu", "ratio>=", 3.0),
    Target("latency", "p50_ms", "<= 2 ms", "odradek<=", 2.0),
    Target("latency", "p99_ms", "<= 5 ms", "odradek<=", 5.0),
]


def _value(results: dict, broker: str, workload: str, key: str) -> float | None:
    value = results.get(broker, {}).get(workload, {}).get(key)
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.1f}"
    return f"{value:.2f}"


def evaluate(results: dict) -> list[dict]:
    """One row per metric with both values, the ratio and any target verdict."""
    rows = []
    for workload, key, label, higher_better in METRICS:
        ours = _value(results, "odradek", workload, key)
        theirs = _value(results, "tansu", workload, key)
        target = next((t for t in TARGETS if (t.workload, t.key) == (workload, key)), None)
        rows.append(
            {
                "workload": workload,
                "metric": label,
                "key": key,
                "higher_is_better": higher_better,
                "odradek": ours,
                "tansu": theirs,
                "ratio_odradek_over_tansu": _ratio(ours, theirs),
                "target": target.text if target else None,
                "verdict": target.check(ours, theirs) if target else None,
            }
        )
    return rows


def render_table(rows: list[dict]) -> str:
    header = ["workload", "metric", "odradek", "tansu", "odradek/tansu", "target", "result"]
    body = [
        [
            r["workload"],
            r["metric"],
            _fmt(r["odradek"]),
            _fmt(r["tansu"]),
            "-"
            if r["ratio_odradek_over_tansu"] is None
            else f"{r['ratio_odradek_over_tansu']:.2f}x",
            r["target"] or "",
            r["verdict"] or "",
        ]
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in [header, *body]) for i in range(len(header))]
    right = {2, 3, 4}

    def line(cells: list[str]) -> str:
        return "  ".join(
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), sep, *(line(b) for b in body)])


def render_notes(results: dict) -> str:
    """Errors and the diagnostics that say whether a number can be trusted."""
    notes = []
    for broker in ("odradek", "tansu"):
        res = results.get(broker)
        if not res:
            continue
        if "error" in res:
            notes.append(f"{broker}: {res['error']}")
        prod = res.get("produce", {})
        if "enqueue_seconds" in prod:
            notes.append(
                f"{broker} produce: {prod['records']:,} records in {prod['seconds']:.2f}s "
                f"(client enqueue loop {prod['enqueue_seconds']:.2f}s, "
                f"{prod['queue_full_waits']:,} queue-full waits)"
            )
        cons = res.get("consume", {})
        if "seconds" in cons:
            wm = cons.get("watermark_records")
            mismatch = "" if wm == cons["records"] else f" (high-low watermarks sum to {wm:,})"
            notes.append(
                f"{broker} consume: {cons['records']:,} records in {cons['seconds']:.2f}s{mismatch}"
            )
        lat = res.get("latency", {})
        if "received" in lat:
            notes.append(
                f"{broker} latency: {lat['received']:,}/{lat['sent']:,} records at "
                f"{lat['rate_achieved']:,.0f}/s (target {lat['rate_target']:,}/s, sender at most "
                f"{lat['max_send_behind_ms']:.2f} ms behind schedule), "
                f"mean {lat['mean_ms']:.2f} ms, max {lat['max_ms']:.2f} ms"
            )
        busy = res.get("cpu_busy_before_start")
        load = res.get("load_average_at_start")
        if busy is not None and busy > 0.25:
            notes.append(
                f"{broker}: the CPUs were {busy:.0%} busy with other processes when it "
                "started: expect noisy numbers"
            )
        elif busy is None and load and load[0] > 1.0:
            notes.append(f"{broker}: load average {load[0]:.2f} at start: expect noisy numbers")
        for workload in ("produce", "consume", "latency"):
            part = res.get(workload, {})
            if "wall_s" in part and part["wall_s"] > 0:
                broker_cpu = part.get("broker_cpu_s")
                broker_text = "-" if broker_cpu is None else f"{broker_cpu:.2f}s"
                other = part.get("other_cpu_s")
                other_text = "" if other is None else f", other processes {other:.2f}s"
                notes.append(
                    f"{broker} {workload}: CPU time broker {broker_text}, client "
                    f"{part['client_cpu_s']:.2f}s{other_text} over {part['wall_s']:.2f}s wall"
                )
            if "error" in part:
                notes.append(f"{broker} {workload}: ERROR {part['error']}")
            for err in part.get("client_errors", [])[:3]:
                notes.append(f"{broker} {workload}: client error: {err}")
            if part.get("profile"):
                notes.append(f"{broker} {workload}: profile {part['profile']}")
        if res.get("profiled"):
            notes.append(f"{broker}: ran under py-spy, its numbers include the sampling overhead")
    return "\n".join("  - " + n.replace("\n", "\n      ") for n in notes)


def write_json(path: Path, document: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
