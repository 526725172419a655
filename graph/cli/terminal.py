"""Text for the terminal: `graph.controls`, where Ferry's logs find it too."""

from __future__ import annotations

from graph.controls import printable, printable_json

__all__ = ["printable", "printable_json"]
