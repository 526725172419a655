"""The tables (markdown, pasteable into bench/README.md) and the issue's targets, from results.

`python -m bench.report [bench/results.json]` prints them again from a saved run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.systems import LABELS, SYSTEMS
from bench.targets import div, get, missing, ratio_to, total, windows

DEFINITIONS = {
    "raw_bytes": "sum over the thread's messages of the UTF-8 length of the JSON record "
    "{role, content, tool_calls?, tool_call_id?, status?} (the shape of ferry history --json)",
    "storage_bytes": "every file whose name starts with the storage's name (.db, -wal after "
    "PRAGMA wal_checkpoint(TRUNCATE), side files, the bare loop's .jsonl); -shm excluded",
    "bytes_per_turn": "storage growth per turn over the last max(2, N/10) turns up to N",
    "framework_ms_per_call": "median over the window's turns of (turn time - time inside the "
    "model and tools) / the turn's model calls, in wall time and in process CPU time",
    "cold_process": "a new process (bench.cold): imports and builds the system, then loads the "
    "thread its own way; load_ms times the load alone; extra_kb = peak RSS after the load "
    "minus peak RSS before it (the baseline of the same imports)",
}

FORMATS: dict[str, Callable[[float], str]] = {
    "bytes": lambda v: _bytes(v),
    "x": lambda v: f"{v:.2f}×",
    "ms": lambda v: f"{v:.2f} ms",
    "s": lambda v: f"{v:.2f} s",
    "kb": lambda v: f"{v / 1024:.1f} MB",
    "rate": lambda v: f"{v:.1f}/s",
    "n": lambda v: f"{v:.0f}",
}


def _bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "–"
    return value if isinstance(value, str) else FORMATS[kind](value)


def _rows(results: dict[str, Any]) -> list[tuple[str, list[Any], str] | str]:
    systems = results["systems"]
    names = [n for n in SYSTEMS if n in systems]
    points: list[int] = results["meta"]["config"]["points"]
    win = windows(points)

    def each(*keys: str) -> list[Any]:
        return [get(systems[n], *keys) for n in names]

    def at(p: int, field: str) -> list[Any]:
        out = []
        for n in names:
            fig = get(systems[n], "growth", "points", str(p)) or {}
            out.append(fig.get(field, "skipped" if "skipped" in fig else None))
        return out

    rows: list[tuple[str, list[Any], str] | str] = ["storage"]
    for p in points[1:]:
        rows.append((f"raw message bytes @{p} turns", at(p, "raw_bytes"), "bytes"))
        rows.append((f"storage bytes @{p}", at(p, "db_bytes"), "bytes"))
        rows.append((f"amplification (storage ÷ raw) @{p}", at(p, "amplification"), "x"))
    for p in points:
        rows.append((f"storage bytes per turn @{p}", at(p, "bytes_per_turn"), "bytes"))
    last = str(points[-1])
    flat = [
        div(get(systems[n], "growth", "points", last, "bytes_per_turn"),
             get(systems[n], "growth", "points", str(points[1]), "bytes_per_turn"))
        for n in names
    ]  # fmt: skip
    rows.append((f"  bytes per turn @{last} ÷ @{points[1]}", flat, "x"))
    rows.append("framework time per model call (scripted model: only the framework shows)")
    for w in win:
        rows.append(
            (f"CPU ms/call, turns {w}", each("growth", "framework_cpu_ms_per_call", w), "ms")
        )
        rows.append((f"wall ms/call, turns {w}", each("growth", "framework_ms_per_call", w), "ms"))
    for w in (win[0], win[-1]):
        gate = each("growth", "gate_cpu_ms_per_call", w)
        rows.append((f"  of which Ferry's gate + keyed releases, turns {w}", gate, "ms"))
    for key, label in (("framework_cpu_ms_per_call", "CPU"), ("framework_ms_per_call", "wall")):
        growth = [
            div(get(systems[n], "growth", key, win[-1]), get(systems[n], "growth", key, win[0]))
            for n in names
        ]
        rows.append((f"  {label}, turns {win[-1]} ÷ turns {win[0]}", growth, "x"))
    for w in (win[0], win[-1]):
        ratio = [
            ratio_to(results, n, "bare", "growth", "framework_cpu_ms_per_call", w) for n in names
        ]
        rows.append((f"  CPU ÷ bare loop's, turns {w}", ratio, "x"))
    last = [
        f"{lw['cpu_ms_per_call']:.2f} ms (turns {lw['turns']})" if lw else None
        for lw in each("growth", "last_window")
    ]
    rows.append(("CPU ms/call, the last 10 turns run", last, "ms"))
    for p in points[1:]:
        rows.append(
            (
                f"seconds to grow to {p} turns",
                each("growth", "points", str(p), "seconds_to_here"),
                "s",
            )
        )
    rows.append("reading a thread")
    for p in points[1:]:
        rows.append(
            (
                f"load @{p}, new system in this process",
                each("growth", "get_state", str(p), "cold_ms"),
                "ms",
            )
        )
    rows.append(
        ("turns in the thread read by a new process", each("growth", "cold_process", "turns"), "n")
    )
    rows.append(("cold read, new process", each("growth", "cold_process", "load_ms"), "ms"))
    rows.append(
        ("memory to hold it (peak RSS growth)", each("growth", "cold_process", "extra_kb"), "kb")
    )
    mem = [ratio_to(results, n, "bare", "growth", "cold_process", "extra_kb") for n in names]
    rows.append(("  peak growth ÷ bare loop's", mem, "x"))
    resident = each("growth", "cold_process", "resident_extra_kb")
    rows.append(("  resident memory growth (for comparison)", resident, "kb"))
    pg = results.get("postgres") or {}
    pg_cell = pg.get("not_run")
    if "load_ms" in pg:
        pg_cell = f"{pg['load_ms']:.1f} ms ({pg['turns']} turns{', stopped' * ('stopped' in pg)})"
    rows.append(
        (
            "cold read on Postgres, new process",
            [pg_cell if n == "ferry" else None for n in names],
            "ms",
        )
    )
    rows.append("other workloads")
    rows.append(("3 parallel 1-s tool calls, turn wall", each("parallel_tools", "wall_s"), "s"))
    for mode, label in (
        ("threads_shared", "threads, one graph"),
        ("threads_own", "threads, a graph each"),
        ("processes", "processes × threads"),
    ):
        rows.append(
            (f"concurrency, {label}: turns/s", each("concurrency", mode, "turns_per_s"), "rate")
        )
    locked = [total(systems[n], "locked") for n in names]
    lost = [missing(systems[n]) for n in names]
    rows.append(
        (
            "  'database is locked' / lost or missing turns",
            [f"{a} / {b}" if a is not None else None for a, b in zip(locked, lost, strict=True)],
            "n",
        )
    )
    ferry_only = [n == "ferry" for n in names]
    rows += [
        (label, [value if f else None for f in ferry_only], kind)
        for label, value, kind in _startup_rows(results)[:2]
    ]
    for key, label in (
        ("ask_cpu_s", "one-tool `ferry ask` offline, CPU (median)"),
        ("imports_cpu_s", "  importing langgraph.graph + langchain_core.messages, CPU"),
        ("imports_collected_as_ferry_cpu_s", "  the same imports, collector run as ferry's, CPU"),
    ):
        value = get(results, "ferry_ask", key)
        rows.append((label, [value if f else None for f in ferry_only], "s"))
    ask = results.get("ferry_ask") or {}
    ratio = div(ask.get("ask_cpu_s"), ask.get("imports_cpu_s"))
    rows.append(("  `ferry ask` ÷ the imports", [ratio if f else None for f in ferry_only], "x"))
    features = (results.get("features") or {}).get("cpu_ms_per_call") or {}
    for mode, label in (
        ("off", "CPU / model call, offline turns: schema, fallback, cost, tracing off"),
        ("otel", "  with OpenTelemetry tracing"),
        ("all", "  with all of them on"),
    ):
        rows.append((label, [features.get(mode) if f else None for f in ferry_only], "ms"))
    rows += [
        (label, [value if f else None for f in ferry_only], kind)
        for label, value, kind in _startup_rows(results)[2:]
    ]
    return rows  # fmt: skip


def _startup_rows(results: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """`python -c pass` and `--help`, then the listings: best wall, and median CPU beside it."""
    threads = get(results, "ferry_threads", "threads")
    rows = []
    for label, key, best, cpu in (
        ("`python -c pass`, the interpreter alone", "python_startup", "best_s", "cpu_s"),
        ("`ferry --help`", "ferry_help", "best_s", "cpu_s"),
        (f"`ferry threads`, {threads} threads", "ferry_threads", "best_s", "cpu_s"),
        ("`ferry threads`, empty database", "ferry_threads", "empty_best_s", "empty_cpu_s"),
    ):
        rows.append((f"{label} (best wall)", get(results, key, best), "s"))
        rows.append(("  its CPU (median)", get(results, key, cpu), "s"))
    return rows


def render_startup(results: dict[str, Any]) -> str:
    """`python -m bench --startup`'s table: each command's times, and beyond the interpreter's."""
    python = get(results, "python_startup", "best_s")
    python_cpu = get(results, "python_startup", "cpu_s")
    body = []
    for index, (label, value, _) in enumerate(_startup_rows(results)):
        base = python_cpu if index % 2 else python  # rows alternate: best wall, its CPU
        beyond = value - base if value is not None and base is not None and index > 1 else None
        shown = "–" if beyond is None else f"{beyond * 1000:.0f} ms"
        body.append([label, _cell(None if value is None else value * 1000, "ms"), shown])
    meta = results["meta"]
    lines = [
        f"{meta['date'][:10]}, commit {meta.get('commit')}, {meta['cpus']} CPUs (load "
        f"{meta.get('load_at_start')} at start, {meta.get('load_at_end')} at end), Python "
        f"{meta['python']}; `python -m bench --startup`, {meta.get('total_seconds', 0):.0f} s.",
        "",
        *_markdown(["command", "time", "beyond `python -c pass`"], body),
        "",
    ]
    return "\n".join(lines + _targets_table(results))


