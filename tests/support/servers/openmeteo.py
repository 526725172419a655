"""Open-Meteo geocoding (`/v1/search`) and forecast (`/v1/forecast`) on loopback.

Base URL for both tools: `server.url + "/v1"`. Response shapes follow the real APIs.
"""

from __future__ import annotations

import unicodedata
from collections import deque
from typing import Any

from tests.support.servers.base import LoopbackServer, Reply, Request


def _city(
    geo_id: int, name: str, lat: float, lon: float, where: str, **more: Any
) -> dict[str, Any]:
    country, code, admin1 = where.split("|")
    fields = {"id": geo_id, "name": name, "latitude": lat, "longitude": lon}
    fields |= {"feature_code": "PPLC", "country_code": code, "country": country, "admin1": admin1}
    return fields | more


# In the real API's order (by relevance, roughly population).
CITIES = [
    _city(3117735, "Madrid", 40.4165, -3.70256, "Spain|ES|Community of Madrid",
          population=3255944, timezone="Europe/Madrid", elevation=667.0),
    _city(3688689, "Bogotá", 4.60971, -74.08175, "Colombia|CO|Bogota D.C.",
          population=7674366, timezone="America/Bogota", elevation=2582.0),
    _city(2988507, "Paris", 48.85341, 2.3488, "France|FR|Île-de-France",
          population=2138551, timezone="Europe/Paris", elevation=42.0),
    _city(4717560, "Paris", 33.66094, -95.55551, "United States|US|Texas",
          population=24782, timezone="America/Chicago", elevation=183.0),
    _city(2950159, "Berlin", 52.52437, 13.41053, "Germany|DE|Land Berlin",
          population=3426354, timezone="Europe/Berlin", elevation=74.0),
]  # fmt: skip
CURRENT_UNITS = {
    "temperature_2m": "°C",
    "apparent_temperature": "°C",
    "relative_humidity_2m": "%",
    "wind_speed_10m": "km/h",
    "precipitation": "mm",
    "weather_code": "wmo code",
}
WIND_UNITS = {"kmh": ("km/h", 1.0), "ms": ("m/s", 1 / 3.6), "mph": ("mph", 1 / 1.609344)}


def fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def error(reason: str) -> Reply:
    """Open-Meteo's error shape."""
    return Reply(400, {"error": True, "reason": reason})


class OpenMeteoServer(LoopbackServer):
    """Geocoding over `CITIES`; current weather from `temperatures` (°C) and `weather_codes`.

    Their keys are "Name, CC" or just "Name". `forecast_faults` answer the next forecast
    requests only, so geocoding still works.
    """

    def __init__(self) -> None:
        super().__init__()
        self.temperatures = {"Madrid": 21.4, "Bogotá": 14.2, "Paris": 18.0, "Paris, US": 30.5}
        self.temperatures["Berlin"] = 9.5
        self.weather_codes = {"Madrid": 0, "Paris": 2, "Berlin": 61}
        self.time = "2026-11-30T15:00"
        self.forecast_faults: deque[Reply] = deque()

    def handle(self, request: Request) -> Reply:
        if request.path == "/v1/search":
            return self._search(request.query)
        if request.path == "/v1/forecast":
            if self.forecast_faults:
                return self.forecast_faults.popleft()
            return _bad_forecast(request.query) or self._forecast(request.query)
        return super().handle(request)

    def _search(self, query: dict[str, str]) -> Reply:
        if "name" not in query:
            return error("Parameter 'name' is required")
        if not 1 <= int(query.get("count", "10")) <= 100:
            return error("Parameter 'count' must be between 1 and 100")
        wanted = fold(query["name"].strip())
        # Like the real API: nothing under 2 characters, exact for 2, prefix match from 3.
        matches = [
            c
            for c in CITIES
            if fold(c["name"]) == wanted or len(wanted) > 2 and fold(c["name"]).startswith(wanted)
        ]
        body: dict[str, Any] = {"generationtime_ms": 0.61}
        if matches and len(wanted) >= 2:
            body["results"] = matches[: int(query.get("count", "10"))]
        return Reply(200, body)

    def _forecast(self, query: dict[str, str]) -> Reply:
        lat, lon = float(query["latitude"]), float(query["longitude"])
        city = next(
            (c for c in CITIES if abs(c["latitude"] - lat) + abs(c["longitude"] - lon) < 0.01),
            None,
        )
        values, units = self._conditions(city), dict(CURRENT_UNITS)
        if query.get("temperature_unit") == "fahrenheit":
            for key in ("temperature_2m", "apparent_temperature"):
                values[key], units[key] = round(values[key] * 9 / 5 + 32, 1), "°F"
        units["wind_speed_10m"], factor = WIND_UNITS[query.get("wind_speed_unit", "kmh")]
        values["wind_speed_10m"] = round(values["wind_speed_10m"] * factor, 1)
        variables = [v for v in query.get("current", "").split(",") if v]
        return Reply(
            200,
            {
                "latitude": round(lat, 4),
                "longitude": round(lon, 4),
                "generationtime_ms": 0.05,
                "utc_offset_seconds": 0,
                "timezone": city["timezone"] if city else "GMT",
                "timezone_abbreviation": "GMT",
                "elevation": city["elevation"] if city else 0.0,
                "current_units": {"time": "iso8601", "interval": "seconds"}
                | {v: units[v] for v in variables},
                "current": {"time": self.time, "interval": 900} | {v: values[v] for v in variables},
            },
        )

    def _conditions(self, city: dict[str, Any] | None) -> dict[str, Any]:
        keys = [f"{city['name']}, {city['country_code']}", city["name"]] if city else []
        temperature = next((self.temperatures[k] for k in keys if k in self.temperatures), 15.0)
        code = next((self.weather_codes[k] for k in keys if k in self.weather_codes), 3)
        return {
            "temperature_2m": temperature,
            "apparent_temperature": round(temperature - 1.3, 1),
            "relative_humidity_2m": 40,
            "wind_speed_10m": 12.0,
            "precipitation": 0.0,
            "weather_code": code,
        }


def _bad_forecast(query: dict[str, str]) -> Reply | None:
    """Reject what the real forecast API rejects, with its wording."""
    try:
        lat, lon = float(query["latitude"]), float(query["longitude"])
    except (KeyError, ValueError):
        return error("Parameter 'latitude' and 'longitude' must be floating point numbers")
    if not -90 <= lat <= 90:
        return error(f"Latitude must be in range of -90 to 90°. Given: {lat}.")
    if not -180 <= lon <= 180:
        return error(f"Longitude must be in range of -180 to 180°. Given: {lon}.")
    unit = query.get("temperature_unit", "celsius")
    if unit not in ("celsius", "fahrenheit"):
        return error(f"Cannot initialize TemperatureUnit from invalid String value {unit}.")
    unit = query.get("wind_speed_unit", "kmh")
    if unit not in WIND_UNITS:
        return error(f"Cannot initialize WindspeedUnit from invalid String value {unit}.")
    unknown = [v for v in query.get("current", "").split(",") if v and v not in CURRENT_UNITS]
    if unknown:
        return error(f"Cannot initialize ForecastVariable from invalid String value {unknown[0]}.")
    return None
