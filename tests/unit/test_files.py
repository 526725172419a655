"""read_file: pages through text inside the files root and refuses everything else, leak-free."""

from __future__ import annotations

import os
import socket
import stat
import time
from pathlib import Path

import pytest
from langchain_core.tools import ToolException

from tools.files import read_file

SECRET = "SECRET-7f3a"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A files root with ordinary, hidden and hostile entries, and a secret folder beside it."""
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 524)))
    (root / "docs" / "readme.md").write_text("# Readme\nhello\n")
    for hidden in (".env", ".git/config", ".ferry/ferry.db", "docs/.secret"):
        (root / hidden).parent.mkdir(parents=True, exist_ok=True)
        (root / hidden).write_text(f"API_KEY={SECRET}\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (root / "link_out").symlink_to(outside / "secret.txt")
    (root / "linked_dir").symlink_to(outside)
    (root / "env_alias").symlink_to(root / ".env")
    (root / "binary.bin").write_bytes(b"\x89PNG\r\n\x1a\n\0\0" + SECRET.encode())
    with (root / "big.log").open("wb") as big:
        big.write(SECRET.encode())
        big.truncate(6 * 1024 * 1024)
    os.mkfifo(root / "fifo")
    monkeypatch.setenv("FERRY_FILES_ROOT", str(root))
    return root


def _refusal(path: str) -> str:
    started = time.perf_counter()
    with pytest.raises(ToolException) as caught:
        read_file.invoke({"path": path})
    assert time.perf_counter() - started < 2  # refused before reading anything
    message = str(caught.value)
    assert SECRET not in message
    return message


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../outside/secret.txt", "Path escapes the files root"),
        ("docs/../../outside/secret.txt", "Path escapes the files root"),
        ("{tmp}/outside/secret.txt", "Path escapes the files root"),
        ("link_out", "Path escapes the files root"),
        ("linked_dir/secret.txt", "Path escapes the files root"),
        ("linked_dir", "Path escapes the files root"),
        ("/proc/self/environ", "Path escapes the files root"),
        ("/etc/passwd", "Path escapes the files root"),
        ("/", "Path escapes the files root"),
        ("..", "Path escapes the files root"),
        (".env", "Hidden files and folders"),
        ("./.env", "Hidden files and folders"),
        ("{tmp}/root/.env", "Hidden files and folders"),
        ("docs/../.env", "Hidden files and folders"),
        ("env_alias", "Hidden files and folders"),
        (".git/config", "Hidden files and folders"),
        (".git", "Hidden files and folders"),
        (".git/../notes.txt", "Hidden files and folders"),
        (".ferry/ferry.db", "Hidden files and folders"),
        ("docs/.secret", "Hidden files and folders"),
        ("fifo", "not a regular file"),
        ("notes.txt\0.env", "NUL byte"),
        ("binary.bin", "binary"),
        ("big.log", "looks like a binary file"),
        ("missing.txt", "No such file or folder: missing.txt"),
    ],
)
def test_refusals_never_leak_contents(root: Path, path: str, message: str) -> None:
    assert message in _refusal(path.format(tmp=root.parent))


def test_a_socket_is_refused(root: Path) -> None:
    # Relative to the working folder (the test's tmp_path), so the address fits AF_UNIX's limit.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind("root/sock")
        assert "not a regular file" in _refusal("sock")


def test_a_device_is_refused(root: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    os.mknod(root / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    assert "not a regular file" in _refusal("null")


def test_a_symlink_loop_is_refused(root: Path) -> None:
    (root / "loop").symlink_to(root / "loop")
    assert "loop" in _refusal("loop")


def test_first_page_states_range_and_total(root: Path) -> None:
    reply = read_file.invoke({"path": "notes.txt"})
    header, *lines = reply.split("\n")
    assert header == "notes.txt: lines 1-200 of 523 (ask with start_line=201 for more)"
    assert lines == [f"line {n}" for n in range(1, 201)]


@pytest.mark.parametrize("path", ["./notes.txt", "docs/../notes.txt", "{root}/notes.txt"])
def test_relative_and_absolute_paths_inside_the_root(root: Path, path: str) -> None:
    reply = read_file.invoke({"path": path.format(root=root), "max_lines": 2})
    assert reply == "notes.txt: lines 1-2 of 523 (ask with start_line=3 for more)\nline 1\nline 2"


def test_later_pages_and_the_last_page(root: Path) -> None:
    middle = read_file.invoke({"path": "notes.txt", "start_line": 201, "max_lines": 3})
    assert middle.split("\n") == [
        "notes.txt: lines 201-203 of 523 (ask with start_line=204 for more)",
        "line 201",
        "line 202",
        "line 203",
    ]
    last = read_file.invoke({"path": "notes.txt", "start_line": 500, "max_lines": 100})
    assert last.split("\n")[0] == "notes.txt: lines 500-523 of 523"
    assert last.split("\n")[-1] == "line 523"


def test_start_line_past_the_end_says_how_long_the_file_is(root: Path) -> None:
    with pytest.raises(ToolException, match="start_line=600 is past the end: notes.txt has 523"):
        read_file.invoke({"path": "notes.txt", "start_line": 600})


@pytest.mark.parametrize(("start_line", "max_lines"), [(0, 10), (-1, 10), (1, 0), (1, -5)])
def test_paging_arguments_are_validated(root: Path, start_line: int, max_lines: int) -> None:
    with pytest.raises(ToolException, match="must both be 1 or more"):
        read_file.invoke({"path": "notes.txt", "start_line": start_line, "max_lines": max_lines})


def test_max_lines_is_capped(root: Path) -> None:
    (root / "long.txt").write_text("x\n" * 2500)
    reply = read_file.invoke({"path": "long.txt", "max_lines": 100_000})
    assert reply.startswith("long.txt: lines 1-2000 of 2500 (ask with start_line=2001 for more)")


def test_reply_size_is_capped_even_for_huge_lines(root: Path) -> None:
    (root / "minified.js").write_text("a" * 300_000 + "\nsecond\n")
    reply = read_file.invoke({"path": "minified.js"})
    assert reply.startswith("minified.js: lines 1-1 of 2 (ask with start_line=2 for more)")
    assert reply.endswith("…[line cut]")
    assert len(reply) < 101_000


def test_nested_file_and_symlink_inside_the_root(root: Path) -> None:
    (root / "alias.md").symlink_to(root / "docs" / "readme.md")
    expected = "docs/readme.md: lines 1-2 of 2\n# Readme\nhello"
    assert read_file.invoke({"path": "docs/readme.md"}) == expected
    assert read_file.invoke({"path": "alias.md"}) == expected


def test_a_symlinked_root_works(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root.parent / "root_link").symlink_to(root)
    monkeypatch.setenv("FERRY_FILES_ROOT", str(root.parent / "root_link"))
    reply = read_file.invoke({"path": str(root.parent / "root_link" / "docs" / "readme.md")})
    assert reply.startswith("docs/readme.md: lines 1-2 of 2")


def test_text_details(root: Path) -> None:
    (root / "empty.txt").write_text("")
    (root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (root / "no_newline.txt").write_text("one\ntwo")
    (root / "latin1.txt").write_bytes("caf\u00e9\n".encode("latin-1"))
    assert read_file.invoke({"path": "empty.txt"}) == "empty.txt: the file is empty (0 lines)."
    assert read_file.invoke({"path": "crlf.txt"}) == "crlf.txt: lines 1-2 of 2\none\ntwo"
    assert (
        read_file.invoke({"path": "no_newline.txt"}) == "no_newline.txt: lines 1-2 of 2\none\ntwo"
    )
    latin1 = read_file.invoke({"path": "latin1.txt"})
    assert latin1.startswith("latin1.txt: lines 1-1 of 1 (not valid UTF-8")
    assert latin1.endswith("caf\ufffd")


def test_a_folder_is_listed_without_hidden_entries(root: Path) -> None:
    header, *entries = read_file.invoke({"path": "."}).split("\n")
    assert header == "./: a directory with 8 visible entries; folders end in /."
    assert entries == [
        "big.log",
        "binary.bin",
        "docs/",
        "env_alias -> (hidden)",
        "fifo",
        "link_out -> (outside the files root)",
        "linked_dir -> (outside the files root)",
        "notes.txt",
    ]
    assert read_file.invoke({"path": "docs"}) == (
        "docs/: a directory with 1 visible entry; folders end in /.\nreadme.md"
    )
    (root / "empty_dir").mkdir()
    assert read_file.invoke({"path": "empty_dir"}) == "empty_dir/: an empty directory."


def test_a_missing_root_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_FILES_ROOT", str(tmp_path / "nowhere"))
    with pytest.raises(ToolException, match="files root does not exist"):
        read_file.invoke({"path": "notes.txt"})
