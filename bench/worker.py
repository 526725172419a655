"""One process of the multi-process concurrency workload (started by `python -m bench`).

Builds one graph on `--db`, prints "ready", waits for "go" on stdin, runs `--threads`
conversations × `--turns` turns, and prints one JSON line: ok, locked, other, errors.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

from bench.model import BenchModel
from bench.systems import build
from bench.tools import fetch_blob
from bench.workloads import Tally, run_threads


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.worker")
    parser.add_argument("--system", required=True)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--prefix", default="p0")
    args = parser.parse_args()
    tally = Tally()
    go = threading.Event()
    try:
        system = build(args.system, args.db, BenchModel(), [fetch_blob])
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which counts it
        print("ready", flush=True)
        sys.stdin.readline()
        tally.add(exc)
        print(json.dumps(tally.as_dict()), flush=True)
        return
    thread_ids = [f"{args.prefix}-{i}" for i in range(args.threads)]
    workers = run_threads([system], thread_ids, args.turns, tally, go)
    print("ready", flush=True)
    sys.stdin.readline()
    go.set()
    for w in workers:
        w.join()
    system.close()
    print(json.dumps(tally.as_dict()), flush=True)


if __name__ == "__main__":
    main()
