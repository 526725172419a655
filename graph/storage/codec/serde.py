"""How Ferry stores values: message lists in a compact form, compressed, optionally encrypted.

A stored value's type tag says how it was made, suffix by suffix (graph/storage/FORMAT.md),
and this module reads top to bottom in that order: the serializer, then the compact message
form, then compression (encryption is LangGraph's cipher).

A thread's history is stored as the messages each step wrote (see `graph.state`), and a process
that has not seen the thread yet — `ferry history`, a restarted server — decodes many of them.
LangGraph's serializer stores each message with all its fields and rebuilds it through pydantic
validation; a message list written here stores only the fields that differ from their defaults
and is rebuilt without re-validating what was validated when it was made. Anything else (and
any message list holding a value msgpack cannot carry exactly) takes LangGraph's path. Values of
32 bytes or more are compressed with Ferry's zstd dictionary
(`graph.storage.codec.dictionary`), and with `FERRY_ENCRYPTION_KEY` set every value is encrypted
with AES (LangGraph's cipher). Stored data is never trusted: what it may name is
`graph.storage.codec.allowlist`'s table; no value is decompressed beyond the read cap
(`FERRY_MAX_STORED_VALUE_MB`), and no read's values take more memory than its budget
(`graph.storage.codec.reads`).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

import ormsgpack
import zstandard
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from graph.storage.codec import reads
from graph.storage.codec.allowlist import Unpacker, UnstorableValueError, load_json
from graph.storage.codec.dictionary import dictionary
from graph.storage.codec.reads import (
    PER_JSON_BYTE,
    PER_MESSAGE,
    StoredValueError,
    msgpack_footprint,
)
from graph.storage.codec.stored_types import MESSAGE_CLASSES, allowing

if TYPE_CHECKING:
    from graph.core.settings import Settings

__all__ = [
    "MESSAGES",
    "FerrySerializer",
    "StoredValueError",
    "UnstorableValueError",
    "collection_paused",
    "serializer",
]

MESSAGES = "ferry-msgs"
"""Type tag of a message list in the compact form (stored on every row: kept short)."""
_AES = "+aes"  # LangGraph's AES cipher (EAX), outermost
_WORTH_TRYING = 32  # bytes; with the dictionary even a short reply shrinks by half
MAX_VALUE_BYTES = 32 * 2**20
"""What one stored value may decompress to (`FERRY_MAX_STORED_VALUE_MB`).

