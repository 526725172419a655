"""How a turn fails as a client sees it, whichever runner ran it: each error says it in words.

`graph/cli/errors.py` classifies these once for every runner: a `ServerUnreachable` is a
`connection_error`, a `RunFailed` a `run_error`; their message is the one line shown.
"""

from __future__ import annotations


class ServerUnreachable(ConnectionError):
    """The server a turn runs on does not answer; the message names it and what to do next."""


class RunFailed(RuntimeError):
    """The turn ended without an answer (failed, cancelled, refused); the message says why."""
