"""A tool that declares side effects (retry_safe=False) is never re-run by a resume."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_resume_does_not_repeat_a_call_with_side_effects(tmp_path: Path) -> None:
    log = tmp_path / "payments.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), "FERRY_DB": str(tmp_path / "pay.db")}

    def run(step: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tests.support.payment", str(log), step],
            env={**env, **extra}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    crashed = run("ask", CRASH_AFTER_PAYING="1")
    assert crashed.returncode == 9
    resumed = run("resume")
    assert resumed.returncode == 0, resumed.stderr
    content, status = resumed.stdout.strip().splitlines()
    assert status == "error"
    assert "not re-run automatically" in content and "send_payment" in content
    assert log.read_text() == "paid 5\n"  # paid once, never twice
