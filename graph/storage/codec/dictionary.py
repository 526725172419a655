"""The zstd dictionary Ferry compresses stored values with, and how it was made.

Most stored values are small: a checkpoint's bookkeeping, one model reply, a task. zstd alone
barely shrinks a few hundred bytes, because its savings come from repeats it has already seen;
a dictionary of typical content gives it those repeats up front (a checkpoint shrinks to about
a third, against two thirds without it).

A dictionary is part of the storage format: a value compressed with it reads back only with the
same bytes. Each is therefore frozen, and checked against its digest when loaded; a better one
ships beside the others under a new name and type tag, and the old ones stay readable.

- `ferry-1.zdict` (`+zd1`): typical messages and provider replies, as raw content. Message
  lists are compressed with it.
- `ferry-2.zdict` (`+zd2`): trained by zstd on the checkpoints of an offline run of the real
  graph (`python -m bench.dictionary PATH`). Every other value (checkpoints, tasks) is
  compressed with it: a step's checkpoint shrinks to about a fifth (zd1: about a third).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import zstandard

DIGESTS = {
    "ferry-1.zdict": "sha256:8bde66e9af72078e2f6f16076ff56b66f2b3591046129aacd96bb7fc860ce0cc",
    "ferry-2.zdict": "sha256:00de9f59220c8f2b842f2026da61f0a7bc61f45566ba1712f0553de4562aa93c",
}
"""Each shipped dictionary, by file name, with the digest it is checked against."""


class DictionaryError(RuntimeError):
    """The shipped dictionary is missing or not the one stored values were compressed with."""


@functools.cache
def dictionary(name: str = "ferry-1.zdict") -> zstandard.ZstdCompressionDict:
    """A frozen dictionary, checked against its digest."""
    data = Path(__file__).with_name(name).read_bytes()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest != DIGESTS[name]:
        raise DictionaryError(f"{name} is {digest}, expected {DIGESTS[name]}: reinstall Ferry")
    if name == "ferry-1.zdict":  # typical values, concatenated
        return zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
    return zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_FULLDICT)
