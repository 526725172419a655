"""tools/ stands alone: it imports nothing from graph/, and takes its settings from the run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import ToolException
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.core.settings import Settings
from tests.support.scripted import ScriptedModel, answer, tool_call
from tests.support.trust import trust_folder
from tests.support.turns import ask
from tools.files import read_file
from tools.settings import ToolSettings, tool_settings, with_tool_settings

TOOLS_DIR = Path(__file__).resolve().parents[2] / "tools"


def imported_modules(source: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(), filename=str(source))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


def test_no_module_under_tools_imports_graph() -> None:
    sources = sorted(TOOLS_DIR.rglob("*.py"))
    assert len(sources) >= 8
    offenders = {
        f"{source.relative_to(TOOLS_DIR)}: {module}"
        for source in sources
        for module in imported_modules(source)
        if module == "graph" or module.startswith("graph.")
    }
    assert offenders == set()


def notes_in(folder: Path, text: str) -> Path:
    folder.mkdir()
    (folder / "notes.txt").write_text(text + "\n")
    return folder


def test_read_file_reads_the_root_of_the_settings_the_graph_was_built_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed = notes_in(tmp_path / "handed", "from the settings")
    monkeypatch.setenv("FERRY_FILES_ROOT", str(notes_in(tmp_path / "env", "from the environment")))
    model = ScriptedModel([tool_call("read_file", path="notes.txt"), answer("done")])
    graph = build_graph(
        model=model,
        tools=[read_file],
        settings=Settings(files_root=handed, db=tmp_path / "ferry.db"),
        checkpointer=InMemorySaver(),
    )
    result = ask(graph, "read notes.txt")
    [reply] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert (reply.status, reply.content) == (
        "success",
        "notes.txt: lines 1-1 of 1\nfrom the settings",
    )


def test_read_file_standalone_reads_the_environments_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRY_FILES_ROOT", str(notes_in(tmp_path / "env", "from the environment")))
    assert read_file.invoke({"path": "notes.txt"}).endswith("\nfrom the environment")


def test_read_file_standalone_defaults_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(notes_in(tmp_path / "cwd", "from the working directory"))
    assert read_file.invoke({"path": "notes.txt"}).endswith("\nfrom the working directory")


def test_handed_settings_win_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRY_FILES_ROOT", str(tmp_path / "nowhere"))
    handed = ToolSettings(files_root=notes_in(tmp_path / "handed", "handed over"))
    config = with_tool_settings({"configurable": {"thread_id": "t1"}}, handed)
    assert config["configurable"]["thread_id"] == "t1"
    assert tool_settings(config) is handed
    assert read_file.invoke({"path": "notes.txt"}, config).endswith("\nhanded over")


def test_the_environment_is_read_as_ferry_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ToolSettings.from_environment() == Settings().tool_settings()
    values = {
        "FERRY_FILES_ROOT": str(tmp_path),
        "FERRY_FILES_ALLOW_HARDLINKS": "1",
        "FERRY_TAVILY_URL": "http://127.0.0.1:1/tavily",
        "FERRY_SEARCH_MAX_CHARS": "900",
        "FERRY_GEOCODING_URL": "http://127.0.0.1:1/geo",
        "FERRY_FORECAST_URL": "http://127.0.0.1:1/forecast",
        "FERRY_HTTP_TIMEOUT_S": "2.5",
        "FERRY_HTTP_RETRY_TOTAL_S": "0",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    assert ToolSettings.from_environment() == Settings().tool_settings()
    assert tool_settings(None) == Settings().tool_settings()


def test_a_dotenv_file_is_read_standalone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("FERRY_SEARCH_MAX_CHARS=777\n")
    trust_folder(tmp_path)
    assert ToolSettings.from_environment().search_max_chars == 777
    monkeypatch.delenv("FERRY_SEARCH_MAX_CHARS")  # load_dotenv wrote it into os.environ


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FERRY_HTTP_TIMEOUT_S", "soon"),
        ("FERRY_SEARCH_MAX_CHARS", "-5"),
        ("FERRY_FILES_ALLOW_HARDLINKS", "maybe"),
    ],
)
def test_an_unusable_variable_is_named(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ToolException, match=f"^{name}: expected .*got '{value}'"):
        ToolSettings.from_environment()
