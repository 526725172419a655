"""Reading messages whatever the provider's format: their text and their token usage."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage


def message_text(message: BaseMessage) -> str:
    """Return the text of a message: a plain string, or the text blocks of a block list."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def token_usage(message: BaseMessage) -> dict[str, int]:
    """Input, output and total tokens the provider reported for a reply (zeros if none)."""
    usage = message.usage_metadata if isinstance(message, AIMessage) else None
    return {
        "input_tokens": usage["input_tokens"] if usage else 0,
        "output_tokens": usage["output_tokens"] if usage else 0,
        "total_tokens": usage["total_tokens"] if usage else 0,
    }
