"""Structured answers: a schema the turn's final answer must match (`response_format`).

The model answers in the schema by calling one more tool, the *answer tool*, named after the
schema. That works on every model that calls tools, and the model can still call Ferry's tools
first in the same turn. Nothing runs the answer tool: `check` validates its arguments. A valid
answer is stored as the thread's `structured_response` — plain JSON, as stored data names no
code — and ends the turn; an invalid one is answered with what was wrong, and the model tries
again, `FERRY_OUTPUT_RETRIES` times at most (graph/nodes.py).

The schema is the graph's (`build_graph(response_format=...)`: a pydantic model, a TypedDict,
a dataclass or a JSON schema) or the run's (`configurable["response_format"]`, a JSON schema:
what the CLI's `--schema`, a server client and a Temporal turn send). A run's schema comes from
outside the process: it is checked against JSON Schema's own meta-schema where it enters, its
`$ref`s resolve inside it only — nothing is fetched — and its patterns match in linear time.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import BaseMessage, ToolMessage
from pydantic import BaseModel, PydanticUserError, TypeAdapter, ValidationError
from typing_extensions import is_typeddict  # typing's misses typing_extensions' before 3.12

from graph.core.settings import ConfigError

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

RUN_KEY = "response_format"
"""Where a run's own schema goes in `configurable`."""
ANSWER_MARK = "ferry_answer"
"""Marks the answer tool's results (in `response_metadata`)."""
_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_ERRORS = 5
_MAX_SCHEMA_CHARS = 100_000
_MAX_DEPTH = 64
"""Deeper than any schema a person writes; deep enough nesting overflows a recursive walk."""


class InvalidAnswer(ValueError):
    """An answer that does not match the schema; the message says where and why."""


@dataclass(frozen=True)
class ResponseFormat:
    """A schema answers must match, and the answer tool that carries them."""

    name: str
    """The answer tool's name: the schema's title or class name."""
    json_schema: dict[str, Any]
    description: str
    validate: Callable[[Any], Any] = dataclasses.field(repr=False, compare=False)
    """The answer as plain JSON data, or `InvalidAnswer`."""

    def as_tool(self) -> dict[str, Any]:
        """The answer tool, in the form every chat model's `bind_tools` takes."""
        description = self.description or "Give the final answer in this form."
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": f"{description} Call this last, alone, to give your answer.",
                "parameters": self.json_schema,
            },
        }

    def answer_in(self, text: str) -> Any:
        """An answer written as JSON text instead of a call, validated; `InvalidAnswer` else."""
        try:
            data = json.loads(_unfenced_json(text))
        except ValueError as exc:
            raise InvalidAnswer(f"the answer is not JSON ({exc})") from None
        return self.validate(data)


AnswerVerdict = Literal["accepted", "invalid", "not_alone"]


def answer_result(result: ToolMessage, verdict: AnswerVerdict) -> ToolMessage:
    """`result`, marked as the answer tool's, with what was decided.

    A report counts it as the answer, not a tool call; only `invalid` answers spend
    `FERRY_OUTPUT_RETRIES`.
    """
    result.response_metadata[ANSWER_MARK] = verdict
    return result


def is_answer(message: BaseMessage, verdict: AnswerVerdict | None = None) -> bool:
    """Whether `message` is a result `answer_result` marked (with `verdict`, if given)."""
    if not isinstance(message, ToolMessage):
        return False
    marked = message.response_metadata.get(ANSWER_MARK)
    return bool(marked) and (verdict is None or marked == verdict)


def unclashed(answer: ResponseFormat, taken: Collection[str]) -> ResponseFormat:
    """`answer` with a name no tool has: a schema titled like a tool gets `_answer` added."""
    if answer.name not in taken:
        return answer
    suffixes = (f"_answer{n or ''}" for n in itertools.count())
    name = next(n for s in suffixes if (n := answer.name[: 64 - len(s)] + s) not in taken)
    return dataclasses.replace(answer, name=name)


def response_format(schema: Any) -> ResponseFormat:
    """The answer format for a pydantic model, a TypedDict, a dataclass or a JSON schema.

    Raises:
        ConfigError: `schema` is none of those, is not a valid JSON schema, or does not
            describe an object (a tool's arguments are one).
    """
    if isinstance(schema, ResponseFormat):
        return schema
    if isinstance(schema, Mapping):
        return _from_json_schema(json.dumps(schema, sort_keys=True, default=str))
    if isinstance(schema, type) and (
        issubclass(schema, BaseModel) or is_typeddict(schema) or dataclasses.is_dataclass(schema)
    ):
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(schema)
        except PydanticUserError as exc:  # e.g. typing.TypedDict before Python 3.12
            raise ConfigError(f"response_format {schema.__name__}: {exc.message}") from None

        def validate(data: Any) -> Any:
            try:
                return adapter.dump_python(adapter.validate_python(data), mode="json")
            except ValidationError as exc:
                raise InvalidAnswer(_pydantic_errors(exc)) from None

        json_schema = adapter.json_schema()
        return ResponseFormat(
            _answer_tool_name(schema.__name__),
            _object_schema(json_schema),
            (schema.__doc__ or "").strip() if not is_typeddict(schema) else "",
            validate,
        )
    raise ConfigError(
        f"response_format must be a pydantic model, a TypedDict, a dataclass or a JSON schema "
        f"(a dict), not {type(schema).__name__}"
    )


