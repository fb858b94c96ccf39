"""What the real APIs answer 400 to in the calls and results of a request body: the pairing of
calls with results by id, unique ids, call names, arguments that are objects. Each function
returns the problems found, in the APIs' own words where they have them (empty: none)."""

from __future__ import annotations

import re
from typing import Any, cast

__all__ = ["anthropic_problems", "gemini_problems", "openai_problems", "responses_problems"]

CALL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""OpenAI's `tool_calls[].function.name` and Anthropic's `tool_use.name`."""
GEMINI_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")
ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")


def anthropic_problems(body: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    uses: list[str] = []  # of the assistant turn before
    every_id: list[str] = []
    for i, message in enumerate(body["messages"]):
        content: Any = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = cast(list[dict[str, Any]], content)
        if message["role"] == "assistant":
            if uses:
                problems.append(f"messages.{i}: tool_use ids {uses} without tool_result")
            calls = [b for b in blocks if b["type"] == "tool_use"]
            uses = [str(c["id"]) for c in calls]
            every_id += uses
            for call in calls:
                if not ANTHROPIC_ID.fullmatch(call["id"]):
                    problems.append(f"messages.{i}: tool_use.id {call['id']!r} invalid")
                if not CALL_NAME.fullmatch(call["name"]):
                    problems.append(f"messages.{i}: tool_use.name {call['name']!r} invalid")
                if not isinstance(call["input"], dict):
                    problems.append(f"messages.{i}: tool_use.input not an object")
            continue
        results = [str(b["tool_use_id"]) for b in blocks if b["type"] == "tool_result"]
        problems += [
            f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: {r}"
            for r in results
            if r not in uses
        ]
        if missing := sorted(set(uses) - set(results)):
            problems.append(f"messages.{i}: tool_use ids without tool_result blocks: {missing}")
        uses = []
    if len(set(every_id)) != len(every_id):
        problems.append(f"`tool_use` ids must be unique: {every_id}")
    return problems


def openai_problems(body: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    pending: set[str] = set()
    every_id: list[str] = []
    for i, message in enumerate(body["messages"]):
        if message["role"] == "tool":
            if message["tool_call_id"] not in pending:
                problems.append(f"messages[{i}]: tool_call_id answers no call before it")
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            problems.append(f"messages[{i}]: tool_calls {sorted(pending)} have no tool message")
        calls: list[dict[str, Any]] = message.get("tool_calls") or []
        pending = {call["id"] for call in calls}
        every_id += [call["id"] for call in calls]
        problems += [
            f"messages[{i}].tool_calls: name {call['function']['name']!r} does not match"
            for call in calls
            if not CALL_NAME.fullmatch(call["function"]["name"])
        ]
    if len(set(every_id)) != len(every_id):
        problems.append(f"duplicate tool_call ids: {every_id}")
    return problems


def gemini_problems(body: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    calls: list[dict[str, Any]] = []  # of the model turn before
    for i, content in enumerate(body["contents"]):
        parts = content["parts"]
        if content["role"] == "model":
            calls = [p["functionCall"] for p in parts if "functionCall" in p]
            for call in calls:
                if not GEMINI_NAME.fullmatch(call["name"]):
                    problems.append(f"contents[{i}]: functionCall.name {call['name']!r} invalid")
                if not isinstance(call.get("args", {}), dict):
                    problems.append(f"contents[{i}]: functionCall.args not an object")
            continue
        responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
        if calls and len(responses) != len(calls):
            problems.append(f"contents[{i}]: {len(responses)} responses for {len(calls)} calls")
        # Responses answer calls in order; an id, where the call has one, must be its own.
        for call, response in zip(calls, responses, strict=False):
            if (call.get("id"), call["name"]) != (response.get("id"), response["name"]):
                problems.append(f"contents[{i}]: response {response} answers call {call}")
        calls = []
    return problems


def responses_problems(body: dict[str, Any]) -> list[str]:
    """The Responses API's `input`: every output answers a call before it, every call has an
    output, a reasoning item is followed by what it led to."""
    problems: list[str] = []
    items: list[dict[str, Any]] = body["input"]
    calls: list[str] = []
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            calls.append(item["call_id"])
            if not CALL_NAME.fullmatch(item["name"]):
                problems.append(f"input[{i}].name {item['name']!r} does not match")
            if not isinstance(item["arguments"], str):
                problems.append(f"input[{i}].arguments: expected a string")
        elif kind == "function_call_output":
            if item["call_id"] not in calls:
                problems.append(
                    f"No tool call found for function call output with call_id {item['call_id']}."
                )
            answered.add(item["call_id"])
        elif kind == "reasoning":
            following = items[i + 1] if i + 1 < len(items) else {}
            if following.get("type") not in ("function_call", "message"):
                problems.append(
                    f"Item '{item['id']}' of type 'reasoning' was provided without its required "
                    "following item."
                )
    problems += [f"No tool output found for function call {c}." for c in calls if c not in answered]
    if len(set(calls)) != len(calls):
        problems.append(f"duplicate call_ids: {calls}")
    ids = [item["id"] for item in items if "id" in item]
    if len(set(ids)) != len(ids):
        problems.append(f"Duplicate item found with id: {ids}")
    return problems
