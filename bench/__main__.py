"""`python -m bench`: run every workload for Ferry and its peers, print tables, write JSON.

The peers: Ferry's graph on a stock `SqliteSaver`, langchain's `create_agent` with a
`SqliteSaver`, a bare LangChain loop writing JSONL, and the OpenAI Agents SDK with a
`SQLiteSession`. All get the same scripted model (bench.model), the same tool (bench.tools).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from bench.features_cost import features_phase
from bench.phase import growth_phase, log
from bench.processes import ferry_ask_startup, postgres_cold_read, startup
from bench.report import DEFINITIONS, render, render_startup
from bench.systems import SYSTEMS
from bench.targets import targets
from bench.temporal_scale import temporal_phase
from bench.workloads import concurrency_processes, concurrency_threads, parallel_tools

PACKAGES = (
    "langgraph",
    "langchain",
    "langchain-core",
    "langgraph-checkpoint-sqlite",
    "openai-agents",
)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "--quick", action="store_true", help="smoke run (~30 s): 10/30 turns, small sizes"
    )
    p.add_argument(
        "--startup",
        action="store_true",
        help="only the start-up measures (~1 min): python -c pass, ferry --help, ferry threads",
    )
    p.add_argument(
        "--systems", default=",".join(SYSTEMS), help=f"comma-separated: {','.join(SYSTEMS)}"
    )
    p.add_argument(
        "--points", type=_ints, help="turns to sample at; the first is also the window size "
        "(default 10,80,320,1000)"
    )  # fmt: skip
    p.add_argument("--chunk", type=int, default=10, help="turns per system before alternating")
    p.add_argument(
        "--time-cap-s", type=float, default=240.0,
        help="stop growing a system once its turns have taken this long in all",
    )  # fmt: skip
    p.add_argument(
        "--max-extra-s", type=float, default=480.0,
        help="skip growing a system to the next point if projected to take longer "
        "(a system projected within it grows until --time-cap-s)",
    )  # fmt: skip
    p.add_argument(
        "--max-db-gb", type=float, default=2.0,
        help="skip growing a system to the next point if its storage is projected larger",
    )  # fmt: skip
    p.add_argument("--list-threads", type=int, help="threads for `ferry threads` (default 1000)")
    p.add_argument("--postgres", choices=("auto", "no"), default="auto", help="Postgres cold read")
    p.add_argument("--pg-python", help="interpreter with the postgres extra (default: .venv's)")
    p.add_argument("--pg-cap-s", type=float, default=180.0, help="time cap of the Postgres thread")
    p.add_argument(
        "--concurrency-systems", default="ferry,reference",
        help="systems for the parallel-tools and concurrency workloads",
    )  # fmt: skip
    p.add_argument("--threads", type=int, help="concurrent runs in one process (default 16)")
    p.add_argument("--turns", type=int, help="turns per concurrent run (default 10)")
    p.add_argument("--processes", type=int, help="worker processes (default 4)")
    p.add_argument("--proc-threads", type=int, help="runs per worker process (default 4)")
    p.add_argument("--parallel-repeat", type=int, help="turns of the parallel-tools workload")
    p.add_argument("--repeat", type=int, default=5, help="repeats for loads and CLI timings")
    p.add_argument("--cold-repeat", type=int, help="new processes per cold read (default 3)")
    p.add_argument("--workdir", type=Path, help="where the databases go (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the databases")
    p.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    args = p.parse_args(argv)
    quick = {"points": [10, 30], "list_threads": 50, "cold_repeat": 1, "threads": 4, "turns": 3,
             "processes": 2, "proc_threads": 2, "parallel_repeat": 1}  # fmt: skip
    full = {"points": [10, 80, 320, 1000], "list_threads": 1000, "cold_repeat": 3, "threads": 16,
            "turns": 10, "processes": 4, "proc_threads": 4, "parallel_repeat": 3}  # fmt: skip
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.quick:
        args.repeat = min(args.repeat, 3)
    if args.startup and args.out == p.get_default("out"):
        args.out = args.out.with_name("results-startup.json")  # a full run's results stay
    if len(args.points) < 2 or args.points != sorted(set(args.points)) or args.points[0] < 2:
        p.error("--points needs at least two increasing turn counts, the first >= 2")
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


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def meta(args: argparse.Namespace) -> dict[str, Any]:
    """What was measured, where and how: printed above the tables and kept in the JSON."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_at_start": _load(),
        "versions": {p: _version(p) for p in PACKAGES},
        "quick": args.quick,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "definitions": DEFINITIONS,
        "workload": "one thread; each turn: question -> 3 rounds of (1 tool call -> 2 KB "
        "result) -> answer; 4 model calls and 3 tool calls a turn",
    }


