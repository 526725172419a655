"""get_weather against a loopback Open-Meteo: answers, ambiguity, and every transport fault."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from langchain_core.tools import ToolException

from tests.support.servers.base import Reply, closed_port_url
from tests.support.servers.openmeteo import CITIES, OpenMeteoServer
from tools.http import get_json
from tools.weather import WMO_CODES, get_weather

TEMPERATURE = re.compile(r"(-?\d+(?:\.\d+)?) ?°[CF]")


@pytest.fixture
def openmeteo(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenMeteoServer]:
    server = OpenMeteoServer()
    with server:
        monkeypatch.setenv("FERRY_GEOCODING_URL", server.url + "/v1")
        monkeypatch.setenv("FERRY_FORECAST_URL", server.url + "/v1")
        yield server


def weather(city: str, units: str = "celsius") -> str:
    reply = get_weather.invoke({"city": city, "units": units})
    assert isinstance(reply, str)
    return reply


def failure(city: str = "Madrid") -> str:
    with pytest.raises(ToolException) as caught:
        get_weather.invoke({"city": city})
    return str(caught.value)


def test_reports_the_servers_temperature_for_bogota(openmeteo: OpenMeteoServer) -> None:
    openmeteo.temperatures["Bogotá"] = 14.7
    reply = weather("Bogotá")
    assert reply == (
        "Bogotá, Bogota D.C., Colombia: 14.7 °C (feels like 13.4 °C), overcast, humidity 40%, "
        "wind 12.0 km/h, precipitation 0.0 mm (as of 2026-11-30T15:00 local time)"
    )
    match = TEMPERATURE.search(reply)
    assert match and float(match.group(1)) == 14.7
    [geocode] = openmeteo.requests_to("/v1/search")
    assert geocode.query == {"name": "Bogotá", "count": "10", "language": "en", "format": "json"}
    [forecast] = openmeteo.requests_to("/v1/forecast")
    assert forecast.query == {
        "latitude": "4.60971",
        "longitude": "-74.08175",
        "current": "temperature_2m,apparent_temperature,relative_humidity_2m,"
        "wind_speed_10m,precipitation,weather_code",
        "temperature_unit": "celsius",
        "wind_speed_unit": "kmh",
        "timezone": "auto",
    }


def test_accents_and_case_do_not_matter(openmeteo: OpenMeteoServer) -> None:
    assert weather("  bogota ").startswith("Bogotá, Bogota D.C., Colombia: 14.2 °C")


def test_fahrenheit_uses_fahrenheit_and_mph(openmeteo: OpenMeteoServer) -> None:
    reply = weather("Madrid", "fahrenheit")
    assert reply.startswith("Madrid, Community of Madrid, Spain: 70.5 °F (feels like 68.2 °F)")
    assert "clear sky" in reply and "wind 7.5 mph" in reply
    [forecast] = openmeteo.requests_to("/v1/forecast")
    assert forecast.query["temperature_unit"] == "fahrenheit"
    assert forecast.query["wind_speed_unit"] == "mph"


def test_ambiguous_name_picks_the_most_populous_and_names_the_others(
    openmeteo: OpenMeteoServer,
) -> None:
    reply = weather("Paris")
    assert reply.startswith("Paris, Île-de-France, France: 18.0 °C")
    assert "Several places are called 'Paris'; chose the most populous." in reply
    assert "Others: Paris, Texas, United States." in reply
    assert reply.endswith("For another, ask e.g. 'Paris, Texas'.")


def test_most_populous_wins_whatever_the_services_order(openmeteo: OpenMeteoServer) -> None:
    paris = [c for c in CITIES if c["name"] == "Paris"]
    openmeteo.fail_next(Reply(200, {"results": paris[::-1], "generationtime_ms": 0.5}))
    assert weather("Paris").startswith("Paris, Île-de-France, France")


def test_region_after_a_comma_picks_that_place(openmeteo: OpenMeteoServer) -> None:
    assert weather("Paris, Texas").startswith("Paris, Texas, United States: 30.5 °C")
    assert weather("paris, us").startswith("Paris, Texas, United States: 30.5 °C")
    assert "Several places" not in weather("Paris, Texas")


def test_weather_codes_become_words(openmeteo: OpenMeteoServer) -> None:
    assert "slight rain" in weather("Berlin")
    openmeteo.weather_codes["Berlin"] = 99
    assert "thunderstorm with heavy hail" in weather("Berlin")
    expected = {0, 1, 2, 3, 45, 48, 51, 53, 55, 56, 57, 61, 63, 65, 66, 67, 71, 73, 75, 77}
    assert set(WMO_CODES) == expected | {80, 81, 82, 85, 86, 95, 96, 99}


def test_unknown_city(openmeteo: OpenMeteoServer) -> None:
    assert failure("Atlantis") == (
        "City 'Atlantis' not found. Check the spelling or try a nearby larger city; "
        "add the country after a comma to narrow it down, e.g. 'Paris, France'."
    )
    assert failure("Paris, Narnia").startswith("City 'Paris, Narnia' not found.")
    assert failure(" ") == "Give a city name, e.g. 'Madrid' or 'Paris, France'."
    assert openmeteo.requests_to("/v1/forecast") == []


def test_forecast_rejection_carries_the_services_reason(openmeteo: OpenMeteoServer) -> None:
    with pytest.raises(ToolException) as caught:
        get_json(
            openmeteo.url + "/v1/forecast",
            {"latitude": 100, "longitude": 0},
            service="F",
            timeout_s=5,
            retry_total_s=5,
        )
    assert str(caught.value) == (
        "F rejected the request (HTTP 400): Latitude must be in range of -90 to 90°. "
        "Given: 100.0. Retrying the same request will fail again."
    )
    assert len(openmeteo.requests) == 1


def test_connection_refused(monkeypatch: pytest.MonkeyPatch, fast_faults: None) -> None:
    url = closed_port_url()
    monkeypatch.setenv("FERRY_GEOCODING_URL", url + "/v1")
    started = time.monotonic()
    message = failure()
    assert time.monotonic() - started < 5
    assert message.startswith(f"Cannot connect to Open-Meteo geocoding ({url}: ")
    assert re.search(r"after [1-4] attempts?; it may be down or unreachable\.$", message)


def test_timeout_is_retried_then_reported(
    openmeteo: OpenMeteoServer, fast_faults: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A budget that always leaves room for a second attempt (0.5 s timeout + at most 1 s of
    # jittered backoff): with less, a busy machine decides by luck whether it is made.
    monkeypatch.setenv("FERRY_HTTP_RETRY_TOTAL_S", "3")
    openmeteo.fail_next(Reply(200, {}, delay_s=1.0), times=10)
    started = time.monotonic()
    message = failure()
    assert time.monotonic() - started < 5
    attempts = len(openmeteo.requests)
    assert 2 <= attempts <= 4
    assert message == (
        f"Open-Meteo geocoding timed out (no answer within 0.5 s) after {attempts} attempts; "
        "it may be overloaded, try again later."
    )


def test_429_with_retry_after_then_success(openmeteo: OpenMeteoServer) -> None:
    openmeteo.fail_next(
        Reply(429, {"error": True, "reason": "Too many requests"}, {"Retry-After": "1"})
    )
    started = time.monotonic()
    assert weather("Bogotá").startswith("Bogotá, Bogota D.C., Colombia: 14.2 °C")
    assert time.monotonic() - started >= 0.9
    assert len(openmeteo.requests_to("/v1/search")) == 2


def test_persistent_429_gives_up_after_four_attempts(
    openmeteo: OpenMeteoServer, fast_faults: None
) -> None:
    openmeteo.fail_next(Reply(429, {"reason": "Too many requests"}, {"Retry-After": "0"}), times=9)
    assert failure() == (
        "Open-Meteo geocoding is rate limiting requests (HTTP 429) after 4 attempts. Wait a minute."
    )
    assert len(openmeteo.requests) == 4


def test_429_asking_for_more_than_the_budget_fails_at_once(
    openmeteo: OpenMeteoServer, fast_faults: None
) -> None:
    openmeteo.fail_next(Reply(429, {"reason": "Too many requests"}, {"Retry-After": "120"}))
    started = time.monotonic()
    assert failure() == (
        "Open-Meteo geocoding is rate limiting requests (HTTP 429) after 1 attempt. "
        "It asked to wait 120 s, longer than the retry budget allows. Wait a minute."
    )
    assert time.monotonic() - started < 10  # not the 120 s asked for
    assert len(openmeteo.requests) == 1


def test_500_then_success_on_the_forecast(openmeteo: OpenMeteoServer) -> None:
    openmeteo.forecast_faults.append(Reply(500, "Internal Server Error"))
    assert weather("Berlin").startswith("Berlin, Land Berlin, Germany: 9.5 °C")
    assert len(openmeteo.requests_to("/v1/search")) == 1
    assert len(openmeteo.requests_to("/v1/forecast")) == 2


def test_persistent_503_gives_up_after_four_attempts(
    openmeteo: OpenMeteoServer, fast_faults: None
) -> None:
    openmeteo.forecast_faults.extend([Reply(503, "Unavailable", {"Retry-After": "0"})] * 9)
    assert failure() == (
        "Open-Meteo forecast had a service error (HTTP 503) after 4 attempts; try again later."
    )
    assert len(openmeteo.requests_to("/v1/forecast")) == 4


def test_persistent_503_without_retry_after_is_bounded_by_the_budget(
    openmeteo: OpenMeteoServer, fast_faults: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRY_HTTP_RETRY_TOTAL_S", "1.0")
    openmeteo.fail_next(Reply(503, "Unavailable"), times=9)
    started = time.monotonic()
    message = failure()
    assert time.monotonic() - started < 3  # four attempts' backoff alone is over 3.5 s
    attempts = len(openmeteo.requests)
    assert 1 <= attempts < 4
    assert f"(HTTP 503) after {attempts} attempt" in message


def test_malformed_json_is_not_retried(openmeteo: OpenMeteoServer) -> None:
    openmeteo.fail_next(Reply(200, "<html>gateway</html>", {"Content-Type": "text/html"}))
    assert failure() == (
        "Open-Meteo geocoding sent a malformed reply (HTTP 200 but not JSON); try again later."
    )
    assert len(openmeteo.requests) == 1


def test_client_error_carries_the_reason_and_is_not_retried(openmeteo: OpenMeteoServer) -> None:
    openmeteo.fail_next(Reply(400, {"error": True, "reason": "Parameter 'count' is invalid"}))
    assert failure() == (
        "Open-Meteo geocoding rejected the request (HTTP 400): Parameter 'count' is invalid. "
        "Retrying the same request will fail again."
    )
    assert len(openmeteo.requests) == 1


def test_forecast_without_current_conditions(openmeteo: OpenMeteoServer) -> None:
    openmeteo.forecast_faults.append(Reply(200, {"latitude": 1.0, "longitude": 2.0}))
    assert failure() == "Open-Meteo forecast sent no current temperature; try again later."
