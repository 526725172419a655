"""get_weather: current conditions for a city from Open-Meteo (geocoding, then forecast)."""

from __future__ import annotations

import unicodedata
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ToolException, tool

from tools.http import get_json
from tools.settings import ToolSettings, tool_settings

# WMO weather interpretation codes, as documented by Open-Meteo.
WMO_CODES: dict[int, str] = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "depositing rime fog",
    51: "light drizzle",
    53: "moderate drizzle",
    55: "dense drizzle",
    56: "light freezing drizzle",
    57: "dense freezing drizzle",
    61: "slight rain",
    63: "moderate rain",
    65: "heavy rain",
    66: "light freezing rain",
    67: "heavy freezing rain",
    71: "slight snowfall",
    73: "moderate snowfall",
    75: "heavy snowfall",
    77: "snow grains",
    80: "slight rain showers",
    81: "moderate rain showers",
    82: "violent rain showers",
    85: "slight snow showers",
    86: "heavy snow showers",
    95: "thunderstorm",
    96: "thunderstorm with slight hail",
    99: "thunderstorm with heavy hail",
}
_CURRENT = (
    "temperature_2m",
    "apparent_temperature",
    "relative_humidity_2m",
    "wind_speed_10m",
    "precipitation",
    "weather_code",
)
Place = dict[str, Any]


@tool(parse_docstring=True)
def get_weather(
    city: str, units: Literal["celsius", "fahrenheit"] = "celsius", *, config: RunnableConfig
) -> str:
    """Get the current weather in a city: temperature, feels-like, sky, humidity, wind, rain.

    Args:
        city: The city's name, e.g. "Madrid". To pick one of several places with the same
            name, add its region or country after a comma, e.g. "Paris, Texas".
        units: "celsius" (wind in km/h) or "fahrenheit" (wind in mph).
        config: Injected by LangChain, never seen by the model; carries the run's settings.
    """
    settings = tool_settings(config)
    place, others = _resolve(city, settings)
    current = _current(place, units, settings)
    reply = f"{_label(place)}: {_describe(current, units)}"
    if others:
        reply += (
            f". Several places are called '{place['name']}'; chose the most populous. "
            f"Others: {'; '.join(_label(p) for p in others)}. "
            f"For another, ask e.g. '{_label(others[0], short=True)}'."
        )
    return reply


get_weather.metadata = {"outbound": True}  # the city goes to Open-Meteo, so it can carry data out


def _resolve(city: str, settings: ToolSettings) -> tuple[Place, list[Place]]:
    """Find the place `city` names; return it and up to two other places of the same name."""
    name, _, qualifier = (part.strip() for part in city.partition(","))
    if not name:
        raise ToolException("Give a city name, e.g. 'Madrid' or 'Paris, France'.")
    data = get_json(
        f"{settings.geocoding_url.rstrip('/')}/search",
        {"name": name, "count": 10, "language": "en", "format": "json"},
        service="Open-Meteo geocoding",
        timeout_s=settings.http_timeout_s,
        retry_total_s=settings.http_retry_total_s,
    )
    results = data.get("results") if isinstance(data, dict) else None
    found = [r for r in results or [] if _usable(r) and _in_region(r, qualifier)]
    if not found:
        raise ToolException(
            f"City '{city}' not found. Check the spelling or try a nearby larger city; "
            "add the country after a comma to narrow it down, e.g. 'Paris, France'."
        )
    same_name = [r for r in found if _fold(r["name"]) == _fold(name)]
    if not same_name:  # only fuzzy matches: trust the service's own relevance order
        return found[0], []
    ranked = sorted(same_name, key=lambda r: r.get("population") or 0, reverse=True)
    return ranked[0], ranked[1:3]


def _current(place: Place, units: str, settings: ToolSettings) -> dict[str, Any]:
    params = {
        "latitude": place["latitude"],
        "longitude": place["longitude"],
        "current": ",".join(_CURRENT),
        "temperature_unit": units,
        "wind_speed_unit": "kmh" if units == "celsius" else "mph",
        "timezone": "auto",
    }
    data = get_json(
        f"{settings.forecast_url.rstrip('/')}/forecast",
        params,
        service="Open-Meteo forecast",
        timeout_s=settings.http_timeout_s,
        retry_total_s=settings.http_retry_total_s,
    )
    current = data.get("current") if isinstance(data, dict) else None
    if not isinstance(current, dict) or not _is_number(current.get("temperature_2m")):
        raise ToolException("Open-Meteo forecast sent no current temperature; try again later.")
    return current


def _describe(current: dict[str, Any], units: str) -> str:
    degrees, speed = ("°C", "km/h") if units == "celsius" else ("°F", "mph")
    code = current.get("weather_code")
    sky = WMO_CODES.get(code, f"weather code {code}") if isinstance(code, int) else "sky unknown"
    return (
        f"{current['temperature_2m']:.1f} {degrees} "
        f"(feels like {_number(current, 'apparent_temperature', '.1f')} {degrees}), {sky}, "
        f"humidity {_number(current, 'relative_humidity_2m', '.0f')}%, "
        f"wind {_number(current, 'wind_speed_10m', '.1f')} {speed}, "
        f"precipitation {_number(current, 'precipitation', '.1f')} mm "
        f"(as of {current.get('time', 'unknown time')} local time)"
    )


def _label(place: Place, *, short: bool = False) -> str:
    """Name the place as people do: city, region, country (without repeats)."""
    parts: list[str] = []
    for part in (place.get("name"), place.get("admin1"), place.get("country")):
        if part and part not in parts:
            parts.append(str(part))
    return ", ".join(parts[:2] if short else parts)


def _in_region(place: Place, qualifier: str) -> bool:
    fields = ("admin1", "admin2", "country", "country_code")
    return not qualifier or any(_fold(place.get(f)) == _fold(qualifier) for f in fields)


def _usable(result: Any) -> bool:
    return isinstance(result, dict) and all(k in result for k in ("name", "latitude", "longitude"))


def _fold(text: Any) -> str:
    """Compare names the way people type them: no accents, no case."""
    decomposed = unicodedata.normalize("NFKD", str(text or ""))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(current: dict[str, Any], key: str, spec: str) -> str:
    value = current.get(key)
    return format(value, spec) if _is_number(value) else "n/a"
