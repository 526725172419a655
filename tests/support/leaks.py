"""Secrets in the forms they get written, and a search for any of them in what Ferry wrote.

A test makes a provider or tool answer `quoting_every_form(secrets)`, then asserts that
`found_in(what Ferry stored, logged or printed, secrets)` is empty.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from urllib.parse import quote, quote_plus


def forms(secret: str) -> dict[str, str]:
    """The plain, base64 (standard or URL-safe, padded or not, Basic auth) and URL-encoded forms."""
    raw = secret.encode()
    found = {
        "plain": secret,
        "quote": quote(secret),
        "quote safe=''": quote(secret, safe=""),
        "quote_plus": quote_plus(secret),
    }
    for name, encode in (("base64", base64.b64encode), ("urlsafe", base64.urlsafe_b64encode)):
        found[name] = encode(raw).decode()
        found[f"{name} unpadded"] = found[name].rstrip("=")
        found[f"{name} of user:secret"] = encode(b"user:" + raw).decode()
    return found


def quoting_every_form(secrets: Iterable[str]) -> str:
    """An error text that quotes every form of every secret, the way a careless gateway does."""
    quoted = [f"({label}) {form}" for secret in secrets for label, form in forms(secret).items()]
    return "upstream rejected the credentials: " + " ".join(quoted)


def found_in(text: str, secrets: Iterable[str]) -> list[str]:
    """Each form of each secret that occurs in `text` (also after undoing JSON escapes)."""
    texts = [text, *_json_strings(text)]
    return sorted(
        f"{secret!r} ({label})"
        for secret in secrets
        for label, form in forms(secret).items()
        if any(form in t for t in texts)
    )


def _json_strings(text: str) -> list[str]:
    """The decoded strings of every line of `text` that is JSON (`\\u00f6` hides `ö`)."""
    decoded = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        decoded.append(json.dumps(value, ensure_ascii=False))
    return decoded
