"""What a version of Ferry reads back from a database file, as JSON, through public entry points.

A thread's state (its values, `next`, tasks and interrupts, checkpoint and metadata), a digest
of every checkpoint in its history, and what `ferry threads --json` and `ferry history --json`
print. `make_files.py` records it with a release's code in the golden files' manifest; the
golden-file test computes it again with today's code and compares. Imports nothing from
graph/: the caller passes a compiled graph, and the CLI runs as the `ferry` command.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.types import StateSnapshot

MESSAGE_FIELDS = (
    "type",
    "id",
    "name",
    "content",
    "tool_calls",
    "invalid_tool_calls",
    "tool_call_id",
    "status",
    "artifact",
    "usage_metadata",
    "additional_kwargs",
    "response_metadata",
)
"""The fields compared; a field a later LangChain adds (with its default) is not stored anyway."""


def plain(value: Any) -> Any:
    """`value` as JSON would carry it (tuples as lists, keys as text)."""
    return json.loads(json.dumps(value, default=_unknown, ensure_ascii=False))


def _unknown(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value)
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} in a stored value: add it to readback.plain")


def message(m: BaseMessage) -> dict[str, Any]:
    """One message's stored fields."""
    return plain({name: getattr(m, name) for name in MESSAGE_FIELDS if hasattr(m, name)})


def values(snapshot: StateSnapshot) -> dict[str, Any]:
    """A snapshot's channel values, messages field by field."""
    stored = dict(snapshot.values) if isinstance(snapshot.values, Mapping) else {}
    messages = [message(m) for m in stored.pop("messages", [])]
    return {"messages": messages, **plain(stored)}


def _checkpoint_id(config: Any) -> str | None:
    return (config or {}).get("configurable", {}).get("checkpoint_id")


def state(snapshot: StateSnapshot) -> dict[str, Any]:
    """A thread's newest snapshot: its values and where the run stands."""
    return {
        "values": values(snapshot),
        "next": list(snapshot.next),
        "tasks": [
            {
                "id": task.id,
                "name": task.name,
                "interrupts": [{"id": i.id, "value": plain(i.value)} for i in task.interrupts],
            }
            for task in snapshot.tasks
        ],
        "interrupts": [{"id": i.id, "value": plain(i.value)} for i in snapshot.interrupts],
        "checkpoint_id": _checkpoint_id(snapshot.config),
        "parent_checkpoint_id": _checkpoint_id(snapshot.parent_config),
        "created_at": snapshot.created_at,
        "metadata": plain(snapshot.metadata),
    }


def digest(value: Any) -> str:
    """A short digest of a JSON value, keys sorted."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def history(snapshots: Sequence[StateSnapshot]) -> list[dict[str, Any]]:
    """Every checkpoint, newest first: its ids, step, `next`, and a digest of its values."""
    return [
        {
            "checkpoint_id": _checkpoint_id(s.config),
            "parent_checkpoint_id": _checkpoint_id(s.parent_config),
            "step": (s.metadata or {}).get("step"),
            "source": (s.metadata or {}).get("source"),
            "next": list(s.next),
            "messages": len((s.values or {}).get("messages", [])),
            "values_digest": digest(values(s)),
        }
        for s in snapshots
    ]


def thread(graph: Any, thread_id: str) -> dict[str, Any]:
    """What `graph` reads of one thread: its state and its whole history."""
    config = {"configurable": {"thread_id": thread_id}}
    return {
        "state": state(graph.get_state(config)),
        "history": history(list(graph.get_state_history(config))),
    }


def _ferry_env(db: Path, pythonpath: str | None) -> dict[str, str]:
    """A clean environment for `ferry` on `db`: no settings or keys but the file's."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FERRY_", "OPENAI_", "ANTHROPIC_", "TAVILY_", "LANGSMITH_"))
    }
    env |= {"FERRY_DB": str(db), "XDG_CONFIG_HOME": str(db.parent / ".config")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def listing(db: Path, thread_ids: Sequence[str], pythonpath: str | None = None) -> dict[str, Any]:
    """What the CLI shows of the file: `ferry threads --json`, `ferry history --json` of each.

    The commands run as the `ferry` console script, at once (each only reads); `pythonpath`
    puts a checkout first (a release's, or the one under test), so they run its code.
    """
    ferry = str(Path(sys.executable).with_name("ferry"))
    commands = [["threads"], *(["history", "--thread", t] for t in thread_ids)]
    env = _ferry_env(db, pythonpath)
    running = [
        subprocess.Popen(
            [ferry, *args, "--json"],
            env=env,
            cwd=db.parent,
            text=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        for args in commands
    ]
    shown = []
    for args, process in zip(commands, running, strict=True):
        out, err = process.communicate(timeout=120)
        if process.returncode != 0:
            raise AssertionError(f"ferry {' '.join(args)} failed ({process.returncode}): {err}")
        shown.append(json.loads(out))
    return {
        "ferry_threads": shown[0],
        "ferry_history": dict(zip(thread_ids, shown[1:], strict=True)),
    }
