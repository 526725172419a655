"""Ferry's settings, where Python users import them from (they live in graph/core/settings.py)."""

from graph.core.settings import ConfigError, ModelPrice, Settings, get_settings

__all__ = ["ConfigError", "ModelPrice", "Settings", "get_settings"]
