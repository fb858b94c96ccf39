"""What a failed MCP tool call says, for the calls a node makes and those it passes through
(`Forward`) alike: the same failure reads the same on either path."""

from __future__ import annotations

from ..nesting import TooDeep

__all__ = ["cut_short", "stray_answer", "too_deep_text", "too_large"]


def cut_short(node: str, tool: str) -> str:
    """A call whose connection closed while the server stayed (`still_there`)."""
    return (
        f"MCP server {node!r} closed the connection during a call to {tool!r}, but still "
        "answers: only this call failed (it may have run)"
    )


def stray_answer(node: str, answer_id: object) -> str:
    """A call answered with an id no request has (`StrayAnswer`)."""
    said = "null" if answer_id is None else repr(answer_id)
    return f"MCP server {node!r} answered with id {said}, which no request has"


def too_deep_text(node: str, exc: TooDeep) -> str:
    """A call whose result nests deeper than a result may (`nesting`)."""
    return f"MCP server {node!r} sent a result {exc}"


def too_large(node: str, limit: int, size: int | None = None) -> str:
    """A call whose answer (a server-sent event, a JSON body, a line on stdout: `size`
    bytes, when it was read to its end) is over the node's `max_message_bytes`."""
    measured = f" ({size} bytes)" if size is not None else ""
    return (
        f"MCP server {node!r} sent an answer larger than the {limit} byte limit{measured}: "
        f"raise mcpServers.{node}.max_message_bytes to take it"
    )
