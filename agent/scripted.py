"""A model that replays a script: for tests and for the keyless demo.

It records the conversations it was sent (the last `history` of them), so tests can assert
what the agent asked while a long-lived demo gateway stays the same size.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from .call_order import take_turn
from .errors import ScriptExhausted, StateError
from .messages import AssistantMessage, ChatMessage, StopReason, ToolCall, ToolDefinition, Usage
from .model import TokenCallback

__all__ = ["ScriptedAnswer", "ScriptedCall", "ScriptedModel"]


class ScriptedCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, JsonValue] = Field(default_factory=dict[str, JsonValue])
    id: str | None = None


class ScriptedAnswer(BaseModel):
    """One answer, as written in a script file: `{"content": ..., "tool_calls": [...]}`, and
    optionally `"stop_reason"`."""

    model_config = ConfigDict(extra="forbid")

    content: str = ""
    tool_calls: list[ScriptedCall] = Field(default_factory=list[ScriptedCall])
    stop_reason: StopReason | None = None
    """Why the answer stopped, as a provider would say (e.g. `max_tokens` for a cut-off one)."""


_SCRIPT = TypeAdapter(list[ScriptedAnswer])
HISTORY = 1000
"""Conversations a `ScriptedModel` keeps by default: every one a test makes, and a bounded
few (each holds its whole conversation) for a gateway serving a script for days."""
_WORDS = re.compile(r"(?<=\s)(?=\S)")
"""Splits text before every word that follows white space: the pieces join back exactly."""


def _where(loc: tuple[int | str, ...]) -> str:
    """`, answer 2: tool_calls[0].name` for the place `loc` names in a script (answers count
    from 1, as `ScriptExhausted` counts them; lists inside one from 0, as JSON indexes)."""
    if not loc:
        return ""
    answer, *inside = loc
    key = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in inside)
    return f", answer {answer + 1 if isinstance(answer, int) else answer}" + (
        f": {key.removeprefix('.')}" if key else ""
    )


def _what(err: ErrorDetails) -> str:
    """A validation error's problem in one line (pydantic's own carries its input and a link)."""
    kind, loc = err["type"], err["loc"]
    if kind == "json_invalid":
        return f"not valid JSON: {err['ctx']['error'] if 'ctx' in err else err['msg']}"
    if kind == "list_type" and not loc:
        return 'must be a JSON list of answers: [{"content": "...", "tool_calls": [...]}, ...]'
    if kind == "model_type":
        call = "tool_calls" in loc
        shape = '{"name": "...", "arguments": {...}}' if call else '{"content": "...", ...}'
        return f"must be an object: {shape}"
    if kind == "extra_forbidden":
        model = ScriptedCall if "tool_calls" in loc else ScriptedAnswer
        close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
        return "unknown key" + (f" (did you mean {close[0]!r}?)" if close else "")
    return err["msg"]


class ScriptedModel:
    """Replays `answers` in order, one per call; raises `ScriptExhausted` past the end. An
    answer is a `ScriptedAnswer`, its text alone, or a dict in a script file's shape. The
    calls of one agent step for several items take their answers in item order.

    Given `on_token`, it streams each answer's text word by word before returning it."""

    native_output = True
    """Native mode is taken (`HoldsOutputSchema`): answers are as scripted, for tests and dry
    runs, so fitting the schema is the script's to do."""

    def __init__(
        self,
        answers: Sequence[ScriptedAnswer | str | Mapping[str, Any]],
        *,
        name: str = "scripted",
        history: int = HISTORY,
    ) -> None:
        given = [ScriptedAnswer(content=a) if isinstance(a, str) else a for a in answers]
        try:  # an answer may be written as in a script file: {"content": ..., "tool_calls": [...]}
            self._answers = _SCRIPT.validate_python(given)
        except ValidationError as exc:
            problems = [
                f"invalid answers{_where(err['loc'])}: {_what(err)}" for err in exc.errors()
            ]
            raise StateError("\n".join(problems)) from None
        self._name = name
        self._ids = itertools.count(1)
        self._history = history
        self._turns = 0
        self.calls: list[tuple[list[ChatMessage], list[ToolDefinition]]] = []
        """The (messages, tools) the model was sent, in order: the last `history` of them."""

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        """Load a JSON list of answers, each `{"content": "...", "tool_calls": [...]}`."""
        path = Path(path)
        try:
            answers = _SCRIPT.validate_json(path.read_bytes())
        except OSError as exc:
            raise StateError(f"cannot read script {path}: {exc.strerror}") from exc
        except ValidationError as exc:
            problems = [
                f"invalid script {path}{_where(err['loc'])}: {_what(err)}" for err in exc.errors()
            ]
            raise StateError("\n".join(problems)) from exc
        return cls(answers, name=f"scripted:{path.name}")

    @property
    def name(self) -> str:
        return self._name

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        await take_turn()  # a step's calls for several items: answered in item order
        turn = self._turns
        self._turns += 1
        self.calls.append((list(messages), list(tools)))
        if len(self.calls) > self._history:
            del self.calls[0]  # a list still (tests slice it): moving 1,000 pointers is cheap
        if turn >= len(self._answers):
            raise ScriptExhausted(
                f"{self._name} has {len(self._answers)} answers and was asked for answer {turn + 1}"
            )
        answer = self._answers[turn]
        if on_token is not None:
            # Word by word, as a provider streams: a listener sees the answer grow.
            for delta in _WORDS.split(answer.content):
                if delta:
                    await on_token(delta)
        calls = tuple(
            ToolCall(id=c.id or f"call_{next(self._ids)}", name=c.name, arguments=c.arguments)
            for c in answer.tool_calls
        )
        # Word counts stand in for tokens: deterministic, so tests can check usage roll-ups.
        usage = Usage(
            input_tokens=sum(len(m.content.split()) for m in messages),
            output_tokens=len(answer.content.split()) + len(calls),
            requests=1,
        )
        return AssistantMessage(
            content=answer.content, tool_calls=calls, usage=usage, stop_reason=answer.stop_reason
        )
