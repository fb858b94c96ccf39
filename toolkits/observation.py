"""Turning a tool result into what the agent reads.

The engine hands the agent a JSON value per call; the agent's own rules make the final string
(a single `response` field is its value, anything else compact JSON). Here we decide that value:
structured content when the tool gave only that (its text, if any, being the same JSON, as MCP
has tools send it), otherwise the result's content as compact text followed by the structured
content's JSON, if any, unless that JSON is only the content blocks again (then the content
alone). An error's text is made the same way (`observed_text`).

The result itself is never changed (a gateway relays it whole); only the agent's view is
compacted. Images and audio are described in the text (`[image: image/png, 1234 bytes]`) and
also given as media (`result_media`), for models that can read them; resources show their uri
and text (a text-type blob decoded), links their uri, and the text is capped at `max_chars`
with a notice saying how much was cut (`... [truncated 12345 of 200000 chars]`).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Literal, cast

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import JsonValue

__all__ = [
    "DEFAULT_MAX_CHARS",
    "MAX_MEDIA_BYTES",
    "Media",
    "block_text",
    "observed_text",
    "result_data",
    "result_media",
    "result_text",
    "truncate",
]

DEFAULT_MAX_CHARS = 100_000
"""The observation cap when the caller gives none (an MCP server's `max_output` default too)."""

MAX_MEDIA_BYTES = 5_000_000
"""The largest image or audio clip (decoded bytes) given to a model as media: Anthropic's limit
for one image. A larger one is only described, and the description says why."""

_TEXT_TYPES = ("application/json", "application/xml", "application/yaml", "application/x-yaml")
"""Blob types, besides `text/*` and `*+json`/`*+xml`, whose bytes are shown as text."""


@dataclass(frozen=True, slots=True)
class Media:
    """An image or audio clip of a result, for a model that reads media."""

    kind: Literal["image", "audio"]
    mime_type: str
    """Lower case, as the providers list the types they read."""
    data: str
    """Base64, as the tool sent it."""


def truncate(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """`text` cut to `max_chars` characters, with a notice of how much was cut."""
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\n... [truncated {len(text) - max_chars} of {len(text)} chars]"


def _base64_size(data: str) -> int:
    """Decoded byte count of base64 text, without decoding it."""
    data = data.strip()
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def _mime(mime_type: str | None) -> str:
    return mime_type or "unknown type"


def _too_large(size: int) -> str:
    if size <= MAX_MEDIA_BYTES:
        return ""
    return f"; too large to show the model (over {MAX_MEDIA_BYTES} bytes)"


def _media_text(kind: str, mime_type: str | None, data: str) -> str:
    size = _base64_size(data)
    return f"[{kind}: {_mime(mime_type)}, {size} bytes{_too_large(size)}]"


def _is_text_type(mime_type: str | None) -> bool:
    mime = (mime_type or "").split(";")[0].strip().lower()
    return mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml"))


def _blob_text(resource: BlobResourceContents) -> str:
    header = f"[resource: {resource.uri} ({_mime(resource.mime_type)})]"
    if _is_text_type(resource.mime_type):
        try:
            return f"{header}\n{base64.b64decode(resource.blob).decode('utf-8', 'replace')}"
        except (binascii.Error, ValueError):
            pass  # not base64 after all: described by its size, as any other blob
    size = _base64_size(resource.blob)
    note = _too_large(size) if _media_kind(resource.mime_type) is not None else ""
    return f"[resource: {resource.uri}, {_mime(resource.mime_type)}, {size} bytes{note}]"


def block_text(block: ContentBlock) -> str:
    """One content block as the agent reads it."""
    match block:
        case TextContent():
            return block.text
        case ImageContent():
            return _media_text("image", block.mime_type, block.data)
        case AudioContent():
            return _media_text("audio", block.mime_type, block.data)
        case ResourceLink():
            label = f" {block.name!r}" if block.name else ""
            mime = f", {block.mime_type}" if block.mime_type else ""
            return f"[resource link{label}: {block.uri}{mime}]"
        case EmbeddedResource():
            resource = block.resource
            match resource:
                case TextResourceContents():
                    return (
                        f"[resource: {resource.uri} ({_mime(resource.mime_type)})]\n{resource.text}"
                    )
                case BlobResourceContents():
                    return _blob_text(resource)


def _media_kind(mime_type: str | None) -> Literal["image", "audio"] | None:
    mime = (mime_type or "").lower()
    if mime.startswith("image/"):
        return "image"
    if mime.startswith("audio/"):
        return "audio"
    return None


def result_media(result: CallToolResult) -> tuple[Media, ...]:
    """The images and audio clips of `result` a model may be shown, in order: image and audio
    blocks, and embedded blobs of an image or audio type, each at most `MAX_MEDIA_BYTES`.
    Which types a model reads is its provider's to say."""
    media: list[Media] = []
    for block in result.content:
        match block:
            case ImageContent() | AudioContent():
                kind, mime, data = block.type, block.mime_type, block.data
            case EmbeddedResource(resource=BlobResourceContents() as blob):
                kind, mime, data = _media_kind(blob.mime_type), blob.mime_type, blob.blob
            case _:
                continue
        if kind is not None and mime and _base64_size(data) <= MAX_MEDIA_BYTES:
            media.append(Media(kind=kind, mime_type=mime.strip().lower(), data=data.strip()))
    return tuple(media)


def result_text(result: CallToolResult, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The result's content as one compact string, at most `max_chars` (plus the notice)."""
    return truncate("\n".join(block_text(block) for block in result.content), max_chars)


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _fields(structured: object) -> list[object]:
    """An object's values; any other JSON value (the 2026 era allows one) is its own."""
    if isinstance(structured, dict):
        return list(cast("dict[str, object]", structured).values())
    return [structured]


def _content_repeats_structured(result: CallToolResult) -> bool:
    """Whether the content is only text the structured content holds already: its JSON again
    (MCP has a tool send it so for older clients), or one of its fields (the Python SDK sends
    a value that is not an object as `{"result": value}` beside the value's text, a list item
    by item; a local tool `{"response": value}`; the filesystem server a file's text as
    `{"content": text}`)."""
    structured: object = result.structured_content
    if structured is None:
        return False
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if not texts or len(texts) < len(result.content):
        return False
    fields = _fields(structured)
    values = [_parsed(text) for text in texts]
    if len(fields) == 1 and values == fields[0]:
        return True
    return all(
        value == structured or text in fields or value in fields
        for text, value in zip(texts, values, strict=True)
    )


def _structured_repeats_blocks(result: CallToolResult) -> bool:
    """Whether the structured content is only the content blocks again, as MCP writes them:
    each field the blocks' list, or a lone block (server-filesystem's read_media_file sends
    `{"content": [its image block]}` beside that block). The content is then what the model
    reads: its media described and given as media, not their base64 a second time."""
    structured = result.structured_content
    if not structured or not result.content:
        return False
    blocks = [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content]
    lone = len(blocks) == 1
    return all(value == blocks or (lone and value == blocks[0]) for value in _fields(structured))


_NOT_JSON = object()


def _parsed(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # nested past what Python reads: not JSON to it
        return _NOT_JSON


def observed_text(result: CallToolResult, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Everything the result says, as text: its content, then its structured content's JSON
    when the content does not carry it already; at most `max_chars` (plus the notice)."""
    parts = [block_text(block) for block in result.content]
    structured = result.structured_content
    repeated = _content_repeats_structured(result) or _structured_repeats_blocks(result)
    if structured is not None and not repeated:
        parts.append(_json(structured))  # with no content, all there is
    return truncate("\n".join(parts), max_chars)


def result_data(result: CallToolResult, max_chars: int = DEFAULT_MAX_CHARS) -> JsonValue:
    """The JSON value the agent's observation is built from (for a result that is not an error).

    Structured content alone when the content only repeats it, and it fits in `max_chars` as
    compact JSON; if it does not fit, the agent gets the result's text instead (which MCP has
    the tool give beside it), else the JSON text, truncated: a lone text (`{"response":
    "..."}`, a local tool's string) is cut as itself, not inside its JSON. A result whose
    content says more (a caption, an image) gives its content and then the structured JSON
    (`observed_text`); one whose structured content is only its content blocks again gives
    its content alone.
    """
    structured = result.structured_content
    if _structured_repeats_blocks(result):
        return {"response": result_text(result, max_chars)}
    if structured is not None and (not result.content or _content_repeats_structured(result)):
        text = _json(structured)
        if len(text) <= max_chars:
            return structured
        if result.content:
            return {"response": result_text(result, max_chars)}
        return {"response": truncate(text, max_chars)}
    return {"response": observed_text(result, max_chars)}
