"""The code table of Ferry's SQLite layout is frozen: users' files store its indexes.

`ferry_steps.type` and each write's channel and type tag are stored as their index in `NAMES`
(graph/storage/FORMAT.md, "Tables (SQLite)"). Entries may only ever be appended: removing,
renaming or reordering one makes every file already written read another name at that index.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graph.storage.sqlite.layout import NAMES

GOLDEN_FILES = Path(__file__).parents[1] / "support" / "golden" / "files"

# Append new entries at the end, never anywhere else; never change or remove one.
FROZEN = (
    (0, "null"),
    (1, "msgpack"),
    (2, "msgpack+zd1"),
    (3, "ferry-msgs"),
    (4, "ferry-msgs+zd1"),
    (5, "msgpack+aes"),
    (6, "msgpack+zd1+aes"),
    (7, "ferry-msgs+aes"),
    (8, "ferry-msgs+zd1+aes"),
    (9, "messages"),
    (10, "stop_reason"),
    (11, "__start__"),
    (12, "__pregel_tasks"),
    (13, "branch:to:call_model"),
    (14, "branch:to:check"),
    (15, "branch:to:execute_tool"),
    (16, "__error__"),
    (17, "__interrupt__"),
    (18, "__resume__"),
    (19, "__scheduled__"),
    (20, "__return__"),
    (21, "msgpack+zd2"),
    (22, "msgpack+zd2+aes"),
    (23, "ferry-part"),
    (24, "released_calls"),
)


@pytest.mark.parametrize(("code", "name"), FROZEN, ids=[name for _, name in FROZEN])
def test_each_code_names_what_it_always_named(code: int, name: str) -> None:
    assert NAMES[code] == name


def test_the_table_is_exactly_the_frozen_one() -> None:
    assert list(enumerate(NAMES)) == list(FROZEN)
    assert len(set(NAMES)) == len(NAMES)  # a name listed twice would read back at one index


@pytest.mark.parametrize(
    "manifest", sorted(GOLDEN_FILES.glob("ferry-*.json")), ids=lambda p: p.stem
)
def test_the_golden_files_were_written_with_this_table(manifest: Path) -> None:
    """A release's table is the start of today's: it was appended to, nothing else."""
    written_with = json.loads(manifest.read_text(encoding="utf-8"))["code_table"]
    assert list(NAMES[: len(written_with)]) == written_with
