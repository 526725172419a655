"""Shared fixtures: no real keys, no real network, settings only through monkeypatch.

Every `ScriptedModel` and model emulator (`OpenAIServer`, `AnthropicServer`) a test makes must
play its whole script by the test's end, and be called no more: `_every_script_played` fails the
test otherwise. A test whose point is to leave steps unplayed, or to call past the script, says
so with `@pytest.mark.off_script("why")`.

`scripted([...])` builds a `ScriptedModel`; `make_agent(model, **settings)` compiles Ferry's
graph on it with the module's `agent_tools` (override that fixture in a test module) and the
test's `saver` unless one is given: each such test runs on LangGraph's in-memory saver and on
Ferry's default one.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from tests.support import script_check
from tests.support.cli_helpers import Ferry, ferry_in_process
from tests.support.scripted import ScriptedModel, Step

# `replays`, for the Postgres history tests; `pytester`, for the test of the script check
pytest_plugins = ["tests.support.pg_threads", "pytester"]


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as in a terminal, however the suite was started.

    A shell starts a background job (`make test &`, `nohup … &`) with SIGINT ignored, pytest's
    workers inherit that, and so would the `ferry` processes the Ctrl-C tests interrupt: Ferry
    keeps an ignored Ctrl-C ignored. A signal this process handles is reset to its default in
    the processes it starts.
    """
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line(
        "markers",
        "off_script(reason): the test leaves scripted steps unplayed, or over-calls, on purpose",
    )


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Hand the Temporal tests to the test processes as one unit of work, the others one by one.

    One process then runs every Temporal test, so their dev server and shared workers start
    once (tests/temporal/conftest.py), not in each process. The unit is the largest, so it is
    handed out first, and the other processes share the rest of the suite meanwhile. (xdist's
    `xdist_group` mark does not group under pytest 9: it rewrites a node id pytest no longer
    reads.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class TemporalTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "tests/temporal" if nodeid.startswith("tests/temporal/") else nodeid

    return TemporalTogether(config, log)


_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the test, so a fixture's teardown can see how the test went."""
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


@pytest.fixture(autouse=True)
def _every_script_played(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a passing test whose scripted models or model servers are off their scripts.

    Autouse, so it is set up before the fixtures that make servers and torn down after them.
    A test that failed already is not failed again for the script it did not finish.
    """
    with script_check.tracking() as made:
        yield
    call = request.node.stash.get(_REPORTS, {}).get("call")
    if call is None or not call.passed:
        return
    problems = script_check.unplayed(made)
    marker = request.node.get_closest_marker("off_script")
    if marker is not None and not marker.args:
        pytest.fail('off_script needs a reason: @pytest.mark.off_script("why")', pytrace=False)
    if marker is None and problems:
        pytest.fail(
            "off script (unplayed steps or calls past them):\n  " + "\n  ".join(problems),
            pytrace=False,
        )
    if marker is not None and not problems:
        pytest.fail(
            "marked off_script, but every script was played: remove the mark", pytrace=False
        )


_SECRETS = ("OPENAI_API_KEY", "TAVILY_API_KEY", "ANTHROPIC_API_KEY", "LANGSMITH_API_KEY")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Remove keys and Ferry and OTel settings; work (and keep the trust store) in a temp folder."""
    _isolate(monkeypatch, tmp_path)


@pytest.fixture(scope="module")
def module_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder for what a module's tests share (a server), in an environment isolated as a test's.

    A module's fixture is set up before any test's `_isolated_env`: it isolates its own.
    """
    folder = tmp_path_factory.mktemp("module")
    with pytest.MonkeyPatch.context() as patch:
        _isolate(patch, folder)
        yield folder


def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for name in list(os.environ):
        # OTEL_*: a developer's own collector gets no spans from the suite.
        if name.startswith(("FERRY_", "LANGSMITH_", "OTEL_")) or name in _SECRETS:
            monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("LANGSMITH_GATEWAY", raising=False)
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.chdir(tmp_path)
    # The folder trust store (`ferry trust`) lives under here: never the real user's config.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / ".cache"))  # the MCP listing cache too
    monkeypatch.setenv("FERRY_DB", str(tmp_path / "ferry.db"))
    # Anything that forgets its loopback URL fails fast instead of reaching the internet.
    monkeypatch.setenv("FERRY_TAVILY_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("FERRY_GEOCODING_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("FERRY_FORECAST_URL", "http://127.0.0.1:9")


@pytest.fixture
def fast_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short HTTP timeouts and retry budget, so the tools' fault tests stay quick."""
    monkeypatch.setenv("FERRY_HTTP_TIMEOUT_S", "0.5")
    monkeypatch.setenv("FERRY_HTTP_RETRY_TOTAL_S", "1.5")


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Ferry:
    """`ferry ARGS…` in this process: `cli("ask", "…", env=env, cwd=tmp_path)`, like `ferry`."""

    def run(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
        return ferry_in_process(*args, env=env, cwd=cwd, capsys=capsys)

    return run


@pytest.fixture
def scripted() -> Callable[..., ScriptedModel]:
    """Build `ScriptedModel`s (each checked at teardown, like every scripted model)."""

    def build(steps: Sequence[Step] = (), **kwargs: Any) -> ScriptedModel:
        return ScriptedModel(steps, **kwargs)

    return build


@pytest.fixture
def agent_tools() -> list[BaseTool] | None:
    """The tools `make_agent` binds: None is Ferry's own `tools.TOOLS`."""
    return None


@pytest.fixture(params=["memory", "ferry"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    """The saver `make_agent` defaults to, one per test: each test runs on both.

    "memory" is LangGraph's `InMemorySaver`; "ferry" is the saver users get, Ferry's
    `default_saver` (SQLite at `FERRY_DB`, here a file under `tmp_path`). A module whose agents
    all have their own saver overrides this fixture.
    """
    if request.param == "memory":
        yield InMemorySaver()
        return
    from graph.core.settings import Settings
    from graph.storage import default_saver

    ferry = default_saver(Settings(db=tmp_path / "ferry.db"))
    yield ferry
    ferry.conn.close()


@pytest.fixture
def make_agent(
    agent_tools: list[BaseTool] | None, saver: BaseCheckpointSaver[Any]
) -> Callable[..., Any]:
    """Compile Ferry's graph: `make_agent(model, checkpointer=None, tools=None, **settings)`.

    Every agent of a test is on the test's `saver` unless given a `checkpointer`; `tools`
    replaces the module's `agent_tools` for one agent.
    """
    from graph import build_graph
    from graph.core.settings import Settings

    def build(
        model: Any, checkpointer: Any = None, tools: list[BaseTool] | None = None, **settings: Any
    ) -> Any:
        return build_graph(
            model=model,
            tools=tools if tools is not None else agent_tools,
            checkpointer=checkpointer if checkpointer is not None else saver,
            settings=Settings(**settings),
        )

    return build
