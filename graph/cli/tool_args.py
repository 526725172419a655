"""Checking `ferry tools call`'s arguments before anything runs: one line naming the bad field.

A model that sends bad arguments gets an error result to act on (graph/execution.py); a person
at the command line gets a usage error instead (exit 2), so a typo costs no call. Arguments are
checked against the schema the model is sent, and, for tools with a pydantic schema (Ferry's
own), validated by it as the tool will. An MCP tool's schema is JSON Schema, which its server
validates in full when called; here its names, required fields and top-level types are checked.
"""

from __future__ import annotations

import json
from difflib import get_close_matches
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ValidationError

from graph.cli.agent import UsageError

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def parse_arguments(text: str, tool: BaseTool) -> dict[str, Any]:
    """The arguments as a JSON object that fits `tool`'s schema; a `UsageError` naming what not.

    Raises:
        UsageError: not JSON, not an object, or a field is unknown, missing or of the wrong type.
    """
    try:
        args = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"the arguments for {tool.name} are not JSON ({exc.msg} at character {exc.pos}): "
            f"""give one JSON object, e.g. '{{"name": "value"}}'"""
        ) from None
    if not isinstance(args, dict):
        raise UsageError(
            f"the arguments for {tool.name} must be a JSON object, not {type(args).__name__}"
        )
    check_arguments(tool, args)
    return args


def check_arguments(tool: BaseTool, args: dict[str, Any]) -> None:
    """Refuse arguments the tool's schema does not accept.

    Raises:
        UsageError: a field is unknown, missing or of the wrong type.
    """
    schema = convert_to_openai_tool(tool)["function"]["parameters"]  # what the model is sent
    properties: dict[str, Any] = schema.get("properties", {})
    listed = ", ".join(properties) or "none"
    if schema.get("additionalProperties") is not True:
        for name in args:
            if name not in properties:
                close = get_close_matches(name, list(properties), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else f" (its arguments: {listed})"
                raise UsageError(f"unknown argument {name!r} for {tool.name}{hint}")
    for name in schema.get("required", []):
        if name not in args:
            kind = _type_name(properties.get(name, {}))
            raise UsageError(f"{tool.name} needs the argument {name!r}{kind} (see ferry tools)")
    model = tool.tool_call_schema
    if isinstance(model, type) and issubclass(model, BaseModel):
        try:
            model.model_validate(args)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error["loc"]) or "arguments"
            raise UsageError(f"argument {field!r} for {tool.name}: {error['msg']}") from None
        return
    for name, value in args.items():
        expected = _types(properties.get(name, {}))
        if expected and not _is_one_of(value, expected):
            raise UsageError(
                f"argument {name!r} for {tool.name} must be {' or '.join(expected)}, "
                f"not {_json_type(value)}"
            )


def _types(spec: dict[str, Any]) -> list[str]:
    """The JSON types a property allows (none: any); `anyOf`/`oneOf` of plain types included."""
    kind = spec.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [str(k) for k in kind]
    options = spec.get("anyOf") or spec.get("oneOf") or []
    found = [_types(option) for option in options if isinstance(option, dict)]
    return [] if not found or not all(found) else [k for kinds in found for k in kinds]


def _is_one_of(value: Any, kinds: list[str]) -> bool:
    for kind in kinds:
        allowed = _JSON_TYPES.get(kind)
        if allowed is None:  # a type this check does not know: the server decides
            return True
        # JSON's booleans are not numbers, though Python's are ints; 2.0 is an integer in JSON.
        if isinstance(value, bool) and kind != "boolean":
            continue
        if isinstance(value, allowed) or (kind == "integer" and _whole(value)):
            return True
    return False


def _whole(value: Any) -> bool:
    return isinstance(value, float) and value.is_integer()


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    names = {str: "string", int: "integer", float: "number", list: "array", dict: "object"}
    return names.get(type(value), "null")


def _type_name(spec: dict[str, Any]) -> str:
    kinds = _types(spec)
    return f" ({' or '.join(kinds)})" if kinds else ""
