"""Ctrl-C trials and a kill soak against real `ferry` processes; run by hand, not by `make test`.

    .venv/bin/python -m tests.support.interrupt_trials ctrl-c 20
    .venv/bin/python -m tests.support.interrupt_trials soak 100 30

Each run asks the OpenAI emulator (which answers 400 to an invalid history) a question that
calls calculator, get_weather (a slow loopback Open-Meteo) and `record_note`, a side-effect
tool (retry_safe=False), then answers in a slowly streamed reply. `ferry` is started through
this module (`run-ferry`), which adds `record_note`, logs every tool call's start and end by
call id, and, with TRIAL_KILL_AT="N:before|after", SIGKILLs itself at the Nth checkpoint
write (put or put_writes) before or after it is made: test code only, nothing in `graph/`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

LOG_ENV, KILL_ENV = "TRIAL_TOOL_LOG", "TRIAL_KILL_AT"
TRIAL_TIMEOUT_S = 60.0


def run_ferry(argv: list[str]) -> int:
    """`ferry ARGV` with the trial tool, the call log and the optional kill in the saver."""
    from langchain_core.tools import tool

    import graph.nodes
    import tools
    from graph.cli import main
    from graph.storage.sqlite.saver import FerrySaver

    log = Path(os.environ[LOG_ENV])

    def note(line: str) -> None:
        with log.open("a") as out:
            out.write(f"{os.getpid()} {line}\n")

    @tool
    def record_note(text: str) -> str:
        """Record a note (a side effect: it must never run twice).

        Args:
            text: the note.
        """
        return "noted"

    record_note.metadata = {"retry_safe": False}
    tools.TOOLS.append(record_note)
    original_run_call = graph.nodes.run_call

    def logged_run_call(tool: Any, call: Any, *args: Any) -> Any:
        note(f"start {call['id']} {call['name']}")
        outcome = original_run_call(tool, call, *args)
        note(f"end {call['id']} {call['name']}")
        return outcome

    graph.nodes.run_call = logged_run_call  # type: ignore[assignment]  # a logging wrapper
    if os.environ.get(KILL_ENV):
        at, when = os.environ[KILL_ENV].split(":")
        writes = [0]

        def killing(method: Any) -> Any:
            def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
                writes[0] += 1
                if writes[0] == int(at) and when == "before":
                    os.kill(os.getpid(), signal.SIGKILL)
                result = method(self, *args, **kwargs)
                if writes[0] == int(at) and when == "after":
                    os.kill(os.getpid(), signal.SIGKILL)
                return result

            return wrapped

        FerrySaver.put = killing(FerrySaver.put)  # type: ignore[method-assign]
        FerrySaver.put_writes = killing(FerrySaver.put_writes)  # type: ignore[method-assign]
    return main(argv)


class Rig:
    """The loopback servers and the environment of one batch of trials."""

    def __init__(self, root: Path) -> None:
        from tests.support.servers.base import Reply, Request
        from tests.support.servers.openai import (
            OpenAIServer,
            openai_answer,
            openai_tool_calls,
            slow_stream,
        )
        from tests.support.servers.openmeteo import OpenMeteoServer

        class SlowOpenMeteo(OpenMeteoServer):
            def handle(self, request: Request) -> Reply:
                if request.path == "/v1/forecast":
                    time.sleep(1.0)
                return super().handle(request)

        def reply(body: dict[str, Any]) -> Any:
            time.sleep(0.5)  # a model takes a while
            if body["messages"][-1]["role"] == "user":
                return openai_tool_calls(
                    ("calculator", {"expression": "150 * 3"}),
                    ("get_weather", {"city": "Bogotá"}),
                    ("record_note", {"text": "asked about Bogotá"}),
                )
            return slow_stream(openai_answer("It is 14.2 °C in Bogotá; 150 * 3 = 450."), 0.05)

        self.root = root
        self.weather = SlowOpenMeteo().__enter__()
        self.model = OpenAIServer().__enter__()
        self.model.script([reply] * 10_000)
        self.env = dict(os.environ)
        self.env.update(
            FERRY_DB=str(root / "ferry.db"),
            FERRY_FILES_ROOT=str(root),
            FERRY_GEOCODING_URL=self.weather.url + "/v1",
            FERRY_FORECAST_URL=self.weather.url + "/v1",
            OPENAI_API_KEY="sk-test-fake",
            OPENAI_BASE_URL=self.model.url + "/v1",
            FERRY_MODEL="openai:gpt-4.1-mini",
            PYTHONPATH=str(Path(__file__).resolve().parents[2]),  # `-m tests…` from `root`
        )

    def start(self, *args: str, log: Path, kill_at: str = "") -> subprocess.Popen[str]:
        env = {**self.env, LOG_ENV: str(log), KILL_ENV: kill_at}
        argv = [sys.executable, "-m", "tests.support.interrupt_trials", "run-ferry", *args]
        return subprocess.Popen(
            argv,
            env=env,
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def close(self) -> None:
        self.weather.__exit__(None, None, None)
        self.model.__exit__(None, None, None)


def stored_messages(db: Path, thread_id: str) -> list[Any]:
    from graph.builder import build_graph
    from graph.core.settings import Settings
    from graph.storage import open_saver

    if not db.exists():
        return []
    settings = Settings(db=db, model="offline")
    with open_saver(settings) as saver:
        state = build_graph(checkpointer=saver, settings=settings).get_state(
            {"configurable": {"thread_id": thread_id}}
        )
        return list(state.values.get("messages") or [])


def calls_logged(log: Path) -> list[tuple[int, str, str, str]]:
    if not log.exists():
        return []
    rows = [line.split() for line in log.read_text().splitlines()]
    return [(int(pid), what, call_id, name) for pid, what, call_id, name in rows]


def resume_and_judge(rig: Rig, thread_id: str, log: Path, killed_pid: int) -> dict[str, Any]:
    """`ferry resume`, then what became of the thread."""
    from langchain_core.messages import AIMessage, ToolMessage

    from tests.support.cli_helpers import stored_tool_results

    db = rig.root / "ferry.db"
    before = stored_messages(db, thread_id)
    stored_before = {m.tool_call_id for m in stored_tool_results(db, thread_id)}
    rejections_before = len(rig.model.rejections)
    resume = rig.start("resume", "--thread", thread_id, "--json", log=log)
    out, err = resume.communicate(timeout=TRIAL_TIMEOUT_S)
    after = stored_messages(db, thread_id)
    report = json.loads(out) if resume.returncode == 0 and out.strip() else {}
    calls = calls_logged(log)
    finished_before = {c for pid, what, c, _ in calls if pid == killed_pid and what == "end"}
    rerun = {c for pid, what, c, _ in calls if pid == resume.pid and what == "start"}
    starts: dict[str, int] = {}
    for _, what, call_id, name in calls:
        if what == "start" and name == "record_note":
            starts[call_id] = starts.get(call_id, 0) + 1
    before_ids = [m.id for m in before]
    valid = True
    for i, message in enumerate(after):
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = sorted(c["id"] for c in message.tool_calls)
            block = after[i + 1 : i + 1 + len(ids)]
            valid &= all(isinstance(m, ToolMessage) for m in block)
            valid &= sorted(m.tool_call_id for m in block if isinstance(m, ToolMessage)) == ids
    return {
        "question_stored": bool(before),
        # By the stored messages: a kill after the answer's write but before `check` leaves
        # the answer stored with no stop reason, and `resume` then has nothing to do.
        "answered": bool(after)
        and isinstance(after[-1], AIMessage)
        and not after[-1].tool_calls
        and report.get("stop_reason") in ("answered", None),
        "stop_reason": report.get("stop_reason"),
        "lost_messages": sum(1 for i in before_ids if i not in {m.id for m in after}),
        "finished_calls_rerun": len(finished_before & stored_before & rerun),
        "side_effect_twice": sum(1 for n in starts.values() if n > 1),
        "protocol_errors": len(rig.model.rejections) - rejections_before + (not valid),
        "resume_exit": resume.returncode,
        "resume_traceback": "Traceback" in err,
        **({"resume_stderr": err[-600:]} if resume.returncode else {}),
    }


def reached(rig: Rig, where: str, seen: tuple[int, int]) -> bool:
    """Whether the run is at `where`: `seen` counts the model and forecast requests before it."""
    if where == "mid-tool":
        return len(rig.weather.requests_to("/forecast")) > seen[1]
    return len(rig.model.chat_requests()) > seen[0] + (where == "mid-stream")


def ctrl_c_trials(count: int, deadline: float) -> list[dict[str, Any]]:
    """SIGINT mid-tool, mid-model and mid-stream, in turn; then resume."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        rig = Rig(Path(tmp))
        try:
            for n in range(count):
                if time.monotonic() > deadline:
                    break
                where = ("mid-tool", "mid-model", "mid-stream")[n % 3]
                thread_id, log = str(uuid.uuid4()), Path(tmp) / f"calls-{n}.log"
                seen = len(rig.model.chat_requests()), len(rig.weather.requests_to("/forecast"))
                process = rig.start("ask", "Bogotá?", "--thread", thread_id, log=log)
                limit = time.monotonic() + TRIAL_TIMEOUT_S
                while (
                    not reached(rig, where, seen)
                    and time.monotonic() < limit
                    and process.poll() is None
                ):
                    time.sleep(0.01)
                time.sleep(0.2 if where != "mid-stream" else 0.8)  # into the call or the stream
                sent = time.monotonic()
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    process.send_signal(signal.SIGINT)  # the impatient second Ctrl-C
                    process.wait(timeout=TRIAL_TIMEOUT_S)
                seconds = time.monotonic() - sent
                _, err = process.communicate(timeout=TRIAL_TIMEOUT_S)
                judged = resume_and_judge(rig, thread_id, log, process.pid)
                results.append(
                    {
                        "where": where,
                        "seconds_to_exit": round(seconds, 3),
                        "exit": process.returncode,
                        "stderr_interrupted_lines": err.count("interrupted"),
                        "traceback": "Traceback" in err,
                        **judged,
                    }
                )
                print(json.dumps(results[-1]), flush=True)  # noqa: T201 - a report
        finally:
            rig.close()
    return results


