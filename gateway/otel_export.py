"""Where a command's spans go, and a bounded wait for them at its end.

`configure_otel` sets a global SDK tracer provider up for the time of a command, unless one is
set already (by `opentelemetry-instrument`, or an application embedding the gateway): spans go
over OTLP when the OTLP exporter package is installed and `OTEL_EXPORTER_OTLP_ENDPOINT` (or
`..._TRACES_ENDPOINT`) is set, else as JSON to stderr. The API package comes with the MCP SDK;
the SDK is the `otel` extra.

At the end, the spans still batched are exported within a bound (`otel_batch`): a collector
that is down or slow would otherwise hold the command up for its exporter's timeout and
retries (10 s and more). Inside `export_at_exit` (the command line), that wait comes after the
command's answer is printed, not before.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Generator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TextIO, cast

from opentelemetry import trace

from .console_lines import ThroughConsole
from .errors import ConfigError

if TYPE_CHECKING:  # the SDK is optional (the `otel` extra)
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["configure_otel", "export_at_exit"]

_at_exit: list[Callable[[], None]] | None = None
"""Inside `export_at_exit`: the exports to close when it ends."""


@contextmanager
def export_at_exit() -> Generator[None]:
    """For a command line: the exports `configure_otel` sets up meanwhile are closed (their
    bounded wait) when this block ends, after stdout is flushed, not when their gateway
    closes: the answer comes first."""
    global _at_exit
    _at_exit = []
    try:
        yield
    finally:
        closing, _at_exit = _at_exit, None
        if closing:
            with suppress(BrokenPipeError, ValueError):  # the reader left, stdout closed
                sys.stdout.flush()
            for close in closing:
                close()


@contextmanager
def configure_otel() -> Generator[None]:
    """Make sure spans go somewhere for the time of a command, and are exported after (within
    `otel_batch.EXPORT_AT_EXIT` seconds; inside `export_at_exit`, when it ends).

    A global SDK provider already set is used as it is. Raises `ConfigError` when the SDK is
    missing.
    """
    try:
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    except ImportError:
        raise ConfigError(
            "OpenTelemetry export needs the SDK: pip install 'agent-gateway[otel]'"
        ) from None
    if isinstance(trace.get_tracer_provider(), SdkTracerProvider):
        yield
        return
    from .otel_batch import BoundedExport

    export = BoundedExport(_exporter(), _endpoint())
    trace.set_tracer_provider(export.provider)
    try:
        yield
    finally:
        if _at_exit is not None:
            _at_exit.append(export.close)
        else:
            export.close()


def _endpoint() -> str | None:
    """The OTLP collector's URL, if one is set."""
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )


def _exporter() -> SpanExporter:
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    if _endpoint():
        try:
            otlp: Any = importlib.import_module(
                "opentelemetry.exporter.otlp.proto.http.trace_exporter"
            )
        except ImportError:
            raise ConfigError(
                "OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OTLP exporter is not installed: "
                "pip install opentelemetry-exporter-otlp-proto-http"
            ) from None
        return otlp.OTLPSpanExporter()  # reads the OTEL_EXPORTER_OTLP_* variables itself
    # stdout may be the MCP protocol (serve --stdio) or the answer: spans go to stderr, as
    # whole lines around a terminal's streamed answer, as log lines go (the batch is written
    # from a thread of its own, every few seconds).
    return ConsoleSpanExporter(out=cast(TextIO, ThroughConsole(sys.stderr)))
