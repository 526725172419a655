"""The `get_datetime` tool: the current date and time in an IANA time zone or the local one."""

from __future__ import annotations

import difflib
import functools
import os
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from langchain_core.tools import ToolException, tool

_EXAMPLES = "IANA time zone names such as 'Europe/Madrid', 'America/New_York' or 'UTC'"
# Spelled out rather than strftime("%A"), which follows the process locale.
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _now(tz: tzinfo) -> datetime:
    """Return the current time in `tz` (tests replace this to fix the clock)."""
    return datetime.now(tz)


@functools.cache
def _zones_by_lower_name() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()}


def _named_zone(name: str) -> ZoneInfo:
    """Return the zone called `name` (any letter case), or raise with close matches."""
    key = _zones_by_lower_name().get(name.strip().lower())
    if key is not None:
        return ZoneInfo(key)
    # Models often pass a city ("New York") where a zone ("America/New_York") is needed.
    wanted = name.strip().replace(" ", "_").lower()
    cities = [zone for low, zone in _zones_by_lower_name().items() if low.endswith("/" + wanted)]
    close = difflib.get_close_matches(name, sorted(_zones_by_lower_name().values()), n=3)
    suggestions = list(dict.fromkeys(cities + close))[:3]
    hint = f" Did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
    raise ToolException(f"Unknown time zone {name[:60]!r}. Use {_EXAMPLES}.{hint}")


def _local_zone() -> tuple[tzinfo, str]:
    """Return the machine's zone and its IANA name when it can be found."""
    configured = os.environ.get("TZ", "").removeprefix(":")
    if not configured and os.path.islink("/etc/localtime"):
        configured = os.readlink("/etc/localtime")
    # A path into the zoneinfo tree (/usr/share/zoneinfo/Europe/Madrid) ends in the zone's name.
    if "zoneinfo/" in configured:
        configured = configured.partition("zoneinfo/")[2]
    try:
        return ZoneInfo(configured), configured
    except (ZoneInfoNotFoundError, ValueError, OSError):
        fixed = datetime.now(UTC).astimezone().tzinfo or UTC
        return fixed, "local time"


def _offset(moment: datetime) -> str:
    minutes = int((moment.utcoffset() or timedelta(0)).total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@tool(parse_docstring=True)
def get_datetime(timezone: str | None = None) -> str:
    """Get the current date, time, weekday and UTC offset.

    Use this whenever the answer depends on today's date, the current time or the day of the
    week, in the user's place or anywhere else. Example reply: "2026-11-30 15:04:05 Monday,
    UTC+01:00 (Europe/Madrid, CET); ISO 8601: 2026-11-30T15:04:05+01:00".

    Args:
        timezone: IANA time zone name such as "Europe/Madrid", "America/New_York" or "UTC".
            Leave it out for the machine's local time zone.
    """
    if timezone and timezone.strip():
        zone: tzinfo = _named_zone(timezone)
        name = str(zone)
    else:
        zone, name = _local_zone()
    moment = _now(zone).astimezone(zone).replace(microsecond=0)
    abbreviation = moment.tzname()
    label = name if abbreviation in (None, name) else f"{name}, {abbreviation}"
    return (
        f"{moment:%Y-%m-%d %H:%M:%S} {_WEEKDAYS[moment.weekday()]}, {_offset(moment)} ({label}); "
        f"ISO 8601: {moment.isoformat()}"
    )
