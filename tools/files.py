"""The `read_file` tool: text files and folder listings under `FERRY_FILES_ROOT`, nothing else."""

from __future__ import annotations

import codecs
import os
from typing import BinaryIO

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ToolException, tool

from tools.files_walk import (
    EscapesRoot,
    Found,
    HiddenPath,
    Root,
    open_entry,
    open_root,
    shown_name,
    walk,
)
from tools.settings import is_system_root, tool_settings

MAX_LINES = 2_000
MAX_REPLY_CHARS = 100_000
MAX_LISTED_ENTRIES = 1_000
BINARY_SNIFF_BYTES = 8_192
CHUNK_BYTES = 64 * 1024
# A UTF-8 character takes at most 4 bytes, so a page this long always holds more than a reply shows.
PAGE_BYTES = 4 * MAX_REPLY_CHARS + 8


def _listing(root: Root, folder: Found) -> str:
    """List a folder from its descriptor; a broken or escaping symlink is marked, not fatal."""
    with os.scandir(folder.folder_fd) as scan:
        entries = sorted(
            _entry_line(root, folder, entry) for entry in scan if not entry.name.startswith(".")
        )
    shown = "./" if folder.shown == "." else folder.shown + "/"
    if not entries:
        return f"{shown}: an empty directory."
    kept = entries[:MAX_LISTED_ENTRIES]
    more = f" (first {len(kept)} shown)" if len(kept) < len(entries) else ""
    count = f"{len(entries)} visible {'entry' if len(entries) == 1 else 'entries'}"
    odd = any(shown_name(name) != name for _, name in kept)
    note = "; \\xNN in a name is a byte that is not UTF-8: pass the name as shown" * odd
    header = f"{shown}: a directory with {count}{more}; folders end in /{note}."
    return "\n".join([header, *(line for line, _ in kept)])


def _entry_line(root: Root, folder: Found, entry: os.DirEntry[str]) -> tuple[str, str]:
    """How an entry is listed, and its name as the folder holds it."""
    name = shown_name(entry.name)
    if not entry.is_symlink():
        return name + ("/" if entry.is_dir(follow_symlinks=False) else ""), entry.name
    # A symlink is resolved by the same walk a read would take, so nothing outside is looked at.
    try:
        target = walk(root, "/".join((*folder.parts, entry.name)))
    except EscapesRoot:
        return f"{name} -> (outside the files root)", entry.name
    except HiddenPath:
        return f"{name} -> (hidden)", entry.name
    except (ToolException, OSError):  # dangling, a loop, or a component that is not a folder
        return f"{name} -> (broken link)", entry.name
    os.close(target.folder_fd)
    return name + ("/" if target.name is None else ""), entry.name


def _open_text(found: Found, allow_hardlinks: bool) -> BinaryIO:
    """Open a regular file with a single name that does not look binary."""
    file = os.fdopen(open_entry(found), "rb")
    try:
        links = os.fstat(file.fileno()).st_nlink
        if links > 1 and not allow_hardlinks:
            raise ToolException(
                f"{found.shown} has {links} hard links: it may be another name for a file outside "
                "the files root or a hidden one, so it is not read. "
                "Set FERRY_FILES_ALLOW_HARDLINKS=1 to allow such files."
            )
        if b"\0" in file.read(BINARY_SNIFF_BYTES):
            raise ToolException(
                f"{found.shown} looks like a binary file; only text files can be read."
            )
        file.seek(0)
    except BaseException:
        file.close()
        raise
    return file


def _after_newlines(chunk: bytes, count: int) -> int:
    """Return the offset just past the `count`-th newline of `chunk` (its end if fewer)."""
    offset = 0
    for _ in range(count):
        found = chunk.find(b"\n", offset)
        if found < 0:
            return len(chunk)
        offset = found + 1
    return offset


def _scan(file: BinaryIO, start_line: int, max_lines: int) -> tuple[bytes, int]:
    """Return the bytes of the asked lines (at most PAGE_BYTES) and the file's line count.

    The file is streamed once, so memory holds one chunk and the page whatever its size.
    """
    end_line = start_line + max_lines
    page = bytearray()
    line = 1  # the line the chunk's first byte belongs to
    last = b"\n"
    while chunk := file.read(CHUNK_BYTES):
        newlines = chunk.count(b"\n")
        if line < end_line and line + newlines >= start_line and len(page) < PAGE_BYTES:
            low = _after_newlines(chunk, start_line - line)
            high = _after_newlines(chunk, end_line - line)
            page += chunk[low:high][: PAGE_BYTES - len(page)]
        line += newlines
        last = chunk[-1:]
    return bytes(page), line - (last == b"\n")


def _page(lines: list[str], start_line: int, max_lines: int) -> tuple[list[str], int]:
    """Return the lines to show and the last line number, within the line and size caps."""
    chosen: list[str] = []
    budget = MAX_REPLY_CHARS
    for line in lines[:max_lines]:
        if len(line) > budget:
            if not chosen:  # one huge line still shows its beginning rather than nothing
                chosen.append(line[:budget] + " …[line cut]")
            break
        chosen.append(line)
        budget -= len(line) + 1
    return chosen, start_line + len(chosen) - 1


def _text_reply(file: BinaryIO, shown: str, start_line: int, max_lines: int) -> str:
    data, total = _scan(file, start_line, max_lines)
    if total == 0:
        return f"{shown}: the file is empty (0 lines)."
    if start_line > total:
        raise ToolException(f"start_line={start_line} is past the end: {shown} has {total} lines.")
    # Not final when the page was cut: a character split at the cut is not an encoding error.
    cut = len(data) >= PAGE_BYTES
    try:
        text, note = codecs.getincrementaldecoder("utf-8-sig")().decode(data, final=not cut), ""
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        note = " (not valid UTF-8: undecodable bytes are shown as \ufffd)"
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if text.endswith("\n"):
        lines.pop()
    chosen, last = _page(lines, start_line, max_lines)
    more = f" (ask with start_line={last + 1} for more)" if last < total else ""
    return "\n".join([f"{shown}: lines {start_line}-{last} of {total}{more}{note}", *chosen])


def _read(root: Root, path: str, start_line: int, max_lines: int, allow_hardlinks: bool) -> str:
    found = walk(root, path)
    try:
        if found.name is None:
            return _listing(root, found)
        with _open_text(found, allow_hardlinks) as file:
            return _text_reply(file, found.shown, start_line, max_lines)
    finally:
        os.close(found.folder_fd)


@tool(parse_docstring=True)
def read_file(
    path: str, start_line: int = 1, max_lines: int = 200, *, config: RunnableConfig
) -> str:
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
        config: Injected by LangChain, never seen by the model; carries the run's settings.
    """
    if start_line < 1 or max_lines < 1:
        raise ToolException("start_line and max_lines must both be 1 or more.")
    if "\0" in path:
        raise ToolException("The path contains a NUL byte; pass a plain file name.")
    settings = tool_settings(config)
    allow_hardlinks = settings.files_allow_hardlinks
    # Settings refuse such a root at start-up; checked again in case one is handed over anyway.
    if is_system_root(settings.files_root):
        raise ToolException(f"The files root {settings.files_root} is a system folder; not read.")
    with open_root(settings.files_root) as root:
        try:
            return _read(root, path, start_line, min(max_lines, MAX_LINES), allow_hardlinks)
        except FileNotFoundError:
            raise ToolException(f"No such file or folder: {path} ('.' lists the files).") from None
        except PermissionError:
            raise ToolException(f"Permission denied: {path}.") from None
        except OSError as error:
            raise ToolException(f"Cannot read {path}: {error.strerror or error}.") from None
