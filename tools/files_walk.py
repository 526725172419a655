r"""Find a path under the files root without ever leaving it, even while the tree changes.

Each component is opened relative to the descriptor of the folder before it, with O_NOFOLLOW, and
symlinks are resolved here rather than by the kernel. A folder swapped for a symlink between two
steps can therefore only make a step fail or be looked at again: nothing outside the root is ever
opened, and no kernel path lookup ever starts anywhere but inside the root.

A name need not be UTF-8 (Linux allows any bytes but `/` and NUL), and such a name as Python
hands it over, with lone surrogates, is text no model API or checkpoint accepts: it is shown
with its stray bytes as `\xNN` escapes (`shown_name`), and a walk takes that spelling back.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from langchain_core.tools import ToolException

MAX_SYMLINKS = 40  # the kernel's own limit before ELOOP
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the lstat opens at once instead of hanging the tool.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_STRAY_BYTE = re.compile(r"\\x([89a-f][0-9a-f])", re.IGNORECASE)  # as `shown_name` writes one


def shown_name(name: str) -> str:
    r"""`name` as text: the bytes of a name that are not UTF-8 as `\xNN` escapes, the rest as is."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # the lone surrogates Python decodes such bytes to
        return os.fsencode(name).decode("utf-8", "backslashreplace")
    return name


def _stray_bytes(name: str) -> str | None:
    r"""The name on disk that `name` shows, if it has `\xNN` escapes of bytes from 0x80."""
    if "\\" not in name:
        return None
    raw = _STRAY_BYTE.sub(lambda found: chr(0xDC00 + int(found.group(1), 16)), name)
    return raw if raw != name else None


class EscapesRoot(ToolException):
    """The path, or a symlink on the way, leads outside the files root."""


class HiddenPath(ToolException):
    """The path, or a symlink on the way, names a hidden file or folder."""


class SymlinkLoop(ToolException):
    """More than MAX_SYMLINKS symlinks were followed."""


@dataclass(frozen=True)
class Root:
    """An open descriptor of the files root and the spellings of its absolute path."""

    fd: int
    prefixes: tuple[tuple[str, ...], ...]

    def relative(self, path: str) -> list[str] | None:
        """Return the components of absolute `path` below the root, or None if it is outside."""
        parts = [part for part in path.split("/") if part not in ("", ".")]
        for prefix in self.prefixes:
            if tuple(parts[: len(prefix)]) == prefix:
                return parts[len(prefix) :]
        return None


