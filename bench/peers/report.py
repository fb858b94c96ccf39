"""Medians over rounds, ratios to `direct` from the same round, and the table, JSON and plot."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .arms import DIRECT, Arm
from .run import RoundResults
from .workloads import Figure, WorkloadSpec

__all__ = ["as_json", "headline", "plot", "summarize", "tables"]

Summary = dict[str, dict[str, dict[str, Any]]]
"""arm -> workload -> {"figures": {key: {"median", "ratio", "values"}}} or {"n/a"} / {"failed"}."""


def summarize(
    arms: Sequence[Arm], specs: Sequence[WorkloadSpec], rounds: Sequence[RoundResults]
) -> Summary:
    summary: Summary = {}
    for arm in arms:
        summary[arm.name] = {}
        for spec in specs:
            outcomes = [r[arm.name].get(spec.name) for r in rounds]
            measured = [o.figures for o in outcomes if o is not None and o.figures is not None]
            failures = [o.failed for o in outcomes if o is not None and o.failed]
            entry: dict[str, Any] = {}
            if failures:
                entry["failed"] = failures
            if not measured:
                reasons = [o.not_applicable for o in outcomes if o is not None and o.not_applicable]
                if reasons:
                    entry["n/a"] = reasons[0]
                summary[arm.name][spec.name] = entry
                continue
            entry["figures"] = {
                figure.key: _figure(arm.name, spec.name, figure, rounds) for figure in spec.figures
            }
            summary[arm.name][spec.name] = entry
    return summary


def _figure(
    arm: str, workload: str, figure: Figure, rounds: Sequence[RoundResults]
) -> dict[str, Any]:
    values: list[float] = []
    ratios: list[float] = []
    for results in rounds:
        value = _value(results, arm, workload, figure.key)
        if value is None:
            continue
        values.append(value)
        base = _value(results, DIRECT, workload, figure.key) if figure.ratio else None
        if base:
            ratios.append(value / base)
    return {
        "median": statistics.median(values) if values else None,
        "ratio": statistics.median(ratios) if ratios else None,
        "values": values,
        "ratios": ratios,
    }


def _value(results: RoundResults, arm: str, workload: str, key: str) -> float | None:
    outcome = results.get(arm, {}).get(workload)
    if outcome is None or outcome.figures is None:
        return None
    return outcome.figures.get(key)


def _number(value: float, unit: str) -> str:
    if unit == "":
        return f"{value:,.0f}"
    if unit == "/s":
        return f"{value:,.0f}/s"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "%":
        return f"{value:+.1f} %"
    digits = 3 if abs(value) < 1 else 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
    return f"{value:,.{digits}f} {unit}"


def _cell(arm: str, figure: Figure, entry: dict[str, Any]) -> str:
    if "figures" not in entry:
        if "n/a" in entry:
            return "n/a"
        return "failed" if "failed" in entry else ""
    data = entry["figures"][figure.key]
    if data["median"] is None:
        return "n/a"
    text = _number(data["median"], figure.unit)
    if figure.ratio and arm != DIRECT and data["ratio"] is not None:
        text += f" ({data['ratio']:.2f}x)"
    return text


HEADLINE = (
    ("sequential", "p50_ms", "p50"),
    ("sequential", "p99_ms", "p99"),
    ("sequential", "cpu_ms", "CPU/call"),
    ("asking", "p50_ms", "p50, asking client"),
    ("asking_modern", "p50_ms", "p50, asking 2026 client"),
    ("clients10", "calls_per_s", "10 clients"),
    ("clients50", "calls_per_s", "50 clients"),
    ("blob1mb", "mb_per_s", "1 MB"),
    ("blob4mb", "mb_per_s", "4 MB"),
    ("parallel_sleep", "wall_ms", "10 parallel sleeps"),
    ("agent", "run_ms", "agent run"),
    ("nested", "p50_ms", "nested hop"),
)
"""The ratios to direct that say most, in one row per arm."""


def headline(arms: Sequence[Arm], specs: Sequence[WorkloadSpec], summary: Summary) -> str:
    """One table: direct's own figures, every other arm as ratios to direct (same round)."""
    units = {(s.name, f.key): f.unit for s in specs for f in s.figures}
    columns = [c for c in HEADLINE if (c[0], c[1]) in units]
    if not columns:
        return ""
    out = [
        "| arm | " + " | ".join(label for _w, _k, label in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for arm in arms:
        cells: list[str] = []
        for workload, key, _label in columns:
            data = summary[arm.name][workload].get("figures", {}).get(key)
            if data is None or data["median"] is None:
                cells.append("n/a")
            elif arm.name == DIRECT:
                cells.append(_number(data["median"], units[workload, key]))
            else:
                cells.append(f"{data['ratio']:.2f}x" if data["ratio"] is not None else "n/a")
        out.append(f"| {arm.name} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def tables(arms: Sequence[Arm], specs: Sequence[WorkloadSpec], summary: Summary) -> str:
    """Markdown: a table per workload, arms as rows; `(N.NNx)` is the ratio to direct."""
    out: list[str] = []
    for spec in specs:
        out.append(f"### {spec.name}: {spec.title}\n")
        out.append("| arm | " + " | ".join(f.label for f in spec.figures) + " |")
        out.append("|---|" + "---|" * len(spec.figures))
        for arm in arms:
            entry = summary[arm.name][spec.name]
            cells = [_cell(arm.name, f, entry) for f in spec.figures]
            failed = entry.get("failed")
            note = f" ({len(failed)} round(s) failed)" if failed and "figures" in entry else ""
            out.append(f"| {arm.name}{note} | " + " | ".join(cells) + " |")
        reasons = {
            arm.name: summary[arm.name][spec.name]["n/a"]
            for arm in arms
            if "n/a" in summary[arm.name][spec.name]
        }
        if reasons:
            out.append("\nn/a: " + "; ".join(f"{a}: {r}" for a, r in reasons.items()))
        failures = {
            arm.name: summary[arm.name][spec.name]["failed"][0]
            for arm in arms
            if "failed" in summary[arm.name][spec.name]
        }
        if failures:
            out.append("\nfailed: " + "; ".join(f"{a}: {r}" for a, r in failures.items()))
        out.append("")
    return "\n".join(out)


def as_json(
    meta: dict[str, Any],
    arms: Sequence[Arm],
    specs: Sequence[WorkloadSpec],
    rounds: Sequence[RoundResults],
    summary: Summary,
) -> str:
    document = {
        "meta": meta,
        "arms": {arm.name: {"kind": arm.kind, "about": arm.description} for arm in arms},
        "workloads": {
            spec.name: {
                "title": spec.title,
                "figures": [
                    {
                        "key": f.key,
                        "label": f.label,
                        "unit": f.unit,
                        "higher_is_better": f.higher_is_better,
                        "ratio_to_direct": f.ratio,
                    }
                    for f in spec.figures
                ],
            }
            for spec in specs
        },
        "rounds": [
            {
                arm: {
                    workload: {
                        k: v
                        for k, v in (
                            ("figures", o.figures),
                            ("n/a", o.not_applicable),
                            ("failed", o.failed),
                        )
                        if v is not None
                    }
                    for workload, o in by_workload.items()
                }
                for arm, by_workload in results.items()
            }
            for results in rounds
        ],
        "summary": summary,
    }
    return json.dumps(document, indent=1)


def plot(path: Path, arms: Sequence[Arm], specs: Sequence[WorkloadSpec], summary: Summary) -> None:
    """One panel per figure: each arm's median (bars), the ratio to direct written beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(spec, figure) for spec in specs for figure in spec.figures]
    columns = 4
    rows = max(1, -(-len(panels) // columns))
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 0.35 * len(arms) * rows + rows))
    flat = list(axes.flat)
    names = [arm.name for arm in arms]
    colours = [plt.get_cmap("tab10")(i % 10) for i in range(len(arms))]
    for ax, (spec, figure) in zip(flat, panels, strict=False):
        values: list[float] = []
        labels: list[str] = []
        for arm in arms:
            entry = summary[arm.name][spec.name]
            data = entry.get("figures", {}).get(figure.key)
            value = data["median"] if data else None
            values.append(value or 0.0)
            if value is None:
                labels.append("n/a")
            elif figure.ratio and data and data["ratio"] is not None and arm.name != DIRECT:
                labels.append(f"{_number(value, figure.unit)}  {data['ratio']:.2f}x")
            else:
                labels.append(_number(value, figure.unit))
        bars = ax.barh(names, values, color=colours)
        ax.bar_label(bars, labels=labels, fontsize=7, padding=2)
        better = "higher" if figure.higher_is_better else "lower"
        ax.set_title(f"{spec.name}: {figure.label} ({better} is better)", fontsize=8)
        ax.invert_yaxis()
        ax.tick_params(labelsize=7)
        ax.margins(x=0.45)
    for ax in flat[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=90)  # pyright: ignore[reportUnknownMemberType]
    plt.close(fig)
