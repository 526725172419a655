"""The `ferry` commands that run the agent: ask and resume (with approvals); chat in chat.py.

Heavy imports stay inside the functions, so the CLI's start-up (and `--help`) stays fast.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from graph.cli.approvals import CHOICES, ask_decisions
from graph.cli.collection import collection_after_loading
from graph.core.controls import printable, printable_json

if TYPE_CHECKING:
    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool

    from graph.builder import FerryGraph
    from graph.core.settings import Settings
    from graph.runs.runner import Event, TurnRunner


class UserError(Exception):
    """A problem the user can fix; printed as one line, exit code 1."""


class UsageError(UserError):
    """A command line that cannot work (an empty question, a bad date); one line, exit code 2."""


def print_json(value: Any) -> None:
    """Print one JSON object on stdout: all that `--json` prints there."""
    sys.stdout.write(printable_json(json.dumps(value, ensure_ascii=False, default=str)) + "\n")


def command_settings(args: argparse.Namespace) -> Settings:
    """The settings with the command's `--model` and `--tools` applied (`with_tools_option`)."""
    from graph.core.settings import get_settings

    settings = get_settings()
    if getattr(args, "model", None):
        settings = settings.model_copy(update={"model": args.model})
    return with_tools_option(settings, args)


def with_tools_option(settings: Settings, args: argparse.Namespace) -> Settings:
    """The settings with `--tools` in place of `FERRY_TOOLS` (as `--model` of `FERRY_MODEL`).

    Its tools are imported now, so a module not found, or not tools, is a usage error (exit 2).
    """
    if not getattr(args, "tools", None):
        return settings
    from graph.builder import user_tools
    from graph.core.settings import ConfigError

    settings = settings.model_copy(update={"tools": ",".join(args.tools)})
    try:
        user_tools(settings, option="--tools")
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return settings


@contextmanager
def open_graph(args: argparse.Namespace, *, need_model: bool) -> Iterator[FerryGraph]:
    """The graph on the configured database for one command; the model checked up front."""
    # What loads and builds the graph lives as long as the command: not collected, frozen.
    with collection_after_loading() as loaded, _built(args, need_model=need_model) as graph:
        loaded()
        yield graph


@contextmanager
def _built(args: argparse.Namespace, *, need_model: bool) -> Iterator[FerryGraph]:
    from graph.builder import build_graph
    from graph.core.log import configure_logging
    from graph.models import make_model
    from graph.state import fold_messages
    from graph.storage import open_saver
    from graph.storage.stores import StoreOnFirstUse

    settings = command_settings(args)
    configure_logging(settings)
    model = make_model(settings.model) if need_model else None
    # The built-in tools and the MCP servers' (started now, once per process)...
    tools: list[BaseTool] | None = None
    if not need_model:  # a command that only reads threads runs no tool: none to start or approve
        tools, settings = [], settings.model_copy(update={"approve_tools": ""})
    with open_saver(settings, fold=fold_messages) as saver, ExitStack() as stack:
        # A turn may remember and recall: its store beside the threads (none to read them),
        # opened when the turn first uses it.
        store = None
        if need_model:
            store = StoreOnFirstUse(settings.db, settings.database_url)
            stack.callback(store.close)
        graph = build_graph(
            model=model, tools=tools, checkpointer=saver, settings=settings, store=store
        )
        if getattr(args, "wait", False):  # wait for a busy thread instead of failing at once
            from graph.threads.lease import WAIT_FOR_THREAD

            graph = graph.with_config(configurable={WAIT_FOR_THREAD: True})
        opened = None if settings.database_url else _file_identity(settings.db)
        yield graph
        if opened is not None and _file_identity(settings.db) != opened:
            # SQLite went on writing to the file it had open, which is no longer at its path.
            raise UserError(
                f"database {settings.db.absolute()} was moved or removed while this ran: what "
                "it stored went with the old file, and the path has none of it (FERRY_DB)"
            )


def _file_identity(path: Path) -> tuple[int, int] | None:
    """Which file is at `path` (device, inode), or None if none is."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_dev, status.st_ino


def refuse_without_database(args: argparse.Namespace) -> None:
    """A command that reads a named thread, where no database is yet: one line, nothing created."""
    from graph.core.settings import get_settings
    from graph.storage.threads.reading import nothing_stored

    settings = get_settings()
    if not settings.database_url and nothing_stored(settings.db):
        raise UserError(f"unknown thread {args.thread!r} (see `ferry threads`)")


def thread_config(thread_id: str) -> RunnableConfig:
    """The run configuration naming a thread."""
    return {"configurable": {"thread_id": thread_id}}


def _never_stored(state: Any) -> bool:
    """Whether a thread's state is the empty one of a thread never stored."""
    return not state.values and state.created_at is None


