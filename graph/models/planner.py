"""The offline planner's reading of a question: which tools to call, and with what.

Deliberately small and literal. It recognises arithmetic, "weather in X", date/time (optionally
"in <zone>"), "read <file>", "search …", "remember that …" and "what do you remember (about …)",
and any tool called by its name (`named_call`); anything else is left to the caller to decline.
"""

from __future__ import annotations

import json
import re
import shlex
import zoneinfo
from dataclasses import dataclass
from functools import cache

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
