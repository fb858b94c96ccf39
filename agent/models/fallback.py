"""A `ChatModel` that tries its models in order until one answers."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence

from ..context_window import ReportsContextWindow
from ..errors import AllModelsFailed, ModelConfigError, ModelError, ModelHTTPError
from ..messages import AssistantMessage, ChatMessage, ToolDefinition
from ..model import ChatModel, ReportsServer, ServerAddress, TokenCallback, holds_output_schema
from ._json import is_obj

__all__ = ["FallbackCallback", "FallbackModel"]

_log = logging.getLogger(__name__)
_NUMBERS = re.compile(r"\d+")

FallbackCallback = Callable[[str, ModelError, str], Awaitable[None]]
"""`on_fallback(failed_name, error, next_name)`: a model failed and the next one is tried."""


class FallbackModel:
    """Tries each model in turn; a `ModelError` (raised after that model's own retries) moves
    the call to the next model. Cancellation and other exceptions are not caught.

    A model that refuses calls with a client error (HTTP 4xx but 408 and 429: a key, a request
    its provider refuses however often it is sent) would go unnoticed, its calls answered by
    the next model: it is warned of, once for each model and cause.

    The answer records who gave it: `raw["model"]` holds the answering model's name (the HTTP
    providers always set it; for others it is added when `raw` is a dict or None). Each
    provider replays only raw payloads whose `AssistantMessage.provider` is its own, so a
    conversation can move between providers mid-run. Tokens a failing model already streamed
    to `on_token` are not taken back: the next model's tokens follow them. The answer's
    `response_model` is what the answering model's provider said, and `server_of` names that
    model's server.
    """

    def __init__(
        self, models: Sequence[ChatModel], *, on_fallback: FallbackCallback | None = None
    ) -> None:
        if not models:
            raise ModelConfigError("FallbackModel needs at least one model")
        self._models = tuple(models)
        self._on_fallback = on_fallback
        self._refusals_said: set[tuple[str, int, str]] = set()

    @property
    def name(self) -> str:
        return f"fallback({', '.join(model.name for model in self._models)})"

    @property
    def models(self) -> tuple[ChatModel, ...]:
        return self._models

    @property
    def native_output(self) -> bool:
        """Native mode holds if every model holds it (`HoldsOutputSchema`): any may answer."""
        return all(holds_output_schema(model) for model in self._models)

    def __repr__(self) -> str:
        return f"FallbackModel(name={self.name!r})"

    async def context_window(self) -> int | None:
        """The window of the first model, which every call is sent to first (None when it
        reports none).

        Not the smallest of all: that would refuse calls the first model can take, for a model
        only asked when it fails. A later model with a smaller window that gets a call too
        long for it answers with its provider's error, as a model without a reported window
        does.
        """
        first = self._models[0]
        if isinstance(first, ReportsContextWindow):
            return await first.context_window()
        return None

    def server_of(self, answer: AssistantMessage | None) -> ServerAddress | None:
        """The server of the model that wrote `answer` (named in `raw["model"]`), if it
        reports one; None for a failed call, which may have gone to any of them."""
        name = answer.raw.get("model") if answer is not None and is_obj(answer.raw) else None
        for model in self._models:
            if model.name == name and isinstance(model, ReportsServer):
                return model.server_of(answer)
        return None

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        """Raises `AllModelsFailed` (a `ModelError`) with every model's error when none answers."""
        failures: list[tuple[str, ModelError]] = []
        for position, model in enumerate(self._models):
            try:
                answer = await model.invoke(messages, tools, on_token=on_token)
            except ModelError as error:
                failures.append((model.name, error))
                following = self._models[position + 1 :]
                if following:
                    self._say_refusal(model.name, error, following[0].name)
                if following and self._on_fallback is not None:
                    await self._on_fallback(model.name, error, following[0].name)
                continue
            return _signed(answer, model.name)
        raise AllModelsFailed(failures)

    def _say_refusal(self, name: str, error: ModelError, next_name: str) -> None:
        """Warn of `error` if it is a client error not warned of for `name` before."""
        if not isinstance(error, ModelHTTPError) or not _is_client_error(error.status_code):
            return
        said = error.provider_message or str(error)
        # One cause, whatever the numbers in it (a tool's index, a length, a token count).
        key = (name, error.status_code, _NUMBERS.sub("#", said))
        if key in self._refusals_said:
            return
        self._refusals_said.add(key)
        _log.warning(
            "%s refused a call with HTTP %d, which sending it again does not mend: the call "
            "went on to %s, as each it refuses so will (said once): %s",
            name,
            error.status_code,
            next_name,
            said,
        )


def _is_client_error(status: int) -> bool:
    return 400 <= status < 500 and status not in (408, 429)


def _signed(answer: AssistantMessage, name: str) -> AssistantMessage:
    if answer.raw is None:
        return answer.model_copy(update={"raw": {"model": name}})
    if is_obj(answer.raw) and "model" not in answer.raw:
        return answer.model_copy(update={"raw": {**answer.raw, "model": name}})
    return answer