@contextmanager
def open_root(root: Path) -> Iterator[Root]:
    """Open the files root's folder for one walk; it is closed when the block ends."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        raise ToolException("The files root does not exist; no files can be read.") from None
    spellings = {os.path.abspath(root), os.path.realpath(root)}
    prefixes = tuple(tuple(p for p in spelling.split("/") if p) for spelling in spellings)
    try:
        yield Root(fd, prefixes)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Found:
    """Where a walk ended: a folder (`name` is None) or the entry `name` inside `folder_fd`.

    The caller owns `folder_fd` and closes it.
    """

    folder_fd: int
    parts: tuple[str, ...]
    name: str | None
    status: os.stat_result | None

    @property
    def shown(self) -> str:
        """The path from the root, as the reply names it."""
        parts = (*self.parts, self.name) if self.name else self.parts
        return "/".join(map(shown_name, parts)) or "."


def walk(root: Root, path: str) -> Found:
    """Find `path` (relative to the root, or absolute inside it) one component at a time.

    Raises:
        EscapesRoot: The path or a symlink leads outside the root.
        HiddenPath: A component, or a symlink's target, is hidden.
        SymlinkLoop: Too many symlinks.
        OSError: A component is missing or not a folder.
    """
    if path.startswith("/"):
        parts = root.relative(path)
        if parts is None:
            raise _escape(path)
    else:
        parts = path.split("/")
    walker = _Walker(root, path, parts)
    try:
        return walker.run()
    finally:
        walker.close()


def open_entry(found: Found) -> int:
    """Open the regular file a walk found, never following a symlink swapped in meanwhile."""
    assert found.name is not None and found.status is not None
    if not stat.S_ISREG(found.status.st_mode):
        raise ToolException(f"{found.shown} is not a regular file (device, FIFO or socket).")
    fd = os.open(found.name, _FILE_FLAGS, dir_fd=found.folder_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolException(f"{found.shown} is not a regular file; not read.")
    return fd


class _Walker:
    """One walk: the folders entered so far (descriptors), their names, and what is left."""

    def __init__(self, root: Root, path: str, parts: list[str]) -> None:
        self.root, self.path = root, path
        self.pending = deque(parts)
        self.folders = [os.dup(root.fd)]
        self.names: list[str] = []
        self.hops = 0

    def run(self) -> Found:
        """Walk what is left of the path; return the folder or entry where it ends."""
        while self.pending:
            name = self.pending.popleft()
            if name in ("", "."):
                continue
            if name == "..":
                self._up()
                continue
            if name.startswith("."):
                raise _hidden(self.path)
            name, status = self._look_up(name)
            if stat.S_ISLNK(status.st_mode):
                self._follow(name)
            elif stat.S_ISDIR(status.st_mode):
                self._enter(name)
            elif self.pending:  # "notes.txt/x" or "notes.txt/", as the kernel would say
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
            else:
                return Found(self.folders.pop(), tuple(self.names), name, status)
        return Found(self.folders.pop(), tuple(self.names), None, None)

    def close(self) -> None:
        for fd in self.folders:
            os.close(fd)

    def _look_up(self, name: str) -> tuple[str, os.stat_result]:
        """The name of an entry of the current folder and its status, as listed or as shown."""
        try:
            return name, os.lstat(name, dir_fd=self.folders[-1])
        except FileNotFoundError:
            if (raw := _stray_bytes(name)) is None:  # a name with such bytes, shown escaped
                raise
            return raw, os.lstat(raw, dir_fd=self.folders[-1])

    def _up(self) -> None:
        if not self.names:
            raise _escape(self.path)
        os.close(self.folders.pop())
        self.names.pop()

    def _enter(self, name: str) -> None:
        try:
            fd = os.open(name, _FOLDER_FLAGS, dir_fd=self.folders[-1])
        except OSError as error:
            if error.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            self._look_again(name)  # swapped for a symlink or a file since the lstat
            return
        self.folders.append(fd)
        self.names.append(name)

    def _follow(self, name: str) -> None:
        self._count_hop()
        try:
            target = os.readlink(name, dir_fd=self.folders[-1])
        except OSError as error:
            if error.errno != errno.EINVAL:
                raise
            self._look_again(name)  # no longer a symlink since the lstat
            return
        self.pending.extendleft(reversed(self._target_parts(target)))

    def _target_parts(self, target: str) -> list[str]:
        if not target.startswith("/"):
            return target.split("/")  # continues from the current folder
        parts = self.root.relative(target)
        if parts is None:
            raise _escape(self.path)
        while self.names:  # an absolute target is walked again from the root
            self._up()
        return parts

    def _look_again(self, name: str) -> None:
        # Counted like a symlink, so a tree that keeps changing cannot keep the walk going forever.
        self._count_hop()
        self.pending.appendleft(name)

    def _count_hop(self) -> None:
        self.hops += 1
        if self.hops > MAX_SYMLINKS:
            raise SymlinkLoop(f"Cannot resolve {self.path!r}: a symlink loop.")


def _escape(path: str) -> EscapesRoot:
    return EscapesRoot(
        f"Path escapes the files root: {path!r} is outside the folder this tool may read. "
        "Use a path inside it, e.g. 'notes.txt' or 'docs/readme.md' ('.' lists it)."
    )


def _hidden(path: str) -> HiddenPath:
    return HiddenPath(
        f"Hidden files and folders (names starting with '.') are off limits: {path!r}."
    )
