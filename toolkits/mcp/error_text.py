"""A failure as one line of text: an exception (through the groups task groups wrap it in), or
a server's JSON-RPC error as a tool's error text; and that error kept beside its text
(`ProtocolErrorResult`) for a proxy, which relays the error as the server sent it."""

from __future__ import annotations

from typing import Any, cast

from mcp_types import URL_ELICITATION_REQUIRED, CallToolResult, ErrorData, TextContent
from pydantic import PrivateAttr

__all__ = [
    "ProtocolErrorResult",
    "describe_error",
    "error_text",
    "protocol_error",
    "protocol_error_result",
]

_UNTRUSTED = "CERTIFICATE_VERIFY_FAILED"
_TRUST_HINT = (
    " (a server whose certificate a private CA signed: set SSL_CERT_FILE to that CA's"
    " certificate, PEM, or SSL_CERT_DIR to a directory of them, before the gateway starts)"
)


def describe_error(exc: BaseException) -> str:
    """`Type: message`, looking through single-exception groups (task groups wrap errors)."""
    while isinstance(exc, BaseExceptionGroup):
        group = cast(BaseExceptionGroup[BaseException], exc)
        if len(group.exceptions) != 1:
            return "; ".join(describe_error(inner) for inner in group.exceptions)
        exc = group.exceptions[0]
    text = str(exc)
    if _UNTRUSTED in text:
        text += _TRUST_HINT
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def error_text(code: object, message: object) -> str:
    """A server's JSON-RPC error as a tool's error text: `MCP error CODE: MESSAGE`, once (the
    TypeScript SDK's servers already put that prefix in the message)."""
    prefix = f"MCP error {code}: "
    text = str(message)
    return text if text.startswith(prefix) else prefix + text


class ProtocolErrorResult(CallToolResult):
    """A server's JSON-RPC error to a tool call, as the error result a model reads, with the
    error itself as the server sent it (`error`): a proxy relays that to its client."""

    _error: ErrorData = PrivateAttr()

    @property
    def error(self) -> ErrorData:
        return self._error

    @classmethod
    def of(cls, error: ErrorData, text: str) -> ProtocolErrorResult:
        result = cls(content=[TextContent(text=text)], is_error=True)
        result._error = error
        return result


def protocol_error_result(error: ErrorData) -> ProtocolErrorResult:
    """`error` as a tool's error result: its text (`error_text`), and where the server wants a
    URL opened first (-32042), each URL, for a model that cannot open it to pass on."""
    text = error_text(error.code, error.message)
    if error.code == URL_ELICITATION_REQUIRED:
        text = "; ".join([text, *_urls_to_open(error.data)])
    return ProtocolErrorResult.of(error, text)


def protocol_error(result: object) -> ErrorData | None:
    """The server's JSON-RPC error `result` stands for, if it is one (`protocol_error_result`)."""
    return result.error if isinstance(result, ProtocolErrorResult) else None


def _urls_to_open(data: Any) -> list[str]:
    fields = cast(dict[str, Any], data) if isinstance(data, dict) else {}
    asked = fields.get("elicitations")
    lines: list[str] = []
    for each in cast(list[Any], asked) if isinstance(asked, list) else []:
        said = cast(dict[str, Any], each) if isinstance(each, dict) else {}
        url, why = said.get("url"), said.get("message")
        if isinstance(url, str):
            lines.append(f"open {url} ({why})" if isinstance(why, str) and why else f"open {url}")
    return lines