def soak(random_kills: int, write_kills: int, deadline: float) -> list[dict[str, Any]]:
    """SIGKILL `ferry ask` at random moments, then inside checkpoint writes; resume each."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        rig = Rig(Path(tmp))
        try:
            for n in range(random_kills + write_kills):
                if time.monotonic() > deadline:
                    break
                thread_id, log = str(uuid.uuid4()), Path(tmp) / f"calls-{n}.log"
                in_write = n >= random_kills
                kill_at = f"{random.randint(1, 12)}:{random.choice(['before', 'after'])}"
                process = rig.start(
                    "ask", "Bogotá?", "--thread", thread_id, log=log,
                    kill_at=kill_at if in_write else "",
                )  # fmt: skip
                if not in_write:
                    # Random within the run, from its first model request (start-up takes
                    # seconds under load, and a kill before it only tests an empty thread).
                    seen = len(rig.model.chat_requests())
                    limit = time.monotonic() + TRIAL_TIMEOUT_S
                    while len(rig.model.chat_requests()) == seen and time.monotonic() < limit:
                        time.sleep(0.01)
                    try:
                        process.wait(timeout=random.uniform(0.0, 4.0))
                    except subprocess.TimeoutExpired:
                        process.kill()
                _, ask_err = process.communicate(timeout=TRIAL_TIMEOUT_S)
                judged = resume_and_judge(rig, thread_id, log, process.pid)
                how = f"write {kill_at}" if in_write else "random"
                failed = {"ask_stderr": ask_err[-600:]} if process.returncode not in (0, -9) else {}
                results.append({"kill": how, "ask_exit": process.returncode, **judged, **failed})
                print(json.dumps(results[-1]), flush=True)  # noqa: T201 - a report
        finally:
            rig.close()
    return results


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("answered", "question_stored", "lost_messages", "finished_calls_rerun")
    keys += ("side_effect_twice", "protocol_errors", "resume_traceback")
    total = {k: sum(int(r[k]) for r in results) for k in keys}
    if results and "seconds_to_exit" in results[0]:
        seconds = sorted(r["seconds_to_exit"] for r in results)
        total |= {"seconds_max": seconds[-1], "seconds_median": seconds[len(seconds) // 2]}
        total["tracebacks"] = sum(r["traceback"] for r in results)
        total["exit_130"] = sum(r["exit"] == 130 for r in results)
    return {"trials": len(results), **total}


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "run-ferry":
        sys.exit(run_ferry(rest))
    deadline = time.monotonic() + 1800  # every batch is bounded in time as well as count
    if command == "ctrl-c":
        done = ctrl_c_trials(int(rest[0]) if rest else 20, deadline)
    else:
        done = soak(int(rest[0]) if rest else 100, int(rest[1]) if len(rest) > 1 else 30, deadline)
    print(json.dumps(summary(done)))  # noqa: T201 - a report
