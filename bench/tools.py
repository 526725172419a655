"""The benchmark's tools, given unchanged to Ferry and to the reference."""

from __future__ import annotations

import hashlib
import time

from langchain_core.tools import tool

from bench.model import timed

BLOB_CHARS = 2048


def blob(n: int) -> str:
    """2 KB of deterministic, incompressible-looking text for `n` (hex words of a hash chain)."""
    words: list[str] = []
    digest = hashlib.sha256(str(n).encode()).digest()
    size = 0
    while size < BLOB_CHARS:
        digest = hashlib.sha256(digest).digest()
        word = digest.hex()[:15]
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:BLOB_CHARS]


@tool
@timed
def fetch_blob(n: int) -> str:
    """Fetch record number n (about 2 KB of text)."""
    return blob(n)


@tool
@timed
def sleep_one(n: int) -> str:
    """Wait one second, then report n."""
    time.sleep(1.0)
    return f"slept ({n})"
