"""Reading a streamed Responses API answer from its events.

Text deltas (`response.output_text.delta`) are passed on as they come; the answer itself is
the response object of the end event (`response.completed`, or `response.incomplete` when it
was cut short), read as a whole answer is, so both paths end in the same `AssistantMessage`.
Its output items are the end event's; should it carry none, those of the
`response.output_item.done` events are taken (each whole, a reasoning item's encrypted content
included). `response.failed` and `error` events are the provider's failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ModelResponseError
from ..messages import AssistantMessage
from ._base import cut_short
from ._json import JSONObject, NestedTooDeeply, arr, count, obj, read_json, text
from ._sse import SSEEvent
from .openai_stream import error_text

__all__ = ["ResponseAssembler"]

_ENDS = frozenset({"response.completed", "response.incomplete"})


@dataclass(slots=True)
class ResponseAssembler:
    """Rebuilds the answer from `response.*` events; `build` reads a response object."""

    label: str
    build: Callable[[JSONObject], AssistantMessage]
    _items: dict[int, JSONObject] = field(default_factory=dict[int, JSONObject])
    """The `response.output_item.done` items, by their `output_index`."""
    _end: JSONObject | None = None

    def feed(self, event: SSEEvent) -> str:
        try:
            data = obj(read_json(event.data))
        except NestedTooDeeply as exc:
            raise ModelResponseError(f"{self.label}: a stream event {exc}") from None
        except ValueError:
            raise ModelResponseError(f"{self.label}: unreadable stream event") from None
        kind = text(data.get("type")) or event.event
        if kind == "response.output_text.delta":
            return text(data.get("delta"))
        if kind == "response.output_item.done":
            self._items[count(data.get("output_index"))] = obj(data.get("item"))
        elif kind in _ENDS:
            self._end = obj(data.get("response"))
        elif kind == "response.failed":
            said = error_text(obj(data.get("response")).get("error")) or "the response failed"
            raise ModelResponseError(f"{self.label}: stream error: {said}")
        elif kind == "error":
            said = error_text(data.get("error") or data) or event.data
            raise ModelResponseError(f"{self.label}: stream error: {said}")
        return ""

    def finish(self) -> AssistantMessage:
        if self._end is None:
            raise cut_short(self.label, "response.completed")
        response = self._end
        if not arr(response.get("output")) and self._items:
            response = {**response, "output": [self._items[i] for i in sorted(self._items)]}
        return self.build(response)
