"""A chat completion's `content` as a list of chunks, as Mistral's reasoning models send it.

Mistral Small 4 and Medium 3.5 with `reasoning_effort`, and Magistral, answer with
`[{"type": "thinking", "thinking": [{"type": "text", "text": ...}]}, {"type": "text",
"text": ...}]` instead of a string, and stream `delta.content` as such lists while thinking
(a string after). The text chunks are the answer; the thinking chunks are the model's
thinking, shown as such and sent back as they came: Mistral asks for the assistant turn to be
replayed with its thinking chunks intact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._json import JSONObject, arr, is_arr, is_obj, obj, text

__all__ = ["ChunkList", "chunks_text", "replayed_chunks", "thinking_of_chunks"]


def chunks_text(content: Any) -> str:
    """The answer's text: `content` itself when a string, its text chunks joined when a list."""
    if isinstance(content, str):
        return content
    return "".join(text(chunk.get("text")) for chunk in _typed(content, "text"))


def thinking_of_chunks(content: Any) -> str:
    """The text of `content`'s thinking chunks (each a list of text chunks, or a string)."""
    return "\n\n".join(_thinking(chunk) for chunk in _typed(content, "thinking"))


def replayed_chunks(chunks: list[Any], answer: str) -> list[Any]:
    """The chunk list an assistant turn goes back as: every chunk but text as it came, and
    `answer` (the text as the agent has it: a text tool call taken out, say) in the place of
    the first text chunk."""
    out: list[Any] = []
    placed = False
    for chunk in chunks:
        if obj(chunk).get("type") != "text":
            out.append(chunk)
        elif not placed:
            placed = True
            if answer:
                out.append({**obj(chunk), "text": answer})
    if not placed and answer:
        out.append({"type": "text", "text": answer})
    return out


@dataclass(slots=True)
class ChunkList:
    """Joins streamed `delta.content` pieces (strings or chunk lists) into one content: a
    string while only strings came, else a chunk list in which neighbouring pieces of one
    type are one chunk, as a whole answer has them."""

    _chunks: list[JSONObject] = field(default_factory=list[JSONObject])
    _listed: bool = False

    def feed(self, content: Any) -> str:
        """Take one delta's `content`; return the answer text it carried."""
        if isinstance(content, str):
            self._add_text(content)
            return content
        if not is_arr(content):
            return ""
        self._listed = True
        said = ""
        for chunk in map(obj, content):
            kind = chunk.get("type")
            if kind == "text":
                piece = text(chunk.get("text"))
                self._add_text(piece)
                said += piece
            elif kind == "thinking" and self._chunks and self._chunks[-1].get("type") == kind:
                last = self._chunks[-1]
                self._chunks[-1] = {
                    **last,
                    **chunk,
                    "thinking": _merged(arr(last.get("thinking")), arr(chunk.get("thinking"))),
                }
            elif chunk:
                self._chunks.append(dict(chunk))
        return said

    def content(self) -> Any:
        """The content as a whole answer's message holds it: None when nothing came."""
        if self._listed:
            return self._chunks
        return chunks_text(self._chunks) or None

    def _add_text(self, piece: str) -> None:
        if not piece:
            return
        if self._chunks and self._chunks[-1].get("type") == "text":
            last = self._chunks[-1]
            self._chunks[-1] = {**last, "text": text(last.get("text")) + piece}
        else:
            self._chunks.append({"type": "text", "text": piece})


def _typed(content: Any, kind: str) -> list[JSONObject]:
    if not is_arr(content):
        return []
    return [chunk for chunk in map(obj, content) if chunk.get("type") == kind]


def _thinking(chunk: JSONObject) -> str:
    thinking = chunk.get("thinking")
    if isinstance(thinking, str):
        return thinking
    return "".join(text(obj(part).get("text")) for part in arr(thinking))


def _merged(before: list[Any], after: list[Any]) -> list[Any]:
    """A thinking chunk's parts, streamed in two: neighbouring text parts joined."""
    out = list(before)
    for part in after:
        last = obj(out[-1]) if out else {}
        if is_obj(part) and part.get("type") == "text" and last.get("type") == "text":
            out[-1] = {**last, "text": text(last.get("text")) + text(part.get("text"))}
        else:
            out.append(part)
    return out
