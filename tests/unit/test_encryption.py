"""`FERRY_ENCRYPTION_KEY`: every stored value encrypted, on top of the compact form and zstd."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from graph.cli import main
from graph.core.settings import ConfigError
from graph.storage.codec.serde import MESSAGES, FerrySerializer, StoredValueError, serializer

KEY = "0123456789abcdef0123456789abcdef"
SECRET_QUESTION = "What is 1234 * 5678?"


@pytest.fixture
def encrypted(monkeypatch: pytest.MonkeyPatch) -> FerrySerializer:
    monkeypatch.setenv("FERRY_ENCRYPTION_KEY", KEY)
    return serializer()


def test_compact_form_compression_and_encryption_stack(encrypted: FerrySerializer) -> None:
    messages = [HumanMessage("weather in Madrid " * 20, id="h"), AIMessage("sunny", id="a")]
    tag, data = encrypted.dumps_typed(messages)
    assert tag == MESSAGES + "+zd1+aes"
    assert b"Madrid" not in data
    assert encrypted.loads_typed((tag, data)) == messages
    assert encrypted.loads_typed(encrypted.dumps_typed({"step": 3})) == {"step": 3}


def test_every_tag_written_so_far_still_loads_with_a_key(encrypted: FerrySerializer) -> None:
    messages = [HumanMessage("hello", id="h")]
    plain = FerrySerializer()
    assert encrypted.loads_typed(plain.dumps_typed(messages)) == messages  # before the key
    langgraph_aes = EncryptedSerializer.from_pycryptodome_aes(
        JsonPlusSerializer(), key=KEY.encode()
    )
    assert encrypted.loads_typed(langgraph_aes.dumps_typed(messages)) == messages


def test_a_wrong_or_missing_key_is_one_clear_line(
    encrypted: FerrySerializer, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = encrypted.dumps_typed([HumanMessage("hello", id="h")])
    monkeypatch.setenv("FERRY_ENCRYPTION_KEY", "another key of 32 characters!!!!")
    with pytest.raises(StoredValueError, match="FERRY_ENCRYPTION_KEY is not the key"):
        serializer().loads_typed(stored)
    monkeypatch.delenv("FERRY_ENCRYPTION_KEY")
    with pytest.raises(StoredValueError, match="encrypted: set FERRY_ENCRYPTION_KEY"):
        serializer().loads_typed(stored)
    monkeypatch.setenv("FERRY_ENCRYPTION_KEY", "short")
    with pytest.raises(ConfigError, match="FERRY_ENCRYPTION_KEY must be 16, 24 or 32 bytes"):
        serializer()


def _stored_bytes(db: Path) -> bytes:
    """Every byte SQLite holds for the database, its WAL included."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_no_conversation_text_is_readable_in_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FERRY_ENCRYPTION_KEY", KEY)
    monkeypatch.setenv("FERRY_MODEL", "offline")
    assert main(["ask", SECRET_QUESTION, "--json"]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert "7006652" in reply["answer"]
    stored = _stored_bytes(tmp_path / "ferry.db")
    for text in ("1234 * 5678", "7006652", "calculator"):
        assert text.encode() not in stored
    assert main(["history", "--thread", reply["thread_id"], "--json"]) == 0
    assert SECRET_QUESTION in capsys.readouterr().out
    monkeypatch.setenv("FERRY_ENCRYPTION_KEY", "another key of 32 characters!!!!")
    assert main(["history", "--thread", reply["thread_id"]]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"ferry: thread {reply['thread_id']}: cannot decrypt a stored value: "
        "FERRY_ENCRYPTION_KEY is not the key it was written with\n"
    )
