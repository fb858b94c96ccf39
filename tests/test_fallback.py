"""A list of models in config: on a provider error the next one answers, and the trace says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway import TraceEvent
from gateway.assembly import open_gateway
from gateway.config import parse_config
from gateway.errors import ConfigError

pytestmark = pytest.mark.anyio


async def test_the_next_model_answers_and_the_trace_records_the_fallback(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("[]")  # this model fails at once: it has no answers
    good = tmp_path / "good.json"
    good.write_text(json.dumps([{"content": "from the second model"}]))
    config = parse_config({"agents": {"a": {"model": [f"scripted:{empty}", f"scripted:{good}"]}}})
    events: list[TraceEvent] = []

    async def record(event: TraceEvent) -> None:
        events.append(event)

    async with open_gateway(config, hooks=[record]) as gateway:
        result = await gateway.run("a", "hello")
    assert result.output == "from the second model"
    note = next(e for e in events if e.phase == "note")
    assert note.name == "scripted:empty.json"
    assert note.output == {
        "fallback_to": "scripted:good.json",
        "error": "scripted:empty.json has 0 answers and was asked for answer 1",
    }
    model_span = next(e for e in events if e.kind == "model" and e.phase == "start")
    assert note.parent_id == model_span.id


async def test_a_missing_api_key_is_a_config_error_naming_the_agent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    config = parse_config({"agents": {"writer": {"model": "anthropic:claude-sonnet-4-5"}}})
    with pytest.raises(ConfigError, match=r"agents\.writer\.model: anthropic needs an API key"):
        async with open_gateway(config):
            pass
