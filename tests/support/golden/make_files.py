"""Write a golden database file, and its manifest, with a Ferry release's own code.

The file (`files/ferry-<commit>.db`) holds four threads (recipe.py): a short one, a long one
stored in parts, one awaiting approval, and one whose process was killed inside a tool with
side effects. The manifest (`files/ferry-<commit>.json`) records what the release reads back
from it (readback.py), the file's sha256 and the release's code table. Every later version
must read the file identically, continue and resume it (tests/integration/test_golden_files.py).
A file is written once per release and never regenerated: users' files are what it stands for.

To add the file of a release, check it out beside this repository and run this script from
the checkout, with this repository's interpreter (the checkout's `graph` is imported first):

    git worktree add /tmp/release <commit>
    cd /tmp/release
    /work/main/.venv/bin/python /work/main/tests/support/golden/make_files.py --release /tmp/release
    cd - && git worktree remove --force /tmp/release

Only public entry points write the file: `build_graph`, `graph.storage.sqlite_saver`, the
release's `tests/support/scripted.py` model, and the `ferry` command (`threads`, `history`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Beside this file (the script's folder is first on sys.path); neither imports graph/.
import readback
import recipe

HERE = Path(__file__).resolve().parent


def _import_release(release: Path) -> None:
    """Make `graph` and `tests.support.scripted` the release's; this folder's modules stay."""
    sys.path.insert(0, str(release))
    import graph

    if Path(graph.__file__).resolve().parent != release / "graph":
        raise SystemExit(f"graph imported from {graph.__file__}, not from {release}")


def _clean_environment(work: Path) -> None:
    """No settings, keys or `.env` of the caller's: every run sees Ferry's defaults."""
    for name in list(os.environ):
        if name.startswith(("FERRY_", "OPENAI_", "ANTHROPIC_", "TAVILY_", "LANGSMITH_")):
            del os.environ[name]
    os.environ["XDG_CONFIG_HOME"] = str(work / ".config")
    os.environ["LANGSMITH_TRACING"] = "false"
    os.environ["FERRY_APPROVE_TOOLS"] = recipe.APPROVE_TOOLS
    os.chdir(work)


def _graph(steps: list[Any], saver: Any) -> Any:
    """The release's graph on the scripted model, with the golden threads' tools."""
    from graph import build_graph
    from tests.support.scripted import ScriptedModel

    model = ScriptedModel(steps)
    return model, build_graph(model=model, tools=recipe.TOOLS, checkpointer=saver)


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def write_threads(db: Path) -> None:
    """The short, long and approval threads, in this process."""
    from graph.storage import sqlite_saver

    saver = sqlite_saver(db)
    model, graph = _graph(recipe.SHORT_REPLIES, saver)
    graph.invoke({"messages": [("user", recipe.SHORT_QUESTION)]}, _config(recipe.SHORT))
    model.assert_complete()
    for question, replies in recipe.long_turns():
        model, graph = _graph(replies, saver)
        graph.invoke({"messages": [("user", question)]}, _config(recipe.LONG))
        model.assert_complete()
    model, graph = _graph(recipe.APPROVAL_REPLIES, saver)
    graph.invoke({"messages": [("user", recipe.APPROVAL_QUESTION)]}, _config(recipe.APPROVAL))
    model.assert_complete()
    assert graph.get_state(_config(recipe.APPROVAL)).interrupts, "the approval run did not pause"
    saver.conn.close()  # so no -wal or -shm file is left behind


def killed_turn(db: Path, running: Path) -> None:
    """The killed thread's turn: `send_invoice` says it runs (`running`), then blocks forever."""
    from graph.storage import sqlite_saver

    def hold() -> None:
        running.write_text("running")
        time.sleep(3600)

    recipe.HOLD.append(hold)
    _, graph = _graph(recipe.KILLED_REPLIES, sqlite_saver(db))
    graph.invoke({"messages": [("user", recipe.KILLED_QUESTION)]}, _config(recipe.KILLED))
    raise SystemExit("send_invoice returned: it should have blocked")


def kill_mid_tool(db: Path, release: Path) -> None:
    """Run the killed thread's turn in a process and SIGKILL it while send_invoice runs."""
    running = db.with_name("running")
    child = subprocess.Popen(
        [sys.executable, __file__, "--release", str(release), "killed-turn", str(db), str(running)]
    )
    deadline = time.monotonic() + 60
    while not running.exists():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            raise SystemExit("the killed turn never reached send_invoice")
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()


