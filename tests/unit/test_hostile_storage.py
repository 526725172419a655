"""A database someone else can write: planted rows never run code, bombs never exhaust memory."""

from __future__ import annotations

import json
import sqlite3
import sys
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest
import zstandard
from langchain_core.messages import HumanMessage

from graph import build_graph
from graph.cli import main
from graph.settings import Settings
from graph.storage import sqlite_saver
from graph.storage.serde import FerrySerializer, StoredValueError
from tests.support.hostile_rows import PLANTED_MODULE, hostile_values, plant_module
from tests.support.scripted import ScriptedModel, answer

MARKER_NAME = "code-ran"
PAYLOADS = sorted(hostile_values(Path("/x")))


def _converse(db: Path, *threads: str) -> None:
    graph = build_graph(
        model=ScriptedModel([answer(f"hello {t}") for t in threads]), tools=[],
        checkpointer=sqlite_saver(db), settings=Settings(db=db),
    )  # fmt: skip
    for thread in threads:
        graph.invoke({"messages": [("user", f"hi from {thread}")]}, _config(thread))


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _plant(db: Path, thread: str, where: str, value: tuple[str, bytes]) -> None:
    """Replace the thread's stored messages (a write) or its latest checkpoint with `value`."""
    conn = sqlite3.connect(db)
    with conn:
        if where == "write":
            changed = conn.execute(
                "UPDATE writes SET type = ?, value = ? "
                "WHERE thread_id = ? AND channel = 'messages'",
                (*value, thread),
            ).rowcount
        else:
            changed = conn.execute(
                "UPDATE checkpoints SET type = ?, checkpoint = ? WHERE thread_id = ? AND "
                "checkpoint_id = (SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ?)",
                (*value, thread, thread),
            ).rowcount
    conn.close()
    assert changed


def _forget_summary(db: Path, thread: str) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM ferry_thread_summaries WHERE thread_id = ?", (thread,))
    conn.close()


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A database with a good thread and a `bad` one; the planted module is importable."""
    plant_module(tmp_path, tmp_path / MARKER_NAME)
    monkeypatch.syspath_prepend(str(tmp_path))
    db = tmp_path / "ferry.db"
    _converse(db, "good", "bad")
    return db


def _assert_nothing_ran(tmp_path: Path) -> None:
    assert not (tmp_path / MARKER_NAME).exists()
    assert PLANTED_MODULE not in sys.modules


@pytest.mark.parametrize("where", ["write", "checkpoint"])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_planted_row_is_refused_naming_its_thread_and_runs_nothing(
    planted: Path, tmp_path: Path, payload: str, where: str
) -> None:
    _plant(planted, "bad", where, hostile_values(tmp_path / MARKER_NAME)[payload])
    graph = build_graph(
        model=ScriptedModel([]), tools=[], checkpointer=sqlite_saver(planted),
        settings=Settings(db=planted),
    )  # fmt: skip
    with pytest.raises(StoredValueError, match="^thread bad: ") as refused:
        graph.get_state(_config("bad"))
    assert "\n" not in str(refused.value)
    good = graph.get_state(_config("good")).values["messages"]
    assert [m.content for m in good] == ["hi from good", "hello good"]
    _assert_nothing_ran(tmp_path)


def test_the_cli_says_one_line_and_the_other_threads_still_list(
    planted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(planted, "bad", "write", hostile_values(tmp_path / MARKER_NAME)["os.system"])
    _forget_summary(planted, "bad")  # so the listing reads the thread, as one from before them
    assert main(["history", "--thread", "bad"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ferry: thread bad: refused to load a stored value naming os.system")
    assert err.count("\n") == 1
    assert main(["threads", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [t["thread_id"] for t in json.loads(out)["threads"]] == ["good"]
    assert "bad" in err
    assert main(["resume", "--thread", "bad"]) == 1
    assert capsys.readouterr().err.startswith("ferry: thread bad: ")
    _assert_nothing_ran(tmp_path)


def _bomb(tag: str, size: int) -> tuple[str, bytes]:
    """A value that is tiny stored and `size` bytes decompressed."""
    zeros = bytes(2**20)
    if tag == "zlib":
        packer = zlib.compressobj(9)
        data = b"".join(packer.compress(zeros) for _ in range(size // len(zeros)))
        return "msgpack+zlib", data + packer.flush()
    compressor = zstandard.ZstdCompressor(level=1).compressobj()
    data = b"".join(compressor.compress(zeros) for _ in range(size // len(zeros)))
    return "msgpack+zstd", data + compressor.flush()


@pytest.mark.parametrize("tag", ["zstd", "zlib"])
def test_a_decompression_bomb_is_refused_within_bounded_memory(tag: str) -> None:
    cap = 8 * 2**20
    stored = _bomb(tag, 512 * 2**20)
    assert len(stored[1]) < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(StoredValueError, match="decompresses to more than 8 MB"):
            FerrySerializer(max_value_bytes=cap).loads_typed(stored)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * cap


def test_a_value_too_big_to_decompress_under_the_cap_is_stored_plain_and_loads() -> None:
    serde = FerrySerializer(max_value_bytes=2**20)
    messages = [HumanMessage("weather report " * 100_000, id="h")]
    tag, data = serde.dumps_typed(messages)
    assert "+" not in tag and len(data) > 2**20
    assert serde.loads_typed((tag, data)) == messages
    small = [HumanMessage("weather report " * 1_000, id="h")]
    assert serde.dumps_typed(small)[0].endswith("+zd1")


def test_the_cap_is_a_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FERRY_MAX_STORED_VALUE_MB", "1")
    saver = sqlite_saver(tmp_path / "ferry.db")
    assert isinstance(saver.serde, FerrySerializer)
    assert saver.serde.max_value_bytes == 2**20


def test_a_frame_that_declares_its_size_is_held_to_it() -> None:
    cap = 8 * 2**20
    serde = FerrySerializer(max_value_bytes=cap)
    honest = zstandard.ZstdCompressor(level=1).compress(bytes(16 * 2**20))  # declares 16 MB
    with pytest.raises(StoredValueError, match="decompresses to more than 8 MB"):
        serde.loads_typed(("msgpack+zstd", honest))
    # A frame header claiming 1000 bytes for 3000 (its 2-byte size field holds size - 256).
    frame = bytearray(zstandard.ZstdCompressor(level=1).compress(bytes(3000)))
    assert zstandard.frame_content_size(bytes(frame)) == 3000 and frame[4] == 0x60
    frame[5:7] = (1000 - 256).to_bytes(2, "little")
    with pytest.raises(StoredValueError, match="does not decompress"):
        serde.loads_typed(("msgpack+zstd", bytes(frame)))
