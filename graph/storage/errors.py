"""The errors storage raises for a person to act on: leaves, so every part can raise them."""

from __future__ import annotations

from graph.core.settings import ConfigError


class DatabaseError(ConfigError):
    """The database cannot be opened or read; the message names it and the setting."""


class NotSupportedByDatabase(Exception):
    """The database's back end cannot do what was asked; the message says what to use instead."""