def existing_state(graph: FerryGraph, thread_id: str) -> Any:
    """The thread's latest state; a one-line error if it was never stored."""
    state = graph.get_state(thread_config(thread_id))
    if _never_stored(state):
        raise UserError(f"unknown thread {thread_id!r} (see `ferry threads`)")
    return state


def resume_all(pending: list[dict[str, Any]], decision: dict[str, Any]) -> dict[str, Any]:
    """The resume value deciding every pending call alike; a one-line error if one forbids it."""
    for call in pending:
        allowed = call.get("allowed_decisions") or list(CHOICES)
        if decision["type"] not in allowed:
            raise UserError(
                f"tool call {call['id']} ({call['name']}) does not allow {decision['type']}: "
                f"FERRY_APPROVE_TOOLS allows {'|'.join(allowed)} for {call['name']}"
            )
    return {"decisions": [decision] * len(pending)}


def on_temporal(args: argparse.Namespace) -> bool:
    """Whether this command's turns go to Temporal (`--temporal` or FERRY_TEMPORAL_ADDRESS)."""
    from graph.core.settings import get_settings

    return bool(getattr(args, "temporal", None) or get_settings().temporal_address)


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings, with `--temporal ADDRESS` (and `--tools`) applied; logging configured."""
    from graph.core.log import configure_logging
    from graph.core.settings import get_settings

    settings = with_tools_option(get_settings(), args)  # the worker's; ask refuses it (below)
    if getattr(args, "temporal", None):
        settings = settings.model_copy(update={"temporal_address": args.temporal})
    configure_logging(settings)
    return settings


@contextmanager
def open_runner(args: argparse.Namespace, *, interactive: bool) -> Iterator[TurnRunner]:
    """The runner of this command's turns: on Temporal when an address is configured.

    `interactive`: a person at the terminal decides paused calls. Either way, once a run has
    stopped and its outcome is stored, a Ctrl-C is recorded instead of raised (`outcome_stored`).
    """
    from graph.cli.interrupt import outcome_stored

    if not on_temporal(args):
        from graph.runs.runner import InProcessRunner

        with open_graph(args, need_model=True) as graph:
            yield InProcessRunner(graph, interactive=interactive, on_stopped=outcome_stored)
        return
    if getattr(args, "tools", None):
        raise UsageError(
            "--tools: on Temporal the workers run the tools, not this command; start them "
            f"with ferry worker --tools {' --tools '.join(args.tools)} (or FERRY_TOOLS), "
            "and ask without --tools"
        )
    from graph.cli.temporal_runtime import say
    from graph.temporal.runner import TemporalRunner

    settings = settings_of(args)
    shown = not getattr(args, "json", False) and getattr(args, "schema", None) is None
    with (
        open_graph(args, need_model=False) as graph,  # only to read threads: no model, no tools
        TemporalRunner(
            settings,
            graph,
            stream=shown,  # only the answer is shown otherwise
            wait=bool(getattr(args, "wait", False)),
            say=say,
            on_stopped=outcome_stored,
        ) as runner,
    ):
        yield runner


def _nothing() -> None:
    """Announce nothing."""


def _say(line: str) -> None:
    sys.stderr.write(line)


def run_to_stop(
    runner: TurnRunner,
    events: Iterator[Event],
    thread_id: str,
    as_json: bool,
    *,
    interactive: bool,
    note: str | None = None,
    schema: str | None = None,
) -> int:
    """Show a turn to its answer, a guard's stop, or a pause for approval, and report it.

    `note` goes to stderr once the turn holds its thread (a turn refused as busy prints only
    that). `interactive`: a pause is decided by the person at the terminal, and the turn goes
    on. With a `schema`, the answer in it is what stdout gets, as JSON, and there being none is
    a failure (exit 1): a program reading stdout gets the answer or nothing.
    """
    from graph.cli.interrupt import interrupt_again
    from graph.cli.render import Progress, show_turn
    from graph.runs.runner import Paused

    progress = Progress(out=None if as_json or schema is not None else sys.stdout)
    on_start: Callable[[], None] = functools.partial(_say, note) if note else _nothing
    while True:
        stop = show_turn(events, progress, on_start)
        on_start = _nothing  # announced once, before the first run
        if not (isinstance(stop, Paused) and stop.pending and interactive):
            break
        interrupt_again()  # while a person decides, Ctrl-C leaves the run to resume
        events = runner.decide(thread_id, ask_decisions(stop.pending), schema)
    report = stop.report
    if as_json:
        print_json(report)
    pending = report.get("pending_approvals") or []
    if pending and not as_json:
        for call in pending:
            line = f"awaiting approval: {call['name']}({json.dumps(call['args'])})"
            sys.stderr.write(printable(line) + "\n")
        sys.stderr.write(
            f"decide with: ferry resume --thread {thread_id} --approve (or --reject REASON)\n"
        )
    return schema_outcome(report, as_json) if schema is not None else 0


def answer_schema(args: argparse.Namespace) -> str | None:
    """`--schema`: a JSON schema, given inline (`{...}`) or as a file; a usage error if unusable.

    Checked before anything is stored or any model called.
    """
    text: str | None = getattr(args, "schema", None)
    if text is None:
        return None
    from graph.core.settings import ConfigError
    from graph.output import RUN_KEY, of_run

    if not text.lstrip().startswith("{"):
        try:
            text = Path(text).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise UsageError(f"--schema: cannot read {text}: {reason}") from None
    try:
        of_run({"configurable": {RUN_KEY: text}}, None)
    except ConfigError as exc:
        raise UsageError(f"--schema: {exc}") from None
    return text


def turn_schema(state: Any) -> str | None:
    """The answer schema the thread's turn began with (a resume answers in it), as JSON text."""
    stored = (getattr(state, "values", None) or {}).get("answer_schema")
    return json.dumps(stored) if stored is not None else None