def read(db: Path, release: Path) -> dict[str, Any]:
    """What the release reads back from the file, in a fresh process."""
    done = subprocess.run(
        [sys.executable, __file__, "--release", str(release), "read", str(db)],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    return json.loads(done.stdout)


def read_here(db: Path, release: Path) -> dict[str, Any]:
    """What this process (the release's code) reads back from the file."""
    from graph import build_graph
    from graph.storage import sqlite_saver

    saver = sqlite_saver(db)
    graph = build_graph(tools=recipe.TOOLS, checkpointer=saver)  # the offline model, unused
    threads = {t: readback.thread(graph, t) for t in recipe.THREADS}
    saver.conn.close()  # so no -wal or -shm file is left behind
    cli = readback.listing(db, recipe.THREADS, pythonpath=str(release))
    return {"threads": threads, **cli}


def settle(db: Path) -> None:
    """Checkpoint the WAL into the file and close it: no -wal or -shm file is left."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    left = [p.name for p in db.parent.glob(db.name + "-*")]
    if left:
        raise SystemExit(f"left beside the file: {left}")


def check_contents(db: Path) -> dict[str, int]:
    """The rows that show what the file holds: parts of the long thread, the killed call's start."""
    conn = sqlite3.connect(f"{db.absolute().as_uri()}?mode=ro", uri=True)
    try:
        counts = {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("ferry_threads", "ferry_steps", "ferry_writes", "ferry_parts")
        }
        started = conn.execute(
            "SELECT tool_call_id FROM ferry_started_calls WHERE thread_id = ?", (recipe.KILLED,)
        ).fetchall()
    finally:
        conn.close()
    if not counts["ferry_parts"]:
        raise SystemExit("the long thread has no parts")
    if started != [("killed-c1",)]:
        raise SystemExit(f"the killed call's start is not recorded: {started}")
    return {**counts, "ferry_started_calls": len(started)}


def _code_table() -> list[str]:
    """The release's frozen code table (`NAMES`), wherever its storage package keeps it."""
    import importlib

    for module in ("graph.storage.sqlite.layout", "graph.storage.layout"):
        try:
            return list(importlib.import_module(module).NAMES)
        except ModuleNotFoundError:
            continue
    raise SystemExit("the release's code table (NAMES) was not found")


def write(release: Path, out: Path) -> None:
    """Write `ferry-<commit>.db` and its manifest under `out`."""
    commit = subprocess.run(
        ["git", "-C", str(release), "rev-parse", "--short=7", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="ferry-golden-"))
    _clean_environment(work)
    db = work / "ferry.db"
    write_threads(db)
    kill_mid_tool(db, release)
    first = read(db, release)
    settle(db)
    again = read(db, release)  # after the release's own reads, and from the settled file
    settle(db)
    if first != again:
        raise SystemExit("the release reads the file differently the second time")
    rows = check_contents(db)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"ferry-{commit}.db"
    target.write_bytes(db.read_bytes())
    manifest = {
        "release": commit,
        "file": target.name,
        "sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
        "bytes": target.stat().st_size,
        "rows": rows,
        "code_table": _code_table(),
        **again,
    }
    text = json.dumps(manifest, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    (out / f"ferry-{commit}.json").write_text(text, encoding="utf-8")
    shutil.rmtree(work)
    print(f"{target} ({manifest['bytes']} bytes), {target.with_suffix('.json')}")  # noqa: T201


def main() -> None:
    """Parse the command line; `write` by default (the other commands are its child processes)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", type=Path, default=Path.cwd(), help="the release checkout")
    parser.add_argument("--out", type=Path, default=HERE / "files")
    parser.add_argument(
        "command", nargs="?", default="write", choices=["write", "killed-turn", "read"]
    )
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args()
    release = args.release.resolve()
    _import_release(release)
    if args.command == "killed-turn":
        killed_turn(*args.paths)
    elif args.command == "read":
        print(json.dumps(read_here(args.paths[0], release), ensure_ascii=False))  # noqa: T201
    else:
        write(release, args.out.resolve())


if __name__ == "__main__":
    main()
