r"""The spellings a text can hide behind, undone: what the exfiltration guard compares.

`fold` maps a text to its skeleton, the same for every way of writing it: compatibility forms
(fullwidth letters, ligatures, mathematical letters) become plain ones (NFKD), accents and
other combining marks go, Cyrillic, Greek, Armenian and Cherokee look-alikes become the Latin
letters they imitate (`LOOK_ALIKES`), case is folded, and whitespace and invisible format
characters (Unicode category Cf: zero-width spaces and joiners, soft hyphens, bidi controls,
tags) are dropped. Each character folds on its own, so a fold's offsets map back to the text.

`variants` yields a text and what its encodings stand for: percent-encoding (repeated, so
double encoding too), HTML entities, `\x`/`\u` escapes, and runs of hex or base64 (standard
or URL-safe alphabet, padded or not) that decode to text; decoded text is decoded again, three
levels deep, and so is the reversed text (reversed, then encoded). Matching the folds of these,
forward and reversed, is what `graph/policy/quotes.py` does.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import unicodedata
import urllib.parse
from collections.abc import Iterator

_SCRIPTS = (  # look-alikes, and the Latin letters they pass for
    ("АВЕЅІЈКМНОРСТХУҮҺӀԚԜ", "ABESIJKMHOPCTXYYHIQW"),  # Cyrillic capitals
    ("аеѕіјкмнорстхуүһӏԁԛԝв", "aesijkmhopctxyyhldqwb"),  # Cyrillic small letters
    ("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧϹͿ", "ABEZHIKMNOPTYXCJ"),  # Greek capitals
    ("αεικνορτυχγηϲϳ", "aeikvoptuxyncj"),  # Greek small letters
    ("օսոհզց", "ounhqg"),  # Armenian
    ("ᎪᏴᏟᎬᎻᏦᎷᏢᏚᎢᏔᏃᎠᏀᏞᏙᎡ", "ABCEHKMPSTWZDGLVR"),  # Cherokee
    ("ıȷɑɡɩʏ", "ijagiy"),  # Latin letters outside ASCII that pass for ASCII ones
)
LOOK_ALIKES = str.maketrans("".join(a for a, _ in _SCRIPTS), "".join(b for _, b in _SCRIPTS))
"""Letters that look like Latin ones, to those Latin letters (upper- and lowercase apart)."""
DEPTH = 3
"""How many encodings deep `variants` decodes (base64 of hex of a secret is two)."""
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_ESCAPE = re.compile(r"\\x([0-9A-Fa-f]{2})|\\u([0-9A-Fa-f]{4})")
_HEX = re.compile(r"[0-9A-Fa-f]{16,}")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{16,}")
_MEMO_CHARS = 50_000
"""Characters whose fold is remembered: a text of every character in Unicode stays cheap."""
_TEXT_SHARE = 0.9
"""Decoded bytes count as text when this share of them decodes to printable characters."""


class _Folds(dict[int, str]):
    """Each character's fold, worked out on first sight (`str.translate` asks for it)."""

    def __missing__(self, code: int) -> str:
        folded = chr(code)
        for _ in range(2):  # a casefold can give a look-alike (Cherokee) or a mark (İ) back
            folded = _plain(folded.translate(LOOK_ALIKES)).casefold()
        if len(self) < _MEMO_CHARS:
            self[code] = folded
        return folded


def _plain(text: str) -> str:
    """`text` in compatibility form, its marks, whitespace and format characters dropped."""
    return "".join(
        c
        for c in unicodedata.normalize("NFKD", text)
        if not (c.isspace() or unicodedata.category(c) in ("Mn", "Me", "Cf"))
    )


_FOLDS = _Folds()


def fold(text: str) -> str:
    """The skeleton of `text`: how it reads, whatever its case, width, look-alikes or spacing."""
    return text.translate(_FOLDS)


def unfolded(text: str, start: int, end: int) -> str:
    """The stretch of `text` whose fold is `fold(text)[start:end]`."""
    at, begin = 0, None
    for i, char in enumerate(text):
        if begin is None and at + len(_FOLDS[ord(char)]) > start:
            begin = i
        at += len(_FOLDS[ord(char)])
        if at >= end:
            return text[begin or 0 : i + 1]
    return text[begin or 0 :]


def variants(text: str) -> Iterator[str]:
    """`text`, then each text its encodings stand for (each once), to `DEPTH` levels."""
    seen = {text}
    level = [text]
    yield text
    for _ in range(DEPTH):
        decoded = [d for t in level for form in (t, t[::-1]) for d in _decodings(form)]
        level = [d for d in decoded if d not in seen]
        seen.update(level)
        yield from level


def _decodings(text: str) -> Iterator[str]:
    """What `text` says once one encoding in it is undone, for each encoding it shows."""
    if _PERCENT.search(text):
        yield urllib.parse.unquote(text)
        yield urllib.parse.unquote_plus(text)
    if "&" in text and (unescaped := html.unescape(text)) != text:
        yield unescaped
    if "\\" in text and _ESCAPE.search(text):
        yield _ESCAPE.sub(lambda m: chr(int(m[1] or m[2], 16)), text)
    for runs, decode, tries in ((_HEX, _from_hex, 2), (_BASE64, _from_base64, 4)):
        # A run glued to other letters is decoded from each offset; only text is kept.
        parts = [
            part
            for run in runs.findall(text)
            for offset in range(tries)
            if (part := _as_text(decode(run[offset:]))) is not None
        ]
        if parts:
            yield "\n".join(parts)


def _from_hex(run: str) -> bytes:
    return binascii.unhexlify(run[: len(run) // 2 * 2])


def _from_base64(run: str) -> bytes:
    run = run.replace("-", "+").replace("_", "/")
    run = run[: len(run) // 4 * 4] if len(run) % 4 == 1 else run + "=" * (-len(run) % 4)
    try:
        return base64.b64decode(run, validate=True)
    except binascii.Error:
        return b""


def _as_text(data: bytes) -> str | None:
    """`data` as UTF-8 text, or None if too little of it is printable (a wrong guess)."""
    if len(data) < 8:
        return None
    text = data.decode("utf-8", errors="replace")
    if text.count("\ufffd") > (1 - _TEXT_SHARE) * len(text):  # most wrong guesses, quickly
        return None
    printable = sum(c != "\ufffd" and (c.isprintable() or c.isspace()) for c in text)
    return text if printable >= _TEXT_SHARE * len(text) else None
