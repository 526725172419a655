"""The offline model: a deterministic planner behind the chat-model interface, needing no key.

It lets the whole loop run (parallel calls, dependent calls, errors, persistence) without an LLM.
It is not one, and says so whenever a question is outside what it understands.

Its reading of a question (the planner, at the end of this module) is deliberately small and
literal. It recognises arithmetic, "weather in X", date/time (optionally "in <zone>"), "read
<file>", "search …", "remember that …" and "what do you remember (about …)", and any tool
called by its name (`named_call`); anything else is left to the model to decline.
"""

from __future__ import annotations

import json
import re
import shlex
import uuid
import zoneinfo
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from graph.core.fence import unfenced
from graph.core.transcript import SUMMARY_PROMPT, offline_summary

HELP = (
    "I am Ferry's offline planner, not a language model, so I only understand: arithmetic "
    '("what is 150 * 3"), "weather in <city>", the date or time (optionally "in <zone>"), '
    '"read <file>", "search <query>", "remember that <fact>" and "what do you remember". Set '
    "OPENAI_API_KEY or FERRY_MODEL to use a real model."
)
SUMMARY_MARK = SUMMARY_PROMPT.split("]", 1)[0]
NAMED = {"model_name": "offline", "model_provider": "ferry"}
"""How its replies name their model (`--json`'s `models`; priced at nothing)."""
_LABELS = {
    "get_weather": "Weather",
    "get_datetime": "Date and time",
    "web_search": "Search results",
    "recall": "Remembered",
}


def _call(name: str, args: dict[str, Any]) -> ToolCall:
    return ToolCall(name=name, args=args, id=f"call_{uuid.uuid4().hex[:12]}", type="tool_call")


def _previous_result(history: Sequence[BaseMessage]) -> str | None:
    """The last successful calculator result before this turn, for follow-ups like "and / 9"."""
    for message in reversed(history):
        if isinstance(message, ToolMessage) and message.name == "calculator":
            if message.status == "success":
                return first_number(message.text)
    return None