Ferry's largest values are whole histories (a pruned thread's oldest checkpoint, a part after
an edit, Postgres's stored copy), a few MB for a thousand turns; a value that would
decompress beyond the cap is stored uncompressed, so nothing Ferry writes is ever refused.
"""
READ_FLOOR_VALUES = 2
"""What any read may take in memory, in values at the cap (`graph.storage.codec.reads`): 64 MB by
default, beyond which it may take `reads.RATIO` times what it found stored."""


class FerrySerializer(SerializerProtocol):
    """Stores values compactly, compressed, optionally encrypted; loads only what Ferry stores.

    A stored value's type tag says how it was written, suffix by suffix: the form
    (`ferry-msgs`, or LangGraph's `msgpack`, `json`, …), then its compression (`+zd1`, or
    `+zstd` / `+zlib` from earlier versions), then `+aes` when encrypted. Every tag written so
    far still loads. Loading never imports or calls anything outside
    `graph.storage.codec.allowlist`,
    never decompresses a value beyond `max_value_bytes`, never lets one read's values take more
    memory than its budget (`graph.storage.codec.reads`), and refuses anything else with a
    `StoredValueError`. A value naming a type loading would refuse is refused when it is
    written (`UnstorableValueError`, naming the type and `allowed_types`), so it is never stored.
    """

    def __init__(
        self,
        *,
        max_value_bytes: int = MAX_VALUE_BYTES,
        cipher: CipherProtocol | None = None,
        allowed_types: Iterable[type] = (),
    ) -> None:
        self.max_value_bytes = max_value_bytes
        self.cipher = cipher
        self._allowed = allowing(allowed_types)
        self._unpacker = Unpacker(self._allowed)
        self._langgraph = JsonPlusSerializer()  # its encoder only: loading is done here

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Serialise `obj`: compact if it is a message list, compressed if that pays, encrypted.

        Raises `UnstorableValueError` if `obj` holds a type `loads_typed` would refuse.
        """
        if isinstance(obj, BaseException):
            # LangGraph stores a failed step's error; a provider's error may quote the API key.
            from graph.core.log import redact

            obj = redact(repr(obj))
        compact = compact_form(obj)
        type_tag, data = (MESSAGES, compact) if compact else self._langgraph.dumps_typed(obj)
        if type_tag == "msgpack":  # the compact form names only the message classes
            self._unpacker.check(data)
        # A value too big to decompress under the cap stays uncompressed, so it always loads.
        if _WORTH_TRYING <= len(data) <= self.max_value_bytes:
            suffix = MESSAGES_DICTIONARY if compact else VALUES_DICTIONARY
            packed = compress(data, suffix)
            if len(packed) <= len(data) * 0.9:
                type_tag, data = type_tag + suffix, packed
        if self.cipher:
            cipher_name, data = self.cipher.encrypt(data)
            type_tag = f"{type_tag}+{cipher_name}"
        return type_tag, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Load a value written by `dumps_typed`, LangGraph's serializer or an earlier Ferry."""
        type_tag, payload = data
        if not isinstance(type_tag, str) or not isinstance(payload, bytes | bytearray | memoryview):
            raise StoredValueError("a stored value is not a type tag and bytes")
        with reads.one_read():  # outside any read, a value is a read of its own
            reads.found(len(payload))
            return self._loads(type_tag, bytes(payload))

    def _loads(self, type_tag: str, payload: bytes) -> Any:
        if type_tag.endswith(_AES):
            type_tag, payload = type_tag.removesuffix(_AES), self._decrypt(payload)
        for suffix, decompress in DECOMPRESSORS.items():
            if type_tag.endswith(suffix):
                type_tag = type_tag.removesuffix(suffix)
                payload = decompress(payload, self.max_value_bytes)
                break
        if type_tag == MESSAGES:
            self.charge(msgpack_footprint(payload, reads.left(self.read_floor)))
            pausing = gc.isenabled()  # a plain check: this runs for every stored message row
            if pausing:
                gc.disable()
            try:
                entries = self._unpacker.unpack(payload)
                self.charge(PER_MESSAGE * len(entries) if isinstance(entries, list) else 0)
                return [rebuilt_message(name, fields) for name, fields in entries]
            finally:
                if pausing:
                    gc.enable()
        if type_tag == "msgpack":
            self.charge(msgpack_footprint(payload, reads.left(self.read_floor)))
            return self._unpacker.unpack(payload, ormsgpack.OPT_NON_STR_KEYS)
        if type_tag == "json":
            self.charge(PER_JSON_BYTE * len(payload))
            return load_json(payload, self._allowed)
        if type_tag in _PLAIN:
            self.charge(len(payload))
            return _PLAIN[type_tag](payload)
        raise StoredValueError(f"refused to load a stored value of type {type_tag[:40]!r}")

    @property
    def read_floor(self) -> int:
        """What any read may take in memory, whatever it found stored (`READ_FLOOR_VALUES`)."""
        return READ_FLOOR_VALUES * self.max_value_bytes

    def charge(self, cost: int) -> None:
        """Count `cost` bytes against the read in progress; refuse the read once past its budget.

        Charged before a value is unpacked, so a refused read never holds what it refused.
        """
        if (budget := reads.spend(cost, self.read_floor)) is not None:
            raise StoredValueError(
                f"a read's stored values would take more than {budget // 2**20} MB in memory "
                f"once loaded ({reads.RATIO} times their stored size, or {READ_FLOOR_VALUES} × "
                "FERRY_MAX_STORED_VALUE_MB if more): refused as a likely decompression bomb; "
                "raise FERRY_MAX_STORED_VALUE_MB to read it"
            )

    def _decrypt(self, payload: bytes) -> bytes:
        if self.cipher is None:
            raise StoredValueError("stored values are encrypted: set FERRY_ENCRYPTION_KEY")
        try:
            return self.cipher.decrypt(_AES[1:], payload)
        except (ValueError, KeyError) as exc:  # pycryptodome: "MAC check failed"
            raise StoredValueError(
                "cannot decrypt a stored value: FERRY_ENCRYPTION_KEY is not the key it was "
                "written with"
            ) from exc


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Pause Python's cycle collector while messages are rebuilt (`loads_typed` does too).

    A cold read rebuilds thousands of messages, each a few dicts and lists: the collector would
    run dozens of times over everything the process holds (after LangChain's imports, a lot),
    for objects that form no cycles. That was 100 of the 165 ms of a cold read of 1000 turns.
    Reference counting still frees everything; the collector resumes afterwards. Left alone
    if it is already paused (by another thread's read, or by the application).
    """
    if not gc.isenabled():  # paused by another thread's read, or by the application
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


_PLAIN: dict[str, Callable[[bytes], Any]] = {
    "null": lambda _: None,
    "bytes": bytes,
    "bytearray": bytearray,
}


def serializer(settings: Settings | None = None) -> FerrySerializer:
    """The serializer the settings ask for (`FERRY_MAX_STORED_VALUE_MB`, `FERRY_ENCRYPTION_KEY`).

    The key is a secret, so it is read from the environment, never kept in `Settings`; a bad
    one is one line naming the setting.
    """
    from graph.core.settings import ConfigError, get_settings  # only a saver made without one

    settings = settings or get_settings()
    cipher = None
    if key_text := os.environ.get("FERRY_ENCRYPTION_KEY"):
        key = key_text.encode()
        if len(key) not in (16, 24, 32):
            raise ConfigError("FERRY_ENCRYPTION_KEY must be 16, 24 or 32 bytes (AES-128/192/256)")
        try:
            cipher = EncryptedSerializer.from_pycryptodome_aes(key=key).cipher
        except ImportError as exc:
            raise ConfigError(
                "FERRY_ENCRYPTION_KEY needs pycryptodome: pip install 'ferry-agent[encryption]'"
            ) from exc
    return FerrySerializer(max_value_bytes=settings.max_stored_value_mb * 2**20, cipher=cipher)


# -- the compact message form (`ferry-msgs`) ---------------------------------------------------
# Only the fields that differ from the class's defaults; rebuilt without re-validating what
# pydantic validated when the message was made.

_CLASSES: dict[str, type[BaseMessage]] = {cls.__name__: cls for cls in MESSAGE_CLASSES}
# Only values msgpack round-trips exactly: a tuple, datetime, UUID, enum, dataclass, subclass of
# a builtin or huge int makes the encoder raise, and the list takes LangGraph's path instead.
_EXACT_ONLY = (
    ormsgpack.OPT_PASSTHROUGH_BIG_INT
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_TUPLE
    | ormsgpack.OPT_PASSTHROUGH_UUID
)


def compact_form(obj: Any) -> bytes | None:
    """`obj` in the compact form, or None if it is not a list of plain LangChain messages."""
    if type(obj) is not list or not obj:
        return None
    entries = []
    for message in obj:
        name = type(message).__name__
        if _CLASSES.get(name) is not type(message) or message.__pydantic_extra__:
            return None
        fields = {}
        for field, default in _defaults(name)[0].items():
            value = getattr(message, field)
            if type(value) is not type(default) or value != default:
                fields[field] = value
        entries.append([name, fields])
    try:
        return ormsgpack.packb(entries, option=_EXACT_ONLY)
    except TypeError:  # a value msgpack cannot carry exactly
        return None


def rebuilt_message(name: str, stored: dict[str, Any]) -> BaseMessage:
    """Rebuild a message stored in the compact form, the way pickle rebuilds a pydantic model.

    It was validated when it was made and every field is either stored or its default, so
    validating it again (most of a cold read's cost) would only recompute what is stored.
    """
    cls = _CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise StoredValueError(f"refused to load a stored message of class {str(name)[:80]!r}")
    defaults, fresh = _defaults(name)
    if not stored.keys() <= defaults.keys():  # stored by a version with other fields
        return cls.model_validate(stored)
    values = {**defaults, **stored}  # in field order, as validation would leave them
    for field, empty in fresh:
        if field not in stored:
            values[field] = empty()  # a message's own dict or list, never a shared one
    message = cls.__new__(cls)
    message.__setstate__(
        {
            "__dict__": values,
            "__pydantic_fields_set__": set(defaults),  # all, as LangGraph's own path leaves it
            "__pydantic_extra__": {},
            "__pydantic_private__": None,
        }
    )
    return message


@functools.cache
def _defaults(name: str) -> tuple[dict[str, Any], list[tuple[str, Callable[[], Any]]]]:
    """A message class's fields with their defaults, and those made fresh for each message.

    A field without a default (`content`, `tool_call_id`) maps to PydanticUndefined, which no
    value equals, so it is always stored.
    """
    defaults: dict[str, Any] = {}
    fresh: list[tuple[str, Callable[[], Any]]] = []
    for field, info in _CLASSES[name].model_fields.items():
        if info.default_factory is not None:
            factory = cast(Callable[[], Any], info.default_factory)
            defaults[field] = factory()
            fresh.append((field, factory))
        else:
            defaults[field] = info.default
    return defaults, fresh


# -- compression -------------------------------------------------------------------------------
# No value is decompressed beyond the read cap: a zstd frame that declares its size within
# the cap is decompressed in one call into a buffer of exactly that size (zstd refuses a frame
# that runs past its declared size); any other frame, and zlib, is read in chunks and refused
# once past it.

MESSAGES_DICTIONARY = "+zd1"  # zstd with Ferry's dictionary 1 (`graph.storage.codec.dictionary`)
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
