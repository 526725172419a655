"""One cold read in a new process: `python -m bench.cold --system S --path P --thread T`.

Imports and builds the system, records the peak resident memory (VmHWM: the baseline of the same
imports), loads the thread the system's own way and keeps it, then records the peak again. Prints
one JSON line: load_ms (wall time of the load alone), messages, rss_base_kb, rss_loaded_kb,
extra_kb (peak after minus peak before) and resident_extra_kb (the same for resident memory now).
With `--url`, Ferry reads the thread from Postgres instead of a file.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import time
from pathlib import Path
from typing import Any


def _status_kb(field: str) -> int:
    """A memory figure of this process from /proc/self/status (Linux), in KB; 0 elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _peak_kb() -> int:
    """Peak resident memory of this process image. Not ru_maxrss: Linux carries that over from
    the parent through fork and exec, so a child smaller than the bench reports the bench's peak.
    """
    return _status_kb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _resident_kb() -> int:
    """Resident memory now, which a peak may hide when an import peaked higher."""
    return _status_kb("VmRSS")


def _build(args: argparse.Namespace) -> Any:
    from bench.model import BenchModel
    from bench.systems import System, build, ferry_settings
    from bench.tools import fetch_blob

    if args.url is None:
        return build(args.system, args.path, BenchModel(), [fetch_blob])
    from graph import build_graph
    from graph.storage.postgres.saver import postgres_saver

    saver = postgres_saver(args.url)
    settings = ferry_settings(args.path)
    graph = build_graph(
        model=BenchModel(), tools=[fetch_blob], checkpointer=saver, settings=settings
    )
    return System(name="ferry-postgres", graph=graph, saver=saver, path=args.path)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cold")
    parser.add_argument("--system", required=True)
    parser.add_argument("--path", type=Path, required=True)
    parser.add_argument("--thread", required=True)
    parser.add_argument("--url", help="a Postgres URL: read Ferry's thread from there")
    args = parser.parse_args()
    os.environ["LANGSMITH_TRACING"] = "false"
    from bench.systems import load

    system = _build(args)
    gc.collect()
    base, resident = _peak_kb(), _resident_kb()
    started = time.perf_counter()
    held = load(system, args.thread)
    load_ms = (time.perf_counter() - started) * 1000
    gc.collect()
    loaded, resident_loaded = _peak_kb(), _resident_kb()
    report = {
        "load_ms": load_ms,
        "messages": len(held),
        "rss_base_kb": base,
        "rss_loaded_kb": loaded,
        "extra_kb": loaded - base,
        "resident_extra_kb": resident_loaded - resident,
    }
    print(json.dumps(report), flush=True)
    system.close()


if __name__ == "__main__":
    main()