def _markdown(header: list[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in body]


def _targets_table(results: dict[str, Any]) -> list[str]:
    t_body = []
    for t in results["targets"]:
        value = t["value"]
        shown = f"{value:.2f}" if isinstance(value, float) else "–" if value is None else str(value)
        met = {True: "yes", False: "**no**", None: "–"}[t["met"]]
        unit = {"×": "×", "n": ""}.get(t["unit"], f" {t['unit']}")
        limit = "" if t["limit"] is None else f"{t['limit']:g}{unit}"
        t_body.append(
            [t["target"], shown + unit if isinstance(value, int | float) else shown, limit, met]
        )
    return _markdown(["target (issue 14)", "Ferry", "limit", "met"], t_body)


def render(results: dict[str, Any]) -> str:
    """The figures and the targets as markdown tables, with the run's conditions above them."""
    names = [n for n in SYSTEMS if n in results["systems"]]
    body: list[list[str]] = []
    for row in _rows(results):
        if isinstance(row, str):
            body.append([f"**{row}**"] + [""] * len(names))
            continue
        label, values, kind = row
        body.append([label] + [_cell(v, kind) for v in values])
    meta = results["meta"]
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v)
    lines = [
        f"{meta['date'][:10]}, commit {meta.get('commit')}, {meta['cpus']} CPUs (load "
        f"{meta.get('load_at_start')} at start, {meta.get('load_at_end')} at end), Python "
        f"{meta['python']}; {versions}; `python -m bench{' --quick' if meta['quick'] else ''}`, "
        f"{meta.get('total_seconds', 0):.0f} s.",
        "",
        *_markdown(["metric", *(LABELS[n] for n in names)], body),
        "",
    ]
    lines += _targets_table(results)
    notes = [
        f"- {LABELS[n]}: {s['growth']['skipped']}"
        for n, s in results["systems"].items()
        if get(s, "growth", "skipped")
    ]
    return "\n".join(lines + ([""] + notes if notes else []))


if __name__ == "__main__":
    saved = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("results.json"))
    loaded = json.loads(saved.read_text())
    print(render(loaded) if loaded["systems"] else render_startup(loaded))
