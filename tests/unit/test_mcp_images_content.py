"""Images in tool results: what an MCP result keeps, how each model is shown it, what is stored.

The MCP side turns the adapters' LangChain blocks into a result's content (tools/mcp/content.py);
the model side decides from the real clients' LangChain profiles how a model takes images, and
rewrites the prompt to match (graph/prompt.py). End to end: tests/integration/
test_mcp_images.py.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI

from graph.core.settings import Settings
from graph.models.offline import OfflineModel
from graph.prompt import image_delivery, with_images_placed
from graph.storage.codec.serde import serializer
from tests.support.servers.mcp_images import PNG, PNG_BASE64, png
from tools import TOOLS
from tools.mcp import content

IMAGE = {"type": "image", "base64": PNG_BASE64, "mime_type": "image/png"}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def image(data: bytes, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "base64": base64.b64encode(data).decode(), "mime_type": mime}


# --- what an MCP result keeps ---------------------------------------------------------------


def test_text_and_an_image_keep_the_image_and_name_it_in_the_text() -> None:
    said, kept = content.text_and_images([text("A chart."), image(PNG)])
    assert said == f"A chart.\n[image 1: image/png, {len(PNG)} B]"
    assert kept == [IMAGE]
    assert content.with_images(said, kept) == [text(said), IMAGE]


def test_a_result_without_images_stays_a_string() -> None:
    said, kept = content.text_and_images([text("one"), text("two")])
    assert content.with_images(said, kept) == "one\ntwo"


SVG_NOTE = "[image/svg+xml, 6 B: not kept, models take only PNG, JPEG, GIF and WebP images]"
LINK = {"type": "image", "url": "https://x.test/a.png", "mime_type": "image/png"}
LINK_NOTE = "[image/png at https://x.test/a.png: not shown, Ferry does not fetch links]"
PDF = {"type": "file", "base64": "JVBERi0=", "mime_type": "application/pdf"}
PDF_NOTE = "[application/pdf content: not shown, Ferry passes only text and images]"


@pytest.mark.parametrize(
    ("block", "note"),
    [
        (image(b"<svg/>", "image/svg+xml"), SVG_NOTE),
        ({**IMAGE, "base64": "not base64!"}, "[image/png: not kept, its data is not valid base64]"),
        (LINK, LINK_NOTE),
        (PDF, PDF_NOTE),
    ],
    ids=["svg", "not base64", "a link", "a file"],
)
def test_what_a_provider_would_refuse_is_not_kept_and_the_text_says_why(
    block: dict[str, Any], note: str
) -> None:
    said, kept = content.text_and_images([text("Here."), block])
    assert kept == []
    assert said == f"Here.\n{note}"


def test_a_misspelt_jpeg_and_wrapped_base64_are_kept_as_providers_take_them() -> None:
    wrapped = "\n".join(PNG_BASE64[i : i + 20] for i in range(0, len(PNG_BASE64), 20))
    _, kept = content.text_and_images([{**IMAGE, "base64": wrapped, "mime_type": "IMAGE/JPG"}])
    assert kept == [{**IMAGE, "mime_type": "image/jpeg"}]


def test_one_image_and_all_of_a_results_images_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    big, small = png(40, 40), PNG
    monkeypatch.setattr(content, "MAX_IMAGE_BYTES", len(big) - 1)
    monkeypatch.setattr(content, "MAX_RESULT_IMAGE_BYTES", 2 * len(small))
    said, kept = content.text_and_images([image(big), *[image(small)] * 3])
    assert kept == [IMAGE, IMAGE]
    lines = said.splitlines()
    assert lines[0] == (
        f"[image/png, {content.size(len(big))}: not kept, over Ferry's "
        f"{content.size(len(big) - 1)} limit for one image]"
    )
    assert lines[1:3] == [f"[image {n}: image/png, {len(small)} B]" for n in (1, 2)]
    assert lines[3].endswith(f"over Ferry's {len(small) * 2} B limit for the images of one result]")


# --- how each model is shown images -----------------------------------------------------------


def openai(name: str, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(model=name, api_key="sk-test", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "setting", "expected"),
    [
        (openai("gpt-4.1-mini"), "auto", "after_results"),  # Chat Completions: user images only
        (openai("gpt-4.1-mini", use_responses_api=True), "auto", "results"),
        (openai("gpt-3.5-turbo"), "auto", "none"),
        (openai("gpt-4.1-mini"), "off", "none"),
        (openai("my-local-model"), "auto", "none"),  # no profile: not known to take images
        (openai("my-local-model"), "on", "after_results"),
        (ChatAnthropic(model_name="claude-haiku-4-5", api_key="k"), "auto", "results"),  # type: ignore[call-arg, arg-type]
        (OfflineModel(), "auto", "none"),
        (GenericFakeChatModel(messages=iter([])), "auto", "none"),
    ],
)
def test_the_delivery_follows_the_models_profile_and_the_setting(
    model: Any, setting: str, expected: str
) -> None:
    assert image_delivery(model, setting) == expected


def test_a_model_bound_to_tools_is_judged_by_the_model_inside() -> None:
    assert image_delivery(openai("gpt-4.1-mini").bind_tools(TOOLS)) == "after_results"


def test_the_setting_is_read_from_ferry_tool_images(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_TOOL_IMAGES", "off")
    assert Settings().tool_images == "off"
    monkeypatch.setenv("FERRY_TOOL_IMAGES", "sometimes")
    with pytest.raises(ValueError, match="tool_images"):
        Settings()


# --- the prompt as sent -------------------------------------------------------------------------


def block_of_two() -> list[Any]:
    call = AIMessage("", tool_calls=[{"name": "chart", "args": {}, "id": "c1"}])
    call.tool_calls.append({"name": "get_datetime", "args": {}, "id": "c2", "type": "tool_call"})
    return [
        HumanMessage("chart and time?"),
        call,
        ToolMessage([text("A chart.\n[image 1: image/png, 58 B]"), IMAGE], tool_call_id="c1"),
        ToolMessage("12:00", tool_call_id="c2"),
        AIMessage("Done."),
    ]


def test_after_results_the_images_follow_the_whole_block_in_one_user_message() -> None:
    prompt = block_of_two()
    sent = with_images_placed(prompt, "after_results")
    assert [type(m).__name__ for m in sent] == [
        *("HumanMessage", "AIMessage", "ToolMessage", "ToolMessage"),
        *("HumanMessage", "AIMessage"),
    ]
    assert sent[2].content == (
        "A chart.\n[image 1: image/png, 58 B]\n[Ferry: sent after the tool results, in a message "
        "of their own: image 1 (image/png, 58 B).]"
    )
    assert sent[4].content[1:] == [text("[image 1: image/png, 58 B] of None (call c1):"), IMAGE]
    assert prompt == block_of_two()  # the prompt kept for the next call is untouched


def test_in_results_and_none_the_sequence_is_unchanged() -> None:
    prompt = block_of_two()
    assert with_images_placed(prompt, "results") == prompt
    sent = with_images_placed(prompt, "none")
    assert [type(m) for m in sent] == [type(m) for m in prompt]
    assert sent[2].content == (
        "A chart.\n[image 1: image/png, 58 B]\n[Ferry: not shown, this model does not accept "
        "images (FERRY_TOOL_IMAGES): image 1 (image/png, 58 B).]"
    )


# --- what is stored ---------------------------------------------------------------------------


def test_a_result_with_an_image_round_trips_through_the_serializer() -> None:
    result = ToolMessage([text("A chart."), IMAGE], tool_call_id="c1", name="chart", id="r1")
    serde = serializer(Settings())
    assert serde.loads_typed(serde.dumps_typed(result)) == result
