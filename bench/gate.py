"""The CPU cost of Ferry's one gate and its keyed releases, measured inside Ferry's own turns.

Every run's input passes `admit_run` (graph/provenance.py); every call `check` releases
gets an HMAC mark (`release`) that the tool node verifies (`unreleased`). Before the gate,
Ferry did none of this, so their time is what the gate added: the growth phase reports it per
model call beside the framework's whole CPU time per call, at the first and the last turns.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any


class GateClock:
    """CPU time spent in the gate and the releases, process-wide (tools run in helper threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cpu_s = 0.0
        self._installed = False

    def install(self) -> None:
        """Time `admit_run`, `release` and `unreleased` wherever Ferry calls them."""
        if self._installed:
            return
        import graph.builder
        from graph.policy import releases

        graph.builder.admit_run = self._timed(graph.builder.admit_run)  # type: ignore[assignment]
        releases.release = self._timed(releases.release)  # type: ignore[assignment]
        releases.unreleased = self._timed(releases.unreleased)  # type: ignore[assignment]
        self._installed = True

    def snapshot(self) -> float:
        with self._lock:
            return self.cpu_s

    def _timed(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.thread_time() - started
                with self._lock:
                    self.cpu_s += spent

        return timed


GATE = GateClock()
