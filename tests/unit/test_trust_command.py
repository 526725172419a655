"""`ferry trust`, `--list`, `--revoke` and `ferry untrust`: what they show, record and refuse."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.cli_helpers import Ferry, ferry_env, one_json_object, succeeded
from tools.trust import store_path

KEY = "sk-folder-key-0123456789"
NOTICE = "ferry: ignored ./.env and ./mcp.json (not trusted; run 'ferry trust' to use them)"


def folder_files(folder: Path) -> None:
    (folder / ".env").write_text(
        f"OPENAI_BASE_URL=http://127.0.0.1:9/v1\nOPENAI_API_KEY={KEY}\nFERRY_MAX_ITERATIONS=4\n"
    )
    # Disabled: shown by `ferry trust`, never started by the `ferry info` that follows.
    notes = {"command": sys.executable, "args": ["notes.py", "--key", "${OPENAI_API_KEY}"]}
    servers = {
        "notes": {**notes, "disabled": True},
        "docs": {"url": "http://127.0.0.1:9/mcp", "disabled": True},
        "\x1b[2Jclear": {"url": "http://127.0.0.1:9/other", "disabled": True},
    }
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_trust_shows_what_it_trusts_then_the_files_apply(cli: Ferry, tmp_path: Path) -> None:
    folder_files(tmp_path)
    env = ferry_env(tmp_path, FERRY_MODEL="offline")
    assert "FERRY_MAX_ITERATIONS" not in info_settings(cli, env, tmp_path)

    done = succeeded(cli("trust", env=env, cwd=tmp_path))

    out = done.stdout
    assert out.startswith(f"trusted in {tmp_path} (recorded in {store_path()}):\n")
    assert "    OPENAI_BASE_URL=http://127.0.0.1:9/v1\n" in out  # where the key would go
    assert "    OPENAI_API_KEY=(secret, not shown)\n" in out and KEY not in out
    runs = f"runs {sys.executable} notes.py --key '${{OPENAI_API_KEY}}' (disabled)"
    assert f"    notes: {runs}\n" in out  # as written: the key is not expanded
    assert "    docs: connects to http://127.0.0.1:9/mcp (disabled)\n" in out
    assert "    \\x1b[2Jclear: connects to" in out  # shown, never obeyed by the terminal
    assert out.rstrip().endswith("Undo: ferry untrust")
    assert info_settings(cli, env, tmp_path)["FERRY_MAX_ITERATIONS"] == "4"
    plain = succeeded(cli("info", env=env, cwd=tmp_path)).stdout
    assert f".env:       {tmp_path / '.env'}\n" in plain


def info_settings(cli: Ferry, env: dict[str, str], cwd: Path) -> dict[str, str]:
    settings: dict[str, str] = one_json_object(cli("info", "--json", env=env, cwd=cwd))["settings"]
    return settings


def test_trust_json_list_and_revoke(cli: Ferry, tmp_path: Path) -> None:
    folder_files(tmp_path)
    env = ferry_env(tmp_path, FERRY_MODEL="offline")
    env_key, mcp_key = str(tmp_path / ".env"), str(tmp_path / "mcp.json")

    trusted = one_json_object(cli("trust", "--json", env=env, cwd=tmp_path))
    assert [f["path"] for f in trusted["files"]] == [env_key, mcp_key]
    assert trusted["store"] == str(store_path()) and trusted["folder"] == str(tmp_path)
    (tmp_path / "mcp.json").write_text('{"mcpServers": {}}')
    (tmp_path / ".env").unlink()

    listed = one_json_object(cli("trust", "--list", "--json", env=env, cwd=tmp_path))
    assert [(f["path"], f["status"]) for f in listed["files"]] == [
        (env_key, "missing"),
        (mcp_key, "changed"),
    ]
    plain = succeeded(cli("trust", "--list", env=env, cwd=tmp_path)).stdout.splitlines()
    assert [line.split("  ")[0].strip() for line in plain] == [env_key, mcp_key]
    assert "changed since trusted: ignored" in plain[1]

    revoked = one_json_object(cli("trust", "--revoke", "--json", env=env, cwd=tmp_path))
    assert revoked["revoked"] == [env_key, mcp_key]
    again = succeeded(cli("untrust", str(tmp_path), env=env, cwd=tmp_path / ".config"))
    assert again.stdout == f"nothing in {tmp_path} was trusted\n"
    assert one_json_object(cli("trust", "--list", "--json", env=env, cwd=tmp_path))["files"] == []


def test_untrust_makes_the_files_ignored_again(cli: Ferry, tmp_path: Path) -> None:
    folder_files(tmp_path)
    env = ferry_env(tmp_path, FERRY_MODEL="offline")
    succeeded(cli("trust", env=env, cwd=tmp_path))

    untrusted = succeeded(cli("untrust", env=env, cwd=tmp_path))
    info = cli("info", "--json", env=env, cwd=tmp_path)

    assert untrusted.stdout.startswith(f"no longer trusted: {tmp_path / '.env'}, ")
    assert "FERRY_MAX_ITERATIONS" not in one_json_object(info)["settings"]
    assert one_json_object(info)["env_file_trusted"] is False
    assert info.stderr.splitlines() == [NOTICE]
    plain = succeeded(cli("info", env=env, cwd=tmp_path)).stdout
    assert f".env:       {tmp_path / '.env'} (ignored: not trusted; see ferry trust)\n" in plain


def test_nothing_to_trust_and_bad_usage(cli: Ferry, tmp_path: Path) -> None:
    env = ferry_env(tmp_path)

    empty = cli("trust", env=env, cwd=tmp_path)
    missing = cli("trust", "nowhere", env=env, cwd=tmp_path)
    both = cli("trust", "--list", "--revoke", env=env, cwd=tmp_path)

    assert (empty.returncode, empty.stderr) == (
        1,
        f"ferry: nothing to trust in {tmp_path}: no .env or mcp.json there\n",
    )
    assert (missing.returncode, missing.stderr) == (1, "ferry: nowhere is not a folder\n")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    assert not store_path().exists()


def test_a_corrupt_store_is_one_line_and_left_as_it_is(cli: Ferry, tmp_path: Path) -> None:
    folder_files(tmp_path)
    store_path().parent.mkdir(parents=True)
    store_path().write_text('{"version": 1, "files": {"x": {}}}')
    env = ferry_env(tmp_path)

    done = cli("trust", env=env, cwd=tmp_path)
    listed = cli("trust", "--list", "--json", env=env, cwd=tmp_path)

    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"ferry: {store_path()}: a trust record without its sha256\n"
    assert listed.returncode == 1
    assert json.loads(listed.stdout)["error"]["type"] == "config_error"
    assert store_path().read_text() == '{"version": 1, "files": {"x": {}}}'
