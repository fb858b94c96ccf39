"""A ChatModel wrapper that reports each model call to the run's trace and budget."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue

from agent import AssistantMessage, ChatMessage, ChatModel, TokenCallback, ToolDefinition

from .run_context import TokenBudget
from .trace import Tracer

__all__ = ["TracedModel"]


class TracedModel:
    def __init__(
        self,
        model: ChatModel,
        tracer: Tracer,
        parent_id: str | None,
        budget: TokenBudget | None = None,
    ) -> None:
        self._model = model
        self._tracer = tracer
        self._parent_id = parent_id
        self._budget = budget

    @property
    def name(self) -> str:
        return self._model.name

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        summary: dict[str, JsonValue] = {"messages": len(messages), "tools": len(tools)}
        async with self._tracer.span(
            "model", self._model.name, parent_id=self._parent_id, input=summary
        ) as span:
            answer = await self._model.invoke(messages, tools, on_token=on_token)
            if self._budget is not None:
                self._budget.charge(answer.usage)
            span.output = answer.model_dump(
                mode="json", include={"content", "tool_calls", "usage"}, exclude_defaults=True
            )
            return answer