def schema_outcome(report: dict[str, Any], as_json: bool) -> int:
    """With `--schema`: the answer in it on stdout as JSON (`--json` has it as `output`).

    The exit code is 1 when no answer matched, so a program reading stdout gets the answer
    or nothing; a turn paused for approval is not over (0).
    """
    if report.get("pending_approvals"):
        return 0
    if report.get("output") is None:
        if not as_json:
            reason = report.get("stop_reason")
            sys.stderr.write(f"ferry: no answer matched the schema (stop_reason: {reason})\n")
        return 1
    if not as_json:
        answer = json.dumps(report["output"], ensure_ascii=False, indent=2)
        sys.stdout.write(printable_json(answer) + "\n")
    return 0


PIPED_INPUT_LIMIT_CHARS = 100_000
"""The most text read from a pipe: about 25,000 tokens, a quarter of FERRY_CONTEXT_TOKENS'
default, so the question, the tools' results and the answer still fit beside it."""


def stdin_is_piped() -> bool:
    """Whether stdin is a pipe or a file to read (not a terminal, not a test's closed stand-in)."""
    try:
        return sys.stdin is not None and sys.stdin.readable() and not sys.stdin.isatty()
    except (OSError, ValueError):  # closed: nothing to read
        return False


def _read_stdin() -> str:
    """All of stdin, up to the limit; a usage error past it (nothing stored, no model call).

    Decoded here, strictly: Python's own stdin may pass bytes that are not UTF-8 through as
    lone surrogates (`surrogateescape`), which would be stored and fail when printed.
    """
    stream = getattr(sys.stdin, "buffer", None)
    most = PIPED_INPUT_LIMIT_CHARS + 1
    try:
        if stream is None:  # a text stream a caller put in its place
            text = sys.stdin.read(most)
        else:  # a character is 4 bytes at most: that many bytes are too many characters
            raw = stream.read(4 * most)
            text = "x" * most if len(raw) == 4 * most else raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"stdin is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if len(text) > PIPED_INPUT_LIMIT_CHARS:
        raise UsageError(
            f"stdin holds more than {PIPED_INPUT_LIMIT_CHARS:,} characters, the limit for piped "
            'input; save it under FERRY_FILES_ROOT and ask about the file: ferry "read notes.txt"'
        )
    return text


class Question(NamedTuple):
    """What `ask` sends, and the part of it the person typed (the thread's title)."""

    text: str
    typed: str


def read_question(text: str | None) -> Question | None:
    """The question: the argument, with piped stdin before it as context; stdin alone for `-`.

    As `llm` does, piped text comes first and the question after it (here past a blank line,
    so the question stands apart from the text it is about). No argument (or a blank one) with
    stdin piped: stdin is the question. None when there is no question at all; a usage error
    when the one given is empty.
    """
    given = (text or "").strip()
    reads_stdin = text == "-" or stdin_is_piped()
    piped = _read_stdin() if reads_stdin else ""
    context = piped.strip("\n").rstrip()  # keeps the first line's indentation (code)
    if text == "-" or not given:
        if context.strip():
            return Question(context.strip(), context.strip())
        if text is None:
            return None
        raise UsageError("the question is empty" + (" (nothing on stdin)" if text == "-" else ""))
    return Question(f"{context}\n\n{given}" if context.strip() else given, given)


def question_of(args: argparse.Namespace) -> str:
    """The question `ask` sends (`read_question`); argparse's usage error when there is none."""
    return asked(args).text


def asked(args: argparse.Namespace) -> Question:
    """The question `ask` reads (`read_question`); argparse's usage error when there is none."""
    question = read_question(args.question)
    if question is None:
        usage_error: Callable[[str], NoReturn] = args.usage_error
        usage_error("the following arguments are required: question (or pipe it on stdin)")
    return question


