"""Why the agent answers a model's call itself instead of having it run: a tool that does
not exist (the closest names, and a bounded list of the others), the output tool called
beside others, arguments cut off at the token limit, not a JSON object or not JSON a model
may write (`model_json`), a call repeated once too often; and so which of an answer's calls
the engine is asked to run (`planned_calls`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .handoff import one_handoff
from .messages import AssistantMessage, ToolCall, ToolDefinition
from .model_json import why_refused
from .names import did_you_mean, listed_names
from .output import FINAL_RESULT_TOOL, OutputSchema
from .protocol import Action, ToolCallStep
from .scratchpad import ERROR_PREFIX, repeat_notice

__all__ = ["call_problem", "planned_calls"]


def planned_calls(
    answer: AssistantMessage,
    index: int,
    steps: Sequence[ToolCallStep],
    by_name: Mapping[str, ToolDefinition],
    tools: Sequence[ToolDefinition],
    output: OutputSchema | None,
    why_missing: Callable[[str], str | None] | None,
) -> tuple[list[ToolCallStep], list[Action]]:
    """Of item `index`'s `answer`: actions for the calls the engine must run, and steps for
    those answered right here (`call_problem`, a repeat, a handoff beyond the first).
    `output`: the schema of the `final_result` tool offered, if one is."""
    answered: list[ToolCallStep] = []
    actions: list[Action] = []
    for n, call in enumerate(answer.tool_calls):
        tool = by_name.get(call.name)
        problem = call_problem(call, tool, answer, tools, output, why_missing)
        earlier = answer.tool_calls[:n]
        said = f"{ERROR_PREFIX}{problem}" if problem else repeat_notice(call, steps, earlier)
        if said is not None or tool is None:
            answered.append(
                ToolCallStep(
                    tool_call_id=call.id,
                    tool=call.name,
                    tool_input=call.arguments,
                    observation=said or "",
                    message=answer,
                    is_error=problem is not None,
                )
            )
            continue
        actions.append(
            Action.routed(
                node=tool.source_node,
                tool=call.name,
                arguments=dict(call.arguments),
                from_toolkit=tool.is_from_toolkit,
                tool_call_id=call.id,
                item_index=index,
            )
        )
    actions, not_made = one_handoff(answer, actions, by_name)
    return answered + not_made, actions


def call_problem(
    call: ToolCall,
    tool: ToolDefinition | None,
    answer: AssistantMessage,
    tools: Sequence[ToolDefinition],
    output: OutputSchema | None,
    why_missing: Callable[[str], str | None] | None,
) -> str | None:
    """What the model is told of `call` (of `tool`, None: no tool of that name) in `answer`,
    instead of a result; None: it runs."""
    if tool is None and call.name == FINAL_RESULT_TOOL and output is not None:
        # With other calls (see `structured_answer`): it was written before their results.
        others = sorted({c.name for c in answer.tool_calls if c.name != FINAL_RESULT_TOOL})
        return (
            f"{FINAL_RESULT_TOOL} was not taken: it was called together with "
            f"{', '.join(others)}, so it could not use their results (given with this "
            f"one). Call {FINAL_RESULT_TOOL} alone once you have read them."
        )
    if tool is None:
        # Never drop the call: the model learns what exists and can try again, from the
        # closest names and a bounded list (thousands of names cost more than they tell).
        names = [t.name for t in tools]
        available = (
            f"Available tools: {listed_names(names)}." if names else "This agent has no tools."
        )
        reason = why_missing(call.name) if why_missing is not None else None
        if reason is not None:
            return f"{reason}. {available}"
        guess = did_you_mean(call.name, names) or "."
        return f"there is no tool named {call.name!r}{guess} {available}"
    if call.invalid_arguments is not None and answer.stop_reason == "max_tokens":
        # The JSON is not wrong, only unfinished: asking for valid JSON would loop.
        return (
            f"your answer was cut off at the output token limit while writing the "
            f"arguments for {call.name!r}. Call it again with shorter arguments, or make "
            "fewer calls at once."
        )
    if call.invalid_arguments is not None:
        return (
            f"the arguments for {call.name!r} were {why_refused(call.invalid_arguments)}: "
            f"{call.invalid_arguments[:500]!r}. Call it again with valid JSON arguments."
        )
    return None
