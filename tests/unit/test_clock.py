"""get_datetime: a fixed clock read in named zones, the local zone, and refused unknown zones."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

import pytest
from langchain_core.tools import ToolException

from tools import clock
from tools.clock import get_datetime

# Monday 2026-11-30 14:04:05.123456 UTC
FIXED = datetime(2026, 11, 30, 14, 4, 5, 123_456, tzinfo=UTC)
REAL_NOW = clock._now  # kept before the autouse fixture below replaces it


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> list[tzinfo]:
    """Freeze the clock at FIXED and record the zones it was asked for."""
    asked: list[tzinfo] = []

    def now(tz: tzinfo) -> datetime:
        asked.append(tz)
        return FIXED.astimezone(tz)

    monkeypatch.setattr(clock, "_now", now)
    return asked


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        (
            "Europe/Madrid",
            "2026-11-30 15:04:05 Monday, UTC+01:00 (Europe/Madrid, CET); "
            "ISO 8601: 2026-11-30T15:04:05+01:00",
        ),
        (
            "America/New_York",
            "2026-11-30 09:04:05 Monday, UTC-05:00 (America/New_York, EST); "
            "ISO 8601: 2026-11-30T09:04:05-05:00",
        ),
        ("UTC", "2026-11-30 14:04:05 Monday, UTC+00:00 (UTC); ISO 8601: 2026-11-30T14:04:05+00:00"),
        (
            "Asia/Kolkata",
            "2026-11-30 19:34:05 Monday, UTC+05:30 (Asia/Kolkata, IST); "
            "ISO 8601: 2026-11-30T19:34:05+05:30",
        ),
        (
            "Pacific/Kiritimati",
            "2026-12-01 04:04:05 Tuesday, UTC+14:00 (Pacific/Kiritimati, +14); "
            "ISO 8601: 2026-12-01T04:04:05+14:00",
        ),
        (
            "europe/madrid",  # letter case is forgiven
            "2026-11-30 15:04:05 Monday, UTC+01:00 (Europe/Madrid, CET); "
            "ISO 8601: 2026-11-30T15:04:05+01:00",
        ),
    ],
)
def test_named_zones(zone: str, expected: str) -> None:
    assert get_datetime.invoke({"timezone": zone}) == expected


def test_summer_time_is_applied(fixed_clock: list[tzinfo], monkeypatch: pytest.MonkeyPatch) -> None:
    summer = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
    monkeypatch.setattr(clock, "_now", lambda tz: summer.astimezone(tz))
    reply = get_datetime.invoke({"timezone": "Europe/Madrid"})
    assert reply.startswith("2026-07-01 14:00:00 Wednesday, UTC+02:00 (Europe/Madrid, CEST)")


@pytest.mark.parametrize("arguments", [{}, {"timezone": None}, {"timezone": ""}])
def test_local_zone_by_default(
    arguments: dict[str, str | None], monkeypatch: pytest.MonkeyPatch, fixed_clock: list[tzinfo]
) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    reply = get_datetime.invoke(arguments)
    assert reply == (
        "2026-11-30 23:04:05 Monday, UTC+09:00 (Asia/Tokyo, JST); "
        "ISO 8601: 2026-11-30T23:04:05+09:00"
    )
    assert str(fixed_clock[-1]) == "Asia/Tokyo"


def test_local_zone_from_a_zoneinfo_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", ":/usr/share/zoneinfo/Europe/Madrid")
    assert "(Europe/Madrid, CET)" in get_datetime.invoke({})


def test_unnamed_local_zone_still_has_an_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "not-a-zone")
    reply = get_datetime.invoke({})
    assert "(local time" in reply
    assert "UTC+" in reply or "UTC-" in reply


def test_the_real_clock_is_timezone_aware() -> None:
    moment = REAL_NOW(UTC)
    assert moment.tzinfo is not None
    assert abs((moment - datetime.now(UTC)).total_seconds()) < 5


@pytest.mark.parametrize(
    ("zone", "suggestion"),
    [
        ("Europe/Madird", "'Europe/Madrid'"),
        ("New York", "'America/New_York'"),
        ("Madrid", "'Europe/Madrid'"),
        ("Mars/Olympus_Mons", ""),
        ("../../etc/passwd", ""),
        ("/etc/localtime", ""),
        ("Europe", ""),
        ("UTC\0", ""),
    ],
)
def test_unknown_zones_explain_iana_names(zone: str, suggestion: str) -> None:
    with pytest.raises(ToolException) as caught:
        get_datetime.invoke({"timezone": zone})
    message = str(caught.value)
    assert "Unknown time zone" in message
    assert "'Europe/Madrid', 'America/New_York' or 'UTC'" in message
    assert suggestion in message
