"""Start-up with MCP servers: `ferry ask "what is 2+2" --model offline` with none, then with some.

    .venv/bin/python -m bench.mcp_startup --servers servers.json [--runs 5]

`servers.json` is an `mcpServers` file (the four servers of issue 22: time, fetch, filesystem,
everything). Each run is a new `ferry` process in a throwaway folder with its own database and
its own per-user cache, so nothing but the servers file differs. Three cases, median of `--runs`:

- **none**: no servers file;
- **cold**: the servers file and an empty cache, so every server starts and lists its tools;
- **warm**: the servers file and the listing an earlier run cached, so no server starts (the
  offline model calls the built-in calculator; a called MCP tool would start its server).

Prints one markdown table: the median wall time of each and its ratio to none's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUESTION = "what is 2+2"


def _run(ferry: str, env: dict[str, str], cwd: Path) -> float:
    """One `ferry ask` in a new process: its wall time in seconds (it must answer)."""
    began = time.perf_counter()
    done = subprocess.run(
        [ferry, "ask", QUESTION, "--model", "offline"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    took = time.perf_counter() - began
    if done.returncode != 0 or "4" not in done.stdout:
        raise SystemExit(f"ferry ask failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return took


def _env(folder: Path, servers: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")}
    env |= {
        "FERRY_DB": str(folder / "ferry.db"),
        "XDG_CONFIG_HOME": str(folder / "config"),
        "XDG_CACHE_HOME": str(folder / "cache"),
    }
    if servers is not None:
        env["FERRY_MCP_CONFIG"] = str(servers)
    return env


def measure(ferry: str, servers: Path, runs: int) -> dict[str, list[float]]:
    """Each case's wall times, the cases interleaved so a busy moment hits all alike."""
    times: dict[str, list[float]] = {"none": [], "cold": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="ferry-mcp-bench-") as scratch:
        root = Path(scratch)
        warm = root / "warm"
        warm.mkdir()
        _run(ferry, _env(warm, servers), warm)  # fills the warm folder's cache
        for attempt in range(runs):
            none = root / f"none-{attempt}"
            none.mkdir()
            times["none"].append(_run(ferry, _env(none, None), none))
            cold = root / f"cold-{attempt}"
            cold.mkdir()
            times["cold"].append(_run(ferry, _env(cold, servers), cold))
            times["warm"].append(_run(ferry, _env(warm, servers), warm))
            shutil.rmtree(cold)
    return times


def main() -> None:
    """Measure, then print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=Path, required=True, help="an mcpServers file")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ferry", default=str(Path(sys.executable).parent / "ferry"))
    args = parser.parse_args()
    times = measure(args.ferry, args.servers.resolve(), args.runs)
    base = statistics.median(times["none"])
    lines = ["| case | median s | × none | runs (s) |", "|---|---|---|---|"]
    for case, values in times.items():
        median = statistics.median(values)
        shown = ", ".join(f"{v:.2f}" for v in values)
        lines.append(f"| {case} | {median:.2f} | {median / base:.2f} | {shown} |")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
