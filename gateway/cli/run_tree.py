"""`runs show`: a stored run as text, its calls as a tree.

run 4f2a9c1d7e30  succeeded  agent assistant  2026-12-01 04:04:49 UTC
question: What is 6 * 7?
├─ model  12 ms  6 in / 3 out tokens
│    calls calculator {"expression": "6 * 7"}
├─ tool calculator  call_1  1 ms
│    input  {"expression": "6 * 7"}
│    output "42"
└─ model  8 ms  7 in / 3 out tokens
     It is 42.
answer: It is 42.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import JsonValue

from ..run_state import RunResult, RunState, spent
from .common import plural, utc

if TYPE_CHECKING:
    from ..durable import CallNode, RunInfo

__all__ = ["render_run"]

WIDTH = 300
"""Characters of one value shown (`--json` has them whole)."""


def render_run(
    info: RunInfo, calls: Sequence[CallNode], state: RunState | None, result: RunResult | None
) -> list[str]:
    started = utc(info.created_ms) if info.created_ms is not None else ""
    lines = [f"run {info.run_id}  {info.status}  agent {info.agent or '?'}  {started}".rstrip()]
    if info.error:  # why it failed, or why it stopped (not always a failure: `--no-wait`)
        lines.append(f"{'error' if info.status == 'failed' else 'stopped'}: {info.error}")
    for index, item in enumerate(state.items if state is not None else ()):
        label = "question" if state is not None and len(state.items) == 1 else f"item {index}"
        lines.append(f"{label}: {_short(item.prompt)}")
    lines += _tree(calls, "")
    if result is not None:
        for index, item in enumerate(result.items):
            label = "answer" if len(result.items) == 1 else f"answer {index}"
            if item.handoff is not None:
                label += f" (handed off to {item.handoff})"
            said = item.error if item.error is not None else item.output
            lines.append(
                f"{label}: {_short(said or '')}" if item.error is None else f"{label} error: {said}"
            )
        usage = result.usage
        lines.append(
            f"usage: {usage.input_tokens} in / {usage.output_tokens} out tokens, "
            f"{plural(usage.requests, 'model call')}, {plural(result.iterations, 'iteration')}"
        )
    elif state is not None and (state.request or state.response) is not None:
        usage = spent(state)  # by its last checkpoint, its sub-agents' calls included
        lines.append(
            f"usage so far: {usage.input_tokens} in / {usage.output_tokens} out tokens, "
            f"{plural(usage.requests, 'model call')}"
        )
    return lines


def _tree(calls: Sequence[CallNode], indent: str) -> list[str]:
    lines: list[str] = []
    for index, call in enumerate(calls):
        last = index == len(calls) - 1
        lines.append(f"{indent}{'└─' if last else '├─'} {_head(call)}")
        inner = indent + ("   " if last else "│  ")
        bar = "│    " if call.calls else "  "  # the agent's own calls follow
        lines += [f"{inner}{bar}{line}" for line in _body(call)]
        lines += _tree(call.calls, inner)
    return lines


def _head(call: CallNode) -> str:
    parts = [call.kind if call.kind == "model" else f"tool {call.name}"]
    if call.call_id is not None:
        parts.append(call.call_id)
    if call.in_flight:
        parts.append(_unfinished(call))
    if call.took_ms is not None:
        parts.append(f"{call.took_ms} ms")
    if call.approval is not None:
        parts.append("approved" if call.approval.get("approved") else "denied")
    usage = call.usage or {}
    if usage.get("input_tokens") or usage.get("output_tokens"):
        parts.append(
            f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens"
        )
    return "  ".join(parts)


def _unfinished(call: CallNode) -> str:
    """How a call without a record stands: under way, waiting for a person, decided (the
    decision follows), or ended by the run's cancel."""
    if call.cancelled:
        return "(cancelled while waiting for approval)" if call.waiting_approval else "(cancelled)"
    if call.waiting_approval:
        return "(waiting for approval)"
    return "(decided, not run yet)" if call.approval is not None else "(in flight)"


def _body(call: CallNode) -> list[str]:
    if call.kind == "tool":
        lines = [f"input  {_json(call.input)}"] if call.input is not None else []
        if call.in_flight:
            return lines  # no output yet
        if call.error is not None:  # with its input: what it failed on
            return [*lines, f"error: {_short(call.error)}"]
        if not call.calls or call.output is not None:
            lines.append(f"output {_json(call.output)}")
        return lines
    if call.error is not None:
        return [f"error: {_short(call.error)}"]
    lines: list[str] = []
    answer = call.output if isinstance(call.output, dict) else {}
    thinking = answer.get("thinking")
    if isinstance(thinking, str) and thinking:
        lines.append(f"thinking: {_short(thinking)}")
    content = answer.get("content")
    if isinstance(content, str) and content.strip():
        lines.append(_short(content))
    tool_calls = answer.get("tool_calls")
    for asked in tool_calls if isinstance(tool_calls, list) else []:
        if isinstance(asked, dict):
            lines.append(f"calls {asked.get('name')} {_json(asked.get('arguments'))}")
    return lines


def _json(value: JsonValue) -> str:
    return _short(json.dumps(value, ensure_ascii=False, default=str))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= WIDTH else text[: WIDTH - 1] + "…"
