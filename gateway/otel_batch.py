"""Spans exported in batches, and at the end within a bound: then dropped, with one warning.

The OTLP exporter waits up to 10 s for a collector and retries with backoff, logging a warning
each time: at a command's end, a collector that is down or slow held the command up for that
long, and a collector that is down had a warning logged every few seconds of a long run.
`BoundedExport` keeps the exporter's own logs as the reasons from its start; `close` waits
`EXPORT_AT_EXIT` seconds at most (the flush and the shutdown together) and says once how many
spans it dropped and why (the collector URL's credentials as `***`). Imports the SDK (the
`otel` extra): imported only when spans are exported.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from agent.url_credentials import without_credentials_of

__all__ = ["EXPORT_AT_EXIT", "BoundedExport"]

SERVICE = "agent-gateway"
"""The `service.name` of our spans unless the environment names another."""
EXPORT_AT_EXIT = 2.0
"""Seconds a command waits at its end for its last spans to be exported."""
_EXPORTER_LOGS = "opentelemetry.exporter"
"""Where the SDK's exporters log (OTLP: a warning per retry, an error per batch lost)."""

log = logging.getLogger(__name__)


class BoundedExport:
    """A tracer provider batching its spans to `exporter`, closed within a bound."""

    def __init__(self, exporter: SpanExporter, endpoint: str | None = None) -> None:
        """`endpoint`: the collector's URL, whose credentials (`?api_key=...`) the exporter's
        words, quoting it, say as `***`."""
        self._exporter = _Counted(exporter)
        self._endpoint = endpoint
        self._batch = _CountingBatch(self._exporter)
        # The exporter's warnings (one per retry, every batch of a long run) are kept as the
        # reason for the one warning `close` gives, from now on, not let out between the lines
        # of an answer.
        self._reasons = _LastWords()
        self._exporter_logs = logging.getLogger(_EXPORTER_LOGS)
        self._propagated = self._exporter_logs.propagate
        self._exporter_logs.addHandler(self._reasons)
        self._exporter_logs.propagate = False
        # No shutdown of its own at exit: that one waits as long as the exporter takes.
        self.provider = TracerProvider(resource=_resource(), shutdown_on_exit=False)
        self.provider.add_span_processor(self._batch)

    def close(self, within: float = EXPORT_AT_EXIT) -> None:
        """Export what is batched, waiting `within` seconds at most; warn once of the spans
        dropped, with the exporter's last words as the reason."""
        reasons, exporter_logs = self._reasons, self._exporter_logs
        # In a thread of its own: the SDK's shutdown waits up to 30 s for the export in flight.
        # Left running after `within` (a daemon), it is abandoned when the process exits.
        closing = threading.Thread(
            target=self.provider.shutdown, name="otel-export-at-exit", daemon=True
        )
        closing.start()
        closing.join(within)
        late = closing.is_alive()
        if not late:  # else it still retries: its logs stay with `reasons` till the end
            exporter_logs.removeHandler(reasons)
            exporter_logs.propagate = self._propagated
        dropped = self._batch.ended - self._exporter.exported
        if dropped <= 0:
            return
        if late:
            why = f"the exporter did not finish within {within:g} s (is the collector down?)"
        else:
            why = "the exporter failed"
        said = self._exporter.failure or reasons.said
        if said and self._endpoint:  # the exporter's words may quote its URL
            said = without_credentials_of(self._endpoint, said)
        log.warning(
            "OpenTelemetry: %d span%s not exported: %s%s",
            dropped,
            "" if dropped == 1 else "s",
            why,
            f": {said}" if said else "",
        )


def _resource() -> Resource:
    """The SDK's resource, `service.name` `agent-gateway` unless `OTEL_SERVICE_NAME` or
    `OTEL_RESOURCE_ATTRIBUTES` names the service (not `unknown_service:python`)."""
    named = OTELResourceDetector().detect().attributes.get(SERVICE_NAME)
    return Resource.create() if named else Resource.create({SERVICE_NAME: SERVICE})


class _Counted(SpanExporter):
    """`exporter`, counting the spans it exported; an exception is a failure, kept as the
    reason (not a traceback per batch)."""

    def __init__(self, exporter: SpanExporter) -> None:
        self._exporter = exporter
        self.exported = 0
        self.failure: str | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._exporter.export(spans)
        except Exception as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            return SpanExportResult.FAILURE
        if result == SpanExportResult.SUCCESS:
            self.exported += len(spans)
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


class _CountingBatch(BatchSpanProcessor):
    """Counts the spans that ended: what was not exported of them was dropped."""

    ended = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1
        super().on_end(span)


class _LastWords(logging.Handler):
    """Keeps the last message logged to it."""

    def __init__(self) -> None:
        super().__init__()
        self.said: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.said = record.getMessage()
