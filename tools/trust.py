"""A folder's own `.env` and `mcp.json` apply only once the user trusted them (`ferry trust`).

A cloned repository can hold either file: a `.env` that points `OPENAI_BASE_URL` at another host
(the user's key goes with every request) or turns a guard off, an `mcp.json` whose command runs
as soon as Ferry starts. So, like `direnv allow`, each file is used only while its sha256 is the
one recorded when the user trusted it, in `$XDG_CONFIG_HOME/ferry/trusted.json` (by default
`~/.config/ferry/`); what was ignored is said once, on stderr. What is used is the bytes hashed,
from the same read: a file swapped after the check is never used. The real environment, and a
`FERRY_MCP_CONFIG` set in it, apply as always.

    {"version": 1, "files": {"/home/me/project/.env": {"sha256": "…", "trusted_at": "…"}}}
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import dotenv

ENV_FILE = ".env"
MCP_FILE = "mcp.json"
FOLDER_FILES = (ENV_FILE, MCP_FILE)
"""The files of a working folder that need the user's trust."""
STORE_VERSION = 1
Status = Literal["trusted", "changed", "untrusted"]
_REASONS: dict[Status, str] = {"changed": "changed since trusted", "untrusted": "not trusted"}
_LOCK = threading.Lock()  # the server reads settings from several threads
_ANNOUNCED: set[tuple[str, str]] = set()  # (file, sha256) pairs the notice named already


class TrustStoreError(ValueError):
    """The trust store cannot be read or written; the message names the file."""


@dataclass(frozen=True)
class FolderFile:
    """One of a folder's files, as read once: what is hashed is what is used."""

    path: Path
    """Where it is, as found in its folder (a symlink is not resolved)."""
    content: bytes
    sha256: str

    @classmethod
    def read(cls, path: Path) -> FolderFile:
        """Read the file at `path` once, and hash the bytes read.

        Raises:
            OSError: it cannot be read.
        """
        content = path.read_bytes()
        return cls(path, content, hashlib.sha256(content).hexdigest())

    @property
    def key(self) -> str:
        """Its name in the trust store: the folder's resolved absolute path and the file name."""
        return str(self.path.parent.resolve() / self.path.name)

    def text(self) -> str:
        """The content as text (undecodable bytes replaced: they cannot be a setting)."""
        return self.content.decode("utf-8", errors="replace")


def store_path() -> Path:
    """Where the trust records live: `$XDG_CONFIG_HOME/ferry/trusted.json`, else `~/.config/`."""
    config_home = os.environ.get("XDG_CONFIG_HOME", "")
    # The XDG spec: a relative path is invalid and is ignored.
    base = Path(config_home) if os.path.isabs(config_home) else Path.home() / ".config"
    return base / "ferry" / "trusted.json"


def read_folder_file(path: Path) -> FolderFile | None:
    """The file at `path` (through a symlink) if it is a regular file that can be read."""
    try:
        if not path.is_file():  # a FIFO or a device would block or never end
            return None
        return FolderFile.read(path)
    except OSError:
        return None


def folder_files(folder: Path) -> list[FolderFile]:
    """The `.env` and `mcp.json` present in `folder`."""
    found = (read_folder_file(folder / name) for name in FOLDER_FILES)
    return [file for file in found if file is not None]


