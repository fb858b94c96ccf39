"""Turning a tool result into what the agent reads.

The engine hands the agent a JSON value per call; the agent's own rules make the final string
(a single `response` field is its value, anything else compact JSON). Here we decide that value:
structured content when the tool gave it, otherwise the result's content as compact text.

The result itself is never changed (a gateway relays it whole); only the agent's view is
compacted. Binary content becomes a short placeholder (`[image: image/png, 1234 bytes]`),
resources show their uri and text, links their uri, and the text is capped at `max_chars` with
a notice saying how much was cut (`... [truncated 12345 of 200000 chars]`).
"""

from __future__ import annotations

import json

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

__all__ = ["DEFAULT_MAX_CHARS", "block_text", "result_data", "result_text", "truncate"]

DEFAULT_MAX_CHARS = 100_000
"""The observation cap when the caller gives none (an MCP server's `max_output` default too)."""


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


def block_text(block: ContentBlock) -> str:
    """One content block as the agent reads it."""
    match block:
        case TextContent():
            return block.text
        case ImageContent():
            return f"[image: {_mime(block.mime_type)}, {_base64_size(block.data)} bytes]"
        case AudioContent():
            return f"[audio: {_mime(block.mime_type)}, {_base64_size(block.data)} bytes]"
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
                    size = _base64_size(resource.blob)
                    return f"[resource: {resource.uri}, {_mime(resource.mime_type)}, {size} bytes]"


def result_text(result: CallToolResult, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The result's content as one compact string, at most `max_chars` (plus the notice)."""
    return truncate("\n".join(block_text(block) for block in result.content), max_chars)


def result_data(result: CallToolResult, max_chars: int = DEFAULT_MAX_CHARS) -> JsonValue:
    """The JSON value the agent's observation is built from (for a result that is not an error).

    Structured content wins when the tool gave some and it fits in `max_chars` as compact JSON;
    if it does not fit, the agent gets the result's text instead (which MCP has the tool give
    beside it), else the JSON text, truncated: a lone text (`{"response": "..."}`, a local
    tool's string) is cut as itself, not inside its JSON.
    """
    structured = result.structured_content
    if structured is not None:
        text = json.dumps(structured, separators=(",", ":"), ensure_ascii=False, default=str)
        if len(text) <= max_chars:
            return structured
        if result.content:
            return {"response": result_text(result, max_chars)}
        return {"response": truncate(text, max_chars)}
    return {"response": result_text(result, max_chars)}
