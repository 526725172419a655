"""Two writers on one thread, and two resumes of one crashed run: what the thread lease prevents.

Run by hand (not part of `make test`), from the repository root:

    .venv/bin/python -m bench.lease_trials [--writers 20] [--resumes 10]

Each trial starts real `ferry` processes at once against a loopback OpenAI-compatible server
(which answers 400 to an invalid history, as the real API does) and a loopback Open-Meteo whose
every forecast takes a moment, so the runs overlap. Both modes are measured: the default (the
second run is refused in one line, exit 1) and `--wait` (it waits, then runs). Counted per trial:
questions lost (asked, not refused, yet not answered in the history), provider 400s, broken
threads (a history the provider would refuse, or a next question that fails), and tool calls or
model calls run more than once.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from tests.support.cli_helpers import assert_every_call_answered_in_place, ferry_env, start_ferry
from tests.support.servers.base import Reply, Request
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.support.servers.openmeteo import OpenMeteoServer

RUN_TIMEOUT_S = 90.0
FORECAST_DELAY_S = 0.4
CITIES = ("Madrid", "Paris", "Berlin", "Bogotá")


class SlowForecasts(OpenMeteoServer):
    """Every forecast takes FORECAST_DELAY_S; with `hold_next`, the next one waits for release."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived, self.release = threading.Event(), threading.Event()
        self.hold_next = False

    def handle(self, request: Request) -> Reply:
        if request.path == "/v1/forecast":
            with self._lock:
                hold, self.hold_next = self.hold_next, False
            if hold:
                self.arrived.set()
                self.release.wait(RUN_TIMEOUT_S)
            time.sleep(FORECAST_DELAY_S)
        return super().handle(request)


def respond(body: dict[str, Any]) -> dict[str, Any]:
    """The model: asks for the weather of the city in the question, then answers with it."""
    messages = body["messages"]
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    if messages[-1]["role"] == "tool":
        return openai_answer(f"answer to [{question}]: {str(messages[-1]['content'])[:40]}")
    city = next((c for c in CITIES if c in str(question)), "Madrid")
    return openai_tool_calls(("get_weather", {"city": city}))


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate(timeout=10)
    return process.returncode, out, err


def stored_messages(env: dict[str, str], cwd: Path, thread_id: str) -> list[dict[str, Any]]:
    """`ferry history --thread ID --json`, in this process (its environment is the trials')."""
    from graph.cli import main as ferry_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = ferry_main(["history", "--thread", thread_id, "--json"])
    if code != 0:
        return []
    messages: list[dict[str, Any]] = json.loads(out.getvalue())["messages"]
    return messages


def valid(messages: list[dict[str, Any]]) -> bool:
    try:
        assert_every_call_answered_in_place(messages)
    except AssertionError:
        return False
    return True


def answered(messages: list[dict[str, Any]], question: str) -> bool:
    """Whether the question is stored and answered by the model's message about it."""
    return any(m["role"] == "user" and m["content"] == question for m in messages) and any(
        m["role"] == "assistant" and f"[{question}]" in str(m["content"]) for m in messages
    )


def calls_run_twice(messages: list[dict[str, Any]], forecasts: int) -> int:
    """Forecast requests beyond one per stored get_weather result, plus repeated call ids."""
    results = [m for m in messages if m["role"] == "tool" and m.get("status") != "error"]
    ids = Counter(m["tool_call_id"] for m in messages if m["role"] == "tool")
    return max(0, forecasts - len(results)) + sum(n - 1 for n in ids.values())


