r"""`printable`: control characters become visible `\xNN` escapes; other text stays as it is."""

from __future__ import annotations

import json
import logging

import pytest

from graph.core.controls import printable, printable_json
from graph.core.log import TextFormatter


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # retitle the window (OSC … BEL)
        ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear the screen, cursor home
        ("\x9b31m", "\\x9b31m"),  # C1 CSI, the one-character form of ESC [
        ("\x00\x08\r\x7f", "\\x00\\x08\\x0d\\x7f"),  # NUL, backspace, carriage return, DEL
        ("\x85\x9f", "\\x85\\x9f"),  # the C1 range's ends
    ],
)
def test_control_characters_are_escaped(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_newlines_tabs_and_ordinary_unicode_are_kept() -> None:
    text = "Bogotá: 14.2 °C\n\tline two → ✓ \u00a0non-breaking, 日本語, 🙂"
    assert printable(text) == text


def test_every_control_character_and_nothing_else_is_replaced() -> None:
    controls = [c for c in map(chr, range(0xA0)) if not c.isprintable() and c not in "\n\t"]
    assert len(controls) == 30 + 1 + 32  # C0 less newline and tab, DEL, C1
    assert {c: printable(c) for c in controls} == {c: f"\\x{ord(c):02x}" for c in controls}
    kept = [chr(code) for code in range(0x20, 0x7F)] + ["\xa0", "\u00ff"]
    assert printable("".join(kept)) == "".join(kept)


def test_pieces_escaped_one_by_one_read_as_the_whole_escaped() -> None:
    answer = "Done.\x1b]0;pwned\x07 \x1b[2J"
    pieces = [answer[i : i + 3] for i in range(0, len(answer), 3)]
    assert "".join(printable(p) for p in pieces) == printable(answer)


def test_json_text_spells_del_and_c1_as_escapes_and_means_the_same() -> None:
    value = {"text": "a\x1b[2J\x7f\x85\x9b31m é 日本 🙂", "\x9b": ["\x00"]}
    text = printable_json(json.dumps(value, ensure_ascii=False))
    assert text.isprintable() and json.loads(text) == value
    assert "\\u009b31m" in text and "\\u007f" in text and "é 日本 🙂" in text


def test_a_text_log_line_shows_control_characters_escaped() -> None:
    record = logging.LogRecord(
        "ferry.mcp", logging.WARNING, __file__, 1, "server said %s", ("\x1b]52;c;eA==\x07",), None
    )
    assert TextFormatter().format(record) == "warning ferry.mcp: server said \\x1b]52;c;eA==\\x07"


def test_bidirectional_overrides_are_escaped_and_right_to_left_marks_kept() -> None:
    title = "invoice_\u202egnp.exe"  # shows as "invoice_exe.png"
    assert printable(title) == "invoice_\\u202egnp.exe"
    assert printable_json(json.dumps(title, ensure_ascii=False)) == '"invoice_\\u202egnp.exe"'
    assert printable("שלום\u200f!") == "שלום\u200f!"
