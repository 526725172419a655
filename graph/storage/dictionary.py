"""The zstd dictionary Ferry compresses stored values with, and how it was made.

Most stored values are small: a checkpoint's bookkeeping, one model reply, a task. zstd alone
barely shrinks a few hundred bytes, because its savings come from repeats it has already seen;
a dictionary of typical content gives it those repeats up front (a checkpoint shrinks to about
a third, against two thirds without it).

The dictionary is part of the storage format: a value compressed with it reads back only with
the same bytes. `ferry-1.zdict` is therefore frozen, and checked against its digest when loaded.
A better one would ship beside it under a new name and type tag; this one stays readable.

`python -m bench.dictionary PATH` writes a candidate built from a short offline run of the real
graph and typical provider replies (the way `ferry-1.zdict` was made).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import zstandard

NAME = "ferry-1.zdict"
DIGEST = "sha256:8bde66e9af72078e2f6f16076ff56b66f2b3591046129aacd96bb7fc860ce0cc"


class DictionaryError(RuntimeError):
    """The shipped dictionary is missing or not the one stored values were compressed with."""


@functools.cache
def dictionary() -> zstandard.ZstdCompressionDict:
    """The frozen dictionary, checked against its digest."""
    data = Path(__file__).with_name(NAME).read_bytes()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest != DIGEST:
        raise DictionaryError(f"{NAME} is {digest}, expected {DIGEST}: reinstall Ferry")
    return zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
