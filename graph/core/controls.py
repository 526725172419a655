r"""Text for a terminal: control characters from models, tools and servers shown, never obeyed.

A web page read by a tool can make a model write `\x1b]0;…\x07` (retitle the window),
`\x1b[2J` (clear the screen) or worse, and an MCP server can put the same in a tool's
description, its results or the stderr its failure is explained by; printed raw, the terminal
would act on them. The CLI's output and Ferry's text logs go through `printable`, its JSON
output through `printable_json`.
"""

from __future__ import annotations

_KEPT = {ord("\n"), ord("\t")}
_C0_DEL_C1 = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
# Bidirectional overrides and isolates: U+202E shows a thread's title, or a file name in a
# tool's arguments, reversed (the "Trojan Source" trick).
# (The marks U+200E, U+200F, which right-to-left text uses, are kept.)
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ESCAPES = {code: f"\\x{code:02x}" for code in _C0_DEL_C1 if code not in _KEPT} | {
    code: f"\\u{code:04x}" for code in _BIDI
}
# json.dumps spells the C0 controls as \u escapes itself, but not DEL, the C1 or bidi controls.
_JSON_ESCAPES = {code: f"\\u{code:04x}" for code in [0x7F, *range(0x80, 0xA0), *_BIDI]}


def printable(text: str) -> str:
    r"""Return `text` with each control character replaced by its visible `\xNN` escape.

    Replaced: the C0 controls (U+0000-U+001F) except newline and tab, DEL (U+007F), the C1
    controls (U+0080-U+009F) and the bidirectional controls (`\u202e`); ESC becomes the four
    characters `\x1b`, so `\x1b[2J` prints as
    `\x1b[2J` instead of clearing the screen. Each character is replaced on its own, so the
    pieces of a streamed answer can be escaped one by one. Only what is printed is escaped:
    stored messages keep the text as it came.

    Args:
        text: Text from a model, a tool or a stored message.
    """
    return text.translate(_ESCAPES)


def printable_json(text: str) -> str:
    r"""Return JSON text with DEL, the C1 and the bidirectional controls written as `\u` escapes.

    The JSON means the same (a string may spell any character so, and these appear only inside
    strings), so a reader gets the text as it came and a terminal gets nothing to obey.

    Args:
        text: Text made by `json.dumps` (which escapes the C0 controls itself).
    """
    return text.translate(_JSON_ESCAPES)
