"""A model that answers each item by its question: for runs of several items at once, where
the order of calls across items is not fixed. It records what it was sent and can fail."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from agent import (
    AssistantMessage,
    ChatMessage,
    ModelError,
    ScriptedAnswer,
    TokenCallback,
    ToolCall,
    ToolDefinition,
    Usage,
    UserMessage,
)


class PromptModel:
    """Replays `script[question]` one answer per call for that question (the question is the
    first user message after the history, i.e. the last user message sent). `failures[question]`
    is raised instead, once, at that question's next call. Past its script, a question gets
    its last answer again."""

    def __init__(
        self,
        script: Mapping[str, Sequence[ScriptedAnswer | str]],
        *,
        failures: Mapping[str, ModelError] | None = None,
        name: str = "by-prompt",
    ) -> None:
        self._script = {
            q: [ScriptedAnswer(content=a) if isinstance(a, str) else a for a in answers]
            for q, answers in script.items()
        }
        self._failures = dict(failures or {})
        self._ids = itertools.count(1)
        self._served: dict[str, int] = {}
        self._name = name
        self.calls: list[tuple[str, list[ChatMessage]]] = []
        """(question, messages) of every call, in order."""

    @property
    def name(self) -> str:
        return self._name

    def asked(self, question: str) -> int:
        return sum(1 for q, _ in self.calls if q == question)

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        question = next(m.content for m in reversed(messages) if isinstance(m, UserMessage))
        self.calls.append((question, list(messages)))
        failure = self._failures.pop(question, None)
        if failure is not None:
            raise failure
        answers = self._script[question]
        served = self._served.get(question, 0)
        self._served[question] = served + 1
        answer = answers[min(served, len(answers) - 1)]
        if on_token is not None and answer.content:
            await on_token(answer.content)
        calls = tuple(
            ToolCall(id=c.id or f"call_{next(self._ids)}", name=c.name, arguments=c.arguments)
            for c in answer.tool_calls
        )
        return AssistantMessage(
            content=answer.content,
            tool_calls=calls,
            usage=Usage(input_tokens=10, output_tokens=1, requests=1),
        )
