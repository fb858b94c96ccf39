"""OpenAI strict mode only for schemas within its documented limits.

A schema strict mode would take for its keywords but not for its size is refused, and with it
the agent's whole request; without `strict` OpenAI takes it. So such a schema goes without.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.models.schema import openai_parameters


def closed(properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema strict mode takes for its keywords: closed, every property required."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def nested(levels: int) -> dict[str, Any]:
    """Closed objects whose innermost value is `levels` properties below the root."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = closed({"a": schema})
    return schema


def enums(count: int, values: int, length: int) -> dict[str, Any]:
    """`count` string properties, each an enum of `values` values of `length` characters."""
    return closed(
        {
            f"e{i}": {"type": "string", "enum": [f"{v:0{length}d}" for v in range(values)]}
            for i in range(count)
        }
    )


WITHIN = {
    "10 levels": nested(10),
    "5,000 properties": closed({f"p{i}": {"type": "integer"} for i in range(5_000)}),
    "1,000 enum values": enums(4, 250, 4),
    "an enum of 1,000 values, 15,000 characters": enums(1, 1_000, 15),
    "250 values of 100 characters": enums(1, 250, 100),
    "119,000 characters of enum values": enums(5, 200, 119),
    "an array's items and anyOf": closed(
        {"list": {"type": "array", "items": {"anyOf": [nested(7), {"type": "null"}]}}}
    ),
}
OVER = {
    "13 levels": nested(13),
    "11 levels": nested(11),
    "an array's items and anyOf 11 deep": closed(
        {"list": {"type": "array", "items": {"anyOf": [nested(8), {"type": "null"}]}}}
    ),
    "5,001 properties": closed({f"p{i}": {"type": "integer"} for i in range(5_001)}),
    "1,200 enum values": enums(1, 1_200, 5),
    "1,002 enum values in two enums": enums(2, 501, 4),
    "an enum of 251 values, 15,060 characters": enums(1, 251, 60),
    "121,000 characters of enum values": enums(5, 200, 121),
    "120,008 characters of const values and names": closed(
        {f"c{i}": {"type": "string", "const": "x" * 30_000} for i in range(4)}
    ),
}


@pytest.mark.parametrize("schema", WITHIN.values(), ids=WITHIN.keys())
def test_a_schema_within_the_limits_is_strict(schema: dict[str, Any]) -> None:
    parameters, strict = openai_parameters(schema)
    assert strict
    assert parameters == schema


@pytest.mark.parametrize("schema", OVER.values(), ids=OVER.keys())
def test_a_schema_over_a_limit_is_sent_without_strict_and_unchanged(
    schema: dict[str, Any],
) -> None:
    parameters, strict = openai_parameters(schema)
    assert not strict
    assert parameters == schema
