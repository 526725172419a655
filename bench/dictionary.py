"""Train the zstd dictionary for checkpoints: `python -m bench.dictionary PATH`.

The shipped dictionaries (`graph/storage/ferry-*.zdict`) are frozen (see
`graph.storage.codec.dictionary`); this script is how the newest, `ferry-2.zdict`, was made (an
earlier version of it made `ferry-1.zdict` from typical messages). It is kept out of the
runtime package because it runs the whole app: three threads of 60 turns of the real graph
with the offline model and two real tools, whose checkpoints (`[checkpoint, metadata]`, as
`ferry_steps` stores them) zstd trains an 8 KB dictionary on.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

import zstandard
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from graph import build_graph
from graph.core.settings import Settings
from graph.models import make_model
from graph.storage import sqlite_saver
from graph.storage.codec.serde import FerrySerializer
from graph.storage.sqlite.layout import name_of
from tools import calculator, get_datetime

QUESTIONS = (
    "What time is it in UTC, and what is 150 * 3?",
    "and divided by 9?",
    "what is 2+2?",
    "What time is it in Tokyo?",
)
SIZE = 8192


def build_candidate(threads: int = 3, turns: int = 60) -> bytes:
    """A dictionary trained on the checkpoints of a short offline run."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sample.db"
        graph = build_graph(
            model=make_model("offline"), tools=[calculator, get_datetime],
            checkpointer=sqlite_saver(db), settings=Settings(db=db),
        )  # fmt: skip
        for thread in range(threads):
            config: RunnableConfig = {"configurable": {"thread_id": f"019ad0a2-6f3e-{thread}"}}
            for turn in range(turns):
                question = QUESTIONS[turn % len(QUESTIONS)]
                graph.invoke({"messages": [HumanMessage(question)]}, config)
        serde, plain = FerrySerializer(), JsonPlusSerializer()
        conn = sqlite3.connect(db)
        steps = conn.execute("SELECT type, value FROM ferry_steps").fetchall()
        conn.close()
    samples = [plain.dumps_typed(serde.loads_typed((name_of(t), v)))[1] for t, v in steps]
    return zstandard.train_dictionary(SIZE, samples).as_bytes()


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.write_bytes(build_candidate())
    print(f"wrote {out}: {out.stat().st_size} bytes")  # noqa: T201
