"""One read's memory is bounded: a few stored bytes never unpack into gigabytes.

The per-value cap bounds what one value decompresses to, not what its bytes become once
unpacked (msgpack spends one byte on an empty list, Python 64) nor how many values one read
loads. These tests plant such values, read them as every entry point does, and measure what
the read allocated (tracemalloc: Python's own allocations, so no other process's load counts).
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import struct
import threading
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
import zstandard
from langchain_core.messages import AIMessage, HumanMessage

from graph import build_graph
from graph.core.settings import Settings
from graph.storage import sqlite_saver
from graph.storage.codec import reads
from graph.storage.codec.serde import FerrySerializer, StoredValueError
from graph.storage.sqlite import layout
from graph.storage.sqlite.saver import FerrySaver, connect
from tests.support.scripted import ScriptedModel, answer
from tests.support.stored import (
    converse,
    plant_records,
    plant_step,
    plant_write_values,
    thread_config,
)

MB = 2**20


def _lists(count: int) -> bytes:
    """msgpack of `count` empty lists: one byte each stored, 64 once unpacked."""
    return b"\xdd" + struct.pack(">I", count) + b"\x90" * count


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(data)


def _plant(db: Path, thread: str, value: tuple[str, bytes]) -> None:
    conn = sqlite3.connect(db)
    with conn:
        assert plant_write_values(conn, thread, "messages", value)
    conn.close()


def _peak(read: Callable[[], Any]) -> tuple[int, BaseException | None]:
    """Peak bytes Python allocated while `read` ran, and what it raised."""
    tracemalloc.start()
    try:
        read()
        raised = None
    except StoredValueError as exc:
        raised = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, raised


def _graph(db: Path) -> Any:
    return build_graph(
        model=ScriptedModel([]), tools=[], checkpointer=sqlite_saver(db), settings=Settings(db=db)
    )


@pytest.fixture
def two_threads(tmp_path: Path) -> Path:
    db = tmp_path / "ferry.db"
    converse(db, "good", "bad")
    return db


READS: dict[str, Callable[[Any], Any]] = {
    "history": lambda graph: graph.get_state(thread_config("bad")),
    "checkpoint": lambda graph: graph.checkpointer.get_tuple(thread_config("bad")),
    "listing": lambda graph: list(graph.checkpointer.list(thread_config("bad"))),
    "async history": lambda graph: asyncio.run(graph.aget_state(thread_config("bad"))),
}


@pytest.mark.parametrize(
    ("read", "where"),
    [(read, where) for read in sorted(READS) for where in ("write", "checkpoint")
     if (read, where) != ("checkpoint", "write")],  # the latest checkpoint has no writes
)  # fmt: skip
def test_a_351_byte_write_is_refused_before_it_unpacks_into_gigabytes(
    two_threads: Path, read: str, where: str
) -> None:
    """Ten million empty lists compress to 331 bytes: a 351-byte write, 0.7 GB unpacked."""
    bomb = ("msgpack+zstd", _zstd(_lists(10_000_000)))
    assert len(layout.packed([(0, "messages", *bomb)])) == 351
    if where == "write":
        _plant(two_threads, "bad", bomb)
    else:
        conn = sqlite3.connect(two_threads)
        with conn:
            assert plant_step(conn, "bad", bomb) == 1
        conn.close()
    graph = _graph(two_threads)
    peak, raised = _peak(lambda: READS[read](graph))
    assert peak < 64 * MB, f"the read allocated {peak // MB} MB"
    assert raised is not None and str(raised).startswith("thread bad: ")
    assert "FERRY_MAX_STORED_VALUE_MB" in str(raised) and "\n" not in str(raised)
    good = graph.get_state(thread_config("good")).values["messages"]
    assert [m.content for m in good] == ["hi from good", "hello good"]


def test_many_values_each_under_the_cap_are_refused_once_the_read_passes_its_budget(
    two_threads: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each value alone is allowed; one write holding a hundred of them is not: the total counts."""
    monkeypatch.setenv("FERRY_MAX_STORED_VALUE_MB", "1")
    one = ("msgpack+zstd", _zstd(_lists(20_000)))  # 20 KB, 1.3 MB unpacked
    assert FerrySerializer(max_value_bytes=MB).loads_typed(one) == [[]] * 20_000
    conn = sqlite3.connect(two_threads)
    with conn:
        planted = layout.packed([(i, "messages", *one) for i in range(100)])  # 4 KB
        assert plant_records(conn, "bad", "messages", planted)
    conn.close()
    graph = _graph(two_threads)
    peak, raised = _peak(lambda: list(graph.checkpointer.list(thread_config("bad"))))
    assert peak < 16 * MB, f"the read allocated {peak // MB} MB"
    assert raised is not None and str(raised).startswith("thread bad: ")


