"""The server's token check (the server itself: tests/integration/test_server_security.py)."""

from __future__ import annotations

import pytest

from graph.server.security import bearer_token_matches, server_token

TOKEN = "s3cret-token-42"


@pytest.mark.parametrize(
    "authorization", [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER  {TOKEN} ", f" Bearer {TOKEN}"]
)
def test_the_token_after_the_bearer_scheme_matches(authorization: str) -> None:
    assert bearer_token_matches(authorization, TOKEN)


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        TOKEN,  # no scheme
        f"Basic {TOKEN}",
        "Bearer",
        "Bearer ",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        f"Bearer {TOKEN.upper()}",
        "Bearer ü-not-ascii",
    ],
)
def test_anything_else_does_not(authorization: str | None) -> None:
    assert not bearer_token_matches(authorization, TOKEN)


def test_the_token_comes_from_the_environment_and_empty_means_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert server_token() is None
    monkeypatch.setenv("FERRY_SERVER_TOKEN", "")
    assert server_token() is None
    monkeypatch.setenv("FERRY_SERVER_TOKEN", TOKEN)
    assert server_token() == TOKEN
