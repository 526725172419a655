"""Your own tools, named as `module:ATTR` (`FERRY_TOOLS`, `--tools`): imported, checked, listed.

`ATTR` is a list (or tuple) of LangChain tools, or one tool: a function decorated with `@tool`
is one. The module is imported as `python -m` would find it, the working folder included, but
after everything else on `sys.path`: a file there never shadows Ferry's own packages or an
installed one (a `tools.py` in the folder is not Ferry's `tools`).
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
from collections.abc import Iterable
from difflib import get_close_matches
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool


class UserToolsError(Exception):
    """A `module:ATTR` that gives no usable tools; `reason` says what to fix."""

    def __init__(self, spec: str, reason: str) -> None:
        super().__init__(f"{spec}: {reason}")
        self.spec = spec
        self.reason = reason


def tool_specs(specs: str | Iterable[str]) -> tuple[str, ...]:
    """The `module:ATTR` entries of a comma-separated setting (or of a list of them)."""
    parts = specs.split(",") if isinstance(specs, str) else specs
    return tuple(dict.fromkeys(p.strip() for p in parts if p.strip()))  # in order, once each


_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@functools.cache
def load_user_tools(specs: tuple[str, ...], reserved: frozenset[str]) -> tuple[BaseTool, ...]:
    """The tools each `module:ATTR` names, in order.

    Args:
        specs: The `module:ATTR` entries (`tool_specs`).
        reserved: The built-in tools' names, which none of these may take.

    Raises:
        UserToolsError: a module not found or failing to import, an attribute missing, not a
            tool or a list of them, or a tool whose name is reserved or taken by another.
    """
    loaded: list[BaseTool] = []
    owner: dict[str, str] = {}
    for spec in specs:
        for tool in _tools_of(spec):
            if not _TOOL_NAME.fullmatch(tool.name):  # what providers take (OpenAI's rule)
                raise UserToolsError(
                    spec,
                    f"tool name {tool.name!r} is not 1 to 64 letters, digits, _ or -, which "
                    "model providers require",
                )
            if tool.name in reserved:
                raise UserToolsError(
                    spec,
                    f"tool {tool.name!r} has the name of a built-in tool; give yours another "
                    f'(@tool("my_{tool.name}"))',
                )
            if any(tool is earlier for earlier in loaded):  # named twice: one tool all the same
                continue
            if tool.name in owner:
                raise UserToolsError(
                    spec, f"tool {tool.name!r} is also in {owner[tool.name]}; rename one of them"
                )
            owner[tool.name] = spec
            tool.metadata = {"source": spec, **(tool.metadata or {})}  # `ferry tools` shows it
            loaded.append(tool)
    return tuple(loaded)


def _tools_of(spec: str) -> list[BaseTool]:
    """The tools one `module:ATTR` names."""
    from langchain_core.tools import BaseTool

    module_name, _, attr = spec.partition(":")
    if not (module_name and attr and all(p.isidentifier() for p in module_name.split("."))):
        raise UserToolsError(
            spec, "expected MODULE:ATTR, a module and the list of tools in it (tickets:tools)"
        )
    module = _import(spec, module_name)
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise UserToolsError(spec, _missing(module, module_name, attr))
        value = getattr(value, part)
    items = list(value) if isinstance(value, list | tuple) else [value]
    for index, item in enumerate(items):
        if not isinstance(item, BaseTool):
            where = f"{module_name}.{attr}" + (f"[{index}]" if value is not item else "")
            raise UserToolsError(
                spec,
                f"{where} is {_kind(item)}, not a LangChain tool or a list of them "
                "(decorate a function with @tool from langchain_core.tools)",
            )
    if not items:
        raise UserToolsError(spec, f"{module_name}.{attr} is an empty list: no tools to add")
    return items


def _import(spec: str, module_name: str) -> ModuleType:
    """Import the module, the working folder searched last; a one-line reason if it fails.

    The folder joins the path only when the module is there (`tickets.py`, or a `tickets/`
    package): whatever else a folder holds (an `h2.py` that a library imports if present)
    is not imported because `--tools` named a module installed elsewhere.
    """
    here = str(Path.cwd())
    top = module_name.split(".")[0]
    if (Path(here) / f"{top}.py").is_file() or (Path(here) / top / "__init__.py").is_file():
        if here not in sys.path and "" not in sys.path:
            sys.path.append(here)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):  # the module itself, not an import in it
            raise UserToolsError(
                spec,
                f"no module named {module_name!r} in the working folder ({here}) or on the "
                "Python path",
            ) from None
        raise UserToolsError(spec, f"importing {module_name} failed: {_one_line(exc)}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever it raises, in one line
        raise UserToolsError(spec, f"importing {module_name} failed: {_one_line(exc)}") from None


def _missing(module: ModuleType, module_name: str, attr: str) -> str:
    """Why `module` has no `attr`: the closest names it has, or the file that shadows it."""
    names = [n for n in vars(module) if not n.startswith("_")]
    close = get_close_matches(attr.split(".")[0], names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    local = Path.cwd() / f"{module_name.split('.')[0]}.py"
    found = getattr(module, "__file__", None)
    if local.is_file() and (found is None or Path(found).resolve() != local.resolve()):
        hint += f" ({local.name} here is not it: {module_name} is {found}; rename yours)"
    return f"module {module_name!r} has no attribute {attr!r}{hint}"


def _kind(value: object) -> str:
    """What a value is, in a few words (`a function`, `a str`)."""
    if value is None:
        return "None"
    if isinstance(value, type):
        return f"a class ({value.__name__})"
    if callable(value) and hasattr(value, "__name__"):
        return f"a function ({value.__name__})"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


def _one_line(exc: BaseException) -> str:
    first = (str(exc).splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
