"""JSON logs from the CLI: one object a line, ids on each, a resume recorded, no secret."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support.cli_helpers import Ferry


def test_json_log_lines_through_a_paused_and_resumed_run(cli: Ferry, tmp_path: Path) -> None:
    log_file = tmp_path / "logs" / "ferry.jsonl"
    env = {
        **os.environ,
        "FERRY_LOG_FORMAT": "json",
        "FERRY_LOG_FILE": str(log_file),
        "FERRY_APPROVE_TOOLS": "calculator",
        "TAVILY_API_KEY": "tvly-do-not-log-me-123",
    }

    def ferry(*args: str) -> dict[str, object]:
        done = cli(*args, "--json", env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "tvly-do-not-log-me-123" not in done.stdout + done.stderr
        report: dict[str, object] = json.loads(done.stdout)
        return report

    paused = ferry("ask", "What is 150 * 3?")
    thread = str(paused["thread_id"])
    ferry("resume", "--thread", thread, "--approve")
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    events = [line.get("event") for line in lines]
    for expected in ("model_call", "resume", "tool_start", "tool_end"):
        assert expected in events
    for line in lines:
        if line.get("event"):
            assert line["thread_id"] == thread and line["run_id"]
    tool_end = next(line for line in lines if line.get("event") == "tool_end")
    assert tool_end["tool_call_id"] and tool_end["tool"] == "calculator"
    assert isinstance(tool_end["duration_ms"], int)
    assert "tvly-do-not-log-me-123" not in log_file.read_text()
