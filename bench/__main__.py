"""`python -m bench`: run every workload for Ferry and the reference, print a table, write JSON.

The reference is langchain's `create_agent` with a `SqliteSaver`; both get the same scripted
model (bench.model), the same tools (bench.tools) and the same SQLite connection settings.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.measure import table_bytes
from bench.model import BenchModel
from bench.report import render, targets
from bench.systems import SYSTEMS, build, setup
from bench.tools import fetch_blob
from bench.workloads import (
    Growth,
    concurrency_processes,
    concurrency_threads,
    ferry_help,
    parallel_tools,
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "--quick", action="store_true", help="smoke run (~1 min): 10/30 turns, small concurrency"
    )
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated: ferry,reference")
    p.add_argument("--short", type=int, help="first sample point and early window (default 10)")
    p.add_argument("--long", type=int, help="second sample point and late window end (default 80)")
    p.add_argument("--longest", type=int, help="third sample point, 0 to skip (default 320)")
    p.add_argument("--chunk", type=int, default=10, help="turns per system before alternating")
    p.add_argument(
        "--max-extra-s",
        type=float,
        default=180.0,
        help="skip growing a system to --longest if projected to take longer",
    )
    p.add_argument(
        "--max-db-gb",
        type=float,
        default=2.0,
        help="skip growing a system to --longest if its file is projected larger",
    )
    p.add_argument("--threads", type=int, help="concurrent runs in one process (default 16)")
    p.add_argument("--turns", type=int, help="turns per concurrent run (default 10)")
    p.add_argument("--processes", type=int, help="worker processes (default 4)")
    p.add_argument("--proc-threads", type=int, help="runs per worker process (default 4)")
    p.add_argument("--parallel-repeat", type=int, help="turns of the parallel-tools workload")
    p.add_argument("--repeat", type=int, default=5, help="repeats for get_state and --help")
    p.add_argument("--workdir", type=Path, help="where the databases go (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the databases")
    p.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    args = p.parse_args(argv)
    quick = {"short": 10, "long": 30, "longest": 0, "threads": 4, "turns": 3, "processes": 2,
             "proc_threads": 2, "parallel_repeat": 1}  # fmt: skip
    full = {"short": 10, "long": 80, "longest": 320, "threads": 16, "turns": 10, "processes": 4,
            "proc_threads": 4, "parallel_repeat": 3}  # fmt: skip
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.quick:
        args.repeat = min(args.repeat, 3)
    if not 2 <= args.short <= args.long:
        p.error("need 2 <= --short <= --long")
    return args


def git_commit() -> str | None:
    """The commit measured (with "+dirty" if graph/ or tools/ have uncommitted changes)."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "graph", "tools"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return None
    return (head + ("+dirty" if dirty else "")) or None


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def span(turn: int) -> int:
    """Turns over which 'bytes per turn at `turn`' is averaged (pages make one turn noisy)."""
    return max(2, turn // 10)


def grow(
    runs: dict[str, Growth],
    to: int,
    sample_at: set[int],
    chunk: int,
    deadline: dict[str, float] | None = None,
) -> dict[str, str]:
    """Grow every run to `to` turns, `chunk` turns each in turn; return runs stopped early."""
    stopped: dict[str, str] = {}
    active = list(runs)
    while active:
        for name in list(active):
            run = runs[name]
            run.run_to(min(run.done + chunk, to), sample_at)
            if run.done >= to:
                active.remove(name)
            elif deadline and time.monotonic() > deadline[name]:
                stopped[name] = f"stopped at turn {run.done}: over twice its time projection"
                active.remove(name)
        if active:
            log("  " + ", ".join(f"{n}: turn {runs[n].done}" for n in active))
    return stopped


def growth_phase(args: argparse.Namespace, names: list[str], workdir: Path) -> dict[str, Any]:
    model = BenchModel()
    for name in names:  # imports and library caches warm, so turn 1 is not a process's first
        warm = build(name, workdir / f"warmup-{name}.db", model, [fetch_blob])
        setup(warm)
        Growth(warm).run_to(2, set())
        warm.close()
    runs: dict[str, Growth] = {}
    for name in names:
        system = build(name, workdir / f"growth-{name}.db", model, [fetch_blob])
        setup(system)
        runs[name] = Growth(system)
    points = [args.short, args.long] + ([args.longest] if args.longest > args.long else [])
    sample_at = {t for p in points for t in (p - span(p), p)}

    def fresh(name: str) -> Any:
        return lambda: build(name, workdir / f"growth-{name}.db", model, [fetch_blob])

    log(f"growth: {', '.join(names)} to {args.long} turns, alternating every {args.chunk}")
    grow(runs, args.long, sample_at, args.chunk)
    for name, run in runs.items():
        run.time_get_state(args.repeat, fresh(name))

    skipped: dict[str, str] = {}
    if args.longest > args.long:
        early = (1, args.short)
        late = (args.long - args.short + 1, args.long)
        projections = {
            n: r.project(early, late, span(args.short), args.longest) for n, r in runs.items()
        }
        go = {}
        for name, proj in projections.items():
            gb = proj["db_bytes"] / 1e9
            if proj["seconds"] > args.max_extra_s or gb > args.max_db_gb:
                skipped[name] = (
                    f"skipped: {args.longest} turns projected at +{proj['seconds']:.0f} s and "
                    f"{gb:.1f} GB (limits {args.max_extra_s:.0f} s, {args.max_db_gb:g} GB)"
                )
                log(f"{name}: {skipped[name]}")
            else:
                go[name] = runs[name]
                eta = f"+{proj['seconds']:.0f} s, {gb:.2f} GB"
                log(f"{name}: {args.longest} turns projected at {eta}")
        if go:
            now = time.monotonic()
            deadline = {n: now + 2 * max(projections[n]["seconds"], 30) for n in go}
            log(f"growth: {', '.join(go)} to {args.longest} turns")
            skipped |= grow(go, args.longest, sample_at, args.chunk, deadline)
            for name, run in go.items():
                if name not in skipped:
                    run.time_get_state(args.repeat, fresh(name))
    else:
        projections = {}

    out: dict[str, Any] = {}
    for name, run in runs.items():
        path = run.system.path
        run.system.close()
        point_figures = {}
        for p in points:
            if p not in run.samples:
                point_figures[str(p)] = {"skipped": skipped.get(name, "not run")}
                continue
            s = run.samples[p]
            point_figures[str(p)] = {
                **s,
                "amplification": s["db_bytes"] / s["raw_bytes"],
                "bytes_per_turn": run.bytes_per_turn(p, span(p)),
                "raw_bytes_per_turn": (s["raw_bytes"] - run.samples[p - span(p)]["raw_bytes"])
                / span(p),
                "avg_db_bytes_per_turn": s["db_bytes"] / p,
                "seconds_to_here": sum(t.wall_s for t in run.turns[:p]),
            }
        windows = [(1, args.short)] + [(p - args.short + 1, p) for p in points[1:]]
        out[name] = {
            "turns_run": run.done,
            "seconds": run.elapsed_s,
            "points": point_figures,
            "framework_ms_per_call": {
                f"{a}-{b}": run.framework_ms_per_call(a, b) for a, b in windows
            },
            "framework_ms_per_call_mean": {
                f"{a}-{b}": run.framework_ms_per_call(a, b, mean=True) for a, b in windows
            },
            "wall_ms_per_turn": {f"{a}-{b}": run.wall_ms_per_turn(a, b) for a, b in windows},
            "get_state": {str(k): v for k, v in run.get_state.items()},
            "per_turn": {
                "columns": ["wall_ms", "model_ms", "tool_ms", "model_calls"],
                "rows": [
                    [
                        round(t.wall_s * 1e3, 3),
                        round(t.model_s * 1e3, 3),
                        round(t.tool_s * 1e3, 3),
                        t.model_calls,
                    ]  # fmt: skip
                    for t in run.turns
                ],
            },
            "tables_at_end": table_bytes(path),
            "projection_to_longest": projections.get(name),
            "skipped": skipped.get(name),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    for n in names:
        if n not in SYSTEMS:
            raise SystemExit(f"unknown system {n!r}; choose from {', '.join(SYSTEMS)}")
    # Ferry's defaults, not whatever FERRY_* the shell has; no tracing.
    for key in [k for k in os.environ if k.startswith("FERRY_")]:
        del os.environ[key]
    os.environ["LANGSMITH_TRACING"] = "false"

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ferry-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: dict[str, Any] = {
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": git_commit(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "versions": {
                p: version(p)
                for p in ("langgraph", "langchain", "langchain-core", "langgraph-checkpoint-sqlite")
            },
            "quick": args.quick,
            "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "definitions": {
                "raw_bytes": "sum over the thread's messages of the UTF-8 length of the JSON "
                "record {role, content, tool_calls?, tool_call_id?, status?} "
                "(the shape of ferry history --json)",
                "db_bytes": "size of the .db file plus -wal (after PRAGMA "
                "wal_checkpoint(TRUNCATE)) plus any side file next to it; -shm excluded",
                "bytes_per_turn": "DB growth per turn over the last max(2, N/10) turns up to N",
                "framework_ms_per_call": "median over the window's turns of (turn wall time - "
                "time inside the model - time inside tools) / the turn's model calls; "
                "framework_ms_per_call_mean: the same as total / total",
                "get_state": "median; warm = the running graph, cold = a new graph + connection",
            },
            "workload": "one thread; each turn: question -> 3 rounds of (1 tool call -> 2 KB "
            "result) -> answer; 4 model calls and 3 tool calls a turn",
        },
        "systems": {n: {} for n in names},
    }

    log("ferry --help")
    results["ferry_help"] = ferry_help(args.repeat)

    for name, figures in growth_phase(args, names, workdir).items():
        results["systems"][name]["growth"] = figures

    for name in names:
        log(f"parallel tools: {name}")
        results["systems"][name]["parallel_tools"] = parallel_tools(
            name, workdir, args.parallel_repeat
        )

    for name in names:
        conc: dict[str, Any] = {}
        log(f"concurrency: {name}, {args.threads} threads sharing one graph")
        conc["threads_shared"] = concurrency_threads(
            name, workdir, args.threads, args.turns, shared=True
        )
        log(f"concurrency: {name}, {args.threads} threads, one graph each")
        conc["threads_own"] = concurrency_threads(
            name, workdir, args.threads, args.turns, shared=False
        )
        log(f"concurrency: {name}, {args.processes} processes x {args.proc_threads} threads")
        conc["processes"] = concurrency_processes(
            name, workdir, args.processes, args.proc_threads, args.turns
        )
        results["systems"][name]["concurrency"] = conc

    results["meta"]["total_seconds"] = time.monotonic() - started
    results["targets"] = targets(results, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(render(results, args))
    print(f"\nwrote {args.out}  ({results['meta']['total_seconds']:.0f} s)")
    if not args.keep and args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    elif args.keep:
        print(f"databases kept in {workdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
