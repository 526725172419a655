"""`ferry trust`: let a folder's own `.env` and `mcp.json` apply, after showing what they do.

Like `direnv allow`: the files are recorded by sha256 in the user's trust store (see
`tools.trust`), so a file that changes afterwards is ignored until it is trusted again.
"""

from __future__ import annotations

import argparse
import io
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph.cli.agent import UserError, print_json
from graph.core.controls import printable

if TYPE_CHECKING:
    from tools.trust import FolderFile

_EFFECT = (
    "Ferry now reads these files when it runs in {folder} (the .env's variables, the servers "
    "file's commands); a file that changes is ignored until you trust it again. "
    "Undo: ferry untrust"
)


def describe_dotenv(text: str) -> list[str]:
    """What a `.env` sets: `NAME=value`, a secret's value (as Ferry's logs redact it) left out."""
    from dotenv import dotenv_values

    from graph.core.log import is_secret_name

    values = dotenv_values(stream=io.StringIO(text), interpolate=False)
    return [
        f"{name}=(secret, not shown)" if is_secret_name(name) else f"{name}={value or ''}"
        for name, value in values.items()
    ]


def describe_servers(text: str) -> list[str]:
    """What an `mcp.json` starts: each server's command line or URL, as written in the file."""
    try:
        servers = json.loads(text).get("mcpServers")
    except (json.JSONDecodeError, AttributeError):
        servers = None
    if not isinstance(servers, dict):
        return ["(not a valid servers file: Ferry will say why when it reads it)"]
    lines = []
    for name, entry in servers.items():
        entry = entry if isinstance(entry, dict) else {}
        if "command" in entry:
            args = entry.get("args")
            command = [entry["command"], *(args if isinstance(args, list) else [])]
            what = "runs " + shlex.join(str(part) for part in command)
        else:
            what = f"connects to {entry.get('url', '(no command or url)')}"
        lines.append(f"{name}: {what}" + (" (disabled)" if entry.get("disabled") is True else ""))
    return lines or ["(no servers)"]


def _file_report(file: FolderFile) -> dict[str, Any]:
    from tools.trust import ENV_FILE

    describe = describe_dotenv if file.path.name == ENV_FILE else describe_servers
    target = file.path.resolve() if file.path.is_symlink() else None
    return {
        "path": file.key,
        "sha256": file.sha256,
        "link_to": str(target) if target else None,
        "contents": describe(file.text()),
    }


def _trust(folder: Path, args: argparse.Namespace) -> int:
    from tools.trust import store_path, trust

    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder")
    files = trust(folder)
    if not files:
        raise UserError(f"nothing to trust in {folder.resolve()}: no .env or mcp.json there")
    reports = [_file_report(f) for f in files]
    if args.json:
        print_json({"folder": str(folder.resolve()), "store": str(store_path()), "files": reports})
        return 0
    lines = [f"trusted in {folder.resolve()} (recorded in {store_path()}):"]
    for report in reports:
        link = f" -> {report['link_to']}" if report["link_to"] else ""
        lines.append(f"  {Path(report['path']).name}{link}  sha256:{report['sha256'][:16]}")
        # One line each: a value's own newline must not pass for another line of the report.
        lines += ["    " + line.replace("\n", "\\n") for line in report["contents"]]
    lines.append(_EFFECT.format(folder=folder.resolve()))
    _write(lines)
    return 0


def _list(args: argparse.Namespace) -> int:
    from tools.trust import read_folder_file, read_store, store_path

    rows = []
    for key, record in sorted(read_store().items()):
        found = read_folder_file(Path(key))
        now = "missing" if found is None else "changed"
        now = "trusted" if found and found.sha256 == record["sha256"] else now
        rows.append({"path": key, **record, "status": now})
    if args.json:
        print_json({"store": str(store_path()), "files": rows})
        return 0
    if not rows:
        _write([f"no folder is trusted ({store_path()} holds no record)"])
        return 0
    width = max(len(row["path"]) for row in rows)
    shown = {"trusted": "trusted", "changed": "changed since trusted: ignored", "missing": "gone"}
    _write(
        [f"{r['path']:<{width}}  {shown[r['status']]} ({r.get('trusted_at', '?')})" for r in rows]
    )
    return 0


def _revoke(folder: Path, args: argparse.Namespace) -> int:
    from tools.trust import revoke

    gone = revoke(folder)
    if args.json:
        print_json({"folder": str(folder.resolve()), "revoked": gone})
    elif gone:
        _write([f"no longer trusted: {', '.join(gone)}"])
    else:
        _write([f"nothing in {folder.resolve()} was trusted"])
    return 0


def _write(lines: list[str]) -> None:
    sys.stdout.write(printable("\n".join(lines)) + "\n")  # the files' text may hold escapes


def cmd_trust(args: argparse.Namespace) -> int:
    """Trust the folder's `.env` and `mcp.json` as they are now, list the trusted, or revoke."""
    from graph.core.settings import ConfigError
    from tools.trust import TrustStoreError

    folder = Path(args.folder)
    try:
        if args.list:
            return _list(args)
        if args.revoke:
            return _revoke(folder, args)
        return _trust(folder, args)
    except TrustStoreError as exc:
        raise ConfigError(str(exc)) from exc


def cmd_untrust(args: argparse.Namespace) -> int:
    """Forget the trust of the folder's `.env` and `mcp.json` (`ferry trust --revoke`)."""
    args.list, args.revoke = False, True
    return cmd_trust(args)


def add_trust_commands(sub: Any) -> None:
    """Add `trust` and `untrust` to the command line's subcommands."""
    trust = sub.add_parser(
        "trust",
        help="Let this folder's .env and mcp.json apply (shows what they set and start).",
        description="Let the folder's own .env and mcp.json apply, as they are now: a file "
        "that changes later is ignored until trusted again.",
    )
    trust.set_defaults(handler=cmd_trust)
    which = trust.add_mutually_exclusive_group()
    which.add_argument("--list", action="store_true", help="list the trusted files")
    which.add_argument("--revoke", action="store_true", help="forget the folder's trust")
    untrust = sub.add_parser(
        "untrust",
        help="Forget the trust of this folder's .env and mcp.json.",
        description="Forget the trust of the folder's .env and mcp.json (trust --revoke).",
    )
    untrust.set_defaults(handler=cmd_untrust)
    for p in (trust, untrust):
        p.add_argument("folder", nargs="?", default=".", help="the folder (default: this one)")
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
