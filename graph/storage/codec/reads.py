"""One read's ledger: what the values it loads take in memory, against what it found stored.

A read (a checkpoint from `get_tuple`, each one `list` yields, a thread's history) loads many
stored values, each within the per-value cap. The serializer notes each value's stored size
and charges what it may take once loaded (`graph.storage.codec.footprint`) before unpacking it; the
read is refused once it has taken more than a floor plus `RATIO` times what it found stored.
So a long honest thread is never refused for its length, and a bomb (a few stored bytes that
unpack into gigabytes) gets the floor.

The ledger is a context variable, so every thread and task has its own: a refused read costs
only itself, and a read made inside another (a history rebuild reads its checkpoint) is part
of it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

RATIO = 512
"""Bytes a read may take in memory per byte it found stored. Honest reads are estimated at
20 to 210: text takes about its size, but a message compresses (with Ferry's dictionary) to
a couple of dozen bytes and is rebuilt into 1.5 KB."""


class _Ledger:
    """What one read found stored, and what the values it loaded may take."""

    def __init__(self) -> None:
        self.stored = 0
        self.spent = 0


_open: contextvars.ContextVar[_Ledger | None] = contextvars.ContextVar("ferry_read", default=None)


@contextlib.contextmanager
def one_read() -> Iterator[None]:
    """Count the values loaded inside as one read (inside a read already open: as part of it).

    Keep a `yield` out of it: a generator's caller would share the ledger meanwhile.
    """
    if _open.get() is not None:
        yield
        return
    token = _open.set(_Ledger())
    try:
        yield
    finally:
        _open.reset(token)


def found(stored: int) -> None:
    """Note that the read in progress found `stored` bytes in storage."""
    if (ledger := _open.get()) is not None:
        ledger.stored += stored


def left(floor: int) -> int:
    """What the read in progress may still take: `floor`, plus its share of what it found."""
    ledger = _open.get()
    if ledger is None:
        return floor
    return floor + RATIO * ledger.stored - ledger.spent


def spend(cost: int, floor: int) -> int | None:
    """Charge `cost` bytes to the read in progress; past its budget, the budget (else None)."""
    ledger = _open.get()
    if ledger is None:
        return None if cost <= floor else floor
    ledger.spent += cost
    budget = floor + RATIO * ledger.stored
    return None if ledger.spent <= budget else budget