def two_writers(
    trial: int, wait: bool, env: dict[str, str], cwd: Path, servers: Any
) -> Counter[str]:
    openai, weather = servers
    thread_id = str(uuid.uuid4())
    extra = ["--wait"] if wait else []
    questions = [
        f"trial {trial}: weather in {CITIES[0]}?",
        f"trial {trial}: weather in {CITIES[1]}?",
    ]
    rejected, forecasts = len(openai.rejections), len(weather.requests_to("/v1/forecast"))
    processes = [
        start_ferry("ask", q, "--thread", thread_id, *extra, env=env, cwd=cwd) for q in questions
    ]
    results = [finish(p) for p in processes]
    counts: Counter[str] = Counter(trials=1)
    messages = stored_messages(env, cwd, thread_id)
    for question, (code, _out, err) in zip(questions, results, strict=True):
        busy = "is busy" in err
        counts["contended"] += busy
        if code == 1 and busy and not wait:
            counts["refused_in_one_line"] += err.strip().count("\n") == 0
            continue
        counts["answered"] += code == 0 and answered(messages, question)
        counts["lost_questions"] += not (code == 0 and answered(messages, question))
    counts["provider_400s"] += len(openai.rejections) - rejected
    forecasts = len(weather.requests_to("/v1/forecast")) - forecasts
    counts["calls_run_twice"] += calls_run_twice(messages, forecasts)
    follow = f"trial {trial}: weather in {CITIES[2]}?"
    code, _out, _err = finish(start_ferry("ask", follow, "--thread", thread_id, env=env, cwd=cwd))
    after = stored_messages(env, cwd, thread_id)
    counts["broken_threads"] += not (valid(messages) and code == 0 and answered(after, follow))
    return counts


def double_resume(
    trial: int, wait: bool, env: dict[str, str], cwd: Path, servers: Any
) -> Counter[str]:
    openai, weather = servers
    thread_id = str(uuid.uuid4())
    question = f"resume trial {trial}: weather in {CITIES[3]}?"
    weather.arrived.clear()
    weather.release.clear()
    weather.hold_next = True
    crashed = start_ferry("ask", question, "--thread", thread_id, env=env, cwd=cwd)
    counts: Counter[str] = Counter(trials=1)
    if not weather.arrived.wait(RUN_TIMEOUT_S):
        counts["setup_failed"] += 1
    os.kill(crashed.pid, signal.SIGKILL)
    finish(crashed)
    weather.release.set()
    rejected, forecasts = len(openai.rejections), len(weather.requests_to("/v1/forecast"))
    model_calls = len(openai.chat_requests())
    extra = ["--wait"] if wait else []
    resumes = [
        start_ferry("resume", "--thread", thread_id, "--json", *extra, env=env, cwd=cwd)
        for _ in "ab"
    ]
    results = [finish(p) for p in resumes]
    messages = stored_messages(env, cwd, thread_id)
    for code, _out, err in results:
        busy = "is busy" in err
        counts["contended"] += busy
        if code == 1 and busy and not wait:
            counts["refused_in_one_line"] += err.strip().count("\n") == 0
        elif code != 0:
            counts["resume_errors"] += 1
    counts["lost_questions"] += not answered(messages, question)
    counts["provider_400s"] += len(openai.rejections) - rejected
    # The killed run's forecast never finished: resuming re-runs it once, and asks the model once.
    resumed_forecasts = len(weather.requests_to("/v1/forecast")) - forecasts
    counts["calls_run_twice"] += max(0, resumed_forecasts - 1)
    counts["model_calls_twice"] += max(0, len(openai.chat_requests()) - model_calls - 1)
    counts["broken_threads"] += not valid(messages)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=20, help="two-writer trials per mode")
    parser.add_argument("--resumes", type=int, default=10, help="double-resume trials per mode")
    options = parser.parse_args()
    with OpenAIServer() as openai, SlowForecasts() as weather, tempfile.TemporaryDirectory() as tmp:
        openai.script([respond] * 10_000)
        cwd = Path(tmp)
        env = ferry_env(cwd, weather=weather, model=openai)
        os.environ.update(env)
        os.chdir(cwd)
        for name, trial_function, count in (
            ("two writers", two_writers, options.writers),
            ("double resume", double_resume, options.resumes),
        ):
            for wait in (False, True):
                started, total = time.monotonic(), Counter[str]()
                for trial in range(count):
                    total.update(trial_function(trial, wait, env, cwd, (openai, weather)))
                mode = "--wait" if wait else "default"
                seconds = time.monotonic() - started
                print(
                    f"{name} ({mode}), {seconds:.0f} s: {json.dumps(dict(sorted(total.items())))}"
                )
                sys.stdout.flush()


if __name__ == "__main__":
    main()
