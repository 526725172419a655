"""Ferry's cold read on Postgres: `python -m bench.pg --turns N` (needs psycopg and `initdb`).

Starts a throwaway server (`tests.support.pgserver`), grows one Ferry thread to `--turns` turns
with the bench's model and tool (stopping at `--cap-s` seconds), then reads it cold in new
processes (`bench.cold --url`). Prints one JSON line; {"not_run": why} if there is no server.
Run by `python -m bench` with an interpreter that has the postgres extra (the bench venv has not).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.growth import question
from bench.model import BenchModel
from bench.processes import cold_read
from bench.systems import System, ferry_settings
from bench.tools import fetch_blob


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pg")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--cap-s", type=float, default=240.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from tests.support.pgserver import PostgresServer, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        print(json.dumps({"not_run": "no initdb/pg_ctl on PATH or in /usr/lib/postgresql"}))
        return
    from graph import build_graph
    from graph.storage.postgres.saver import postgres_saver

    server = PostgresServer.start(bin_dir)
    try:
        url = server.create_database("bench")
        saver = postgres_saver(url)
        graph = build_graph(
            model=BenchModel(),
            tools=[fetch_blob],
            checkpointer=saver,
            settings=ferry_settings(Path("unused.db")),
        )
        system = System(name="ferry-postgres", graph=graph, saver=saver, path=Path("unused.db"))
        started, done = time.monotonic(), 0
        while done < args.turns and time.monotonic() - started < args.cap_s:
            done += 1
            system.invoke(question(done), "pg-growth")
        grow_s = time.monotonic() - started
        saver.conn.close()
        cold = cold_read("ferry", Path("unused.db"), "pg-growth", args.repeat, url=url)
        result = {"turns": done, "grow_s": grow_s, **cold}
        if done < args.turns:
            result["stopped"] = f"stopped at turn {done}: over the {args.cap_s:.0f} s cap"
        print(json.dumps(result))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
