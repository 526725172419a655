"""The plain-text table and the targets from the issue, computed from the results."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

Row = tuple[str, Any, Any, str]  # label, ferry, reference, kind


def _get(d: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def _bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


FORMATS: dict[str, Callable[[float], str]] = {
    "bytes": lambda v: _bytes(v),
    "x": lambda v: f"{v:.1f}x",
    "ms": lambda v: f"{v:.2f} ms",
    "us": lambda v: f"{v:.2f} us",
    "s": lambda v: f"{v:.2f} s",
    "rate": lambda v: f"{v:.1f}/s",
    "n": lambda v: f"{v:.0f}",
}


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return FORMATS[kind](value)


def _ratio(a: Any, b: Any) -> str:
    if isinstance(a, int | float) and isinstance(b, int | float) and b:
        return f"{a / b:.2f}"
    return ""


def _rows(results: dict[str, Any], args: argparse.Namespace) -> list[Row | str]:
    systems = results["systems"]

    def both(*keys: str) -> tuple[Any, Any]:
        return _get(systems.get("ferry"), *keys), _get(systems.get("reference"), *keys)

    def point(p: int, field: str) -> tuple[Any, Any]:
        f, r = both("growth", "points", str(p))
        return (
            (f or {}).get(field, "skipped" if f else None),
            (r or {}).get(field, "skipped" if r else None),
        )

    rows: list[Row | str] = []
    points = [args.short, args.long] + ([args.longest] if args.longest > args.long else [])
    rows.append("storage: one thread; a turn = question, 3 x (tool call -> 2 KB result), answer")
    for p in points:
        rows.append((f"raw message bytes @{p} turns", *point(p, "raw_bytes"), "bytes"))
        rows.append((f"DB bytes @{p}", *point(p, "db_bytes"), "bytes"))
        rows.append((f"amplification (DB/raw) @{p}", *point(p, "amplification"), "x"))
        rows.append((f"DB bytes per turn @{p}", *point(p, "bytes_per_turn"), "bytes"))
        rows.append((f"raw bytes per turn @{p}", *point(p, "raw_bytes_per_turn"), "bytes"))
    early, late = f"1-{args.short}", f"{args.long - args.short + 1}-{args.long}"

    def add(label: str, kind: str, *keys: str) -> None:
        rows.append((label, *both(*keys), kind))

    rows.append("time (scripted model: only the framework's cost shows; medians over turns)")
    windows = [early] + [f"{p - args.short + 1}-{p}" for p in points[1:]]
    for w in windows:
        add(f"framework ms/model call, turns {w}", "ms", "growth", "framework_ms_per_call", w)
    f_early, r_early = both("growth", "framework_ms_per_call", early)
    f_late, r_late = both("growth", "framework_ms_per_call", late)
    rows.append(
        (f"  turns {late} / turns {early}", _div(f_late, f_early), _div(r_late, r_early), "x")
    )
    for w in windows:
        add(f"wall ms/turn, turns {w}", "ms", "growth", "wall_ms_per_turn", w)
    for p in points[1:]:
        add(
            f"seconds to grow the thread to {p} turns",
            "s",
            "growth",
            "points",
            str(p),
            "seconds_to_here",
        )
    for p in points[1:]:
        add(f"get_state @{p}, cold (new graph)", "ms", "growth", "get_state", str(p), "cold_ms")
        add("  per message, cold", "us", "growth", "get_state", str(p), "cold_us_per_message")
        add(f"get_state @{p}, warm (same graph)", "ms", "growth", "get_state", str(p), "warm_ms")
        add("  per message, warm", "us", "growth", "get_state", str(p), "warm_us_per_message")
    rows.append("parallel tools: one model step asks for three 1-second calls")
    rows.append(("turn wall time (median)", *both("parallel_tools", "wall_s"), "s"))
    labels = {
        "threads_shared": f"{args.threads} threads, one graph",
        "threads_own": f"{args.threads} threads, a graph each",
        "processes": f"{args.processes} processes x {args.proc_threads} threads",
    }
    rows.append(f"concurrency: runs x {args.turns} turns on one SQLite file")
    for mode, label in labels.items():
        rows.append((f"{label}: turns/s", *both("concurrency", mode, "turns_per_s"), "rate"))
        rows.append(("  'database is locked'", *both("concurrency", mode, "locked"), "n"))
        rows.append(("  other errors", *both("concurrency", mode, "other"), "n"))
        rows.append(
            ("  turns lost (returned, not stored)", *both("concurrency", mode, "lost"), "n")
        )
        rows.append(("  turns stored / expected", *_stored(systems, mode), "n"))
    rows.append("cli")
    rows.append(("ferry --help (best)", _get(results, "ferry_help", "best_s"), None, "s"))
    return rows


def _stored(systems: dict[str, Any], mode: str) -> tuple[str | None, str | None]:
    out = []
    for name in ("ferry", "reference"):
        c = _get(systems.get(name), "concurrency", mode)
        out.append(f"{c['stored_turns']}/{c['expected_turns']}" if c else None)
    return out[0], out[1]


def _div(a: Any, b: Any) -> float | None:
    if isinstance(a, int | float) and isinstance(b, int | float) and b:
        return a / b
    return None


def targets(results: dict[str, Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    """The issue's targets, each with Ferry's value, its limit and whether it is met."""
    ferry = results["systems"].get("ferry") or {}
    ref = results["systems"].get("reference") or {}
    out: list[dict[str, Any]] = []

    def add(name: str, value: Any, limit: float, unit: str) -> None:
        met = value <= limit if isinstance(value, int | float) else None
        out.append({"target": name, "value": value, "limit": limit, "unit": unit, "met": met})

    for p in (args.long, args.longest):
        if p:
            amp = _get(ferry, "growth", "points", str(p), "amplification")
            add(f"amplification @{p} turns <= 3x", amp, 3.0, "x")
    if args.longest:
        mine = _get(ferry, "growth", "get_state", str(args.longest), "cold_us_per_message")
        theirs = _get(ref, "growth", "get_state", str(args.long), "cold_us_per_message")
        add(
            f"get_state per message @{args.longest} (cold) <= reference's @{args.long}",
            _div(mine, theirs),
            1.0,
            "ratio",
        )
    early, late = f"1-{args.short}", f"{args.long - args.short + 1}-{args.long}"
    f_early = _get(ferry, "growth", "framework_ms_per_call", early)
    f_late = _get(ferry, "growth", "framework_ms_per_call", late)
    r_late = _get(ref, "growth", "framework_ms_per_call", late)
    add(
        f"framework ms/call turns {late} <= 1.5x turns {early}", _div(f_late, f_early), 1.5, "ratio"
    )
    add(f"framework ms/call turns {late} <= 0.5x reference's", _div(f_late, r_late), 0.5, "ratio")
    add("3 parallel 1-s tool calls <= 1.2 s", _get(ferry, "parallel_tools", "wall_s"), 1.2, "s")
    add("ferry --help <= 0.5 s", _get(results, "ferry_help", "best_s"), 0.5, "s")
    conc = ferry.get("concurrency") or {}
    if conc:
        locked = sum(c["locked"] for c in conc.values())
        missing = sum(c["expected_turns"] - c["stored_turns"] for c in conc.values())
        add("concurrency: 'database is locked' errors = 0", locked, 0, "n")
        add("concurrency: lost or missing turns = 0", missing, 0, "n")
    return out


def _table(header: list[str], body: list[list[str]], sections: dict[int, str]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    rule = "-" * len(line(header))
    lines = [line(header), rule]
    for i, row in enumerate(body):
        if i in sections:
            lines.append(f"[{sections[i]}]")
        lines.append(line(row))
    return lines


def render(results: dict[str, Any], args: argparse.Namespace) -> str:
    """The figures and targets as plain-text tables."""
    body: list[list[str]] = []
    sections: dict[int, str] = {}
    for row in _rows(results, args):
        if isinstance(row, str):
            sections[len(body)] = row
            continue
        label, f, r, kind = row
        body.append([label, _cell(f, kind), _cell(r, kind), _ratio(f, r)])
    meta = results["meta"]
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    lines = [
        f"Ferry ({meta.get('commit')}) vs create_agent + SqliteSaver  ({meta['date']}, "
        f"{meta['cpus']} CPUs, "
        f"Python {meta['python']}; {versions}{'; QUICK run' if args.quick else ''})",
        "",
        *_table(["metric", "ferry", "reference", "ferry/ref"], body, sections),
        "",
    ]
    t_body = []
    for t in results["targets"]:
        value = t["value"]
        shown = (
            "-" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))
        )
        met = {True: "yes", False: "NO", None: "n/a"}[t["met"]]
        t_body.append([t["target"], shown, f"{t['limit']:g}", met])
    lines += _table(["target (issue)", "ferry", "limit", "met"], t_body, {})
    skipped = [
        f"note: {name} {s['growth']['skipped']}"
        for name, s in results["systems"].items()
        if _get(s, "growth", "skipped")
    ]
    return "\n".join(lines + ([""] + skipped if skipped else []))
