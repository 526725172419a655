"""The same `ferry` tests on both turn runners: in-process, and Temporal with a worker process.

`ask`, `chat` and `resume` are written once against the runner (graph/runs/runner.py), so each
test below asserts the same stdout, stderr lines, `--json` object and exit code on both. `ferry`
runs in this process (the `cli` fixture), but for `chat`, which reads its questions from stdin;
the Temporal turns run on the module's shared worker process.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli_helpers import Ferry, ferry, ferry_env, new_thread_id
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.temporal.helpers import SharedWorker

CALC = openai_tool_calls(("calculator", {"expression": "6 * 7"}))
REPORT_KEYS = [
    *("thread_id", "answer", "stop_reason", "output", "model_calls", "models", "tool_calls"),
    *("usage", "thread_usage"),
]
Env = Callable[..., dict[str, str]]


@pytest.fixture
def model(shared_model: OpenAIServer) -> OpenAIServer:
    """The shared worker's model, which the in-process runs call too."""
    return shared_model


@pytest.fixture(params=["in_process", "temporal"])
def runner_env(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    model: OpenAIServer,
    temporal_env: dict[str, str],
    shared_worker: SharedWorker,
) -> Env:
    """The environment of `ferry` on one runner, with `settings` (a Temporal worker's too).

    On Temporal, the module's shared worker runs the turns; with approvals, its approving one.
    """

    def env(**settings: str) -> dict[str, str]:
        if request.param == "in_process":
            here = ferry_env(tmp_path, model=model, **settings)
            return {k: v for k, v in here.items() if k != "FERRY_TEMPORAL_ADDRESS"}
        if not settings:
            return shared_worker.client_env(tmp_path)
        if settings != {"FERRY_APPROVE_TOOLS": "calculator"}:
            raise ValueError(f"no shared worker has the settings {settings}")
        approving: SharedWorker = request.getfixturevalue("approving_worker")
        return {**approving.client_env(tmp_path), **settings}

    return env


@pytest.fixture
def thread() -> str:
    """A thread id of this test's own: the session's Temporal server has one turn per id."""
    return f"t-{uuid.uuid4()}"


def progress(stderr: str) -> list[str]:
    """The progress lines, durations taken out (they differ from run to run)."""
    lines = [line for line in stderr.splitlines() if not line.startswith("thread: ")]
    return [re.sub(r" \d+ ms$", " N ms", line) for line in lines]


def test_ask_streams_the_answer_and_shows_each_call(
    runner_env: Env, model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    model.script([CALC, openai_answer("It is 42.")])

    done = cli("ask", "What is 6 * 7?", env=runner_env(), cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is 42.\n"
    thread = new_thread_id(done.stderr)
    assert done.stderr.splitlines()[0] == f"thread: {thread}"
    assert progress(done.stderr) == ['→ calculator(expression="6 * 7")', "✓ calculator N ms"]
    assert model.rejections == []


def test_json_is_one_object_read_from_what_the_turn_stored(
    runner_env: Env, thread: str, model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    model.script([CALC, openai_answer("It is 42.")])

    done = cli(
        "ask", "--json", "--thread", thread, "What is 6 * 7?", env=runner_env(), cwd=tmp_path
    )

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # one object, nothing else
    assert list(report) == REPORT_KEYS
    assert report["thread_id"] == thread and report["answer"] == "It is 42."
    assert report["stop_reason"] == "answered" and report["model_calls"] == 2
    assert [(c["name"], c["args"], c["status"]) for c in report["tool_calls"]] == [
        ("calculator", {"expression": "6 * 7"}, "success")
    ]
    assert report["usage"]["total_tokens"] > 0
    assert progress(done.stderr) == [
        f"thread {thread}: new thread",
        '→ calculator(expression="6 * 7")',
        "✓ calculator N ms",
    ]


def test_a_pause_for_approval_then_resume_approve(
    runner_env: Env, thread: str, model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    model.script([CALC, openai_answer("It is 42.")])
    env = runner_env(FERRY_APPROVE_TOOLS="calculator")

    asked = cli("ask", "--thread", thread, "What is 6 * 7?", env=env, cwd=tmp_path)

    assert asked.returncode == 0, asked.stderr
    assert asked.stdout == ""  # no answer yet: stdin is no terminal, so nobody is asked
    assert progress(asked.stderr) == [
        f"thread {thread}: new thread",
        '→ calculator(expression="6 * 7")',
        'awaiting approval: calculator({"expression": "6 * 7"})',
        f"decide with: ferry resume --thread {thread} --approve (or --reject REASON)",
    ]
    decided = cli("resume", "--json", "--thread", thread, "--approve", env=env, cwd=tmp_path)
    assert decided.returncode == 0, decided.stderr
    report = json.loads(decided.stdout)
    assert report["answer"] == "It is 42." and report["stop_reason"] == "answered"
    assert [c["status"] for c in report["tool_calls"]] == ["success"]
    assert progress(decided.stderr) == ['→ calculator(expression="6 * 7")', "✓ calculator N ms"]


def test_an_answer_schema_prints_the_answer_as_json(
    runner_env: Env, model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    schema = {"title": "Product", "type": "object", "properties": {"value": {"type": "integer"}}}
    model.script([CALC, openai_tool_calls(("Product", {"value": 42}))])

    done = cli("ask", "6 * 7?", "--schema", json.dumps(schema), env=runner_env(), cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == '{\n  "value": 42\n}\n'


def test_resume_of_a_finished_thread_has_nothing_to_run(
    runner_env: Env, thread: str, model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    model.script([openai_answer("Hello."), openai_answer("Hello again.")])
    env = runner_env()
    assert cli("ask", "--thread", thread, "Hi", env=env, cwd=tmp_path).returncode == 0
    here = {k: v for k, v in env.items() if k != "FERRY_TEMPORAL_ADDRESS"}
    # The thread's last turn ran in-process: no runner has anything of it to show.
    assert cli("ask", "--thread", thread, "Hi?", env=here, cwd=tmp_path).returncode == 0

    plain = cli("resume", "--thread", thread, env=env, cwd=tmp_path)
    as_json = cli("resume", "--json", "--thread", thread, env=env, cwd=tmp_path)

    assert plain.returncode == as_json.returncode == 0, (plain.stderr, as_json.stderr)
    assert (plain.stdout, plain.stderr) == (
        "",
        f"thread {thread}: nothing to resume, its last run finished.\n",
    )
    report = json.loads(as_json.stdout)
    assert report["resumed"] is False and report["answer"] == "" and report["tool_calls"] == []


def test_resume_of_an_unknown_thread_is_one_line_and_exit_1(
    runner_env: Env, tmp_path: Path, cli: Ferry
) -> None:
    done = cli("resume", "--thread", "nope", env=runner_env(), cwd=tmp_path)

    assert done.returncode == 1
    assert done.stderr == "ferry: unknown thread 'nope' (see `ferry threads`)\n"


def test_chat_answers_each_question_on_one_thread(
    runner_env: Env, thread: str, model: OpenAIServer, tmp_path: Path
) -> None:
    model.script([CALC, openai_answer("It is 42."), openai_answer("Still 42.")])

    done = ferry(
        "chat",
        "--thread",
        thread,
        input="What is 6 * 7?\nAnd now?\n",
        env=runner_env(),
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is 42.\nStill 42.\n"
    assert done.stderr.splitlines()[0] == f"thread: {thread}  (Ctrl-D to end)"
    assert '→ calculator(expression="6 * 7")' in done.stderr