def postgres_phase(args: argparse.Namespace, results: dict[str, Any]) -> dict[str, Any]:
    if args.postgres == "no":
        return {"not_run": "--postgres no"}
    # As long as Ferry's SQLite thread, so the two cold reads compare like with like.
    turns = results["systems"].get("ferry", {}).get("growth", {}).get("turns_run")
    turns = turns or args.points[-1]
    log(f"postgres: Ferry grown to {turns} turns (cap {args.pg_cap_s:.0f} s), then read cold")
    figures = postgres_cold_read(turns, args.pg_cap_s, args.cold_repeat, args.pg_python)
    log(f"postgres: {figures.get('not_run') or 'done'}")
    return figures


def concurrency_phase(args: argparse.Namespace, name: str, workdir: Path) -> dict[str, Any]:
    conc: dict[str, Any] = {}
    log(f"concurrency: {name}, {args.threads} threads sharing one graph")
    conc["threads_shared"] = concurrency_threads(
        name, workdir, args.threads, args.turns, shared=True
    )
    log(f"concurrency: {name}, {args.threads} threads, one graph each")
    conc["threads_own"] = concurrency_threads(name, workdir, args.threads, args.turns, shared=False)
    log(f"concurrency: {name}, {args.processes} processes x {args.proc_threads} threads")
    conc["processes"] = concurrency_processes(
        name, workdir, args.processes, args.proc_threads, args.turns
    )
    return conc


def startup_phase(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    log(
        f"load average {_load()}; python -c pass, ferry --help, ferry threads with "
        f"{args.list_threads} threads (made once by Ferry) and with none, in turn"
    )
    return startup(workdir, args.list_threads, args.repeat)


def run_startup(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """`--startup`: the start-up measures alone, and their targets."""
    started = time.monotonic()
    results: dict[str, Any] = {"meta": meta(args), "systems": {}}
    results |= startup_phase(args, workdir)
    results["meta"]["total_seconds"] = time.monotonic() - started
    results["meta"]["load_at_end"] = _load()
    results["targets"] = [t for t in targets(results) if t["target"].startswith("`ferry")]
    return results


def run(args: argparse.Namespace, names: list[str], workdir: Path) -> dict[str, Any]:
    """Every workload, in order; the results as written to the JSON."""
    started = time.monotonic()
    results: dict[str, Any] = {"meta": meta(args), "systems": {n: {} for n in names}}
    results |= startup_phase(args, workdir)
    log("a one-tool ferry ask offline beside importing langgraph.graph + langchain_core.messages")
    results["ferry_ask"] = ferry_ask_startup(workdir, max(args.repeat, 5))
    for name, figures in growth_phase(args, names, workdir).items():
        results["systems"][name]["growth"] = figures
    results["postgres"] = postgres_phase(args, results)
    conc_names = [n for n in args.concurrency_systems.split(",") if n in names]
    for name in conc_names:
        log(f"parallel tools: {name}")
        results["systems"][name]["parallel_tools"] = parallel_tools(
            name, workdir, args.parallel_repeat
        )
    for name in conc_names:
        results["systems"][name]["concurrency"] = concurrency_phase(args, name, workdir)
    log("issue 32's features off, tracing, all on: CPU per model call (bench/features_cost.py)")
    results["features"] = features_phase(args.pg_python, args.quick)
    log("temporal: kills, throughput by workers, added cost (bench/temporal_scale.py)")
    results["temporal"] = temporal_phase(args.pg_python, args.quick)
    results["meta"]["total_seconds"] = time.monotonic() - started
    results["meta"]["load_at_end"] = _load()
    results["targets"] = targets(results)
    return results


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
    try:
        results = run_startup(args, workdir) if args.startup else run(args, names, workdir)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(render_startup(results) if args.startup else render(results))
    print(f"\nwrote {args.out}  ({results['meta']['total_seconds']:.0f} s)")
    if args.keep:
        print(f"databases kept in {workdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
