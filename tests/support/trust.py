"""Trust a folder's `.env` and `mcp.json` the way `ferry trust` does, in the test's own store.

The autouse `_isolated_env` fixture points `XDG_CONFIG_HOME` at the test's folder, so the
records go there and never to the real user's config.
"""

from __future__ import annotations

from pathlib import Path


def trust_folder(folder: Path) -> None:
    """Record `folder`'s `.env` and `mcp.json`, as they are now, as trusted."""
    from tools.trust import trust  # imported here: the attack tests also run on older code

    trust(folder)
