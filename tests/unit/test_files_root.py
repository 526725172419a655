"""A system folder (or /) as files root is refused at start-up, by the CLI and by the tool."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.tools import ToolException

from graph.cli import main
from graph.core.settings import ConfigError, get_settings
from tools import files
from tools.settings import SYSTEM_ROOTS, ToolSettings, with_tool_settings

REFUSAL = "FERRY_FILES_ROOT: must be a project folder, not / or a system folder"


@pytest.mark.parametrize("system_root", [*SYSTEM_ROOTS, "/etc/", "/usr/../etc", "/var/run"])
def test_a_system_root_is_one_line_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, system_root: str
) -> None:
    monkeypatch.setenv("FERRY_FILES_ROOT", system_root)
    with pytest.raises(ConfigError) as caught:
        get_settings()
    assert str(caught.value).startswith(REFUSAL)
    assert "\n" not in str(caught.value)


def test_a_root_that_resolves_to_a_system_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config").symlink_to("/etc")
    monkeypatch.setenv("FERRY_FILES_ROOT", str(tmp_path / "config"))
    with pytest.raises(ConfigError, match=REFUSAL):
        get_settings()


def test_the_default_root_is_refused_when_working_in_slash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    with pytest.raises(ConfigError, match=REFUSAL):
        get_settings()


def test_ordinary_folders_are_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for folder in (tmp_path, Path("/etc/ssl"), Path("/var/log"), Path("/usr/share")):
        monkeypatch.setenv("FERRY_FILES_ROOT", str(folder))
        assert get_settings().files_root == folder


def test_the_cli_says_so_in_one_line_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FERRY_FILES_ROOT", "/")
    assert main(["threads"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"ferry: {REFUSAL}")
    assert err.count("\n") == 1


def test_the_tool_refuses_a_system_root_it_is_handed() -> None:
    handed = with_tool_settings({}, ToolSettings(files_root=Path("/")))
    with pytest.raises(ToolException, match="The files root / is a system folder"):
        files.read_file.invoke({"path": "etc/shadow"}, handed)


def test_the_tool_refuses_a_system_root_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FERRY_FILES_ROOT", "/etc")
    with pytest.raises(ToolException, match="The files root /etc is a system folder"):
        files.read_file.invoke({"path": "shadow"})
