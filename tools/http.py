"""The one retry policy for transient HTTP failures, and a JSON GET built on it."""

from __future__ import annotations

import email.utils
import logging
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import httpx
from httpx import Response
from langchain_core.tools import ToolException
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential_jitter,
)

MAX_ATTEMPTS = 4
# Jitter spreads the retries of parallel tool calls so they do not hit a struggling service at once.
_BACKOFF = wait_exponential_jitter(multiplier=0.5, max=8, jitter=0.5)
logger = logging.getLogger("ferry.tools")
T = TypeVar("T")
_ADVICE = {
    "connect": "Cannot connect to {service} ({reason}) {after}; it may be down or unreachable.",
    "timeout": "{service} timed out ({reason}) {after}; it may be overloaded, try again later.",
    "rate_limited": "{service} is rate limiting requests ({reason}) {after}.{asked} Wait a minute.",
    "server_error": "{service} had a service error ({reason}) {after}; try again later.{asked}",
}


class TransientError(Exception):
    """A failure worth retrying: no connection, a timeout, HTTP 429 or a 5xx."""

    def __init__(
        self,
        kind: Literal["connect", "timeout", "rate_limited", "server_error"],
        reason: str,
        *,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(reason)
        self.kind, self.reason, self.retry_after_s = kind, reason, retry_after_s


class RetriesExhausted(Exception):
    """A transient failure outlasted the retry policy (its attempts or its time budget)."""

    def __init__(self, last: BaseException, attempts: int, *, out_of_time: bool) -> None:
        super().__init__(f"{type(last).__name__} after {attempts} attempt(s)")
        self.last, self.attempts, self.out_of_time = last, attempts, out_of_time


def parse_retry_after(value: str | None) -> float | None:
    """Return the wait, in seconds, that a `Retry-After` header (delay or HTTP-date) asks for."""
    try:
        return max(0.0, float(value or ""))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value or "")
    except (TypeError, ValueError):
        return None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def retrying(
    call: Callable[[], T],
    *,
    service: str,
    total_s: float,
    is_transient: Callable[[BaseException], bool] = lambda e: isinstance(e, TransientError),
    retry_after: Callable[[BaseException], float | None] = lambda e: None,
    max_attempts: int = MAX_ATTEMPTS,
) -> T:
    """Run `call`, retrying transient failures after jittered backoff or the server's Retry-After.

    Stops after `max_attempts`, or as soon as the next wait would end more than `total_s` seconds
    after the first attempt began.

    Raises:
        RetriesExhausted: a transient failure was still happening when the policy stopped.
    """
    attempts = 0

    def counted() -> T:
        nonlocal attempts
        attempts += 1
        return call()

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, TransientError):
            asked = exc.retry_after_s
        else:
            asked = retry_after(exc) if exc is not None else None
        return _BACKOFF(state) if asked is None else asked

    policy = Retrying(
        stop=stop_after_attempt(max_attempts) | stop_before_delay(total_s),
        wait=wait,
        retry=retry_if_exception(is_transient),
        before_sleep=lambda state: _log_retry(service, state),
        reraise=True,
    )
    try:
        return policy(counted)
    except Exception as exc:
        if is_transient(exc):
            raise RetriesExhausted(exc, attempts, out_of_time=attempts < max_attempts) from exc
        raise


def _log_retry(service: str, state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    # Only our own reasons are logged: foreign exception texts may quote URLs or credentials.
    reason = exc.reason if isinstance(exc, TransientError) else type(exc).__name__
    event = {"event": "retry", "service": service, "attempt": state.attempt_number}
    event |= {"delay_s": round(state.upcoming_sleep, 3), "reason": reason}
    logger.warning(
        "%(service)s: %(reason)s; retry %(attempt)d in %(delay_s).2f s", event, extra=event
    )


def explain(service: str, exhausted: RetriesExhausted) -> str:
    """Say, for the model, why `service` gave no answer and what to do about it."""
    last, n = exhausted.last, exhausted.attempts
    after = f"after {n} attempt{'s' if n != 1 else ''}"
    if not isinstance(last, TransientError):
        return f"{service} kept failing ({type(last).__name__}) {after}; try again later."
    asked = ""
    if exhausted.out_of_time and last.retry_after_s:
        asked = f" It asked to wait {last.retry_after_s:g} s, longer than the retry budget allows."
    return _ADVICE[last.kind].format(service=service, reason=last.reason, after=after, asked=asked)


def get_json(
    url: str,
    params: dict[str, Any],
    *,
    service: str,
    timeout_s: float,
    retry_total_s: float,
) -> Any:
    """GET `url` with `params` and return the decoded JSON, retrying transient failures.

    Each request may take `timeout_s`; retrying stops once it would run past `retry_total_s`.

    Raises:
        ToolException: with an instructive message when the service gives no usable answer.
    """
    with httpx.Client(timeout=timeout_s) as client:
        try:
            response = retrying(
                lambda: _get(client, url, params, timeout_s),
                service=service,
                total_s=retry_total_s,
            )
        except RetriesExhausted as exhausted:
            raise ToolException(explain(service, exhausted)) from None
    status = response.status_code
    if not response.is_success:
        reason = _json_reason(response)
        raise ToolException(
            f"{service} rejected the request (HTTP {status}){': ' + reason if reason else ''}. "
            "Retrying the same request will fail again."
        )
    try:
        return response.json()
    except ValueError:
        raise ToolException(
            f"{service} sent a malformed reply (HTTP {status} but not JSON); try again later."
        ) from None


def _get(
    client: httpx.Client, url: str, params: dict[str, Any], timeout_s: float
) -> httpx.Response:
    try:
        response = client.get(url, params=params)
    except httpx.TimeoutException as exc:
        raise TransientError("timeout", f"no answer within {timeout_s:g} s") from exc
    except httpx.TransportError as exc:
        # The origin is enough to act on; the path and query may carry what logs must not.
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        if _name_not_resolved(exc):  # an offline machine: seconds of retries would not help
            raise ToolException(
                f"cannot reach {origin}: its name does not resolve here (no network or DNS). "
                "Retrying now will fail again; answer without it and say what is missing."
            ) from None
        raise TransientError("connect", f"{origin}: {exc or type(exc).__name__}") from exc
    if response.status_code == 429 or response.status_code >= 500:
        raise TransientError(
            "rate_limited" if response.status_code == 429 else "server_error",
            f"HTTP {response.status_code}",
            retry_after_s=parse_retry_after(response.headers.get("Retry-After")),
        )
    return response


def _name_not_resolved(exc: BaseException) -> bool:
    """Whether a connection failed because the host's name did not resolve (DNS)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, socket.gaierror):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _json_reason(response: Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("reason") or "").rstrip(". ") if isinstance(body, dict) else ""
