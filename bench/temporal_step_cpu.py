"""CPU of a Temporal turn's steps against the same turn in-process, without Temporal.

    .venv/bin/python -m bench.temporal_step_cpu [--at 1,100] [--repeat 20]

bench/temporal_scale.py reads the steps' time from Temporal's history: wall time, with the
engine's own way to the worker and back in it, and on a shared machine whatever else runs.
This runs each step as the activity does (`graph.temporal.steps.advance`, with the worker's
settings), in one process on one SQLite file, and counts the process's CPU
(`time.process_time`) per turn against `graph.invoke` of the same turn on a thread as long:
one tool round (two model calls), the model emulator of bench/temporal_scale.py answering at
once from a process of its own. The two alternate, turn by turn, so load weighs on both alike.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

EMULATOR = (
    "import sys; from bench.temporal_scale import BenchModel; m = BenchModel(0.0); "
    "m.__enter__(); print(m.url, flush=True); sys.stdin.read()"
)


def measured(run: Callable[[], Any]) -> tuple[float, float]:
    """CPU and wall ms of one call, after a collection (a pending one would land in it)."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.temporal_step_cpu", description=__doc__)
    p.add_argument("--at", default="1,100", help="turns measured, comma-separated")
    p.add_argument("--repeat", type=int, default=20, help="turns timed at each")
    args = p.parse_args(argv)
    repo = Path(__file__).resolve().parents[1]
    emulator = subprocess.Popen(
        [sys.executable, "-c", EMULATOR],
        cwd=repo,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert emulator.stdout is not None and emulator.stdin is not None
    url = emulator.stdout.readline().strip()
    try:
        with tempfile.TemporaryDirectory(prefix="ferry-step-cpu-") as folder:
            os.environ.update(
                {
                    "FERRY_DB": str(Path(folder) / "ferry.db"),
                    "FERRY_FILES_ROOT": folder,
                    "FERRY_MODEL": "openai:gpt-4.1-mini",
                    "OPENAI_API_KEY": "sk-bench-fake",
                    "OPENAI_BASE_URL": url + "/v1",
                    "BENCH_TOOL_LOG": str(Path(folder) / "tools.log"),
                }
            )
            results = measure([int(at) for at in args.at.split(",")], args.repeat)
    finally:
        emulator.stdin.close()
        emulator.wait(timeout=30)
    print(json.dumps(results, indent=2))
    return 0


def measure(turns: list[int], repeat: int) -> dict[str, Any]:
    from bench.temporal_scale import question
    from bench.temporal_worker import TOOLS
    from graph.builder import build_graph
    from graph.core.settings import get_settings
    from graph.storage import open_saver
    from graph.temporal.shapes import END, StepInput
    from graph.temporal.steps import StepOutput, advance

    settings = get_settings()
    results: dict[str, Any] = {}
    with open_saver(settings) as saver:
        graph = build_graph(tools=TOOLS, checkpointer=saver, settings=settings)

        def here(name: str, turn: int) -> None:
            graph.invoke(
                {"messages": [("user", question(name, turn, 1))]},
                {"configurable": {"thread_id": name}},
            )

        def there(name: str, turn: int) -> None:
            step = StepInput(
                name, 900.0, question=question(name, turn, 1), message_id=str(uuid.uuid4())
            )
            while True:
                summary = advance(graph, step, settings, threading.Event(), output=StepOutput())
                if summary.next == END:
                    return
                step = StepInput(name, 900.0, since=summary.since)

        tag = uuid.uuid4().hex[:6]
        here(f"{tag}-warm-here", 0)
        there(f"{tag}-warm-there", 0)
        for at in turns:
            a, b = f"{tag}-here-{at}", f"{tag}-there-{at}"
            for turn in range(at - 1):  # both threads grown in-process to turn at - 1
                here(a, turn)
                here(b, turn)
            local, remote = [], []
            for r in range(repeat):
                turn = at - 1 + r
                local.append(measured(lambda: here(a, turn)))  # noqa: B023 - called at once
                remote.append(measured(lambda: there(b, turn)))  # noqa: B023 - called at once
            # Each timed turn against the in-process one just before it: the load of the moment
            # weighs on both, and the median of the differences leaves out its bursts.
            added = [
                [(b - a) / 2 for a, b in zip(x, y, strict=True)]
                for x, y in zip(local, remote, strict=True)
            ]
            results[f"turn_{at}"] = {
                "in_process_cpu_ms": round(statistics.median(x[0] for x in local), 2),
                "steps_cpu_ms": round(statistics.median(x[0] for x in remote), 2),
                "added_cpu_ms_per_model_call": round(statistics.median(x[0] for x in added), 2),
                "added_wall_ms_per_model_call": round(statistics.median(x[1] for x in added), 2),
            }
            sys.stderr.write(f"turn {at}: {results[f'turn_{at}']}\n")
    return results


if __name__ == "__main__":
    sys.exit(main())
