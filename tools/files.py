"""The `read_file` tool: text files and folder listings under `FERRY_FILES_ROOT`, nothing else."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from langchain_core.tools import ToolException, tool

from graph.settings import get_settings

MAX_FILE_MB = 5
MAX_FILE_BYTES = MAX_FILE_MB * 1024 * 1024
MAX_LINES = 2_000
MAX_REPLY_CHARS = 100_000
MAX_LISTED_ENTRIES = 1_000
BINARY_SNIFF_BYTES = 8_192


def _resolve(path: str, root: Path) -> Path:
    """Return the real path `path` names, refusing anything outside `root` or hidden."""
    if "\0" in path:
        raise ToolException("The path contains a NUL byte; pass a plain file name.")
    given = Path(path)
    try:
        resolved = (root / given).resolve()
    except RuntimeError:  # Python 3.11 reports symlink loops this way
        raise ToolException(f"Cannot resolve {path!r}: a symlink loop.") from None
    except OSError as error:
        raise ToolException(f"Cannot resolve {path!r}: {error.strerror or error}.") from None
    if not resolved.is_relative_to(root):
        raise ToolException(
            f"Path escapes the files root: {path!r} is outside the folder this tool may read. "
            "Use a path inside it, e.g. 'notes.txt' or 'docs/readme.md' ('.' lists it)."
        )
    # The given relative path is checked too, so `.git/../x` is refused before resolving hides it.
    given_parts = () if given.is_absolute() else given.parts
    parts = (*given_parts, *resolved.relative_to(root).parts)
    if any(part.startswith(".") and part not in (".", "..") for part in parts):
        raise ToolException(
            f"Hidden files and folders (names starting with '.') are off limits: {path!r}."
        )
    return resolved


def _listing(folder: Path, shown: str) -> str:
    entries = sorted(
        entry.name + ("/" if entry.is_dir() else "")
        for entry in os.scandir(folder)
        if not entry.name.startswith(".")
    )
    if not entries:
        return f"{shown}: an empty directory."
    kept = entries[:MAX_LISTED_ENTRIES]
    more = f" (first {len(kept)} shown)" if len(kept) < len(entries) else ""
    count = f"{len(entries)} visible {'entry' if len(entries) == 1 else 'entries'}"
    header = f"{shown}: a directory with {count}{more}; folders end in /."
    return "\n".join([header, *kept])


def _read_bytes(resolved: Path, shown: str) -> bytes:
    """Read a regular file's bytes; FIFOs, devices and sockets are refused without opening them."""
    mode = os.stat(resolved).st_mode
    if not stat.S_ISREG(mode):
        raise ToolException(f"{shown} is not a regular file (device, FIFO or socket); not read.")
    # O_NOFOLLOW and the fstat check catch a swap between the stat above and the open.
    fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise ToolException(f"{shown} is not a regular file; not read.")
        if status.st_size > MAX_FILE_BYTES:
            size_mb = status.st_size / 1024 / 1024
            raise ToolException(
                f"{shown} is {size_mb:.1f} MB; files over {MAX_FILE_MB} MB are not read."
            )
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ToolException(f"{shown} is over {MAX_FILE_MB} MB; such files are not read.")
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        raise ToolException(f"{shown} looks like a binary file; only text files can be read.")
    return data


def _page(lines: list[str], start_line: int, max_lines: int) -> tuple[list[str], int]:
    """Return the lines to show and the last line number, within the line and size caps."""
    chosen: list[str] = []
    budget = MAX_REPLY_CHARS
    for line in lines[start_line - 1 : start_line - 1 + max_lines]:
        if len(line) > budget:
            if not chosen:  # one huge line still shows its beginning rather than nothing
                chosen.append(line[:budget] + " …[line cut]")
            break
        chosen.append(line)
        budget -= len(line) + 1
    return chosen, start_line + len(chosen) - 1


def _text_reply(data: bytes, shown: str, start_line: int, max_lines: int) -> str:
    try:
        text, note = data.decode("utf-8-sig"), ""
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        note = " (not valid UTF-8: undecodable bytes are shown as \ufffd)"
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if text.endswith("\n") or not text:
        lines.pop()
    if not lines:
        return f"{shown}: the file is empty (0 lines)."
    if start_line > len(lines):
        raise ToolException(
            f"start_line={start_line} is past the end: {shown} has {len(lines)} lines."
        )
    chosen, last = _page(lines, start_line, max_lines)
    more = f" (ask with start_line={last + 1} for more)" if last < len(lines) else ""
    return "\n".join([f"{shown}: lines {start_line}-{last} of {len(lines)}{more}{note}", *chosen])


@tool(parse_docstring=True)
def read_file(path: str, start_line: int = 1, max_lines: int = 200) -> str:
    """Read a text file, or list a folder, inside the user's files folder.

    Use this when the user refers to a local file or wants to know which files exist. Paths
    are relative to the files folder ('.' lists it); hidden files and anything outside it are
    refused. The reply starts with a header naming the lines returned and the total, e.g.
    "notes.txt: lines 1-200 of 523 (ask with start_line=201 for more)", then the lines. Read
    long files page by page.

    Args:
        path: File or folder path relative to the files folder, e.g. "notes.txt" or "docs".
        start_line: First line to return, counting from 1.
        max_lines: How many lines to return at most (up to 2000).
    """
    if start_line < 1 or max_lines < 1:
        raise ToolException("start_line and max_lines must both be 1 or more.")
    root = get_settings().files_root.resolve()
    if not root.is_dir():
        raise ToolException("The files root does not exist; no files can be read.")
    resolved = _resolve(path, root)
    shown = resolved.relative_to(root).as_posix()
    try:
        if resolved.is_dir():
            return _listing(resolved, shown + "/" if shown != "." else "./")
        data = _read_bytes(resolved, shown)
    except FileNotFoundError:
        raise ToolException(f"No such file or folder: {shown} ('.' lists the files).") from None
    except PermissionError:
        raise ToolException(f"Permission denied: {shown}.") from None
    except OSError as error:
        raise ToolException(f"Cannot read {shown}: {error.strerror or error}.") from None
    return _text_reply(data, shown, start_line, min(max_lines, MAX_LINES))