def _code(text: str) -> str:
    """`text` as a Markdown code span, so `2*3` is not read as emphasis."""
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _block(text: str) -> str:
    """`text` as a fenced Markdown code block, its lines kept as they are."""
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`{3,}", text)), default=0) + 1)
    return f"{fence}\n{text}\n{fence}"


def _describe(call: ToolCall, result: ToolMessage) -> str:
    text = result.text
    if result.status == "error":
        return f"{_code(call['name'])} failed: {text}"
    if call["name"] == "calculator":
        return f"{_code(str(call['args'].get('expression')))} = {text}"
    if call["name"] == "remember":
        return text
    if call["name"] == "read_file" or "\n" in text:
        label = _code(str(call["args"].get("path"))) if call["name"] == "read_file" else None
        return f"{label or _LABELS.get(call['name'], call['name'])}:\n\n{_block(text)}"
    return f"{_LABELS.get(call['name'], call['name'])}: {text}"


def markdown_answer(parts: list[str]) -> str:
    """The parts of an answer as Markdown: one line each as list items, blocks apart."""
    if len(parts) <= 1 or any("\n" in part for part in parts):
        return "\n\n".join(parts)
    return "\n".join(f"- {part}" for part in parts)


def filled(
    schema: dict[str, Any], text: str, root: dict[str, Any] | None = None, depth: int = 0
) -> Any:
    """A value of `schema` made from an answer's `text`, the same every time.

    Strings get the text (cut to their `maxLength`), numbers its first number (else 0, within
    `minimum` and `maximum`), booleans true, a list one item, a choice its first option: enough
    to see an answer schema work end to end offline.
    """
    root = root or schema
    if depth > 32:  # a schema that refers to itself: stop somewhere
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return filled(target, text, root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return filled(schema[key][0], text, root, depth + 1)
    kind = schema.get("type", "string")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: filled(part, text, root, depth + 1) for name, part in properties.items()}
    if kind == "array":
        return [filled(schema.get("items") or {}, text, root, depth + 1)]
    if kind in ("number", "integer"):
        result = re.search(r"=\s*(-?\d+(?:\.\d+)?)", text)  # a calculation's, else the first
        number = float(result.group(1) if result else first_number(text) or 0)
        number = max(number, schema.get("minimum", number))
        number = min(number, schema.get("maximum", number))
        return int(number) if kind == "integer" else number
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return text[: schema.get("maxLength")]


class OfflineModel(BaseChatModel):
    """A keyless, deterministic planner that speaks the chat-model protocol."""

    tool_names: tuple[str, ...] = ()
    answer_tool: dict[str, Any] | None = None
    """A tool given only as a schema while a call is required: Ferry's answer tool, which
    the planner calls with its answer where it would answer in words."""

    @property
    def _llm_type(self) -> str:
        return "ferry-offline"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineModel:
        """Return a copy that may call the given tools."""
        names, schemas = [], []
        for tool in tools:
            if isinstance(tool, BaseTool):
                names.append(tool.name)
            else:
                schemas.append(convert_to_openai_tool(tool)["function"])
                names.append(schemas[-1]["name"])
        required = kwargs.get("tool_choice") in ("any", "required")
        answer = schemas[-1] if required and schemas else None
        return self.model_copy(update={"tool_names": tuple(names), "answer_tool": answer})

    def reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """Plan the next step of the conversation, or write a summary when asked for one."""
        if messages and messages[0].text.startswith(SUMMARY_MARK):
            return AIMessage(offline_summary(messages))
        planned = self._plan(messages)
        if self.answer_tool is None or planned.tool_calls:
            return planned
        schema = self.answer_tool.get("parameters") or {}
        return AIMessage(
            "", tool_calls=[_call(self.answer_tool["name"], filled(schema, planned.text))]
        )

    def _plan(self, messages: Sequence[BaseMessage]) -> AIMessage:
        messages = [unfenced(m) for m in messages]  # it reads results as data, never as orders
        start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
        if start < 0:
            return AIMessage(HELP)
        asked = messages[start].text
        named = named_call(asked, self.tool_names)
        intents = [named] if named else parse_intents(asked, _previous_result(messages[:start]))
        turn = messages[start + 1 :]
        answering = self.answer_tool["name"] if self.answer_tool else None
        calls = [
            c
            for m in turn
            if isinstance(m, AIMessage)
            for c in m.tool_calls
            if c["name"] != answering
        ]
        if not calls:
            return self._first_step(intents)
        results = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
        follow_ups = self._follow_ups(intents, calls, results)
        if follow_ups:
            return AIMessage("", tool_calls=follow_ups)
        lines = [_describe(c, results[c["id"]]) for c in calls if c["id"] in results]
        return AIMessage(markdown_answer(lines) or HELP)

    def _first_step(self, intents: list[Intent]) -> AIMessage:
        usable = [i for i in intents if i.tool in self.tool_names]
        missing = sorted({i.tool for i in intents} - set(self.tool_names))
        if not usable:
            if missing:
                return AIMessage(
                    f"I would need the {', '.join(missing)} tool, which is not available here."
                )
            return AIMessage(HELP)
        return AIMessage("", tool_calls=[_call(i.tool, dict(i.args)) for i in usable])

    def _follow_ups(
        self, intents: list[Intent], calls: list[ToolCall], results: dict[str, ToolMessage]
    ) -> list[ToolCall]:
        """Calculator calls that apply a question's "times 3" to a finished result's number."""
        if "calculator" not in self.tool_names or any(c["name"] == "calculator" for c in calls):
            return []
        follow_ups = []
        for intent in intents:
            done = [c for c in calls if c["name"] == intent.tool and c["args"] == intent.args]
            result = results.get(done[0]["id"] or "") if done else None
            if intent.then and result is not None and result.status == "success":
                number = first_number(result.text)
                if number is not None:
                    expression = f"{number} {intent.then[0]} {intent.then[1]}"
                    follow_ups.append(_call("calculator", {"expression": expression}))
        return follow_ups

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self.reply(messages)
        message.usage_metadata = _estimated_usage(messages, message)
        message.response_metadata.update(NAMED)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self.reply(messages)
        words = message.text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == len(words) - 1 else word + " "
            if piece:
                chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
                if run_manager:
                    run_manager.on_llm_new_token(piece, chunk=chunk)
                yield chunk
        tool_chunks = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
            for i, c in enumerate(message.tool_calls)
        ]
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                tool_call_chunks=tool_chunks,  # type: ignore[arg-type]  # plain dicts are ToolCallChunks
                usage_metadata=_estimated_usage(messages, message),
                response_metadata=dict(NAMED),
                chunk_position="last",
            )
        )


def _estimated_usage(messages: Sequence[BaseMessage], reply: AIMessage) -> Any:
    """About four characters a token, so token budgets can be exercised offline."""
    sent = sum(len(m.text) for m in messages) // 4 + 1
    received = (len(reply.text) + len(json.dumps(reply.tool_calls))) // 4 + 1
    return {"input_tokens": sent, "output_tokens": received, "total_tokens": sent + received}


# The planner: which tools a question asks for, and with what.

_OPERATOR_WORDS = [
    (r"\bmultipl(?:y|ied)(?:\s+(?:it|that|this))?\s+by\b", "*"),
    (r"\btimes\b", "*"),
    (r"\bdivided\s+by\b|\bdivide(?:\s+(?:it|that|this))?\s+by\b", "/"),
    (r"\bplus\b|\badd\b", "+"),
    (r"\bminus\b|\bsubtract\b", "-"),
    (r"\bto the power of\b", "**"),
    (r"\bsquare root of\b", "sqrt "),
]
_FUNCTIONS = "sqrt|sin|cos|tan|log10|log|exp|abs|floor|ceil|round|factorial"
_TOKEN = re.compile(rf"(?:{_FUNCTIONS})\b|\bpi\b|\d+(?:\.\d+)?|\*\*|[-+*/%^()]")
_OPERATOR = re.compile(r"\*\*|[-+*/%^]")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_WORD = r"[^\W\d_][\w'’.-]*"
_STOP = (
    r"(?:and|then|times|multipl\w*|plus|minus|divided|in\s+(?:celsius|fahrenheit)|right|now|today)"
)
_WEATHER = re.compile(
    rf"\b(?:weather|temperature|forecast)\s+(?:like\s+)?(?:in|for|at|of)\s+"
    rf"(?P<city>{_WORD}(?:\s+(?!{_STOP}\b){_WORD})*)",
    re.IGNORECASE,
)
_DEPENDENT = re.compile(r"^\s*(?P<op>\*\*|[-+*/])\s*(?P<n>\d+(?:\.\d+)?)")
_DATETIME = re.compile(
    r"\b(?:what\s+(?:day|date|time)|the\s+(?:date|time|day)|time\s+is\s+it|today'?s\s+date"
    r"|day\s+is\s+(?:it|today)|current\s+(?:date|time))\b",
    re.IGNORECASE,
)
_ZONE = re.compile(r"\b(?:time|date|day)\b[^,?]*?\bin\s+(?P<zone>[\w/+-]+(?:\s+[A-Z][\w]+)?)")
_READ = re.compile(r"\bread\s+(?:the\s+)?(?:file\s+)?[\"'`]?(?P<path>[\w./~-]+)", re.IGNORECASE)
_SEARCH = re.compile(r"\bsearch\s+(?:the\s+web\s+)?(?:for\s+)?(?P<query>[^?]+)", re.IGNORECASE)
_REMEMBER = re.compile(
    r"^\s*(?:please\s+)?remember\s+(?:that\s+)?(?P<fact>.+?)[.!]*\s*$", re.IGNORECASE
)
_RECALL = re.compile(
    r"\b(?:what\s+do\s+you\s+remember|recall)\b(?:\s+(?:about|of))?\s*(?P<query>[^?]*)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Intent:
    """One tool call the question asks for, and an optional calculation on its number."""

    tool: str
    args: dict[str, object]
    then: tuple[str, str] | None = None  # (operator, operand) applied to the result's number


def _words_to_operators(text: str) -> str:
    for pattern, symbol in _OPERATOR_WORDS:
        text = re.sub(pattern, f" {symbol} ", text, flags=re.IGNORECASE)
    return text


def _expressions(text: str) -> list[str]:
    """Runs of arithmetic tokens separated only by spaces, holding a number and an operation."""
    runs: list[list[re.Match[str]]] = []
    for match in _TOKEN.finditer(text):
        if runs and not text[runs[-1][-1].end() : match.start()].strip():
            runs[-1].append(match)
        else:
            runs.append([match])
    found = []
    for run in runs:
        expression = text[run[0].start() : run[-1].end()].strip().rstrip("+-*/%^(")
        has_number = any(m.group()[0].isdigit() or m.group() == "pi" for m in run)
        operates = any(m.group().isalpha() for m in run) or bool(
            _OPERATOR.search(expression.lstrip("-+ "))
        )
        if has_number and operates and expression[:1] not in "*/%^":
            found.append(" ".join(expression.replace("^", "**").split()))
    return found


@cache
def _zone_names() -> dict[str, str]:
    return {name.rsplit("/", 1)[-1].lower(): name for name in zoneinfo.available_timezones()}


def _zone(name: str) -> str:
    if "/" in name or name.upper() in {"UTC", "GMT"}:
        return name
    return _zone_names().get(name.strip().replace(" ", "_").lower(), name)


def _weather(text: str, normalized: str) -> list[Intent]:
    units = "fahrenheit" if re.search(r"fahrenheit", text, re.IGNORECASE) else "celsius"
    intents = []
    for match in _WEATHER.finditer(normalized):
        city = match.group("city").strip(" .'’")
        after = _DEPENDENT.match(re.sub(r"^\s*(?:and|then|,)\s*", "", normalized[match.end() :]))
        then = (after.group("op"), after.group("n")) if after else None
        intents.append(Intent("get_weather", {"city": city, "units": units}, then))
    return intents


def parse_intents(text: str, previous_result: str | None = None) -> list[Intent]:
    """Read the tool calls a question asks for, in the order they are asked."""
    found: list[tuple[int, Intent]] = []
    if remember := _REMEMBER.match(text):  # the rest of the message is the fact: look no further
        return [Intent("remember", {"fact": remember.group("fact")})]
    if recall := _RECALL.search(text):
        return [Intent("recall", {"query": recall.group("query").strip(" .")})]
    search = _SEARCH.search(text)
    if search:  # everything after "search" is the query: look no further
        return [Intent("web_search", {"query": search.group("query").strip(" .")})]
    normalized = _words_to_operators(text)
    weather = _weather(text, normalized)
    found += [(normalized.find(str(i.args["city"])), i) for i in weather]
    if read := _READ.search(text):
        found.append((read.start(), Intent("read_file", {"path": read.group("path").rstrip(".,")})))
    if when := _DATETIME.search(text):
        zone = _ZONE.search(text)
        args: dict[str, object] = {"timezone": _zone(zone.group("zone"))} if zone else {}
        if not (zone and weather and zone.group("zone") in str(weather[0].args["city"])):
            found.append((when.start(), Intent("get_datetime", args)))
    if not any(i.then for i in weather):
        arithmetic = normalized if not read else normalized.replace(read.group("path"), " ")
        for expression in _expressions(arithmetic):
            found.append(
                (normalized.find(expression), Intent("calculator", {"expression": expression}))
            )
        follow_up = _DEPENDENT.match(re.sub(r"^\s*(?:and|then|what about)\s*", "", normalized))
        if not found and follow_up and previous_result is not None:
            expression = f"{previous_result} {follow_up.group('op')} {follow_up.group('n')}"
            found.append((0, Intent("calculator", {"expression": expression})))
    return [intent for _, intent in sorted(found, key=lambda pair: pair[0])]


_NAMED = re.compile(
    r"^\s*(?:(?:call|use)\s+)?(?P<name>[A-Za-z_][\w-]*)(?:\s+with(?=\s))?(?:\s+(?P<args>.+?))?\s*$"
)


def named_call(text: str, tool_names: tuple[str, ...]) -> Intent | None:
    """A call of a tool by its name: `use create_ticket with title="printer jam"`, `NAME {json}`.

    How the offline model calls tools it has no words for (yours, an MCP server's): the
    question is the tool's name (after an optional `use` or `call`), then, after an optional
    `with`, its arguments as JSON or as `key=value` pairs (a value that reads as a number is
    one). None when the question is not such a call.
    """
    match = _NAMED.match(text)
    if match is None or match.group("name") not in tool_names:
        return None
    given = (match.group("args") or "").strip()
    if given.startswith("{"):
        try:
            args = json.loads(given)
        except ValueError:
            return None
        return Intent(match.group("name"), args) if isinstance(args, dict) else None
    try:
        words = shlex.split(given)
    except ValueError:
        return None
    if not all("=" in word for word in words):
        return None
    pairs = (word.split("=", 1) for word in words)
    return Intent(match.group("name"), {key: _value(value) for key, value in pairs})


def _value(text: str) -> object:
    try:
        return json.loads(text) if _NUMBER.fullmatch(text) else text
    except ValueError:
        return text


def first_number(text: str) -> str | None:
    """The first number in a tool result, e.g. the temperature in a weather report."""
    match = re.search(r"(-?\d+(?:\.\d+)?)\s*°", text) or _NUMBER.search(text)
    return match.group(1) if match and match.lastindex else (match.group() if match else None)
