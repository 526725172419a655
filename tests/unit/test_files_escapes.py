"""read_file never leaves the root: symlink tricks, hard links, swaps mid-walk, broken links."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.tools import ToolException

from tools.files import read_file
from tools.files_walk import MAX_SYMLINKS

SECRET = "SECRET-51c9"
ESCAPES = "Path escapes the files root"
HIDDEN = "Hidden files and folders"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A root full of links that lead out, a hidden .env and .git, and a secret beside it."""
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "notes.txt").write_text("public notes\n")
    (root / "docs" / "readme.md").write_text("# Readme\n")
    (root / ".env").write_text(f"API_KEY={SECRET}\n")
    (root / ".git" / "config").write_text(f"token={SECRET}\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    links = {
        "up": "../outside/secret.txt",
        "hop1": "hop2",
        "hop2": "../outside",
        "docs/up": "../../outside",
        "parent": str(tmp_path),
        "slash": "/",
        "procroot": "/proc/self/root",
        "proccwd": "/proc/self/cwd",
        "gitdir": ".git",
        "docs/gitdir": "../.git",
        "env_abs": str(root / ".env"),
        "roundtrip": "../root/notes.txt",
        "self": ".",
        "docs_link": "docs",
        "loop_a": "loop_b",
        "loop_b": "loop_a",
    }
    for name, target in links.items():
        (root / name).symlink_to(target)
    monkeypatch.setenv("FERRY_FILES_ROOT", str(root))
    return root


def _refusal(path: str) -> str:
    with pytest.raises(ToolException) as caught:
        read_file.invoke({"path": path})
    assert SECRET not in str(caught.value)
    return str(caught.value)


ESCAPE_CASES = [
    ("up", ESCAPES),
    ("hop1/secret.txt", ESCAPES),
    ("hop1", ESCAPES),
    ("docs/up/secret.txt", ESCAPES),
    ("parent/outside/secret.txt", ESCAPES),
    ("slash/etc/passwd", ESCAPES),
    ("slash{tmp}/outside/secret.txt", ESCAPES),
    ("procroot/etc/passwd", ESCAPES),
    ("proccwd/outside/secret.txt", ESCAPES),
    ("/proc/self/root{tmp}/root/notes.txt", ESCAPES),
    ("roundtrip", ESCAPES),
    ("self/../outside/secret.txt", ESCAPES),
    ("docs_link/../../outside/secret.txt", ESCAPES),
    ("docs/../../root/notes.txt", ESCAPES),
    ("{tmp}/root/../outside/secret.txt", ESCAPES),
    ("{tmp}//root//..//outside/secret.txt", ESCAPES),
    ("//{tmp}/outside/secret.txt", ESCAPES),
    ("{tmp}/rootx/notes.txt", ESCAPES),
    ("gitdir/config", HIDDEN),
    ("gitdir", HIDDEN),
    ("docs/gitdir/config", HIDDEN),
    ("env_abs", HIDDEN),
    ("{tmp}/root/.git/../notes.txt", HIDDEN),
    ("self/.env", HIDDEN),
    ("loop_a", "symlink loop"),
    ("loop_a/x", "symlink loop"),
    ("notes.txt/", "Not a directory"),
    ("notes.txt/../notes.txt", "Not a directory"),
]


@pytest.mark.parametrize(("path", "message"), ESCAPE_CASES)
def test_tricks_are_refused_without_leaking(root: Path, path: str, message: str) -> None:
    assert message in _refusal(path.format(tmp=root.parent))


def test_links_that_stay_inside_still_work(root: Path) -> None:
    assert read_file.invoke({"path": "self/docs_link/readme.md"}).endswith("\n# Readme")
    assert read_file.invoke({"path": "docs_link"}).startswith("docs/: a directory")
    chain = "notes.txt"
    for n in range(MAX_SYMLINKS):
        (root / f"chain{n}").symlink_to(chain)
        chain = f"chain{n}"
    assert read_file.invoke({"path": chain}) == "notes.txt: lines 1-1 of 1\npublic notes"
    (root / "one_too_many").symlink_to(chain)
    assert "symlink loop" in _refusal("one_too_many")


