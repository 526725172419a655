"""A growing thread: one system, one conversation, turn by turn, sampled at chosen turns."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage

from bench.gate import GATE
from bench.measure import db_bytes, median_seconds, raw_bytes
from bench.model import CLOCK
from bench.systems import Peer, load


def question(turn: int) -> str:
    return f"Question {turn}: fetch three records and summarise them."


@dataclass
class Turn:
    wall_s: float
    cpu_s: float  # the whole process's CPU time over the turn (time.process_time)
    model_s: float
    tool_s: float
    inside_cpu_s: float  # CPU time inside the model and the tools
    model_calls: int
    gate_cpu_s: float = 0.0  # CPU time in Ferry's gate and keyed releases (bench.gate)

    @property
    def framework_s(self) -> float:
        return self.wall_s - self.model_s - self.tool_s

    @property
    def framework_cpu_s(self) -> float:
        return self.cpu_s - self.inside_cpu_s


@dataclass
class Growth:
    """One thread of a system, grown turn by turn, sampled at chosen turns."""

    system: Peer
    thread_id: str = field(default_factory=lambda: f"bench-{uuid.uuid4()}")
    turns: list[Turn] = field(default_factory=list)
    samples: dict[int, dict[str, int]] = field(default_factory=dict)
    get_state: dict[int, dict[str, float]] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def done(self) -> int:
        return len(self.turns)

    def run_to(self, last: int, sample_at: set[int]) -> None:
        for turn in range(self.done + 1, last + 1):
            model0, tool0, inside0, calls0 = CLOCK.snapshot()
            gate0 = GATE.snapshot()
            started, cpu = time.perf_counter(), time.process_time()
            final = self.system.invoke(question(turn), self.thread_id)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            model1, tool1, inside1, calls1 = CLOCK.snapshot()
            gate = GATE.snapshot() - gate0
            self.elapsed_s += wall
            self.turns.append(
                Turn(
                    wall,
                    cpu,
                    model1 - model0,
                    tool1 - tool0,
                    inside1 - inside0,
                    calls1 - calls0,
                    gate,
                )
            )
            if not (isinstance(final, AIMessage) and not final.tool_calls):
                raise RuntimeError(f"{self.system.name}: turn {turn} did not end in an answer")
            if turn in sample_at:
                self.sample(turn)

    def sample(self, turn: int) -> None:
        messages = self.system.messages(self.thread_id)
        self.samples[turn] = {
            "db_bytes": db_bytes(self.system.path),
            "raw_bytes": raw_bytes(messages),
            "messages": len(messages),
        }

    def time_get_state(self, repeat: int, fresh: Callable[[], Peer]) -> None:
        """Median time to load the thread: warm (this system) and cold (a new one each time).

        Cold here is a new graph and connection in this process; `bench.cold` measures a new
        process. Warm includes any in-memory cache the system keeps.
        """
        messages = len(load(self.system, self.thread_id))
        warm = median_seconds(lambda: load(self.system, self.thread_id), repeat)
        colds = []
        for _ in range(repeat):
            other = fresh()
            try:
                started = time.perf_counter()
                load(other, self.thread_id)
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

    def window(self, first: int, last: int) -> list[Turn] | None:
        turns = self.turns[first - 1 : last]
        if len(turns) < last - first + 1 or not all(t.model_calls for t in turns):
            return None
        return turns

    def framework_ms_per_call(
        self, first: int, last: int, mean: bool = False, cpu: bool = False
    ) -> float | None:
        """Framework ms per model call over turns `first`..`last`, in wall or process CPU time.

        The median over the window's turns (robust to a stray pause from another process on a
        shared machine), or with `mean`, total framework time / total model calls.
        """
        turns = self.window(first, last)
        if turns is None:
            return None
        spent: Callable[[Turn], float] = (
            (lambda t: t.framework_cpu_s) if cpu else (lambda t: t.framework_s)
        )
        if mean:
            return 1000 * sum(spent(t) for t in turns) / sum(t.model_calls for t in turns)
        return 1000 * statistics.median(spent(t) / t.model_calls for t in turns)

    def gate_ms_per_call(self, first: int, last: int) -> float | None:
        """CPU ms per model call in Ferry's gate and keyed releases over turns `first`..`last`."""
        turns = self.window(first, last)
        if turns is None:
            return None
        return 1000 * sum(t.gate_cpu_s for t in turns) / sum(t.model_calls for t in turns)

    def wall_ms_per_turn(self, first: int, last: int) -> float | None:
        turns = self.turns[first - 1 : last]
        if len(turns) < last - first + 1:
            return None
        return 1000 * sum(t.wall_s for t in turns) / len(turns)

    def bytes_per_turn(self, turn: int, span: int) -> float | None:
        """Bytes the storage grew by per turn over the `span` turns ending at `turn`."""
        if turn not in self.samples or turn - span not in self.samples:
            return None
        return (self.samples[turn]["db_bytes"] - self.samples[turn - span]["db_bytes"]) / span

    def project(
        self, early: tuple[int, int], late: tuple[int, int], span: int, to: int
    ) -> dict[str, float]:
        """Extrapolate seconds and storage bytes for growing from `done` to `to` turns.

        Per-turn time and per-turn storage growth are taken as linear in the turn number, fitted
        through the early and late measurements (exact for quadratic storage, an over-estimate
        for linear storage).
        """
        t1, t2 = early
        u1, u2 = late
        wall_early = (self.wall_ms_per_turn(t1, t2) or 0) / 1000
        wall_late = (self.wall_ms_per_turn(u1, u2) or 0) / 1000
        x_early, x_late = (t1 + t2) / 2, (u1 + u2) / 2
        late_span = max(span, self.done // 10)
        b_early = self.bytes_per_turn(t2, span) or 0.0
        b_late = self.bytes_per_turn(self.done, late_span) or 0.0
        xb_early, xb_late = t2 - span / 2, self.done - late_span / 2

        def linear(x: float, x1: float, y1: float, x2: float, y2: float) -> float:
            slope = (y2 - y1) / (x2 - x1) if x2 != x1 else 0.0
            return max(y2 + slope * (x - x2), 0.0)

        turns = range(self.done + 1, to + 1)
        seconds = sum(linear(n, x_early, wall_early, x_late, wall_late) for n in turns)
        grow = sum(linear(n, xb_early, b_early, xb_late, b_late) for n in turns)
        current = self.samples.get(self.done, {}).get("db_bytes", 0)
        return {"seconds": seconds, "db_bytes": current + grow}

    def per_turn(self) -> dict[str, Any]:
        columns = ["wall_ms", "cpu_ms", "model_ms", "tool_ms", "inside_cpu_ms", "model_calls"]
        rows = [
            [round(v * 1e3, 3) for v in (t.wall_s, t.cpu_s, t.model_s, t.tool_s, t.inside_cpu_s)]
            + [t.model_calls]
            for t in self.turns
        ]
        return {"columns": columns, "rows": rows}