def of_run(config: RunnableConfig | None, default: ResponseFormat | None) -> ResponseFormat | None:
    """The run's answer format: its own JSON schema if it sent one, else the graph's.

    Raises:
        ConfigError: the run's schema is not a valid JSON schema of an object.
    """
    sent = (config or {}).get("configurable", {}).get(RUN_KEY)
    if sent is None:
        return default
    if isinstance(sent, str):  # as a CLI or a form would send it
        return _from_json_schema(sent)
    if not isinstance(sent, Mapping):
        raise ConfigError(f"{RUN_KEY} must be a JSON schema (an object), not {type(sent).__name__}")
    return _from_json_schema(json.dumps(sent, sort_keys=True))


@functools.lru_cache(maxsize=64)
def _from_json_schema(text: str) -> ResponseFormat:
    """A JSON schema's answer format (cached by its text: a run sends it on every turn).

    Validated by jsonschema-rs with Rust's `regex`, whose matching time is linear in the text:
    a `pattern` a client wrote cannot make a worker backtrack for minutes over a model's answer
    (one with look-around or back-references is refused). A `$ref` resolves inside the schema
    only: one to anything else is refused, never fetched.
    """
    import jsonschema_rs  # only where a JSON schema is used

    if len(text) > _MAX_SCHEMA_CHARS:
        raise ConfigError(f"the answer schema is over {_MAX_SCHEMA_CHARS} characters")
    try:
        schema = json.loads(text)
        if _depth(schema) > _MAX_DEPTH:
            raise RecursionError
        _check_schema(schema)
        validator = jsonschema_rs.validator_for(
            schema,
            retriever=_not_fetched,
            pattern_options=jsonschema_rs.RegexOptions(),
            validate_formats=True,  # an answer's "date-time" is one, as pydantic's is
        )
    except RecursionError:
        raise ConfigError(f"the answer schema nests deeper than {_MAX_DEPTH} levels") from None
    except jsonschema_rs.ValidationError as exc:  # (a ValueError: caught first)
        reason = exc.message.splitlines()[0]
        raise ConfigError(f"the answer schema cannot be used: {reason}") from None
    except ValueError as exc:  # not JSON
        raise ConfigError(f"the answer schema is not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise ConfigError("the answer schema must be a JSON object")

    def validate(data: Any) -> Any:
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.instance_path))
        if errors:
            raise InvalidAnswer(
                "; ".join(_at(e.instance_path, e.message) for e in errors[:_MAX_ERRORS])
            )
        return data

    title = schema.get("title")
    name = _answer_tool_name(title if isinstance(title, str) and title else "answer")
    description = schema.get("description")
    return ResponseFormat(
        name,
        _object_schema(schema),
        description if isinstance(description, str) else "",
        validate,
    )


def _check_schema(schema: Any) -> None:
    """Whether `schema` is valid JSON Schema (its own meta-schema says); ConfigError if not."""
    import jsonschema_rs

    try:
        jsonschema_rs.meta.validate(schema)
    except jsonschema_rs.ValidationError as exc:
        reason = exc.message.splitlines()[0]
        raise ConfigError(f"the answer schema is not a valid JSON schema: {reason}") from None


def _depth(value: Any) -> int:
    """How deep objects and lists nest in `value` (1 for a scalar)."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 1


def _not_fetched(uri: str) -> Any:
    raise ValueError(f"{uri} is outside the schema: only references inside it are followed")


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` if it describes an object, as a tool's arguments must."""
    if schema.get("type") != "object":
        raise ConfigError(
            'the answer schema must describe an object ("type": "object"), as a tool\'s '
            "arguments do: wrap a list or a value in an object's property"
        )
    return schema


def _answer_tool_name(title: str) -> str:
    """A tool name from a schema's title: letters, digits, `_` and `-`, 64 at most."""
    return _TOOL_NAME.sub("_", title)[:64] or "answer"


def _pydantic_errors(exc: ValidationError) -> str:
    return "; ".join(
        _at(error["loc"], error["msg"]) for error in exc.errors(include_url=False)[:_MAX_ERRORS]
    )


def _at(path: Any, message: str) -> str:
    """One error: where in the answer, and why (a long value it quotes cut in its middle)."""
    where = "/".join(str(part) for part in path)
    if len(message) > 300:
        message = f"{message[:140]} … {message[-140:]}"
    return f"{where}: {message}" if where else message


def _unfenced_json(text: str) -> str:
    """JSON text without the Markdown fence models often put around it."""
    stripped = text.strip()
    match = re.fullmatch(r"```(?:json)?\s*\n(.*)\n\s*```", stripped, re.DOTALL)
    return match.group(1) if match else stripped
