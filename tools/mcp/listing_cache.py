"""The MCP listing cache: each server's tools as last listed, so a run need not start it.

    $XDG_CACHE_HOME/ferry/mcp-listings.json   (by default ~/.cache/ferry/; 0600, its folder 0700)
    {"version": 1,
     "servers": {"<fingerprint>": {"server": "time", "listed_at": 1718000000.0, "tools": [...]}},
     "warned": ["<hash of a servers file, a server and its renames>", ...]}

It holds data only: names, descriptions, JSON schemas, annotations, never anything to import or
run. A file that is not one Ferry wrote, or that someone else could have written (not the
user's, writable by others, a symlink), is ignored with one warning and replaced at the next
write. Losing an entry (two processes writing at once) only means a server starts once more.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tools.mcp.listing import ListedTool, tool_from_data

VERSION = 1
LISTING_TTL_S = 24 * 3600.0
"""How long a listing is offered without its server starting; any start refreshes it sooner."""
MAX_ENTRIES = 256
"""Listings kept (the oldest go first): one per server entry of every servers file in use."""
_MAX_BYTES = 32 * 1024 * 1024
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
log = logging.getLogger("ferry.mcp")
_lock = threading.RLock()  # one process's threads read-modify-write the file one at a time
_said_lock = threading.Lock()
_said: set[str] = set()


def cache_path() -> Path:
    """`$XDG_CACHE_HOME/ferry/mcp-listings.json`, else under `~/.cache/`."""
    cache_home = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec: a relative path is invalid and is ignored.
    base = Path(cache_home) if os.path.isabs(cache_home) else Path.home() / ".cache"
    return base / "ferry" / "mcp-listings.json"


def cached_listing(
    fingerprint: str, now: Callable[[], float] = time.time
) -> list[ListedTool] | None:
    """The tools cached for the server of this fingerprint, unless older than `LISTING_TTL_S`."""
    entry = _read()["servers"].get(fingerprint)
    if entry is None or not 0 <= now() - entry["listed_at"] <= LISTING_TTL_S:
        return None  # a listing from the future: the clock moved, or the file was edited
    return [tool for tool in map(tool_from_data, entry["tools"]) if tool is not None]


def remember_listing(fingerprint: str, server: str, tools: Iterable[ListedTool]) -> None:
    """Cache the tools the server of this fingerprint listed just now."""
    entry = {"server": server, "listed_at": time.time(), "tools": [t.as_data() for t in tools]}
    _update(lambda data: data["servers"].__setitem__(fingerprint, entry))


def forget_listing(fingerprint: str) -> None:
    """Drop a listing (its server did not start): the next run starts the server to list it."""
    with _lock:
        if fingerprint in _read()["servers"]:
            _update(lambda data: data["servers"].pop(fingerprint, None))


def first_warning(key: str) -> bool:
    """Whether no run warned of `key` yet (a hash: a servers file's renames); it is noted."""
    with _lock:
        if key in _read()["warned"]:
            return False
        _update(lambda data: data["warned"].append(key))
    return True


def _update(change: Callable[[dict[str, Any]], object]) -> None:
    """Read the file, apply `change`, write it back whole (a write that fails is logged)."""
    with _lock:
        data = _read()
        change(data)
        servers = sorted(data["servers"].items(), key=lambda item: item[1]["listed_at"])
        data["servers"] = dict(servers[-MAX_ENTRIES:])
        data["warned"] = data["warned"][-MAX_ENTRIES:]
        _write(data)


def _read() -> dict[str, Any]:
    """The cache's content, or an empty one when there is none or it cannot be trusted."""
    path, empty = cache_path(), {"version": VERSION, "servers": {}, "warned": []}
    try:
        with path.open("rb") as handle:
            # The descriptor's own status: a file swapped in after a check would not count.
            problem = _not_ours(os.fstat(handle.fileno()), path)
            data = None if problem else json.loads(handle.read(_MAX_BYTES + 1))
    except FileNotFoundError:
        return empty
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror})"
    except (ValueError, UnicodeDecodeError):
        problem = "is not valid JSON"
    if not problem:
        problem = _malformed(data)
    if problem:
        _say(f"MCP listing cache {path} {problem}: ignored, each server lists its tools again")
        return empty
    return dict(data)  # type: ignore[arg-type]  # `_malformed` checked it is a dict


def _not_ours(status: os.stat_result, path: Path) -> str:
    if path.is_symlink():
        return "is a symbolic link"
    if not stat.S_ISREG(status.st_mode) or status.st_size > _MAX_BYTES:
        return "is not a regular file of at most 32 MB"
    if os.name != "posix":  # Windows has neither owners by uid nor these permission bits
        return ""
    if status.st_uid != os.getuid():
        return "belongs to another user"
    if status.st_mode & 0o022:
        return "is writable by other users"
    return ""


def _malformed(data: Any) -> str:
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return f'is not one Ferry wrote (expected {{"version": {VERSION}, …}})'
    if set(data) != {"version", "servers", "warned"}:
        return "has keys Ferry does not write"
    servers, warned = data.get("servers"), data.get("warned")
    if not isinstance(servers, dict) or not isinstance(warned, list):
        return 'has no "servers" object or no "warned" list'
    if not all(isinstance(key, str) for key in warned):
        return 'has a "warned" entry that is not a string'
    for key, entry in servers.items():
        if not _FINGERPRINT.fullmatch(key) or not _is_entry(entry):
            return f"has a malformed listing ({key[:16]}…)"
    return ""


def _is_entry(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and set(entry) == {"server", "listed_at", "tools"}
        and isinstance(entry.get("server"), str)
        and isinstance(entry.get("listed_at"), int | float)
        and isinstance(entry.get("tools"), list)
        and all(tool_from_data(tool) is not None for tool in entry["tools"])
    )


def _write(data: dict[str, Any]) -> None:
    """Replace the file at once (never half written), readable by the user only."""
    path = cache_path()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".mcp-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:  # mkstemp made it 0600
                json.dump(data, out, ensure_ascii=False)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except (OSError, TypeError, ValueError) as exc:  # a cache that cannot be written is no error
        _say(f"MCP listing cache {path} cannot be written ({exc}): servers start every run")


def _say(message: str) -> None:
    with _said_lock:
        if message in _said:
            return
        _said.add(message)
    log.warning(message, extra={"event": "mcp_listing_cache"})
