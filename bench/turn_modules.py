"""Project modules one in-process turn touches: `python -m bench.turn_modules [--json]`.

Issue 29 counts the modules of Ferry (`graph.*`, `tools.*`) whose code runs during one turn: how
many a reader may have to open to follow it. The turn is `graph.invoke` of the offline model's
one-tool turn ("What is 150 * 3?": a model call, the calculator, a model call) on Ferry's own
SQLite saver (`FERRY_DB` in a temporary folder, the defaults otherwise), after a warm-up turn
on the same thread, so imports, first-use caches and the saver's set-up are not counted. A
module counts when one of its Python functions is called (`sys.setprofile`, in every thread:
LangGraph runs the nodes in its own); a module whose code only runs at import, or whose
constants alone are read, does not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

PROJECT = ("graph", "tools")
QUESTION = "What is 150 * 3?"


class Recorder:
    """A profile function noting the project modules whose functions are called, when on."""

    def __init__(self) -> None:
        self.on = False
        self.seen: set[str] = set()

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if self.on and event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.split(".", 1)[0] in PROJECT:
                self.seen.add(name)


def touched_by_one_turn() -> dict[str, Any]:
    """The project modules whose functions run during the second turn of a thread."""
    from graph import build_graph
    from graph.core.settings import get_settings
    from graph.state import fold_messages
    from graph.storage import open_saver

    # Installed before anything starts a thread, so a pool's threads made by the warm-up turn
    # and used again by the measured one carry it too; it records only during that turn.
    record = Recorder()
    threading.setprofile(record)
    sys.setprofile(record)
    try:
        with tempfile.TemporaryDirectory(prefix="ferry-turn-modules-") as folder:
            os.environ |= {"FERRY_DB": str(Path(folder) / "ferry.db"), "FERRY_MODEL": "offline"}
            os.environ["FERRY_FILES_ROOT"] = folder
            settings = get_settings()
            with open_saver(settings, fold=fold_messages) as saver:
                graph = build_graph(checkpointer=saver, settings=settings)
                config: Any = {"configurable": {"thread_id": "turn-modules"}}
                graph.invoke({"messages": [("user", QUESTION)]}, config)  # the warm-up turn
                record.on = True
                result = graph.invoke({"messages": [("user", QUESTION)]}, config)
                record.on = False
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type] # None unsets it
    seen = record.seen
    new = result["messages"][-4:]
    storage = sorted(m for m in seen if m.startswith("graph.storage"))
    return {
        "question": QUESTION,
        "stop_reason": result.get("stop_reason"),
        "turn": [type(m).__name__ for m in new],
        "modules": len(seen),
        "storage_modules": len(storage),
        "by_package": _by_package(seen),
        "touched": sorted(seen),
    }


def _by_package(modules: set[str]) -> dict[str, int]:
    """How many of `modules` are in each package (`graph.storage.sqlite`, `graph.cli`…)."""
    counts: dict[str, int] = {}
    for module in modules:
        parts = module.split(".")
        package = ".".join(parts[:3] if parts[:2] == ["graph", "storage"] else parts[:2])
        counts[package] = counts.get(package, 0) + 1
    return dict(sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.turn_modules", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    for key in [k for k in os.environ if k.startswith("FERRY_")]:
        del os.environ[key]  # Ferry's defaults, as `make bench` runs it
    figures = touched_by_one_turn()
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(
        f"one in-process turn ({figures['question']!r}: {', '.join(figures['turn'])}; "
        f"{figures['stop_reason']}) touched "
        f"{figures['modules']} project modules, {figures['storage_modules']} in graph.storage"
    )
    for package, count in figures["by_package"].items():
        print(f"  {count:3d}  {package}")
    for module in figures["touched"]:
        print(f"       {module}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
