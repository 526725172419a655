"""The error a database that cannot be opened or read raises: a leaf, so every part can raise it."""

from __future__ import annotations

from graph.core.settings import ConfigError


class DatabaseError(ConfigError):
    """The database cannot be opened or read; the message names it and the setting."""
