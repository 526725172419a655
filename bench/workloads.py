"""The workloads: a growing thread, parallel tools, concurrent runs, `ferry --help`."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from bench.measure import best_seconds, db_bytes, median_seconds, raw_bytes
from bench.model import CLOCK, BenchModel
from bench.systems import System, build, setup
from bench.tools import fetch_blob, sleep_one


def question(turn: int) -> str:
    return f"Question {turn}: fetch three records and summarise them."


# ---------------------------------------------------------------------------------------------
# A growing thread


@dataclass
class Turn:
    wall_s: float
    model_s: float
    tool_s: float
    model_calls: int

    @property
    def framework_s(self) -> float:
        return self.wall_s - self.model_s - self.tool_s


@dataclass
class Growth:
    """One thread of a system, grown turn by turn, sampled at chosen turns."""

    system: System
    thread_id: str = field(default_factory=lambda: f"bench-{uuid.uuid4()}")
    turns: list[Turn] = field(default_factory=list)
    samples: dict[int, dict[str, int]] = field(default_factory=dict)
    get_state: dict[int, dict[str, float]] = field(default_factory=dict)
    last_messages: list[BaseMessage] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def done(self) -> int:
        return len(self.turns)

    def run_to(self, last: int, sample_at: set[int]) -> None:
        for turn in range(self.done + 1, last + 1):
            model0, tool0, calls0 = CLOCK.snapshot()
            started = time.perf_counter()
            result = self.system.invoke(question(turn), self.thread_id)
            wall = time.perf_counter() - started
            model1, tool1, calls1 = CLOCK.snapshot()
            self.elapsed_s += wall
            self.turns.append(Turn(wall, model1 - model0, tool1 - tool0, calls1 - calls0))
            self.last_messages = list(result["messages"])
            final = self.last_messages[-1]
            if not (isinstance(final, AIMessage) and not final.tool_calls):
                raise RuntimeError(f"{self.system.name}: turn {turn} did not end in an answer")
            if turn in sample_at:
                self.sample(turn)

    def sample(self, turn: int) -> None:
        self.samples[turn] = {
            "db_bytes": db_bytes(self.system.path),
            "raw_bytes": raw_bytes(self.last_messages),
            "messages": len(self.last_messages),
        }

    def time_get_state(self, repeat: int, fresh: Callable[[], System]) -> None:
        """Median `get_state` time: warm (this graph) and cold (a new graph and connection each).

        Cold is what a new process pays (`ferry history`, a server restart); warm is what the
        running graph pays, including any in-memory cache its saver keeps.
        """
        messages = len(self.system.get_state(self.thread_id).values["messages"])
        warm = median_seconds(lambda: self.system.get_state(self.thread_id), repeat)
        colds = []
        for _ in range(repeat):
            other = fresh()
            try:
                started = time.perf_counter()
                other.get_state(self.thread_id)
                colds.append(time.perf_counter() - started)
            finally:
                other.close()
        cold = sorted(colds)[len(colds) // 2]
        self.get_state[self.done] = {
            "messages": messages,
            "warm_ms": warm * 1000,
            "cold_ms": cold * 1000,
            "warm_us_per_message": warm * 1e6 / max(messages, 1),
            "cold_us_per_message": cold * 1e6 / max(messages, 1),
        }

    def framework_ms_per_call(self, first: int, last: int, mean: bool = False) -> float | None:
        """Framework ms per model call over turns `first`..`last`.

        The median over the window's turns (robust to a stray pause from another process on a
        shared machine), or with `mean`, total framework time / total model calls.
        """
        window = self.turns[first - 1 : last]
        if len(window) < last - first + 1 or not all(t.model_calls for t in window):
            return None
        if mean:
            return 1000 * sum(t.framework_s for t in window) / sum(t.model_calls for t in window)
        return 1000 * statistics.median(t.framework_s / t.model_calls for t in window)

    def wall_ms_per_turn(self, first: int, last: int) -> float | None:
        window = self.turns[first - 1 : last]
        if len(window) < last - first + 1:
            return None
        return 1000 * sum(t.wall_s for t in window) / len(window)

    def bytes_per_turn(self, turn: int, span: int) -> float | None:
        """Bytes the database grew by per turn over the `span` turns ending at `turn`."""
        if turn not in self.samples or turn - span not in self.samples:
            return None
        return (self.samples[turn]["db_bytes"] - self.samples[turn - span]["db_bytes"]) / span

    def project(
        self, early: tuple[int, int], late: tuple[int, int], span: int, to: int
    ) -> dict[str, float]:
        """Extrapolate seconds and DB bytes for growing from `done` to `to` turns.

        Per-turn time and per-turn DB growth are taken as linear in the turn number, fitted
        through the early and late measurements (exact for quadratic storage, an over-estimate
        for linear storage).
        """
        t1, t2 = early
        u1, u2 = late
        wall_early = (self.wall_ms_per_turn(t1, t2) or 0) / 1000
        wall_late = (self.wall_ms_per_turn(u1, u2) or 0) / 1000
        x_early, x_late = (t1 + t2) / 2, (u1 + u2) / 2
        b_early = self.bytes_per_turn(t2, span) or 0.0
        b_late = self.bytes_per_turn(self.done, max(span, self.done // 10)) or 0.0
        xb_early, xb_late = t2 - span / 2, self.done - max(span, self.done // 10) / 2

        def linear(x: float, x1: float, y1: float, x2: float, y2: float) -> float:
            slope = (y2 - y1) / (x2 - x1) if x2 != x1 else 0.0
            return max(y2 + slope * (x - x2), 0.0)

        turns = range(self.done + 1, to + 1)
        seconds = sum(linear(n, x_early, wall_early, x_late, wall_late) for n in turns)
        grow = sum(linear(n, xb_early, b_early, xb_late, b_late) for n in turns)
        current = self.samples.get(self.done, {}).get("db_bytes", 0)
        return {"seconds": seconds, "db_bytes": current + grow}


# ---------------------------------------------------------------------------------------------
# Parallel tool calls


def parallel_tools(name: str, workdir: Path, repeat: int) -> dict[str, Any]:
    """One turn whose single model step asks for three 1-second tool calls at once."""
    model = BenchModel(tool_name="sleep_one", rounds=1, per_round=3)
    system = build(name, workdir / f"parallel-{name}.db", model, [sleep_one])
    setup(system)
    walls = []
    try:
        for i in range(repeat):
            started = time.perf_counter()
            system.invoke(question(i + 1), "parallel")
            walls.append(time.perf_counter() - started)
    finally:
        system.close()
    return {"wall_s": sorted(walls)[len(walls) // 2], "all_wall_s": walls}


# ---------------------------------------------------------------------------------------------
# Concurrent runs on one SQLite file


def is_locked(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, sqlite3.OperationalError) and "locked" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@dataclass
class Tally:
    ok: int = 0
    locked: int = 0
    other: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, exc: BaseException | None) -> None:
        with self.lock:
            if exc is None:
                self.ok += 1
            elif is_locked(exc):
                self.locked += 1
            else:
                self.other += 1
                if len(self.errors) < 5:
                    self.errors.append(f"{type(exc).__name__}: {exc}"[:300])

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "locked": self.locked, "other": self.other, "errors": self.errors}


def run_threads(
    systems: list[System], thread_ids: list[str], turns: int, tally: Tally, go: threading.Event
) -> list[threading.Thread]:
    """Start one Python thread per conversation; `systems[i % len(systems)]` runs thread i."""

    def worker(system: System, thread_id: str) -> None:
        go.wait()
        for turn in range(1, turns + 1):
            try:
                system.invoke(question(turn), thread_id)
            except Exception as exc:  # noqa: BLE001 - every failure is counted, none stops the run
                tally.add(exc)
            else:
                tally.add(None)

    threads = [
        threading.Thread(target=worker, args=(systems[i % len(systems)], tid), daemon=True)
        for i, tid in enumerate(thread_ids)
    ]
    for thread in threads:
        thread.start()
    return threads


def stored_turns(system: System, thread_ids: list[str]) -> dict[str, int]:
    """Answered turns stored per thread (final AIMessages without tool calls)."""
    counts = {}
    for tid in thread_ids:
        messages = system.get_state(tid).values.get("messages", [])
        counts[tid] = sum(
            1 for m in messages if isinstance(m, AIMessage) and not m.tool_calls and m.content
        )
    return counts


def concurrency_threads(
    name: str, workdir: Path, threads: int, turns: int, shared: bool
) -> dict[str, Any]:
    """`threads` conversations × `turns` turns from threads of this process on one file."""
    path = workdir / f"conc-threads-{'shared' if shared else 'own'}-{name}.db"
    model = BenchModel()
    systems: list[System] = []
    for _ in range(1 if shared else threads):
        systems.append(build(name, path, model, [fetch_blob]))
    thread_ids = [f"conc-{i}" for i in range(threads)]
    tally, go = Tally(), threading.Event()
    workers = run_threads(systems, thread_ids, turns, tally, go)
    started = time.perf_counter()
    go.set()
    for w in workers:
        w.join()
    wall = time.perf_counter() - started
    for s in systems:
        s.close()
    return _conc_result(name, path, thread_ids, turns, tally.as_dict(), wall)


def concurrency_processes(
    name: str, workdir: Path, processes: int, threads: int, turns: int
) -> dict[str, Any]:
    """`processes` × `threads` conversations × `turns` turns from separate processes."""
    path = workdir / f"conc-procs-{name}.db"
    env = os.environ.copy()  # the workers import `bench` from wherever this one came from
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    procs = []
    for p in range(processes):
        cmd = [sys.executable, "-m", "bench.worker", "--system", name, "--db", str(path)]
        cmd += ["--threads", str(threads), "--turns", str(turns), "--prefix", f"p{p}"]
        procs.append(
            subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        )
    for proc in procs:  # each prints "ready" once its graph is built
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"bench.worker did not start: {line!r}")
    started = time.perf_counter()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reports = []
    for proc in procs:
        out, _ = proc.communicate()
        try:
            reports.append(json.loads(out.strip().splitlines()[-1]))
        except (IndexError, ValueError):  # the worker died: its runs count as failed
            failed = f"bench.worker exited with {proc.returncode}"
            reports.append({"ok": 0, "locked": 0, "other": threads, "errors": [failed]})
    wall = time.perf_counter() - started
    tally = {
        "ok": sum(r["ok"] for r in reports),
        "locked": sum(r["locked"] for r in reports),
        "other": sum(r["other"] for r in reports),
        "errors": [e for r in reports for e in r["errors"]][:5],
    }
    thread_ids = [f"p{p}-{i}" for p in range(processes) for i in range(threads)]
    return _conc_result(name, path, thread_ids, turns, tally, wall)


def _conc_result(
    name: str, path: Path, thread_ids: list[str], turns: int, tally: dict[str, Any], wall: float
) -> dict[str, Any]:
    reader = build(name, path, BenchModel(), [fetch_blob])
    try:
        stored = stored_turns(reader, thread_ids)
    finally:
        reader.close()
    expected = len(thread_ids) * turns
    total_stored = sum(stored.values())
    return {
        **tally,
        "runs": len(thread_ids),
        "turns_per_run": turns,
        "expected_turns": expected,
        "stored_turns": total_stored,
        # a turn that returned normally but is not in the database
        "lost": max(tally["ok"] - total_stored, 0),
        "wall_s": wall,
        "turns_per_s": tally["ok"] / wall if wall else 0.0,
        "model_calls_per_s": 4 * tally["ok"] / wall if wall else 0.0,
    }


# ---------------------------------------------------------------------------------------------
# ferry --help


def ferry_help(repeat: int) -> dict[str, Any]:
    exe = Path(sys.executable).with_name("ferry")
    command = [str(exe)] if exe.exists() else [shutil.which("ferry") or "ferry"]
    command.append("--help")

    def once() -> None:
        subprocess.run(command, check=True, capture_output=True)

    return {"best_s": best_seconds(once, repeat), "command": " ".join(command)}
