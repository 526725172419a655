"""The issue's targets (issue 14), computed from the results, and the lookups they share."""

from __future__ import annotations

from typing import Any


def get(d: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def div(a: Any, b: Any) -> float | None:
    if isinstance(a, int | float) and isinstance(b, int | float) and b:
        return a / b
    return None


def windows(points: list[int]) -> list[str]:
    """The windows' keys: turns 1..points[0], then as many turns ending at each later point."""
    return [f"1-{points[0]}"] + [f"{p - points[0] + 1}-{p}" for p in points[1:]]


def ratio_to(results: dict[str, Any], name: str, peer: str, *keys: str) -> float | None:
    """`name`'s figure at `keys` divided by `peer`'s."""
    systems = results["systems"]
    return div(get(systems.get(name), *keys), get(systems.get(peer), *keys))


def total(system: dict[str, Any], field: str) -> int | None:
    conc = system.get("concurrency")
    return sum(c[field] for c in conc.values()) if conc else None


def missing(system: dict[str, Any]) -> int | None:
    conc = system.get("concurrency")
    return sum(c["expected_turns"] - c["stored_turns"] for c in conc.values()) if conc else None


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, each with Ferry's value, its limit and whether it is met."""
    systems = results["systems"]
    ferry = systems.get("ferry") or {}
    points: list[int] = results["meta"]["config"]["points"]
    win = windows(points)
    out: list[dict[str, Any]] = []

    def add(name: str, value: Any, limit: float | None, unit: str) -> None:
        met = value <= limit if isinstance(value, int | float) and limit is not None else None
        out.append({"target": name, "value": value, "limit": limit, "unit": unit, "met": met})

    for p in points[1:]:
        add(
            f"storage @{p} turns ≤ 1.5× raw",
            get(ferry, "growth", "points", str(p), "amplification"),
            1.5,
            "×",
        )
    add(
        f"bytes per turn flat: @{points[-1]} ÷ @{points[1]} ≤ 1.2",
        div(
            get(ferry, "growth", "points", str(points[-1]), "bytes_per_turn"),
            get(ferry, "growth", "points", str(points[1]), "bytes_per_turn"),
        ),
        1.2,
        "×",
    )
    cpu = ("growth", "framework_cpu_ms_per_call")
    add(
        f"CPU ms/call turns {win[-1]} ≤ 2× turns {win[0]}",
        div(get(ferry, *cpu, win[-1]), get(ferry, *cpu, win[0])),
        2.0,
        "×",
    )
    add(
        f"CPU ms/call turns {win[-1]} ≤ 1.5× bare loop's",
        ratio_to(results, "ferry", "bare", *cpu, win[-1]),
        1.5,
        "×",
    )
    add(
        f"CPU ms/call turns {win[0]} ÷ bare loop's (reported)",
        ratio_to(results, "ferry", "bare", *cpu, win[0]),
        None,
        "×",
    )
    for w in (win[0], win[-1]):
        add(
            f"gate + keyed releases, CPU ms/call turns {w} ≤ 0.3",
            get(ferry, "growth", "gate_cpu_ms_per_call", w),
            0.3,
            "ms",
        )
    cold = get(ferry, "growth", "cold_process", "load_ms")
    turns = get(ferry, "growth", "cold_process", "turns")
    add(f"cold read, new process, {turns} turns, SQLite ≤ 150 ms", cold, 150.0, "ms")
    pg = results.get("postgres") or {}
    if pg.get("not_run") or pg.get("turns") == turns:
        add(
            "cold read on Postgres ≤ 1.5× SQLite's",
            pg.get("not_run") or div(pg.get("load_ms"), cold),
            1.5,
            "×",
        )
    else:  # the Postgres thread stopped short: compare the time per message read
        per_message = div(
            div(pg.get("load_ms"), pg.get("messages")),
            div(cold, get(ferry, "growth", "cold_process", "messages")),
        )
        add(
            f"cold read on Postgres ({pg.get('turns')} turns) ≤ 1.5× SQLite's, per message",
            per_message,
            1.5,
            "×",
        )
    add(
        "memory holding the thread ≤ 1.3× bare loop's",
        ratio_to(results, "ferry", "bare", "growth", "cold_process", "extra_kb"),
        1.3,
        "×",
    )
    add(
        f"`ferry threads`, {get(results, 'ferry_threads', 'threads')} threads ≤ 0.3 s",
        get(results, "ferry_threads", "best_s"),
        0.3,
        "s",
    )
    add("`ferry --help` ≤ 0.1 s", get(results, "ferry_help", "best_s"), 0.1, "s")
    ask = results.get("ferry_ask") or {}
    add(
        "one-tool `ferry ask` offline, CPU ≤ 1.1× importing langgraph.graph + "
        "langchain_core.messages (issue 30)",
        div(ask.get("ask_cpu_s"), ask.get("imports_cpu_s")),
        1.1,
        "×",
    )
    add(
        "  the same, the imports' collector run as ferry's (reported)",
        div(ask.get("ask_cpu_s"), ask.get("imports_collected_as_ferry_cpu_s")),
        None,
        "×",
    )
    add("3 parallel 1-s tool calls ≤ 1.2 s", get(ferry, "parallel_tools", "wall_s"), 1.2, "s")
    if ferry.get("concurrency"):
        add("concurrency: 'database is locked' = 0", total(ferry, "locked"), 0, "n")
        add("concurrency: lost or missing turns = 0", missing(ferry), 0, "n")
    return out  # fmt: skip
