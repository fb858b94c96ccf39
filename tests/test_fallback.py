"""A list of models in config: on a provider error the next one answers, and the trace says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent import ModelError
from agent.errors import MissingApiKey, ModelConfigError
from gateway import TraceEvent
from gateway.assembly import open_gateway
from gateway.cli import main
from gateway.config import parse_config
from tests.servers.openai_stub import Refusal, openai_stub

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


async def test_a_missing_api_key_costs_only_that_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    good = tmp_path / "good.json"
    good.write_text(json.dumps([{"content": "from the scripted model"}]))
    config = parse_config(
        {
            "tools": {"calculator": {"builtin": "calculator"}},
            "agents": {
                "writer": {"model": "anthropic:claude-sonnet-4-5", "tools": ["calculator"]},
                "both": {"model": ["anthropic:claude-sonnet-4-5", f"scripted:{good}"]},
                "neither": {"model": ["anthropic:claude-sonnet-4-5", "gemini:gemini-2.5-pro"]},
                "none": {},
            },
        }
    )
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    async with open_gateway(config) as gateway:  # the gateway starts: its tools serve
        assert (await gateway.call_tool("calculator", {"expression": "6 * 7"})).content
        # A fallback list goes on without the model it has no key for.
        assert (await gateway.run("both", "hello")).output == "from the scripted model"
        # A program embedding the gateway tells a configuration to mend from an outage:
        # not a ModelError (worth a retry), but what `model_from_spec` raises.
        with pytest.raises(
            MissingApiKey, match=r"agents\.writer\.model: anthropic needs an API key"
        ):
            await gateway.run("writer", "hello")
        with pytest.raises(MissingApiKey) as neither:
            await gateway.run("neither", "hello")
        assert "set ANTHROPIC_API_KEY" in str(neither.value)
        assert "set GEMINI_API_KEY" in str(neither.value)
        with pytest.raises(ModelConfigError, match="agent 'none' has no model") as none:
            await gateway.run("none", "hello")
        assert not isinstance(none.value, ModelError)


def test_run_refuses_an_agent_whose_key_is_missing_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    file = tmp_path / "agent-gateway.toml"
    file.write_text('[agents.writer]\nmodel = "anthropic:claude-sonnet-4-5"\n')
    assert main(["run", "hi", "--config", str(file), "--no-store"]) == 2  # before it starts
    said = capsys.readouterr().err
    assert f"error: {file}: agents.writer.model: anthropic needs an API key: set " in said


async def test_a_retry_is_a_note_under_its_model_call_in_the_trace() -> None:
    """As it is a warning in the log: `--trace` and OpenTelemetry show why the call took long."""
    with openai_stub([Refusal(503, "The server is overloaded"), "hello"]) as stub:
        config = parse_config({"agents": {"a": {"model": stub.spec}}})
        events: list[TraceEvent] = []

        async def record(event: TraceEvent) -> None:
            events.append(event)

        async with open_gateway(config, hooks=[record]) as gateway:
            result = await gateway.run("a", "hi")
    assert result.output == "hello"
    [note] = [e for e in events if e.phase == "note"]
    [model_span] = [e for e in events if e.kind == "model" and e.phase == "start"]
    assert (note.kind, note.name, note.parent_id) == ("model", stub.spec, model_span.id)
    assert isinstance(note.output, dict)
    said = str(note.output["retry"])
    # The status, not the provider's words (they may quote the request; the log has them).
    assert said.startswith("HTTP 503. Retrying in "), said
    assert said.endswith(" s (attempt 2 of 4)"), said
