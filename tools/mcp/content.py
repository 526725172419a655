"""An MCP result's content as a ToolMessage's: its text, and its images as standard image blocks.

    text, images = text_and_images(blocks)   # the adapters' LangChain blocks
    content = with_images(text, images)     # a string, or [text block, image blocks…]

Each image kept is named in the text where it was ("[image 1: image/png, 12 KB]"), so every
reader of a result's text (the history, the guards, a model shown no images) knows it is there;
the image itself follows the text as `{"type": "image", "base64", "mime_type"}`. Which models
are shown it is decided when the model is called (graph/prompt.py), not here: a thread
keeps its images whichever model continues it. Images a provider would refuse (another format,
too large, not base64) are not kept: the text says why instead.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from collections.abc import Mapping, Sequence
from typing import Any

Content = str | list[str | dict[str, Any]]
"""A ToolMessage's content, as LangChain types it."""

MAX_IMAGE_BYTES = 5 * 2**20
"""One image's size: what Anthropic's API takes at most (OpenAI's takes up to 20 MB)."""
MAX_RESULT_IMAGE_BYTES = 10 * 2**20
"""All images of one result: it is stored, and sent again with every later call of the turn."""
FORMATS = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The image formats both OpenAI and Anthropic accept; another would fail the model call."""


def text_and_images(blocks: Any) -> tuple[str, list[dict[str, Any]]]:
    """The text of the adapters' `blocks` (each image named in it) and the images kept."""
    parts: list[str] = []
    images: list[dict[str, Any]] = []
    kept_bytes = 0
    for block in blocks if isinstance(blocks, list) else [blocks]:
        if not isinstance(block, Mapping):
            parts.append(str(block))
        elif block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "image" and block.get("base64"):
            image, why_not = _checked(block, kept_bytes)
            if image is None:
                parts.append(why_not)
                continue
            images.append(image)
            kept_bytes += image_bytes(image)
            parts.append(caption(len(images), image))
        elif block.get("type") == "image" and block.get("url"):
            kind = block.get("mime_type") or "image"
            parts.append(f"[{kind} at {block['url']}: not shown, Ferry does not fetch links]")
        else:
            kind = block.get("mime_type") or block.get("type")
            parts.append(f"[{kind} content: not shown, Ferry passes only text and images]")
    return "\n".join(parts), images


def with_images(text: str, images: Sequence[dict[str, Any]]) -> Content:
    """A ToolMessage's content: `text` alone, or a text block followed by the images."""
    if not images:
        return text
    return [{"type": "text", "text": text}, *images]


def caption(number: int, image: Mapping[str, Any]) -> str:
    """How the text names the `number`th image of a result: "[image 1: image/png, 12 KB]"."""
    return f"[image {number}: {describe(image)}]"


def describe(image: Mapping[str, Any]) -> str:
    """An image block's format and size: "image/png, 12 KB"."""
    return f"{image.get('mime_type')}, {size(image_bytes(image))}"


def images_of(content: Any) -> list[dict[str, Any]]:
    """The image blocks kept in a ToolMessage's content, in order."""
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and is_image(b)]


def is_image(block: Mapping[str, Any]) -> bool:
    """Whether `block` is a standard base64 image block."""
    return block.get("type") == "image" and isinstance(block.get("base64"), str)


def image_bytes(image: Mapping[str, Any]) -> int:
    """The decoded size of an image block's data, from its base64 length."""
    data = str(image.get("base64", ""))
    return len(data) * 3 // 4 - data[-2:].count("=")


def size(n: int) -> str:
    """`n` bytes for people: "68 B", "12 KB", "5.2 MB"."""
    if n < 1024:
        return f"{n} B"
    if n < 2**20:
        return f"{round(n / 1024)} KB"
    return f"{n / 2**20:.1f} MB"


def _checked(block: Mapping[str, Any], kept_bytes: int) -> tuple[dict[str, Any] | None, str]:
    """The image as Ferry keeps it, or None and the note that replaces it."""
    mime = str(block.get("mime_type") or "image").lower()
    mime = "image/jpeg" if mime == "image/jpg" else mime  # a common misspelling
    data = "".join(str(block["base64"]).split())  # some servers wrap base64 in lines
    try:
        decoded = len(b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None, f"[{mime}: not kept, its data is not valid base64]"
    said = f"[{mime}, {size(decoded)}: not kept"
    if mime not in FORMATS:
        return None, f"{said}, models take only PNG, JPEG, GIF and WebP images]"
    if decoded > MAX_IMAGE_BYTES:
        return None, f"{said}, over Ferry's {size(MAX_IMAGE_BYTES)} limit for one image]"
    if kept_bytes + decoded > MAX_RESULT_IMAGE_BYTES:
        limit = size(MAX_RESULT_IMAGE_BYTES)
        return None, f"{said}, over Ferry's {limit} limit for the images of one result]"
    return {"type": "image", "base64": data, "mime_type": mime}, ""