def user_message(question: Question) -> HumanMessage:
    """The question as the user message a turn starts with; what was typed kept for the title."""
    from langchain_core.messages import HumanMessage

    from graph.storage.threads.reading import TYPED_QUESTION

    if question.typed == question.text:
        return HumanMessage(question.text)
    return HumanMessage(question.text, additional_kwargs={TYPED_QUESTION: question.typed})


def pick_thread(graph: FerryGraph, args: argparse.Namespace) -> str | None:
    """Set `args.thread` (the most recent one for `--continue`); a note if a given id is new."""
    if args.continue_:
        from graph.storage.ferry_store import ferry_store
        from graph.storage.threads.reading import list_threads

        store = ferry_store(graph.checkpointer)  # the command's own saver: always one
        threads = list_threads(store) if store is not None else []
        if not threads:
            raise UserError("no thread to continue yet: ask a question first")
        args.thread = threads[0]["thread_id"]
    elif args.thread:
        if _never_stored(graph.get_state(thread_config(args.thread))):
            return printable(f"thread {args.thread}: new thread") + "\n"
    else:
        args.thread = str(uuid.uuid4())
        if not getattr(args, "json", False):
            sys.stderr.write(f"thread: {args.thread}\n")
    return None


def interactive(args: argparse.Namespace) -> bool:
    """Whether a person at the terminal decides paused calls (never with `--json`)."""
    return not getattr(args, "json", False) and sys.stdin.isatty()


def cmd_ask(args: argparse.Namespace) -> int:
    """Ask one question: a new turn on a new, given or the most recent thread."""
    args.schema = answer_schema(args)
    question = asked(args)
    with open_runner(args, interactive=interactive(args)) as runner:
        note = pick_thread(runner.graph, args)
        events = runner.start(args.thread, user_message(question), args.schema)
        return run_to_stop(
            runner,
            events,
            args.thread,
            args.json,
            interactive=interactive(args),
            note=note,
            schema=args.schema,
        )


def has_unfinished_run(state: Any) -> bool:
    """Whether `resume` has work (`graph.lifecycle.run_has_work`, imported when needed)."""
    from graph.lifecycle import run_has_work

    return run_has_work(state)


def refuse_missing_tools(args: argparse.Namespace, state: Any) -> None:
    """A usage error if the run left calls of tools this command lacks (`--tools` not given).

    Resumed without them, each such call would be answered "unknown tool" for good, and an
    approval given with `--approve` spent on that.
    """
    from graph.builder import default_tools
    from graph.core.messages import unanswered_calls
    from tools.memory import recall, remember

    calls = unanswered_calls(state.values.get("messages") or [])
    if not calls:
        return
    known = {t.name for t in [*default_tools(command_settings(args)), remember, recall]}
    if args.schema:  # its answer tool, which check answers
        from graph.output import RUN_KEY, of_run

        answer = of_run({"configurable": {RUN_KEY: args.schema}}, None)
        known |= {answer.name} if answer else set()
    missing = sorted({call["name"] for call in calls} - known)
    if missing:
        raise UsageError(
            f"thread {args.thread}'s run calls {', '.join(missing)}, not a tool here: resume "
            "it with the tools it used, --tools MODULE:ATTR (or FERRY_TOOLS), or ask on the "
            "thread to leave those calls unrun"
        )


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue an interrupted or crashed run, watch the one running, or decide its pause."""
    from graph.runs.report import nothing_done, pending_approvals_of

    args.schema = answer_schema(args)
    refuse_without_database(args)
    with open_runner(args, interactive=interactive(args)) as runner:
        state = existing_state(runner.graph, args.thread)
        args.schema = args.schema or turn_schema(state)
        if not on_temporal(args):  # on Temporal the workers bring their own tools
            refuse_missing_tools(args, state)
        if args.approve or args.reject is not None:
            pending = pending_approvals_of(state)
            if not pending:
                raise UserError(f"thread {args.thread!r} has no tool calls awaiting approval")
            decision = (
                {"type": "approve"} if args.approve else {"type": "reject", "message": args.reject}
            )
            events = runner.decide(args.thread, resume_all(pending, decision), args.schema)
        elif (running := runner.attach(args.thread)) is not None:
            events = running
        elif has_unfinished_run(state):
            events = runner.start(args.thread, None, args.schema)
        elif (ended := runner.last_turn(args.thread, state)) is not None:
            events = ended
        else:
            if args.json:
                print_json(nothing_done(args.thread, state))
            else:
                sys.stderr.write(
                    f"thread {args.thread}: nothing to resume, its last run finished.\n"
                )
            return 0
        return run_to_stop(
            runner,
            events,
            args.thread,
            args.json,
            interactive=interactive(args),
            schema=args.schema,
        )
