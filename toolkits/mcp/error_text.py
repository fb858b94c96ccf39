"""A failure as one line of text: an exception (through the groups task groups wrap it in), or
a server's JSON-RPC error as a tool's error text."""

from __future__ import annotations

from typing import cast

__all__ = ["describe_error", "error_text"]

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