def read_store() -> dict[str, dict[str, str]]:
    """Every trust record: the file's key → its `sha256` and `trusted_at`.

    Raises:
        TrustStoreError: the store is not a trust store Ferry wrote.
    """
    path = store_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise TrustStoreError(f"{path}: cannot read the trust store ({exc.strerror})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TrustStoreError(f"{path}: the trust store is not valid JSON ({exc})") from exc
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or data.get("version") != STORE_VERSION:
        raise TrustStoreError(f'{path}: not a trust store (expected {{"version": 1, "files": …}})')
    if not all(isinstance(r, dict) and isinstance(r.get("sha256"), str) for r in files.values()):
        raise TrustStoreError(f"{path}: a trust record without its sha256")
    return dict(files)


def write_store(records: dict[str, dict[str, str]]) -> Path:
    """Replace the store with `records` at once (never half written), readable by the user only.

    Raises:
        TrustStoreError: the store cannot be written.
    """
    path = store_path()
    text = json.dumps({"version": STORE_VERSION, "files": records}, indent=2, sort_keys=True)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".trusted-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:  # mkstemp made it 0600
                out.write(text + "\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise TrustStoreError(f"{path}: cannot write the trust store ({exc.strerror})") from exc
    return path


def trust(folder: Path) -> list[FolderFile]:
    """Record `folder`'s `.env` and `mcp.json`, as they are now, as trusted; return them.

    Raises:
        TrustStoreError: the store cannot be read (it is left as it is) or written.
    """
    files = folder_files(folder)
    records = read_store()
    now = datetime.now(UTC).isoformat(timespec="seconds")
    records.update({f.key: {"sha256": f.sha256, "trusted_at": now} for f in files})
    if files:
        write_store(records)
    return files


def revoke(folder: Path) -> list[str]:
    """Forget the trust of `folder`'s `.env` and `mcp.json`; return the keys forgotten.

    Raises:
        TrustStoreError: the store cannot be read (it is left as it is) or written.
    """
    records = read_store()
    keys = [str(folder.resolve() / name) for name in FOLDER_FILES]
    gone = [key for key in keys if records.pop(key, None) is not None]
    if gone:
        write_store(records)
    return gone


def status(file: FolderFile, records: dict[str, dict[str, str]]) -> Status:
    """Whether `file` is trusted as it is, was trusted with other content, or never was."""
    record = records.get(file.key)
    if record is None:
        return "untrusted"
    return "trusted" if record["sha256"] == file.sha256 else "changed"


def is_trusted(path: Path) -> bool:
    """Whether the folder file at `path` is there and trusted as it is now."""
    found = read_folder_file(path)
    return found is not None and status(found, _records()) == "trusted"


def load_dotenv(path: Path | None = None) -> None:
    """Load the working folder's `.env` (or `path`), if trusted, never overriding the shell.

    Every reader of `.env` comes here. The text loaded is the text hashed, so a file changed
    in between is not used.
    """
    path = path or Path.cwd() / ENV_FILE
    found, records = read_folder_file(path), _records()
    if found is not None and status(found, records) == "trusted":
        dotenv.load_dotenv(stream=io.StringIO(found.text()), override=False)
    _announce(path.parent, records, {path.name: found}, path.name)


def trusted_mcp_file(folder: Path | None = None) -> FolderFile | None:
    """The folder's `mcp.json` (the working folder's by default) if it is there and trusted.

    What is returned holds the bytes that were hashed: parse those, never the path again, or a
    file swapped in between would run unchecked commands.
    """
    path = (folder or Path.cwd()) / MCP_FILE
    found, records = read_folder_file(path), _records()
    _announce(path.parent, records, {MCP_FILE: found})
    return found if found is not None and status(found, records) == "trusted" else None


def _records() -> dict[str, dict[str, str]]:
    """The records, or none when the store is unreadable: no folder file is used then."""
    try:
        return read_store()
    except TrustStoreError as exc:
        _say_once(
            ("store", str(exc)), message=f"ferry: {exc}; no folder's .env or mcp.json is used"
        )
        return {}


def _announce(
    folder: Path,
    records: dict[str, dict[str, str]],
    read: dict[str, FolderFile | None],
    env_name: str = ENV_FILE,
) -> None:
    """Say on stderr, in one line and once per process, which folder files were ignored.

    `read`: the folder's files the caller read already, by name; the others are read here.
    """
    names = [env_name] + ([] if os.environ.get("FERRY_MCP_CONFIG") else [MCP_FILE])
    files = (read[n] if n in read else read_folder_file(folder / n) for n in names)
    ignored = [(f, status(f, records)) for f in files if f is not None]
    ignored = [(f, s) for f, s in ignored if s != "trusted"]
    if ignored:
        _say_once(*[(f.key, f.sha256) for f, _ in ignored], message=_notice(ignored))


def _notice(ignored: list[tuple[FolderFile, Status]]) -> str:
    """`ferry: ignored ./.env and ./mcp.json (not trusted; run 'ferry trust' to use them)`."""
    folder = ignored[0][0].path.parent
    where = "" if _here(folder) else f" in {_printable(str(folder))}"
    hint = f"run 'ferry trust'{where} to use {'them' if len(ignored) > 1 else 'it'}"
    if len({s for _, s in ignored}) == 1:
        names = " and ".join(_shown(f.path) for f, _ in ignored)
        return f"ferry: ignored {names} ({_REASONS[ignored[0][1]]}; {hint})"
    parts = [f"{_shown(f.path)} ({_REASONS[s]})" for f, s in ignored]
    return f"ferry: ignored {' and '.join(parts)}; {hint}"


def _say_once(*keys: tuple[str, str], message: str) -> None:
    with _LOCK:
        if set(keys) <= _ANNOUNCED:
            return
        _ANNOUNCED.update(keys)
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def _shown(path: Path) -> str:
    """`./.env` for the working folder's files, else the whole path."""
    return _printable(f"./{path.name}" if _here(path.parent) else str(path))


def _here(folder: Path) -> bool:
    try:
        return folder.resolve() == Path.cwd().resolve()
    except OSError:  # the working folder was removed
        return False


def _printable(text: str) -> str:
    """`text` with control characters escaped: a folder's name must not drive the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
