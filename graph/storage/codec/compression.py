"""Compressing stored values, and decompressing them within a cap (`graph.storage.codec.serde`).

Stored data is never trusted, so no value is decompressed beyond the read cap
(`FERRY_MAX_STORED_VALUE_MB`): a zstd frame that declares its size within the cap is
decompressed in one call into a buffer of exactly that size (zstd refuses a frame that runs
past its declared size); any other frame, and zlib, is read in chunks and refused once past it.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable

import zstandard

from graph.storage.codec.dictionary import dictionary
from graph.storage.codec.reads import StoredValueError

MESSAGES_DICTIONARY = "+zd1"  # zstd with Ferry's dictionary 1 (graph/storage/codec/dictionary.py)
VALUES_DICTIONARY = "+zd2"  # zstd with Ferry's dictionary 2: checkpoints and the rest
ZSTD = "+zstd"  # zstd alone, written by earlier versions; still read
ZLIB = "+zlib"  # likewise
_LEVEL = 3  # zstd's default: most of the gain, a few microseconds a value
_CHUNK = 2**20  # a decompression bomb is stopped within one chunk past the cap


class _Codecs(threading.local):
    """zstd contexts are not thread-safe, and making one per value costs more than the work."""

    compressors: dict[str, zstandard.ZstdCompressor]
    decompressors: dict[str, zstandard.ZstdDecompressor]

    def __init__(self) -> None:
        one, two = dictionary("ferry-1.zdict"), dictionary("ferry-2.zdict")
        self.compressors = {
            MESSAGES_DICTIONARY: zstandard.ZstdCompressor(level=_LEVEL, dict_data=one),
            # The type tag names the dictionary: its id need not be in every frame (4 bytes).
            VALUES_DICTIONARY: zstandard.ZstdCompressor(
                level=_LEVEL, dict_data=two, write_dict_id=False
            ),
        }
        self.decompressors = {
            MESSAGES_DICTIONARY: zstandard.ZstdDecompressor(dict_data=one),
            VALUES_DICTIONARY: zstandard.ZstdDecompressor(dict_data=two),
        }


_codecs: _Codecs = _Codecs()


def compress(data: bytes, suffix: str = MESSAGES_DICTIONARY) -> bytes:
    """`data` compressed with the dictionary `suffix` names (the frame records its size)."""
    return _codecs.compressors[suffix].compress(data)


def _zstd(decompressor: Callable[[], zstandard.ZstdDecompressor]) -> Decompress:
    def decompress(payload: bytes, cap: int) -> bytes:
        try:
            declared = zstandard.frame_content_size(payload)
        except zstandard.ZstdError:
            declared = -1  # not a frame: the stream reader says why
        if 0 <= declared <= cap:
            try:
                return decompressor().decompress(payload, max_output_size=declared)
            except zstandard.ZstdError as exc:
                raise StoredValueError(f"a stored value does not decompress: {exc}") from exc
        with decompressor().stream_reader(payload) as reader:
            return _bounded(reader.read, cap)

    return decompress


def _zlib(payload: bytes, cap: int) -> bytes:
    stream, pending = zlib.decompressobj(), payload

    def read(size: int) -> bytes:
        nonlocal pending
        data = stream.decompress(pending, size)  # stops at `size`, keeping the rest of the input
        pending = stream.unconsumed_tail
        return data

    return _bounded(read, cap)


def _bounded(read: Callable[[int], bytes], cap: int) -> bytes:
    """Read a decompressing stream to its end, refusing it once it passes `cap` bytes.

    Chunks are kept apart until the end, so a refused bomb costs the cap, not twice that.
    """
    chunks, size = [], 0
    while chunk := read(_CHUNK):
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            raise _too_big(cap)
    return b"".join(chunks)


def _too_big(cap: int) -> StoredValueError:
    return StoredValueError(
        f"a stored value decompresses to more than {cap // 2**20} MB "
        "(FERRY_MAX_STORED_VALUE_MB): refused"
    )


Decompress = Callable[[bytes, int], bytes]
DECOMPRESSORS: dict[str, Decompress] = {
    MESSAGES_DICTIONARY: _zstd(lambda: _codecs.decompressors[MESSAGES_DICTIONARY]),
    VALUES_DICTIONARY: _zstd(lambda: _codecs.decompressors[VALUES_DICTIONARY]),
    ZSTD: _zstd(zstandard.ZstdDecompressor),
    ZLIB: _zlib,
}
"""Each compression suffix of a type tag, and how to undo it within a cap."""
