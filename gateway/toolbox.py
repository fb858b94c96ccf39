"""`toolbox`: a small MCP server shipped with agent-gateway, for the demo and for trying things.

    python -m gateway.toolbox          # an MCP server on stdin/stdout

It is an ordinary stdio MCP server (the SDK's `MCPServer`), started by the built-in default
config as the `toolbox` node, so `agent-gateway demo` shows an agent's call going through the
gateway to an MCP server and back. Its tools are useful on their own: unit conversion, text
statistics, the time in a time zone, and the days between two dates.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["convert_units", "current_time", "days_between", "main", "server", "text_stats"]

# Factors to the base unit of each dimension (metre, kilogram, litre, second, square metre).
_UNITS: dict[str, tuple[str, float]] = {
    "mm": ("length", 0.001),
    "cm": ("length", 0.01),
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "in": ("length", 0.0254),
    "ft": ("length", 0.3048),
    "yd": ("length", 0.9144),
    "mi": ("length", 1609.344),
    "mg": ("mass", 1e-6),
    "g": ("mass", 0.001),
    "kg": ("mass", 1.0),
    "t": ("mass", 1000.0),
    "oz": ("mass", 0.028349523125),
    "lb": ("mass", 0.45359237),
    "ml": ("volume", 0.001),
    "l": ("volume", 1.0),
    "gal": ("volume", 3.785411784),  # US gallon
    "cup": ("volume", 0.2365882365),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "day": ("time", 86400.0),
    "week": ("time", 604800.0),
    "m2": ("area", 1.0),
    "km2": ("area", 1e6),
    "ha": ("area", 1e4),
    "acre": ("area", 4046.8564224),
    "ft2": ("area", 0.09290304),
}
_ALIASES = {
    "meter": "m", "metre": "m", "meters": "m", "metres": "m", "kilometer": "km",
    "kilometre": "km", "kilometers": "km", "kilometres": "km", "centimeter": "cm",
    "centimeters": "cm", "millimeter": "mm", "millimeters": "mm", "inch": "in", "inches": "in",
    "foot": "ft", "feet": "ft", "yard": "yd", "yards": "yd", "mile": "mi", "miles": "mi",
    "gram": "g", "grams": "g", "kilogram": "kg", "kilograms": "kg", "ton": "t", "tonne": "t",
    "tonnes": "t", "ounce": "oz", "ounces": "oz", "pound": "lb", "pounds": "lb", "lbs": "lb",
    "liter": "l", "litre": "l", "liters": "l", "litres": "l", "milliliter": "ml",
    "millilitre": "ml", "gallon": "gal", "gallons": "gal", "cups": "cup", "second": "s",
    "seconds": "s", "minute": "min", "minutes": "min", "hour": "h", "hours": "h", "days": "day",
    "weeks": "week", "hectare": "ha", "hectares": "ha", "acres": "acre",
}  # fmt: skip
_TEMPERATURES = {"c": "C", "celsius": "C", "f": "F", "fahrenheit": "F", "k": "K", "kelvin": "K"}

server = MCPServer(
    "toolbox",
    instructions="Small everyday tools: units, text statistics, times and dates.",
    log_level="WARNING",
)


@server.tool()
def convert_units(value: float, from_unit: str, to_unit: str) -> dict[str, Any]:
    """Convert a quantity between units of length, mass, volume, time, area or temperature,
    e.g. 26.2 "mi" to "km", 100 "F" to "C", 2 "cup" to "ml"."""
    source, target = _temperature(from_unit), _temperature(to_unit)
    if source and target:
        result = _from_kelvin(_to_kelvin(value, source), target)
        return {"value": round(result, 6), "unit": target}
    (kind_from, factor_from), (kind_to, factor_to) = _unit(from_unit), _unit(to_unit)
    if kind_from != kind_to:
        raise ToolError(f"cannot convert {kind_from} ({from_unit}) to {kind_to} ({to_unit})")
    return {"value": round(value * factor_from / factor_to, 6), "unit": to_unit}


@server.tool()
def text_stats(text: str) -> dict[str, Any]:
    """Count the characters, words, sentences and lines of a text, with its reading time."""
    words = re.findall(r"\b[\w'-]+\b", text)
    sentences = [s for s in re.split(r"[.!?]+", text) if s.strip()]
    return {
        "characters": len(text),
        "words": len(words),
        "sentences": len(sentences),
        "lines": len(text.splitlines()),
        "reading_minutes": round(len(words) / 230, 1),  # a typical adult's silent reading speed
    }


@server.tool()
def current_time(timezone: str = "UTC") -> dict[str, str]:
    """The current date and time in an IANA time zone, e.g. "Europe/Paris"."""
    try:
        now = datetime.now(ZoneInfo(timezone))
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown time zone {timezone!r}; use an IANA name") from None
    return {
        "timezone": timezone,
        "datetime": now.isoformat(timespec="seconds"),
        "weekday": f"{now:%A}",
    }


@server.tool()
def days_between(start: str, end: str) -> dict[str, int]:
    """Days from one ISO date (YYYY-MM-DD) to another; negative when `end` is earlier."""
    try:
        days = (date.fromisoformat(end) - date.fromisoformat(start)).days
    except ValueError as exc:
        raise ToolError(f"dates must look like 2025-12-31: {exc}") from None
    return {"days": days, "weeks": days // 7}


def _unit(name: str) -> tuple[str, float]:
    key = name.strip().lower().rstrip(".")
    key = _ALIASES.get(key, key).replace("²", "2")
    if key not in _UNITS:
        known = ", ".join([*_UNITS, "C", "F", "K"])
        raise ToolError(f"unknown unit {name!r}; known: {known}")
    return _UNITS[key]


def _temperature(name: str) -> str | None:
    return _TEMPERATURES.get(name.strip().lower().removeprefix("°").removeprefix("degrees "))


def _to_kelvin(value: float, unit: str) -> float:
    return {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15}.get(unit, value)


def _from_kelvin(value: float, unit: str) -> float:
    return {"C": value - 273.15, "F": (value - 273.15) * 9 / 5 + 32}.get(unit, value)


def main() -> None:
    server.run("stdio")


if __name__ == "__main__":
    main()