@pytest.mark.parametrize("target", ["{tmp}/outside/secret.txt", "{tmp}/root/.env"])
def test_a_hard_link_is_refused_and_names_the_setting(root: Path, target: str) -> None:
    os.link(target.format(tmp=root.parent), root / "hard.txt")
    message = _refusal("hard.txt")
    assert "hard.txt has 2 hard links" in message
    assert "FERRY_FILES_ALLOW_HARDLINKS=1" in message


def test_hard_links_can_be_allowed(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    os.link(root / "notes.txt", root / "copy.txt")
    monkeypatch.setenv("FERRY_FILES_ALLOW_HARDLINKS", "1")
    assert read_file.invoke({"path": "copy.txt"}) == "copy.txt: lines 1-1 of 1\npublic notes"


def test_a_listing_marks_broken_and_escaping_links(root: Path) -> None:
    (root / "dangling").symlink_to("nowhere")
    header, *entries = read_file.invoke({"path": "."}).split("\n")
    assert header == "./: a directory with 17 visible entries; folders end in /."
    assert entries == [
        "dangling -> (broken link)",
        "docs/",
        "docs_link/",
        "env_abs -> (hidden)",
        "gitdir -> (hidden)",
        "hop1 -> (outside the files root)",
        "hop2 -> (outside the files root)",
        "loop_a -> (broken link)",
        "loop_b -> (broken link)",
        "notes.txt",
        "parent -> (outside the files root)",
        "proccwd -> (outside the files root)",
        "procroot -> (outside the files root)",
        "roundtrip -> (outside the files root)",
        "self/",
        "slash -> (outside the files root)",
        "up -> (outside the files root)",
    ]
    assert read_file.invoke({"path": "docs"}).split("\n")[1:] == [
        "gitdir -> (hidden)",
        "readme.md",
        "up -> (outside the files root)",
    ]


def _swap_during(monkeypatch: pytest.MonkeyPatch, name: str, swap: Callable[[], None]) -> list[str]:
    """Run `swap` right after the walk's first lstat of `name`: inside the check-to-open window."""
    real_lstat = os.lstat
    seen: list[str] = []

    def lstat_then_swap(path: str, *, dir_fd: int | None = None) -> os.stat_result:
        status = real_lstat(path, dir_fd=dir_fd)
        if path == name and not seen:
            seen.append(path)
            swap()
        return status

    monkeypatch.setattr(os, "lstat", lstat_then_swap)
    return seen


@pytest.mark.parametrize("path", ["swap/public.txt", "swap"])
def test_a_folder_swapped_for_a_symlink_mid_walk_is_not_followed(
    root: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    (root / "swap").mkdir()
    (root / "swap" / "public.txt").write_text("public\n")
    (root.parent / "outside" / "public.txt").write_text(f"{SECRET}\n")

    def to_symlink() -> None:
        (root / "swap").rename(root / "parked")
        (root / "swap").symlink_to(root.parent / "outside")

    seen = _swap_during(monkeypatch, "swap", to_symlink)
    assert ESCAPES in _refusal(path)
    assert seen == ["swap"]


def test_a_symlink_swapped_for_a_folder_mid_walk_is_looked_at_again(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "swap").symlink_to(root.parent / "outside")
    (root / "parked").mkdir()
    (root / "parked" / "public.txt").write_text("public\n")

    def to_folder() -> None:
        (root / "swap").unlink()
        (root / "parked").rename(root / "swap")

    seen = _swap_during(monkeypatch, "swap", to_folder)
    assert read_file.invoke({"path": "swap/public.txt"}).endswith("\npublic")
    assert seen == ["swap"]


def test_a_file_swapped_for_a_symlink_before_its_open_is_not_followed(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def to_symlink() -> None:
        (root / "notes.txt").unlink()
        (root / "notes.txt").symlink_to(root.parent / "outside" / "secret.txt")

    _swap_during(monkeypatch, "notes.txt", to_symlink)
    assert "Too many levels of symbolic links" in _refusal("notes.txt")
