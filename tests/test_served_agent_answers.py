"""A served agent's answer, as a calling gateway's agent reads it: the answer for its model,
the usage for its run (`gateway.agent_tool`)."""

from __future__ import annotations

import mcp_types as types
from pydantic import JsonValue

from agent import ItemResult, Usage
from gateway.agent_tool import USAGE_META_KEY, answer_data, reported_usage
from gateway.run_state import RunResult
from gateway.server.served.agents import run_result

USAGE = Usage(input_tokens=39, output_tokens=2, requests=2)


def served(output: str, *, structured: JsonValue = None) -> RunResult:
    item = ItemResult(output=output, structured=structured)
    return RunResult(run_id="r1", agent="math", items=[item], usage=USAGE, iterations=2)


def test_a_served_agents_result_says_its_usage_and_the_model_reads_its_answer() -> None:
    result = run_result(served("459"), steps=False)
    assert result.meta == {USAGE_META_KEY: USAGE.model_dump(mode="json")}
    assert reported_usage(result) == USAGE
    assert answer_data(result, 1000) == {"response": "459"}
    # What an MCP client gets is as it was: the answer as text, and `{output, usage}`.
    assert result.content == [types.TextContent(text="459")]
    assert result.structured_content == {"output": "459", "usage": USAGE.model_dump(mode="json")}


def test_an_answer_with_its_steps_or_an_output_schema_is_read_without_the_usage() -> None:
    with_steps = run_result(served("459"), steps=True)
    assert answer_data(with_steps, 1000) == {"output": "459", "steps": []}
    shaped = run_result(served('{"total": 459}', structured={"total": 459}), steps=False)
    assert answer_data(shaped, 1000) == {"total": 459}


def test_an_answer_too_long_for_the_cap_is_read_as_its_text_cut() -> None:
    result = run_result(served("4" * 50, structured={"digits": "4" * 50}), steps=False)
    assert answer_data(result, 20) == {"response": "4" * 20 + "\n... [truncated 30 of 50 chars]"}


def test_a_failed_run_reports_its_usage_too() -> None:
    items = [ItemResult(error="no model")]
    failed = RunResult(run_id="r1", agent="math", items=items, usage=USAGE, iterations=1)
    result = run_result(failed, steps=False)
    assert result.is_error
    assert reported_usage(result) == USAGE


def test_other_results_report_no_usage_and_odd_counts_are_left_out() -> None:
    plain = types.CallToolResult(
        content=[types.TextContent(text="459")], structured_content={"usage": {"requests": 1}}
    )
    assert reported_usage(plain) is None
    odd = {"input_tokens": -3, "output_tokens": "2", "requests": 1, "new_kind": 7}
    sent = plain.model_copy(update={"meta": {USAGE_META_KEY: odd}})
    assert reported_usage(sent) == Usage(requests=1)
    # Nothing but the usage: the text is the answer.
    assert answer_data(sent, 1000) == {"response": "459"}
