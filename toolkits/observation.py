"""Turning a tool result into what the agent reads.

The engine hands the agent a JSON value per call; the agent's own rules make the final string
(a single `response` field is its value, anything else compact JSON). Here we decide that value:
structured content when the tool gave it, otherwise the result's content as compact text.
"""

from __future__ import annotations

from mcp_types import CallToolResult, TextContent
from pydantic import JsonValue

__all__ = ["result_data", "result_text"]


def result_text(result: CallToolResult) -> str:
    """The result's content as one compact string."""
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def result_data(result: CallToolResult) -> JsonValue:
    """The JSON value the agent's observation is built from (for a result that is not an error)."""
    if result.structured_content is not None:
        return result.structured_content
    return {"response": result_text(result)}
