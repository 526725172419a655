"""What a new process pays: a cold read, the memory to hold a thread, `ferry threads`, `--help`
(beside `python -c pass`), a one-tool `ferry ask`."""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.model import BenchModel
from bench.systems import build, setup
from bench.tools import fetch_blob

ROOT = Path(__file__).resolve().parent.parent


def interpreter_with(python: str | None, imports: str) -> str | None:
    """`python`, or this interpreter, or `make test`'s `.venv`'s: the first that `imports`."""
    repo = Path(__file__).resolve().parents[1]
    candidates = [python] if python else [sys.executable, str(repo / ".venv" / "bin" / "python")]
    for chosen in candidates:
        probe = [chosen, "-c", f"import {imports}"]
        if Path(chosen).exists() and subprocess.run(probe, capture_output=True).returncode == 0:
            return chosen
    return None


def bench_env(**extra: str) -> dict[str, str]:
    """This environment without FERRY_* settings, with `bench` importable from the repository."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["LANGSMITH_TRACING"] = "false"
    return env | extra


def cold_read(
    system: str, path: Path, thread_id: str, repeat: int, python: str = sys.executable, **kw: str
) -> dict[str, Any]:
    """`repeat` cold reads, each in a new process (`bench.cold`): median time, median memory."""
    cmd = [python, "-m", "bench.cold", "--system", system, "--path", str(path)]
    cmd += ["--thread", thread_id] + [a for k, v in kw.items() for a in (f"--{k}", v)]
    runs = []
    for _ in range(repeat):
        done = subprocess.run(cmd, capture_output=True, text=True, env=bench_env(), timeout=600)
        if done.returncode != 0:
            return {"error": done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]}
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {
        "load_ms": statistics.median(r["load_ms"] for r in runs),
        "messages": runs[0]["messages"],
        "extra_kb": statistics.median(r["extra_kb"] for r in runs),
        "resident_extra_kb": statistics.median(r["resident_extra_kb"] for r in runs),
        "runs": runs,
    }


def ferry_command(*args: str) -> list[str]:
    exe = Path(sys.executable).with_name("ferry")
    return [str(exe) if exe.exists() else shutil.which("ferry") or "ferry", *args]


IMPORTS = "import langgraph.graph, langchain_core.messages"
# The same imports with the collector as `ferry` runs it (graph/cli/collection.py): paused while
# they load, everything frozen at the end; what `ferry ask` adds to them on equal terms.
IMPORTS_COLLECTED_AS_FERRY = f"import gc; gc.disable(); {IMPORTS}; gc.freeze()"


def _child_cpu_s(command: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one run of `command` (a child of this process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, capture_output=True, env=env, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def ferry_ask_startup(workdir: Path, repeat: int) -> dict[str, Any]:
    """CPU of a one-tool `ferry ask` offline beside importing LangGraph's graph and messages.

    Run in turn, so a machine's load weighs on both alike; medians. Bytecode is written (and a
    first run of each, not counted, writes it): a user's second `ferry ask` reads it.
    """
    env = {k: v for k, v in bench_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    question = "what is 2+3"
    commands = {
        "imports": [sys.executable, "-c", IMPORTS],
        "imports_collected_as_ferry": [sys.executable, "-c", IMPORTS_COLLECTED_AS_FERRY],
        "ask": ferry_command("ask", question),
    }
    runs: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(repeat + 1):
        ask_env = env | {"FERRY_MODEL": "offline", "FERRY_DB": str(workdir / f"ask-{i}.db")}
        for name, command in commands.items():
            cpu_s = _child_cpu_s(command, ask_env if name == "ask" else env)
            if i:  # the first run of each writes the bytecode
                runs[name].append(cpu_s)
    medians = {f"{name}_cpu_s": statistics.median(cpu) for name, cpu in runs.items()}
    return medians | {"runs": runs, "question": question, "imports": IMPORTS}


def threads_file(workdir: Path, threads: int) -> Path:
    """A SQLite file of `threads` one-turn threads, made by Ferry (one model call each)."""
    path = workdir / f"threads-{threads}.db"
    system = build("ferry", path, BenchModel(rounds=0), [fetch_blob])
    setup(system)
    try:
        for i in range(threads):
            system.invoke(f"Thread {i}: say hello.", f"thread-{i:05d}")
    finally:
        system.close()
    return path


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and user + system CPU seconds of one run of `command` (a child of this process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env, timeout=600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def startup(workdir: Path, threads: int, repeat: int) -> dict[str, Any]:
    """`python -c pass`, `ferry --help`, `ferry threads` on `threads` threads and on none.

    Run in turn, `repeat` rounds, so a machine's load weighs on all alike: best and median wall,
    median CPU. Bytecode is written (a first round, not counted, writes it), as a user's second
    command reads it; `python -c pass` is this interpreter, the one `ferry`'s script runs.
    """
    path = threads_file(workdir, threads)
    env = {k: v for k, v in bench_env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    listing = env | {"FERRY_DB": str(path)}
    empty = env | {"FERRY_DB": str(workdir / "threads-none.db")}
    commands = {
        "python": ([sys.executable, "-c", "pass"], env),
        "help": (ferry_command("--help"), env),
        "threads": (ferry_command("threads"), listing),
        "threads_empty": (ferry_command("threads"), empty),
    }
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for i in range(repeat + 1):
        for name, (command, command_env) in commands.items():
            timed = _timed(command, command_env)
            if i:  # the first round writes the bytecode
                runs[name].append(timed)

    def figures(name: str) -> dict[str, Any]:
        walls, cpus = [w for w, _ in runs[name]], [c for _, c in runs[name]]
        return {
            "best_s": min(walls),
            "median_s": statistics.median(walls),
            "cpu_s": statistics.median(cpus),
            "runs": runs[name],
            "command": " ".join(commands[name][0]),
        }

    listed = subprocess.run(
        ferry_command("threads"), check=True, capture_output=True, text=True, env=listing
    )
    threads_figures = figures("threads")
    empty_figures = figures("threads_empty")
    return {
        "python_startup": figures("python"),
        "ferry_help": figures("help"),
        "ferry_threads": threads_figures
        | {
            "empty_best_s": empty_figures["best_s"],
            "empty_cpu_s": empty_figures["cpu_s"],
            "threads": threads,
            "listed": len(listed.stdout.splitlines()),
        },
    }


def postgres_python(explicit: str | None) -> str | None:
    """An interpreter that can run Ferry on Postgres: `explicit`, this one, or `make test`'s."""
    candidates = (
        [explicit] if explicit else [sys.executable, str(ROOT / ".venv" / "bin" / "python")]
    )
    for python in candidates:
        probe = [python, "-c", "import psycopg, langgraph.checkpoint.postgres"]
        if Path(python).exists() and subprocess.run(probe, capture_output=True).returncode == 0:
            return python
    return None


def postgres_cold_read(turns: int, cap_s: float, repeat: int, python: str | None) -> dict[str, Any]:
    """Grow a Ferry thread on a throwaway Postgres (`bench.pg`) and read it cold; or why not."""
    chosen = postgres_python(python)
    if chosen is None:
        return {"not_run": "no interpreter with psycopg and langgraph-checkpoint-postgres"}
    cmd = [chosen, "-m", "bench.pg", "--turns", str(turns), "--cap-s", str(cap_s)]
    cmd += ["--repeat", str(repeat)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=bench_env())
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return {"not_run": f"bench.pg failed: {tail[0]}"}
    return json.loads(lines[-1]) | {"python": chosen}
