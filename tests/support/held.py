"""Loopback servers that hold one request until the test releases it.

A held request lets a test kill or interrupt `ferry` at a known point, not after a guessed delay.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tests.support.servers.base import Reply, Request
from tests.support.servers.openmeteo import OpenMeteoServer

HOLD_LIMIT_S = 30.0  # a held request gives up after this, so a failing test cannot hang


class HeldForecastServer(OpenMeteoServer):
    """Open-Meteo whose first forecast request waits until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.forecast_arrived = threading.Event()
        self.release = threading.Event()
        self.forecast_answered = threading.Event()  # the held request's hold is over
        self._held = False

    def handle(self, request: Request) -> Reply:
        if request.path == "/v1/forecast":
            with self._lock:
                hold, self._held = not self._held, True
            if hold:
                self.forecast_arrived.set()
                self.release.wait(HOLD_LIMIT_S)
                self.forecast_answered.set()
        return super().handle(request)

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        super().__exit__(*exc)


def held_step(
    arrived: threading.Event,
    release: threading.Event,
    step: Any,
    answered: threading.Event | None = None,
) -> Callable[..., Any]:
    """A model-server script step that waits for `release` before replying with `step`.

    `answered`, if given, is set when the hold is over.
    """

    def play(_body: dict[str, Any]) -> Any:
        arrived.set()
        release.wait(HOLD_LIMIT_S)
        if answered is not None:
            answered.set()
        return step

    return play