def test_a_read_that_other_threads_run_meanwhile_costs_only_its_own_thread(
    two_threads: Path,
) -> None:
    """Each read keeps its own budget: a refused one never spends another's."""
    _plant(two_threads, "bad", ("msgpack+zstd", _zstd(_lists(10_000_000))))
    graph = _graph(two_threads)
    results: dict[str, Any] = {}
    start = threading.Barrier(2)

    def read(thread: str) -> None:
        start.wait()
        try:
            for _ in range(5):
                results[thread] = graph.get_state(thread_config(thread)).values["messages"]
        except StoredValueError as exc:
            results[thread] = exc

    workers = [threading.Thread(target=read, args=(t,)) for t in ("bad", "good")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert isinstance(results["bad"], StoredValueError)
    assert [m.content for m in results["good"]] == ["hi from good", "hello good"]


def _honest(turns: int) -> list[Any]:
    """A conversation as Ferry stores one: every message with its own UUID, some non-ASCII."""
    ids = (str(uuid.uuid5(uuid.NAMESPACE_OID, str(n))) for n in itertools.count())
    return [
        message
        for turn in range(turns)
        for message in (
            HumanMessage(f"what is {turn} times 3? ¿y en español? 天气", id=next(ids)),
            AIMessage(f"{turn} times 3 is {turn * 3}.", id=next(ids)),
        )
    ]


def test_an_honest_long_history_is_never_refused_for_its_length() -> None:
    """Beyond its floor a read may take what it found stored, many times: enough for any thread."""
    serde = FerrySerializer(max_value_bytes=64 * 1024)  # a floor of 128 KB
    history = _honest(5000)
    parts = [serde.dumps_typed(history[i : i + 32]) for i in range(0, len(history), 32)]
    assert all(tag.endswith("+zd1") for tag, _ in parts)
    with reads.one_read():
        assert [m for part in parts for m in serde.loads_typed(part)] == history


def test_an_honest_long_thread_reads_cold_under_a_small_floor(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    turns = 150
    saver = FerrySaver(connect(db), FerrySerializer(max_value_bytes=16 * 1024))
    graph = build_graph(
        model=ScriptedModel([answer(f"answer {n} " * 10) for n in range(turns)]), tools=[],
        checkpointer=saver, settings=Settings(db=db),
    )  # fmt: skip
    for turn in range(turns):
        graph.invoke({"messages": [("user", f"question {turn}")]}, thread_config("long"))
    cold = FerrySaver(connect(db), FerrySerializer(max_value_bytes=16 * 1024))
    reader = build_graph(
        model=ScriptedModel([]), tools=[], checkpointer=cold, settings=Settings(db=db)
    )
    messages = reader.get_state(thread_config("long")).values["messages"]
    assert len(messages) == 2 * turns
    assert len(list(reader.get_state_history(thread_config("long")))) > turns


def test_the_budget_names_the_setting_that_raises_it() -> None:
    serde = FerrySerializer(max_value_bytes=MB)
    packed = ormsgpack.packb(["x" * (MB // 2)] * 1)  # fine alone
    assert serde.loads_typed(("msgpack", packed)) == ["x" * (MB // 2)]
    with pytest.raises(StoredValueError, match=r"FERRY_MAX_STORED_VALUE_MB") as refused:
        serde.loads_typed(("msgpack+zstd", _zstd(_lists(900_000))))
    assert "in memory" in str(refused.value)
