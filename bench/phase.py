"""The growth phase: every system's thread grown side by side, alternating every few turns."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from bench.gate import GATE
from bench.growth import Growth
from bench.measure import table_bytes
from bench.model import BenchModel
from bench.processes import cold_read
from bench.systems import Peer, build, setup
from bench.tools import fetch_blob


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def span(turn: int) -> int:
    """Turns over which 'bytes per turn at `turn`' is averaged (pages make one turn noisy)."""
    return max(2, turn // 10)


def windows(points: list[int]) -> list[tuple[int, int]]:
    """Turns 1..points[0], then the same number of turns ending at each later point."""
    size = points[0]
    return [(1, size)] + [(p - size + 1, p) for p in points[1:]]


def storage_path(workdir: Path, kind: str, name: str) -> Path:
    return workdir / (f"{kind}-{name}" + ("" if name == "bare" else ".db"))


def grow(
    runs: dict[str, Growth], to: int, sample_at: set[int], chunk: int, cap_s: float
) -> dict[str, str]:
    """Grow every run to `to` turns, `chunk` turns each in turn; return runs stopped by the cap."""
    stopped: dict[str, str] = {}
    active = list(runs)
    while active:
        for name in list(active):
            run = runs[name]
            run.run_to(min(run.done + chunk, to), sample_at)
            if run.done >= to:
                active.remove(name)
            elif run.elapsed_s > cap_s:
                stopped[name] = f"stopped at turn {run.done}: over the {cap_s:.0f} s time cap"
                log(f"{name}: {stopped[name]}")
                active.remove(name)
        if active and runs[active[0]].done % 100 == 0:
            log("  " + ", ".join(f"{n}: turn {runs[n].done}" for n in active))
    return stopped


def growth_phase(args: argparse.Namespace, names: list[str], workdir: Path) -> dict[str, Any]:
    model = BenchModel()
    GATE.install()
    for name in names:  # imports and library caches warm, so turn 1 is not a process's first
        warm = build(name, storage_path(workdir, "warmup", name), model, [fetch_blob])
        setup(warm)
        Growth(warm).run_to(2, set())
        warm.close()
    runs: dict[str, Growth] = {}
    for name in names:
        system = build(name, storage_path(workdir, "growth", name), model, [fetch_blob])
        setup(system)
        runs[name] = Growth(system)
    points: list[int] = args.points
    sample_at = {t for p in points for t in (p - span(p), p)}

    def fresh(name: str) -> Peer:
        return build(name, storage_path(workdir, "growth", name), model, [fetch_blob])

    stopped: dict[str, str] = {}
    projections: dict[str, dict[str, dict[str, float]]] = {n: {} for n in names}
    active = dict(runs)
    for i, target in enumerate(points[1:], start=1):
        if i > 1:  # project from the first window and the last one reached, as before growing
            early, late = windows(points)[0], windows(points)[i - 1]
            for name in list(active):
                proj = active[name].project(early, late, span(points[0]), target)
                projections[name][str(target)] = proj
                gb = proj["db_bytes"] / 1e9
                if proj["seconds"] > args.max_extra_s or gb > args.max_db_gb:
                    stopped[name] = (
                        f"skipped beyond {points[i - 1]} turns: {target} projected at "
                        f"+{proj['seconds']:.0f} s and {gb:.1f} GB (limits "
                        f"{args.max_extra_s:.0f} s, {args.max_db_gb:g} GB)"
                    )
                    log(f"{name}: {stopped[name]}")
                    del active[name]
        if not active:
            break
        log(f"growth: {', '.join(active)} to {target} turns, alternating every {args.chunk}")
        for name, why in grow(active, target, sample_at, args.chunk, args.time_cap_s).items():
            stopped[name] = why
            del active[name]
        for name, run in active.items():
            run.time_get_state(args.repeat, lambda name=name: fresh(name))

    out: dict[str, Any] = {}
    for name, run in runs.items():
        run.system.close()
        out[name] = figures(run, points, stopped.get(name), projections[name])
        if run.done >= points[1]:
            log(f"cold read in a new process: {name} at {run.done} turns")
            out[name]["cold_process"] = cold_read(
                name, run.system.path, run.thread_id, args.cold_repeat
            ) | {"turns": run.done}
    return out


def figures(
    run: Growth, points: list[int], stopped: str | None, projections: dict[str, Any]
) -> dict[str, Any]:
    point_figures: dict[str, Any] = {}
    for p in points:
        if p not in run.samples:
            point_figures[str(p)] = {"skipped": stopped or "not run"}
            continue
        s, before = run.samples[p], run.samples[p - span(p)]
        point_figures[str(p)] = {
            **s,
            "amplification": s["db_bytes"] / s["raw_bytes"],
            "bytes_per_turn": run.bytes_per_turn(p, span(p)),
            "raw_bytes_per_turn": (s["raw_bytes"] - before["raw_bytes"]) / span(p),
            "avg_db_bytes_per_turn": s["db_bytes"] / p,
            "seconds_to_here": sum(t.wall_s for t in run.turns[:p]),
        }
    size = points[0]
    last = (run.done - size + 1, run.done)  # where a stopped or skipped system got to
    keys = [f"{a}-{b}" for a, b in windows(points)]
    per_window = list(zip(keys, windows(points), strict=True))
    path = run.system.path
    return {
        "turns_run": run.done,
        "seconds": run.elapsed_s,
        "cpu_seconds": sum(t.cpu_s for t in run.turns),
        "points": point_figures,
        "framework_ms_per_call": {k: run.framework_ms_per_call(a, b) for k, (a, b) in per_window},
        "framework_cpu_ms_per_call": {
            k: run.framework_ms_per_call(a, b, cpu=True) for k, (a, b) in per_window
        },
        "gate_cpu_ms_per_call": {  # only Ferry's graph has the gate
            k: run.gate_ms_per_call(a, b) if any(t.gate_cpu_s for t in run.turns) else None
            for k, (a, b) in per_window
        },
        "framework_ms_per_call_mean": {
            k: run.framework_ms_per_call(a, b, mean=True) for k, (a, b) in per_window
        },
        "wall_ms_per_turn": {k: run.wall_ms_per_turn(a, b) for k, (a, b) in per_window},
        "last_window": {
            "turns": f"{last[0]}-{last[1]}",
            "cpu_ms_per_call": run.framework_ms_per_call(*last, cpu=True),
            "wall_ms_per_call": run.framework_ms_per_call(*last),
        },
        "get_state": {str(k): v for k, v in run.get_state.items()},
        "per_turn": run.per_turn(),
        "tables_at_end": table_bytes(path) if path.is_file() else {},
        "projections": projections,
        "skipped": stopped,
    }
