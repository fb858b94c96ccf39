"""A model's thinking as text, read from the raw answer its provider stored, for a person to
see (a trace, `runs show`): Anthropic's `thinking` blocks (a `redacted_thinking` one is only
said to be there), Gemini's thought parts, the reasoning summaries of OpenAI's Responses API,
the `reasoning_content` / `reasoning` of OpenAI-compatible servers, Mistral's thinking chunks,
and a leading `<think>` block a server left in the text.

Read from `raw` rather than kept beside it, so what a run or a chat stores is what it was,
and a run stored by an older gateway shows its thinking too.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import JsonValue

from ._json import arr, obj, text
from .content_chunks import thinking_of_chunks
from .openai_stream import REASONING_FIELDS
from .think_tags import split_think, think_text

__all__ = ["REDACTED", "thinking_text"]

REDACTED = "[redacted thinking]"


def thinking_text(raw: JsonValue, content: str = "") -> str:
    """The thinking in a provider's `raw` answer (blocks joined by blank lines), or "".
    `content` is the answer's text as the agent has it: a `<think>` block still in it is
    not told twice."""
    answer = obj(raw)
    if "output" in answer:  # OpenAI's Responses API: its reasoning items' summaries (or text)
        items = (
            obj(item) for item in arr(answer["output"]) if obj(item).get("type") == "reasoning"
        )
        parts = (
            obj(part)
            for item in items
            for key in ("summary", "content")
            for part in arr(item.get(key))
        )
        return _joined(text(part.get("text")) for part in parts)
    if "message" in answer:  # OpenAI-compatible
        message = obj(answer["message"])
        said = [text(message.get(key)) for key in REASONING_FIELDS]
        said.append(thinking_of_chunks(message.get("content")))
        block = split_think(text(message.get("content")))[0]
        if block and not content.lstrip().startswith("<think>"):
            said.append(think_text(block))
        return _joined(said)
    if "parts" in answer:  # Gemini
        parts = map(obj, arr(answer["parts"]))
        return _joined(text(part.get("text")) for part in parts if part.get("thought"))
    said: list[str] = []  # Anthropic
    for block in map(obj, arr(answer.get("content"))):
        if block.get("type") == "thinking":
            said.append(text(block.get("thinking")))
        elif block.get("type") == "redacted_thinking":
            said.append(REDACTED)
    return _joined(said)


def _joined(parts: Iterable[str]) -> str:
    return "\n\n".join(part.strip() for part in parts if part.strip())
