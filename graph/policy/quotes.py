"""What of a private result a text quotes: the result's compact index, and the check behind it.

The result and every text checked against it are folded first (graph/policy/spellings.py), so case,
width, look-alike letters, accents, whitespace and invisible characters do not count. A text
quotes a result when, folded, forward or reversed, in any of its decoded `variants`, it shares

- `QUOTE_CHARS` (20) consecutive characters with the result: about four words of prose;
- `TOKEN_CHARS` (16) within one of the result's token-like words: 16 or more characters
  without whitespace, holding letters and digits, varied enough (`TOKEN_ENTROPY` bits a
  character) to be a key, a password, a code or an id rather than a word; 16 characters of a
  random key are about 80 bits, never shared by chance, and enough to find or finish the key;
- a whole line of the result of `LINE_CHARS` (10) to 19 characters, 6 of them letters or digits.

The index keeps no text, only 8-byte fingerprints (the hashes of 12-character windows of the
folded result) in a sorted array: one at every 8th position, so any 20 shared characters hold
one; one at every 5th within token-like words, so any 16 of a token hold one; one per short
line. A bitmap of 16 to 32 bits a fingerprint answers most look-ups without a search. That is
about 1.3 bytes per character of prose and at most 4 for a file of keys (a Python set of the
same hashes would take 8 to 25). A fingerprint found in a text is only a candidate: it is
checked against the result's own text, so a collision costs a check, never a finding. Checking
a text costs a hash and a bit test per character, and a search per candidate.
"""

from __future__ import annotations

import hashlib
import math
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from graph.policy.spellings import fold, unfolded, variants

QUOTE_CHARS = 20
"""Consecutive characters (folded: no whitespace) of a result that count as quoting it."""
TOKEN_CHARS = 16
"""Consecutive characters of one of a result's token-like words that count as quoting it."""
TOKEN_ENTROPY = 3.0
"""Bits a character a word needs to count as token-like ("aaaa1111aaaa1111" has 1)."""
LINE_CHARS = 10
"""A whole line counts from this length on (shorter lines are too common to mean anything)."""
MAX_INDEX_BYTES = 64 * 1024 * 1024
"""Indexes kept in memory between checks; one evicted is built again from its text."""
_KEY = 12
_STRIDE = QUOTE_CHARS - _KEY  # a 20-run holds 9 window starts: one is a multiple of 8
_TOKEN_STRIDE = TOKEN_CHARS - _KEY + 1  # a 16-run holds 5: one is a multiple of 5
Span = tuple[int, int]
"""A stretch of a result's fold: start and end offsets."""


def is_token(word: str) -> bool:
    """Whether a folded word looks like a secret: long, letters and digits, varied."""
    if len(word) < TOKEN_CHARS or not any(c.isalpha() for c in word):
        return False
    counts, n = Counter(word), len(word)
    bits = -sum(k / n * math.log2(k / n) for k in counts.values())
    return any(c.isdigit() for c in word) and bits >= TOKEN_ENTROPY


@dataclass(frozen=True)
class Parts:
    """A result's fold, the stretches of it that are token-like words, and its short lines."""

    skeleton: str
    tokens: list[Span]
    lines: dict[str, int]
    """A short line's fold → where it starts in the skeleton."""

    @classmethod
    def of(cls, text: str) -> Parts:
        """Fold `text` word by word and line by line."""
        words, tokens, at = [], [], 0
        for word in text.split():  # what `fold` drops as whitespace is what `split` splits on
            folded = fold(word)
            if is_token(folded):
                tokens.append((at, at + len(folded)))
            words.append(folded)
            at += len(folded)
        lines: dict[str, int] = {}
        at = 0
        for line in text.splitlines():
            folded = fold(line)
            alnum = sum(c.isalnum() for c in folded)
            if LINE_CHARS <= len(folded) < QUOTE_CHARS and alnum >= 6:
                lines.setdefault(folded, at)
            at += len(folded)
        return cls("".join(words), tokens, lines)

    @cached_property
    def token_text(self) -> tuple[str, list[int]]:
        """The tokens, one a line, and where each starts in that text."""
        starts, at = [], 0
        for start, end in self.tokens:
            starts.append(at)
            at += end - start + 1
        return "\n".join(self.skeleton[s:e] for s, e in self.tokens), starts


