"""A database someone else can write: planted rows never run code, bombs never exhaust memory."""

from __future__ import annotations

import json
import sqlite3
import sys
import tracemalloc
import zlib
from pathlib import Path

import pytest
import zstandard
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from graph import build_graph
from graph.cli import main
from graph.core.settings import Settings
from graph.storage import sqlite_saver
from graph.storage.codec.serde import FerrySerializer, StoredValueError, serializer
from graph.storage.sqlite.migration import migrate
from tests.support.hostile_rows import (
    FOREIGN_TYPE_CODES,
    PLANTED_MODULE,
    hostile_values,
    malformed_records,
    misshapen_values,
    plant_module,
)
from tests.support.scripted import ScriptedModel, answer
from tests.support.stored import (
    converse,
    plant_legacy_step,
    plant_legacy_write_values,
    plant_records,
    plant_step,
    plant_step_type,
    plant_write_values,
    step_values,
    thread_config,
    write_records,
    write_values,
)

MARKER_NAME = "code-ran"
PAYLOADS = sorted(hostile_values(Path("/x")))


def _plant(db: Path, thread: str, where: str, value: tuple[str, bytes]) -> None:
    """Replace the thread's stored messages (its writes) or its latest checkpoint with `value`."""
    conn = sqlite3.connect(db)
    with conn:
        if where == "write":
            changed = plant_write_values(conn, thread, "messages", value)
        else:
            changed = plant_step(conn, thread, value)
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
    converse(db, "good", "bad")
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
    _assert_refused_and_good_reads(planted)
    _assert_nothing_ran(tmp_path)


def _assert_refused_and_good_reads(db: Path) -> None:
    """Reading `bad` is refused in one line naming it; `good`, in the same file, still reads."""
    graph = build_graph(
        model=ScriptedModel([]), tools=[], checkpointer=sqlite_saver(db), settings=Settings(db=db)
    )
    with pytest.raises(StoredValueError, match="^thread bad: ") as refused:
        graph.get_state(thread_config("bad"))
    assert "\n" not in str(refused.value)
    good = graph.get_state(thread_config("good")).values["messages"]
    assert [m.content for m in good] == ["hi from good", "hello good"]


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


@pytest.mark.parametrize("shape", sorted(misshapen_values(serializer())))
def test_a_planted_checkpoint_that_loads_but_is_no_checkpoint_is_refused(
    planted: Path, shape: str
) -> None:
    """Decoding is not enough: a checkpoint row holds Ferry's [checkpoint, metadata] or nothing."""
    _plant(planted, "bad", "checkpoint", misshapen_values(serializer())[shape])
    _assert_refused_and_good_reads(planted)


@pytest.mark.parametrize("code", sorted(FOREIGN_TYPE_CODES))
def test_a_checkpoint_type_code_ferry_never_writes_is_refused_not_guessed(
    planted: Path, code: str
) -> None:
    """A type is one of `layout.NAMES` by its exact index, or text: never a number rounded."""
    conn = sqlite3.connect(planted)
    with conn:
        assert plant_step_type(conn, "bad", FOREIGN_TYPE_CODES[code]) == 1
    conn.close()
    _assert_refused_and_good_reads(planted)


@pytest.mark.parametrize("form", sorted(malformed_records((0, "messages", "msgpack", b""))))
def test_writes_stored_in_a_form_ferry_never_writes_are_refused_not_guessed(
    planted: Path, form: str
) -> None:
    """A task's records are read as `layout.packed` wrote them, or not at all."""
    conn = sqlite3.connect(planted)
    with conn:
        [(_, record), *_] = write_records(conn, "bad", "messages")  # a good record to spoil
        assert plant_records(conn, "bad", "messages", malformed_records(record)[form])
    conn.close()
    _assert_refused_and_good_reads(planted)


def test_malformed_pending_writes_are_refused_naming_their_thread(planted: Path) -> None:
    """A failed step's error is a write at the thread's latest checkpoint, read with it."""
    failing = build_graph(
        model=ScriptedModel([RuntimeError("provider down")]), tools=[],
        checkpointer=sqlite_saver(planted), settings=Settings(db=planted),
    )  # fmt: skip
    with pytest.raises(RuntimeError, match="provider down"):
        failing.invoke({"messages": [("user", "again")]}, thread_config("bad"))
    conn = sqlite3.connect(planted)
    with conn:
        assert plant_records(conn, "bad", "__error__", b"\xc1") == 1
    conn.close()
    _assert_refused_and_good_reads(planted)


def test_a_history_with_malformed_writes_is_refused_naming_its_thread(planted: Path) -> None:
    """Listing a thread's checkpoints (Studio's history) reads each one's writes too."""
    conn = sqlite3.connect(planted)
    with conn:
        assert plant_records(conn, "bad", "messages", b"\xc1")
    conn.close()
    graph = build_graph(
        model=ScriptedModel([]), tools=[], checkpointer=sqlite_saver(planted),
        settings=Settings(db=planted),
    )  # fmt: skip
    with pytest.raises(StoredValueError, match="^thread bad: "):
        list(graph.get_state_history(thread_config("bad")))
    assert len(list(graph.get_state_history(thread_config("good")))) > 1


def _converse_in_langgraphs_tables(db: Path, *threads: str) -> None:
    """Threads as a stock `SqliteSaver` stored them (kept as given: it has its own serializer)."""
    stock = SqliteSaver(
        sqlite3.connect(db, check_same_thread=False), serde=JsonPlusSerializer(pickle_fallback=True)
    )
    graph = build_graph(
        model=ScriptedModel([answer(f"hello {t}") for t in threads]), tools=[], checkpointer=stock
    )
    assert graph.checkpointer is stock
    for thread in threads:
        graph.invoke({"messages": [("user", f"hi from {thread}")]}, thread_config(thread))
    stock.conn.close()


@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
@pytest.mark.parametrize(
    ("where", "payload"),
    [
        *[
            (where, payload)
            for where in ("write", "checkpoint")
            for payload in ("os.system", "pickle", "json constructor os.system")
        ],
        ("checkpoint", "a list"),  # decodes: no checkpoint, though an early Ferry's are upgraded
    ],
)
def test_a_row_planted_in_langgraphs_tables_is_still_refused_once_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payload: str, where: str, read_only: bool
) -> None:
    """`ferry migrate` copies a checkpoint's bytes as they were: what it copies is still checked.

    Read-only: the file migrated, then made read-only (migrate refuses a read-only file).
    """
    plant_module(tmp_path, tmp_path / MARKER_NAME)
    monkeypatch.syspath_prepend(str(tmp_path))
    db = tmp_path / "old.db"
    _converse_in_langgraphs_tables(db, "good", "bad")
    values = {**hostile_values(tmp_path / MARKER_NAME), **misshapen_values(serializer())}
    value = values[payload]
    conn = sqlite3.connect(db)
    with conn:
        if where == "write":
            assert plant_legacy_write_values(conn, "bad", "messages", value)
        else:
            assert plant_legacy_step(conn, "bad", value) == 1
    conn.close()
    assert migrate(db, everything=True).moved.keys() == {"good", "bad"}
    if read_only:
        db.chmod(0o444)
    try:
        _assert_refused_and_good_reads(db)
        saver = sqlite_saver(db)
        saver.setup()
        moved = (
            [v for v, _ in step_values(saver.conn)]
            if where == "checkpoint"
            else write_values(saver.conn, "bad", "messages")
        )
        assert value in moved  # as they were planted
    finally:
        db.chmod(0o644)
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
