"""read_file pages files of any size by streaming, with the same replies as for small ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.tools import ToolException

from tools import files
from tools.files import read_file


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setenv("FERRY_FILES_ROOT", str(root))
    return root


def test_a_page_deep_inside_a_20_mb_log(root: Path) -> None:
    line = "{:07d} " + "x" * 90 + "\n"  # 99 bytes a line
    with (root / "app.log").open("w") as log:
        log.writelines(line.format(n) for n in range(1, 210_001))
    assert (root / "app.log").stat().st_size > 20_000_000
    reply = read_file.invoke({"path": "app.log", "start_line": 200_000, "max_lines": 101})
    header, *lines = reply.split("\n")
    assert header == "app.log: lines 200000-200100 of 210000 (ask with start_line=200101 for more)"
    assert lines == [line.format(n).rstrip("\n") for n in range(200_000, 200_101)]


def _expected(text: str, start_line: int, max_lines: int) -> list[str]:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines[start_line - 1 : start_line - 1 + max_lines]


@pytest.mark.parametrize("chunk_bytes", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("ending", ["\n", ""])
def test_pages_are_right_whatever_the_chunk_boundaries(
    root: Path, monkeypatch: pytest.MonkeyPatch, chunk_bytes: int, ending: str
) -> None:
    monkeypatch.setattr(files, "CHUNK_BYTES", chunk_bytes)
    text = "\n".join(["alpha", "", "b", "gamma delta", "", "", "é-ü", "last"]) + ending
    (root / "small.txt").write_text(text)
    for start_line in range(1, 9):
        for max_lines in (1, 2, 3, 8):
            reply = read_file.invoke(
                {"path": "small.txt", "start_line": start_line, "max_lines": max_lines}
            )
            header, *lines = reply.split("\n")
            last = min(start_line + max_lines - 1, 8)
            assert header.startswith(f"small.txt: lines {start_line}-{last} of 8")
            assert lines == _expected(text, start_line, max_lines)
    with pytest.raises(ToolException, match="start_line=9 is past the end: small.txt has 8"):
        read_file.invoke({"path": "small.txt", "start_line": 9})


def test_a_huge_line_of_multibyte_text_is_cut_without_an_encoding_note(root: Path) -> None:
    (root / "wide.txt").write_text("é" * 300_000 + "\nnext\n")
    reply = read_file.invoke({"path": "wide.txt"})
    assert reply.startswith("wide.txt: lines 1-1 of 2 (ask with start_line=2 for more)\n")
    assert "not valid UTF-8" not in reply
    assert reply.endswith("é …[line cut]")
    assert len(reply) < 101_000


def test_a_binary_file_is_refused_whatever_its_size(root: Path) -> None:
    with (root / "disk.img").open("wb") as image:
        image.write(b"text first\n")
        image.truncate(30 * 1024 * 1024)
    with pytest.raises(ToolException, match="looks like a binary file"):
        read_file.invoke({"path": "disk.img"})
