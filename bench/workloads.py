"""The LangGraph systems' other workloads: parallel tool calls and concurrent runs on one file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from bench.growth import question
from bench.model import BenchModel
from bench.systems import Peer, build, setup
from bench.tools import fetch_blob, sleep_one

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
    systems: list[Peer], thread_ids: list[str], turns: int, tally: Tally, go: threading.Event
) -> list[threading.Thread]:
    """Start one Python thread per conversation; `systems[i % len(systems)]` runs thread i."""

    def worker(system: Peer, thread_id: str) -> None:
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


def stored_turns(system: Peer, thread_ids: list[str]) -> dict[str, int]:
    """Answered turns stored per thread (final AIMessages without tool calls)."""
    counts = {}
    for tid in thread_ids:
        messages = system.messages(tid)
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
    systems: list[Peer] = []
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