@dataclass(frozen=True)
class Index:
    """A result's fingerprints, sorted, a bitmap of them, and the lengths of its short lines."""

    fingerprints: array[int]
    bitmap: bytes
    """Bit `fingerprint & mask` is set for each fingerprint: most misses need no search."""
    mask: int
    line_lengths: tuple[int, ...]

    @classmethod
    def of(cls, parts: Parts) -> Index:
        """The fingerprints of `parts` (see the module docstring)."""
        text = parts.skeleton
        starts = [range(0, len(text) - _KEY + 1, _STRIDE)]
        starts += [range(s, e - _KEY + 1, _TOKEN_STRIDE) for s, e in parts.tokens]
        prints = {hash(text[i : i + _KEY]) for run in starts for i in run}
        prints |= {hash("\n" + line) for line in parts.lines}
        lengths = tuple(sorted({len(line) for line in parts.lines}))
        bits = 1 << max(6, (16 * len(prints)).bit_length())  # 16 to 32 bits a fingerprint
        bitmap = bytearray(bits // 8)
        for fingerprint in prints:
            bitmap[(fingerprint & (bits - 1)) >> 3] |= 1 << (fingerprint & 7)
        return cls(array("q", sorted(prints)), bytes(bitmap), bits - 1, lengths)

    @property
    def nbytes(self) -> int:
        """What the index takes in memory, roughly."""
        return self.fingerprints.itemsize * len(self.fingerprints) + len(self.bitmap) + 200

    def __contains__(self, fingerprint: int) -> bool:
        """Whether the result has a window (or short line) of this fingerprint."""
        if not self.bitmap[(fingerprint & self.mask) >> 3] >> (fingerprint & 7) & 1:
            return False
        at = bisect_left(self.fingerprints, fingerprint)
        return at < len(self.fingerprints) and self.fingerprints[at] == fingerprint


class _Indexes:
    """Results' indexes by their text's digest, least recently used first, in a byte budget."""

    def __init__(self, budget: int) -> None:
        self._by_digest: OrderedDict[bytes, Index] = OrderedDict()
        self._budget, self._bytes = budget, 0
        self._lock = threading.Lock()

    def get(self, key: bytes) -> Index | None:
        with self._lock:
            index = self._by_digest.get(key)
            if index is not None:
                self._by_digest.move_to_end(key)
            return index

    def put(self, key: bytes, index: Index) -> None:
        with self._lock:
            if key not in self._by_digest:
                self._by_digest[key] = index
                self._bytes += index.nbytes
            while self._bytes > self._budget and len(self._by_digest) > 1:
                self._bytes -= self._by_digest.popitem(last=False)[1].nbytes


_INDEXES = _Indexes(MAX_INDEX_BYTES)


class Quotes:
    """Finds what texts quote of one result, through its index; checks hits against its text."""

    def __init__(self, text: str) -> None:
        """Check against `text`, indexed now unless its index is cached."""
        self.text = text
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        index = _INDEXES.get(key)
        if index is None:
            self.parts = Parts.of(text)
            index = Index.of(self.parts)
            _INDEXES.put(key, index)
        self.index = index
        self._found: dict[str, list[Span]] = {}

    @cached_property
    def parts(self) -> Parts:
        """The result folded: only worked out once a fingerprint is found."""
        return Parts.of(self.text)

    def spans(self, text: str) -> list[Span]:
        """The stretches of the result that `text` quotes, in any of its spellings."""
        if text not in self._found:
            found: set[Span] = set()
            for variant in variants(text):
                skeleton = fold(variant)
                found.update(self._scan(skeleton))
                found.update(self._scan(skeleton[::-1]))
            self._found[text] = sorted(found)
        return self._found[text]

    def fragment(self, span: Span) -> str:
        """The result's own text for `span`, as it was written (whitespace runs as one space)."""
        return " ".join(unfolded(self.text, *span).split())

    def _scan(self, text: str) -> Iterator[Span]:
        index = self.index
        bitmap, mask = index.bitmap, index.mask
        i = 0
        while i <= len(text) - _KEY:
            fingerprint = hash(text[i : i + _KEY])
            # `in index`, its bitmap looked at here: most windows of a text are misses
            seen = bitmap[(fingerprint & mask) >> 3] >> (fingerprint & 7) & 1
            hit = seen and fingerprint in index and self._quote(text, i)
            if hit:
                yield hit[0]
                i = hit[1]
            else:
                i += 1
        for length in self.index.line_lengths:  # at most 10 lengths
            for start in range(len(text) - length + 1):
                piece = text[start : start + length]
                if hash("\n" + piece) in self.index and piece in self.parts.lines:
                    at = self.parts.lines[piece]
                    yield at, at + length

    def _quote(self, text: str, i: int) -> tuple[Span, int] | None:
        """The quote holding the window `text[i:i+12]`: its span, and where it ends in `text`."""
        skeleton = self.parts.skeleton
        for start in range(max(0, i - _STRIDE), i + 1):
            fragment = text[start : start + QUOTE_CHARS]
            at = skeleton.find(fragment) if len(fragment) == QUOTE_CHARS else -1
            if at >= 0:
                return _widened(text, start, QUOTE_CHARS, skeleton, at)
        tokens, starts = self.parts.token_text
        for start in range(max(0, i - _TOKEN_STRIDE + 1), i + 1):
            fragment = text[start : start + TOKEN_CHARS]
            at = tokens.find(fragment) if len(fragment) == TOKEN_CHARS else -1
            if at >= 0:
                (begin, end), after = _widened(text, start, TOKEN_CHARS, tokens, at)
                n = bisect_right(starts, begin) - 1  # the token it is in: "\n" never matches
                offset = self.parts.tokens[n][0] - starts[n]
                return (begin + offset, end + offset), after
        return None


def _widened(text: str, start: int, length: int, source: str, at: int) -> tuple[Span, int]:
    """The whole common run around `text[start:start+length]` == `source[at:...]`.

    Returns its span in `source` and where it ends in `text`.
    """
    begin, end = start, start + length
    while begin > 0 and at > 0 and text[begin - 1] == source[at - 1]:
        begin, at = begin - 1, at - 1
    while end < len(text) and at + end - begin < len(source):
        if text[end] != source[at + end - begin]:
            break
        end += 1
    return (at, at + end - begin), end
