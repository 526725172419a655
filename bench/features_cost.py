"""CPU per model call with issue 32's features off, tracing alone, and all of them on.

`.venv/bin/python -m bench.features_cost`. Runs in `make test`'s `.venv` (the bench venv has no
OTLP exporter), outside `make bench`. Each measurement is a fresh process running `--turns`
turns of the offline model on new threads of one SQLite file ("What is 150 * 3?": two model
calls and one tool call a turn), after a warm-up; its process CPU time (`time.process_time`,
all threads: the exporter's included) is divided by the model calls. "otel" sends every span to
an OTLP/HTTP sink in another process, so the receiver's work is not counted; "all" adds to it
an answer schema on every run (the answer tool, validation), a fallback list of two models,
`FERRY_COST_BUDGET` (every reply priced at each check) and `FERRY_PRICES`. Modes alternate,
`--rounds` of each; the medians print.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

QUESTION = "What is 150 * 3?"
CALLS_PER_TURN = 2
SCHEMA = {"title": "Product", "type": "object", "properties": {"value": {"type": "integer"}}}
MODES = ("off", "otel", "all")


def sink() -> None:
    """An OTLP/HTTP endpoint that takes every export and keeps nothing; prints its port."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def measure(turns: int, warmup: int) -> None:
    """Run the turns in this process; print CPU ms per model call as JSON."""
    from graph import build_graph, tracing

    graph = build_graph()

    schema = {"response_format": SCHEMA} if os.environ.get("BENCH_SCHEMA") else {}

    def turn(n: int) -> None:
        config = {"configurable": {"thread_id": f"t{n}", **schema}}
        graph.invoke({"messages": [("user", QUESTION)]}, config)  # type: ignore[arg-type]

    for n in range(warmup):
        turn(-n - 1)
    tracing.flush()
    started = time.process_time()
    for n in range(turns):
        turn(n)
    tracing.flush()  # the spans of these turns, sent: their cost is in the figure
    spent = time.process_time() - started
    print(json.dumps({"cpu_ms_per_call": 1000 * spent / (turns * CALLS_PER_TURN)}))


def run(mode: str, endpoint: str, folder: Path, args: argparse.Namespace) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FERRY_"))}
    env |= {"FERRY_MODEL": "offline", "FERRY_DB": str(folder / f"{mode}.db")}
    env["FERRY_FILES_ROOT"] = str(folder)
    if mode in ("otel", "all"):
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    if mode == "all":
        env |= {"BENCH_SCHEMA": "1", "FERRY_MODEL": "offline,offline", "FERRY_COST_BUDGET": "100"}
        env["FERRY_PRICES"] = json.dumps({"bench": {"input_mtok": 1, "output_mtok": 2}})
    argv = [sys.executable, "-m", "bench.features_cost", "--measure"]
    argv += ["--turns", str(args.turns), "--warmup", str(args.warmup)]
    repo = Path(__file__).resolve().parents[1]  # where `bench` is importable
    done = subprocess.run(argv, env=env, cwd=repo, capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout.splitlines()[-1])["cpu_ms_per_call"])


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.features_cost", description=__doc__)
    p.add_argument("--turns", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print the medians as one JSON object")
    p.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--sink", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.sink:
        return sink()
    if args.measure:
        return measure(args.turns, args.warmup)
    receiver = subprocess.Popen(
        [sys.executable, "-m", "bench.features_cost", "--sink"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert receiver.stdout is not None
        endpoint = f"http://127.0.0.1:{receiver.stdout.readline().strip()}"
        figures: dict[str, list[float]] = {mode: [] for mode in MODES}
        with tempfile.TemporaryDirectory() as folder:
            for _ in range(args.rounds):
                for mode in figures:
                    figures[mode].append(run(mode, endpoint, Path(folder), args))
    finally:
        receiver.kill()
        receiver.wait()
    medians = {mode: statistics.median(figures[mode]) for mode in MODES}
    if args.json:
        print(json.dumps({"cpu_ms_per_call": medians, "runs": figures, "turns": args.turns}))
        return None
    print(f"| features | CPU ms / model call (median of {args.rounds}) | runs | vs off |")
    print("|---|---|---|---|")
    for mode, value in medians.items():
        runs = ", ".join(f"{v:.2f}" for v in figures[mode])
        change = 100 * (value - medians["off"]) / medians["off"]
        print(f"| {mode} | {value:.2f} | {runs} | {change:+.1f} % |")


def features_phase(python: str | None, quick: bool) -> dict[str, Any]:
    """`make bench`'s figures: this module run by an interpreter with the `otel` extra."""
    from bench.processes import interpreter_with

    repo = Path(__file__).resolve().parents[1]
    chosen = interpreter_with(python, "opentelemetry.exporter.otlp.proto.http, graph")
    if chosen is None:
        return {"not_run": "no interpreter with the otel extra (make install has it)"}
    sizes = ["--turns", "20", "--rounds", "1"] if quick else ["--turns", "100", "--rounds", "3"]
    cmd = [chosen, "-m", "bench.features_cost", "--json", *sizes]
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    if done.returncode != 0:
        return {"not_run": f"bench.features_cost failed (exit {done.returncode})"}
    figures: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return figures


if __name__ == "__main__":
    main()
