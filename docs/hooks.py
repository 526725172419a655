"""MkDocs hooks: the pages generated from the code, so the docs cannot drift from it.

`<!-- generated: readme -->` is the README (its `docs/` links made relative to the site),
`<!-- generated: cli -->` every command and option of `ferry`, from its parser, and
`<!-- generated: settings -->` every setting, from `graph.core.settings.Settings`: each field's
docstring and default.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Fill in the generated parts of a page."""
    generated = {"readme": readme, "cli": cli_reference, "settings": settings_reference}
    for name, make in generated.items():
        marker = f"<!-- generated: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown


def readme() -> str:
    """The README, with its links into `docs/` made relative to the site's root."""
    text = (REPO / "README.md").read_text()
    return re.sub(r"\]\(docs/", "](", text)


def cli_reference() -> str:
    """Every command of `ferry` with its usage and options, as its parser has them."""
    from graph.cli.parser import build_parser

    parser = build_parser()
    parts = [_command("ferry", parser, level=2)]
    for name, sub in _subcommands(parser):
        parts.append(_command(f"ferry {name}", sub, level=2))
        parts += [_command(f"ferry {name} {n}", s, level=3) for n, s in _subcommands(sub)]
    return "\n".join(parts)


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # noqa: SLF001 - argparse offers no public way to them
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return list(action.choices.items())
    return []


def _command(title: str, parser: argparse.ArgumentParser, level: int) -> str:
    usage = parser.format_usage().removeprefix("usage: ").strip()
    lines = [f"{'#' * level} `{title}`", "", parser.description or "", "", "```", usage, "```", ""]
    rows = []
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):  # noqa: SLF001
            continue
        names = ", ".join(action.option_strings) or action.metavar or action.dest
        if action.option_strings and action.nargs != 0:
            names += f" {action.metavar or action.dest.upper()}"
        rows.append(f"| `{names}` | {_cell(action.help or '')} |")
    if rows:
        lines += ["| argument | what |", "|---|---|", *rows, ""]
    return "\n".join(lines)


def settings_reference() -> str:
    """Every setting: its variable, its docstring, its default."""
    from graph.core.settings import Settings

    rows = ["| variable | meaning | default |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        rows.append(
            f"| `FERRY_{name.upper()}` | {_cell(field.description or '')} | "
            f"{_cell(_default(field))} |"
        )
    return "\n".join(rows) + "\n"


def _default(field: Any) -> str:
    factory = field.default_factory
    if factory == Path.cwd:
        return "the working directory"
    if factory is not None:
        return " ".join((factory.__doc__ or "computed").split())
    if field.is_required():
        return "required"
    if field.default is None:
        return "unset"
    if field.default == "":
        return "empty"
    if isinstance(field.default, bool):
        return f"`{int(field.default)}`"
    return f"`{field.default}`"


def _cell(text: str) -> str:
    """Text for one table cell: on one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")
