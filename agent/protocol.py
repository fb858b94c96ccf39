"""What the agent and its engine say to each other, as JSON-serialisable data.

The agent never runs a tool. It answers a step with an `EngineRequest` (the actions to run and
all of its loop state in `metadata`), and the engine resumes it with an `EngineResponse` (each
action's result plus that same metadata). Nothing else survives between steps, so a run can be
stored after any step and resumed in another process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from .errors import StateError
from .messages import AssistantMessage, ChatMessage, MediaRecord, Usage
from .well_formed import well_formed, well_formed_text

__all__ = [
    "METADATA_VERSION",
    "ROUTING_KEY",
    "Action",
    "ActionResponse",
    "AgentItem",
    "AgentRequestMetadata",
    "AgentResult",
    "EngineRequest",
    "EngineResponse",
    "ItemErrorCode",
    "ItemResult",
    "ToolCallStep",
    "UnsavedTurn",
    "metadata_version",
]

METADATA_VERSION = 7
"""The newest metadata version, which this agent writes when it must; it resumes the older
ones too. Version 2 adds media to steps (`ToolCallStep.media`), version 3 an argument the
routing field displaced (`Action.displaced`), version 4 an item answered by a handoff
(`ItemResult.handoff`), version 5 a failed call (`ToolCallStep.is_error`) or an item
answered by a handoff whose turn is not saved yet (`AgentRequestMetadata.handed_off`),
version 6 an item that failed for a cause named by code (`ItemResult.error_code`), version 7
an item answered whose turn is not saved yet (`AgentRequestMetadata.unsaved`): a run
is of a newer version only while it holds such a thing, so an older agent refuses such a run
with its own clear message, and still resumes every other run this one stored."""
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7)
Version = Literal[1, 2, 3, 4, 5, 6, 7]

ItemErrorCode = Literal["context_length_exceeded"]
"""Why an item failed, for a front that tells its clients by code (OpenAI's words):
`context_length_exceeded`, the request would not fit the model's context window."""

ROUTING_KEY = "tool"
"""The input field that names the tool when an action goes to a toolkit node (one node, many
tools: the seed's `isFromToolkit` routing). A plain tool's node is the tool itself."""


def _is_none(value: object) -> bool:
    return value is None


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentItem(_Model):
    """One question for the agent; `session_id` selects the chat memory to use, or `history`
    gives the conversation before the question (a caller that keeps it, as an OpenAI-style
    client does). Each lone surrogate in the prompt and session (JSON's `"\\ud83d"`, half an
    emoji) is U+FFFD (`well_formed`): no run could store, digest or send it otherwise."""

    # A context holding NaN or Infinity is bad input, as on the command line and over MCP:
    # JSON has neither (a stored run would hold `null`, and resume telling its model that).
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    prompt: str
    session_id: str | None = None
    context: dict[str, JsonValue] | None = Field(default=None, exclude_if=_is_none)
    """What the run is for, as the caller gives it (a customer, a locale, ...): read by the
    system message's placeholders (`system_prompt`) and given to local tools that ask for it;
    never sent to the model as such. Written only when set: an item without it reads as it
    did before it existed."""
    history: list[ChatMessage] | None = Field(default=None, exclude_if=_is_none)
    """The messages before `prompt`, as the model is to read them (system messages joining
    the agent's own). Written only when given: an item without it reads as before."""

    @field_validator("prompt", "session_id")
    @classmethod
    def _well_formed(cls, value: str | None) -> str | None:
        return value if value is None else well_formed_text(value)

    @field_validator("context")
    @classmethod
    def _well_formed_context(
        cls, value: dict[str, JsonValue] | None
    ) -> dict[str, JsonValue] | None:
        return value if value is None else cast(dict[str, JsonValue], well_formed(value))

    @model_validator(mode="after")
    def _one_history(self) -> AgentItem:
        if self.history is not None and self.session_id is not None:
            raise ValueError("give `session_id` or `history`, not both: each is a conversation")
        return self


class Action(_Model):
    """Run `node` with `input`: one tool call of one item."""

    node: str
    input: dict[str, JsonValue]
    tool_call_id: str
    item_index: int
    tool: str
    """The tool name the model used (for a toolkit node it is also `input["tool"]`)."""
    displaced: dict[str, JsonValue] | None = Field(default=None, exclude_if=_is_none)
    """The model's own argument named as the routing field (`{"tool": ...}`), which `input`
    has no room for beside the tool's name: `arguments` gives it back. Written only when
    set: an action without it reads as it did before it existed."""

    @classmethod
    def routed(
        cls,
        *,
        node: str,
        tool: str,
        arguments: dict[str, JsonValue],
        from_toolkit: bool,
        tool_call_id: str,
        item_index: int,
    ) -> Action:
        """The action for one tool call: to its node, and a toolkit node's input also names
        the tool (`ROUTING_KEY`), keeping aside an argument of the model's it replaces."""
        if not from_toolkit:
            node_input, displaced = dict(arguments), None
        else:
            node_input = {**arguments, ROUTING_KEY: tool}
            displaced = {ROUTING_KEY: arguments[ROUTING_KEY]} if ROUTING_KEY in arguments else None
        return cls(
            node=node,
            input=node_input,
            tool_call_id=tool_call_id,
            item_index=item_index,
            tool=tool,
            displaced=displaced,
        )

    def arguments(self, *, from_toolkit: bool) -> dict[str, JsonValue]:
        """The tool's own arguments, every one the model gave: a toolkit call's input without
        its routing field, or with the model's own value there (`displaced`). A plain tool
        keeps an argument that happens to be called `tool`."""
        arguments = dict(self.input)
        if from_toolkit:
            if self.displaced is not None:
                arguments.update(self.displaced)  # in the place the model gave it
            else:
                arguments.pop(ROUTING_KEY, None)
        return arguments


class ToolCallStep(MediaRecord):
    """One finished tool call: what the model asked for and what it observed (`observation`,
    its text, and `media`: the images or audio it showed, each described in the text too)."""

    tool_call_id: str
    tool: str
    tool_input: dict[str, JsonValue]
    observation: str
    message: AssistantMessage
    """The assistant message the call came from, replayed verbatim (thinking included)."""
    is_error: bool = Field(default=False, exclude_if=lambda is_error: not is_error)
    """The call failed (its `observation` says how: `Error: ...`), for providers that mark a
    failed call's result so. Written only when set: a step of a run stored before it existed
    reads as it did (not marked)."""


class ItemResult(_Model):
    """How one item ended: an answer, or an error with the steps taken so far. An answer that
    stopped short (cut off at the token limit, filtered) is an error that keeps its text in
    `output`."""

    output: str | None = None
    error: str | None = None
    structured: JsonValue = None
    """With an output schema: the validated answer (`output` is its JSON text)."""
    steps: list[ToolCallStep] | None = None
    handoff: str | None = Field(default=None, exclude_if=_is_none)
    """The tool (an agent) the item was handed to, whose answer `output` is (`agent.handoff`).
    Written only when set."""
    error_code: ItemErrorCode | None = Field(default=None, exclude_if=_is_none)
    """With `error`, its cause when a client may act on it (trim the conversation and ask
    again): `ItemErrorCode`. Written only when set."""

    @field_validator("steps")
    @classmethod
    def _steps_without_media(cls, steps: list[ToolCallStep] | None) -> list[ToolCallStep] | None:
        """A result's steps are for reading (and stored with the run): their observations say
        what media there was; the bytes were for the model alone."""
        if steps is None or not any(step.media for step in steps):
            return steps
        return [step.model_copy(update={"media": ()}) if step.media else step for step in steps]


class UnsavedTurn(_Model):
    """An item the model answered whose turn its session did not (or may not) keep: what the
    resumed step saves, under the same key, before ending the item with `result`."""

    messages: list[ChatMessage]
    """The turn after its question: the calls made and the answer."""
    result: ItemResult


def metadata_version(
    previous_steps: Mapping[int, Sequence[ToolCallStep]],
    actions: Sequence[Action] = (),
    finished: Mapping[int, ItemResult] | None = None,
    handed_off: Mapping[int, str] | None = None,
    unsaved: Mapping[int, UnsavedTurn] | None = None,
) -> Version:
    """The version metadata with these steps, beside these actions, finished items,
    handoffs that answered and answers not saved, is written as: the oldest that can hold
    them (an older agent would call a tool without the displaced argument, refuse an item
    result that names a handoff, a failed step or an error's code, or ask the model again
    for an item a handoff or the model answered)."""
    every_step = [
        step
        for steps in (
            *previous_steps.values(),
            *((r.steps or ()) for r in (finished or {}).values()),
        )
        for step in steps
    ]
    if unsaved:
        return 7
    if finished and any(result.error_code is not None for result in finished.values()):
        return 6
    if handed_off or any(step.is_error for step in every_step):
        return 5
    if finished and any(result.handoff is not None for result in finished.values()):
        return 4
    if any(action.displaced is not None for action in actions):
        return 3
    with_media = any(step.media for steps in previous_steps.values() for step in steps)
    return 2 if with_media else 1


class AgentRequestMetadata(_Model):
    """All loop state of a run. Versioned: a stored run of a version this agent does not know
    is refused (see `METADATA_VERSION`)."""

    version: Version = 1
    """1 unless a step carries media or failed, an action a displaced argument, an item result
    a handoff or an error's code, or `handed_off` or `unsaved` an item (`metadata_version`)."""
    items_digest: str | None = None
    """Which items the run is over (`resume_check.items_digest`): a step given other items
    refuses the response. None in metadata from before it was kept."""
    previous_steps: dict[int, list[ToolCallStep]] = Field(
        default_factory=dict[int, list[ToolCallStep]]
    )
    """Finished steps per item index."""
    pending: dict[int, AssistantMessage] = Field(default_factory=dict[int, AssistantMessage])
    """Per item, the assistant message whose tool calls are being run."""
    iteration_count: int = 0
    """Steps that called the model (for any item): a run's `iterations`."""
    iterations: dict[int, int] = Field(default_factory=dict[int, int])
    """Model calls made per item index (what `max_iterations` limits)."""
    invalid_answers: dict[int, int] = Field(default_factory=dict[int, int])
    """Answers per item that did not fit the output schema (what `output_retries` limits)."""
    finished_items: dict[int, ItemResult] = Field(default_factory=dict[int, ItemResult])
    handed_off: dict[int, str] = Field(default_factory=dict[int, str], exclude_if=lambda v: not v)
    """Per item answered by a handoff whose turn failed to save, the handoff's call id (its
    step holds the answer): the resumed step saves the turn and ends the item with that
    answer, asking no model. Written only when set."""
    unsaved: dict[int, UnsavedTurn] = Field(
        default_factory=dict[int, UnsavedTurn], exclude_if=lambda v: not v
    )
    """Per item the model answered whose turn failed (or may have failed) to save: the
    resumed step saves it under the same key and ends the item with its answer, asking no
    model (a paid call, and one whose history may hold the turn already). Written only
    when set."""
    usage: Usage = Usage()

    @model_validator(mode="before")
    @classmethod
    def _same_version(cls, data: Any) -> Any:
        """Another version's metadata is refused before its fields are read: they may mean
        something else. A `StateError` (also a ValueError), so parsing raises pydantic's
        `ValidationError` with its message, as for any other input that does not fit."""
        fields: dict[str, Any] = cast(dict[str, Any], data) if isinstance(data, dict) else {}
        version = fields.get("version", 1)
        if version not in READABLE_VERSIONS:
            *older, newest = (str(v) for v in READABLE_VERSIONS)
            readable = f"{', '.join(older)} and {newest}"
            raise StateError(
                f"the agent metadata is version {version!r}; this agent resumes versions "
                f"{readable} only: finish or restart the run with the version that began it"
            )
        return cast(Any, data)


class EngineRequest(_Model):
    """The agent asks the engine to run `actions`, then resume it with their results.

    `actions` may be empty (every call this step was answered by the agent itself, e.g. an
    unknown tool): the engine resumes at once.
    """

    actions: list[Action]
    metadata: AgentRequestMetadata


class ActionResponse(MediaRecord):
    """The outcome of one action: `data` from the node, or `error` when it failed, and
    `media`, the images or audio the result showed (described in `data`'s text too).

    `usage` is what models spent inside the tool (an agent run as a tool); it rolls up into
    the calling run's usage.
    """

    action: Action
    data: JsonValue = None
    error: str | None = None
    usage: Usage = Usage()
    note: str | None = Field(default=None, exclude_if=_is_none)
    """What the model is told after the result (or the error): a person's words given with
    their approval of the call, say. Written only when set."""


class EngineResponse(_Model):
    action_responses: list[ActionResponse]
    metadata: AgentRequestMetadata


class AgentResult(_Model):
    """A finished step: every item's result, in item order, and the run's total usage."""

    items: list[ItemResult]
    usage: Usage
    iterations: int
