"""What the model emulators share: a script of replies, one per valid request, and its record.

A server made during a test is tracked like a `ScriptedModel`: the test fails unless the server
played every step it was given and got no request past them (see tests/support/scripted.py).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.script_check import created_at, track, unplayed_message
from tests.support.servers.base import LoopbackServer, Reply


@dataclass
class Rejection:
    """A request answered with a 4xx: its body (parsed if it was JSON) and the error object."""

    body: Any
    error: dict[str, Any]


class ScriptedServer(LoopbackServer):
    """Plays queued steps in order; records rejected requests and requests past the script."""

    def __init__(self) -> None:
        super().__init__()
        self.rejections: list[Rejection] = []
        self.unexpected: list[Any] = []  # bodies of requests that came after the script ended
        self._steps: deque[Any] = deque()
        self._scripted = 0
        self._answered = 0
        self._script_lock = threading.Lock()
        self.created_at = created_at()
        track(self)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        # A pooled keep-alive connection outlives the event loop of an `asyncio.run` test and
        # breaks the next one ("Event loop is closed"); streamed replies already close.
        if reply.chunks is None:
            reply = replace(reply, headers={**reply.headers, "Connection": "close"})
        LoopbackServer._send(handler, reply)

    def script(self, steps: list[Any]) -> None:
        """Queue steps to play, one per valid request, after any already queued."""
        with self._script_lock:
            self._steps.extend(steps)
            self._scripted += len(steps)

    def start_over(self, where: str) -> None:
        """Forget the script and every request, and be checked at the end of the running test.

        For a server a module's tests share (made outside any test, so tracked by none);
        `where` names it in the check's message.
        """
        with self._lock:
            self.requests.clear()
            self._faults.clear()
        with self._script_lock:
            self.rejections.clear()
            self.unexpected.clear()
            self._steps.clear()
            self._scripted = self._answered = 0
        self.created_at = where
        track(self)

    def assert_complete(self) -> None:
        """Fail unless every step was played and no request came after the script ended."""
        name = type(self).__name__
        if self._steps:
            raise AssertionError(f"{name}: {unplayed_message(self._steps, self._scripted)}")
        if self.unexpected:
            raise AssertionError(
                f"{name}: {len(self.unexpected)} unexpected model call(s), "
                f"past the {self._scripted} steps scripted"
            )

    def reject(self, body: Any, error: dict[str, Any]) -> None:
        """Record a request the real API would refuse."""
        with self._script_lock:
            self.rejections.append(Rejection(body, error))

    def next_step(self, body: Any) -> tuple[Any, int]:
        """The step for this request (callables resolved) and its number; None past the end."""
        with self._script_lock:
            step = self._steps.popleft() if self._steps else None
            self._answered += 1
            number = self._answered
            if step is None:
                self.unexpected.append(body)
        while callable(step):
            step = step(body)
        return step, number

    def past_the_script(self) -> str:
        """The error text for a request that came after every step was played."""
        return f"unexpected model call: all {self._scripted} scripted steps were played"
