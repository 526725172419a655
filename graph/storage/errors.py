"""The errors storage raises for a person to act on: leaves, so every part can raise them.

Imported where one is raised: `ConfigError` comes with the settings, which opening and reading
a file need not load.
"""

from __future__ import annotations

from graph.core.settings import ConfigError


class DatabaseError(ConfigError):
    """The database cannot be opened or read; the message names it and the setting."""


class LayoutVersionError(DatabaseError):
    """A file this Ferry cannot bring to its layout: made by a newer one, or kept busy."""


class NotSupportedByDatabase(Exception):
    """The database's back end cannot do what was asked; the message says what to use instead."""
