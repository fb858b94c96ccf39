"""A run's trace as OpenTelemetry spans, named as the GenAI semantic conventions say.

`OtelExporter` is a trace hook. Each agent becomes an `invoke_agent {agent}` span (its
model's `gen_ai.provider.name`, the session it continues as `gen_ai.conversation.id`; failed
when every item of its run failed), each model call a `chat {model}` span (each model of a
fallback list asked one of its own, a failed one ended by the fallback's note)
(`gen_ai.request.model`, `gen_ai.provider.name`, token usage in `gen_ai.usage.*`, `gen_ai.response.finish_reasons`; the provider's `gen_ai.response.id` and
the model that answered, `gen_ai.response.model`; the host and port of the endpoint it went
to, `server.address` and `server.port`, a failed call's too), each tool call an
`execute_tool {tool}` span (`gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type`), nested as in the
trace: a sub-agent's spans sit under the tool call that ran it. A call waiting for a person's approval is an
`await_approval {tool}` span, ended by the decision. The run itself is not a span of its own (its agent is); its id is the
`agent_gateway.run_id` attribute of every span. A tool's progress (how far, without its
message) and the trace's notes (fallbacks, a server's health, warnings) are span events; the
log messages a tool's server sent are counted, by logger and level, in one event each at the
span's end. An item answered by the agent it was handed to is an `agent.handoff` event (`to`,
`item`) on its agent's span, whose `agent_gateway.handoff` lists the agents handed to.
Failures set the span's error status and `error.type`; a span the run's pause ended (it
stopped to wait for a person, `--no-wait`, or for a client's answer) is no failure:
its status stays unset, and `agent_gateway.paused` says what it waits for. A span under
which a call waited for a person's approval or a slot of its node says for how long
(`agent_gateway.waited_ms`) and how long it was busy (`agent_gateway.busy_ms`). Arguments,
results, messages, progress messages and server log data are not recorded: they may hold
personal data, and so may a tool's own error text, or one quoting the call (`error_private`): such a
status has no description.

Traces cross MCP as SEP-414 says: a served call whose `_meta` holds a W3C `traceparent`
continues the caller's trace, and each tool call puts its span's context (and the caller's
baggage) in the `_meta` of its request, so a gateway or server behind this one continues it.
A span it starts with no parent (a run's agent, when no caller's trace reaches it) is a root
made as any root is, by the tracer provider's sampler; its context is told (`root_context`)
for a stored run to keep, so that each process resuming the run continues under it.

Spans go to the tracer provider given, else the global one (`otel_export.configure_otel` sets
one up for a command when none is).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pydantic import JsonValue

from agent.stopped import reached_max_iterations

from .item_results import handed_off_to
from .trace import TraceEvent

__all__ = ["OtelExporter"]

INSTRUMENTATION = "agent-gateway"
RUN_ID = "agent_gateway.run_id"
APPROVAL_DECISION = "agent_gateway.approval.decision"
PAUSED = "agent_gateway.paused"
HANDOFF = "agent_gateway.handoff"
PROVIDER = "gen_ai.provider.name"
WAITED = "agent_gateway.waited_ms"
"""How much of a span's time a call under it waited (a person's approval, a node's slot)."""
BUSY = "agent_gateway.busy_ms"
_PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])
"""W3C trace context and baggage, carried in a request's `_meta` (SEP-414)."""
_BAGGAGE = W3CBaggagePropagator()
_TRACE_CONTEXT = TraceContextTextMapPropagator()
_CHAIN = "fallback("
"""How a `FallbackModel` names itself: `fallback(SPEC, SPEC, ...)`."""
_PROVIDERS = {"gemini": "gcp.gemini", "openai-responses": "openai"}
"""Our model-spec prefixes whose GenAI `provider.name` differs."""
_FINISH_REASONS = {
    "end": "stop",
    "tool_calls": "tool_call",
    "max_tokens": "length",
    "content_filter": "content_filter",
}
"""Our stop reasons as the GenAI conventions name them (the others: the provider's word)."""
_RESPONSE = {
    "response_id": "gen_ai.response.id",
    "response_model": "gen_ai.response.model",
    "server_address": "server.address",
    "server_port": "server.port",
}
"""A model span's output fields that are attributes as they are (`TracedModel` sets them)."""
_USAGE = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cached_tokens": "gen_ai.usage.cache_read.input_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
}


class OtelExporter:
    """Maps a run's trace events to OpenTelemetry spans as they happen, and hands each tool
    call's span on to the MCP server it calls (`trace_context`)."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(INSTRUMENTATION, tracer_provider=tracer_provider)
        self._spans: dict[str, Span] = {}
        """Open spans by trace id."""
        self._contexts: dict[str, Context | None] = {}
        """What the children of each open trace id start in: its span's context; for a run,
        which is no span, the trace its caller sent (SEP-414), else none (a new trace)."""
        self._waits: dict[str, dict[str, Span]] = {}
        """The approvals waited for, by the span they wait in and the call's name."""
        self._server_logs: dict[str, Counter[tuple[str | None, str]]] = {}
        """The open tool spans' server log messages: how many from each logger at each level."""
        self._handed: dict[str, list[str]] = {}
        """The open agent spans' handoffs: the agents their items were handed to, in order."""
        self._roots: set[str] = set()
        """The open spans started with no parent: each a trace's root (`root_context`)."""
        self._provided: set[str] = set()
        """The open agent spans whose `gen_ai.provider.name` is set (by their first model call)."""
        self._first_chats: dict[str, str] = {}
        """The open chat spans that named their agent's provider, with that agent span's id: a
        fallback from one names the agent's provider anew."""
        self._chat_parents: dict[str, Context | None] = {}
        """What the open chat spans started in: a fallback's next model's span starts there too."""
        self._model_failures: dict[str, tuple[str, str | None]] = {}
        """The open agent spans' last failed model call: its `error.type` and description, for
        an item that failed of it (the agent's span fails with its run)."""

    async def __call__(self, event: TraceEvent) -> None:
        if event.phase == "start":
            self._start(event)
        elif event.phase in ("end", "error"):
            self._contexts.pop(event.id, None)
            span = self._spans.pop(event.id, None)
            logged = self._server_logs.pop(event.id, None)
            self._handed.pop(event.id, None)
            self._roots.discard(event.id)
            self._provided.discard(event.id)
            self._first_chats.pop(event.id, None)
            self._chat_parents.pop(event.id, None)
            failed_call = self._model_failures.pop(event.id, None)
            if event.kind == "model" and event.phase == "error" and event.paused is None:
                said = event.error_public if event.error_private else event.error
                self._model_failures[event.parent_id or ""] = (_error_type(event), said)
            for wait in self._waits.pop(event.id, {}).values():  # it stopped waiting
                wait.set_attribute(APPROVAL_DECISION, "none")
                wait.end()
            if span is not None:
                for (logger, level), count in (logged or {}).items():
                    attributes = {"level": level, "count": count}
                    span.add_event("tool.server_log", {**attributes, "logger": logger or ""})
                self._finish(span, event, failed_call)
        elif event.phase in ("progress", "note"):
            parent = self._spans.get(event.parent_id or "")
            if parent is None:
                return
            if event.progress is not None:
                # How far, not the server's message: it is the server's own words, which may
                # quote the call (a gateway behind this one's do).
                done, total = event.progress.progress, event.progress.total
                how_far = (
                    {"progress": done} if total is None else {"progress": done, "total": total}
                )
                parent.add_event("tool.progress", how_far)
            elif event.server_log is not None:
                # Its data stays out (it may quote the call); which loggers said how much is
                # told at the span's end, one event each, not one per message: a gateway
                # behind this one logs every progress step too.
                said = self._server_logs.setdefault(event.parent_id or "", Counter())
                said[(event.server_log.logger, event.server_log.level)] += 1
            elif _approval(event) in ("waiting", "approved", "denied"):
                self._approval(event)
            elif event.kind == "agent" and (handed := handed_off_to(event.output)) is not None:
                self._handoff(parent, handed, event)
            else:
                parent.add_event(f"{event.kind}.{event.phase}", _flat(event.output))
                if event.kind == "model" and isinstance(event.output, dict):
                    following = event.output.get("fallback_to")
                    if isinstance(following, str):  # the chain's next model is asked now
                        self._fall_back(parent, event, following)

    @contextmanager
    def calling_from(self, span_id: str) -> Generator[dict[str, str]]:
        context = self._contexts.get(span_id)
        if context is None:
            yield {}
            return
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=context)
        token = otel_context.attach(context)
        try:
            yield carrier
        finally:
            otel_context.detach(token)

    def root_context(self, span_id: str) -> dict[str, str] | None:
        """The W3C trace context of `span_id` if it is open and a trace's root (`OpensRoots`):
        its trace and span ids, and whether the sampler kept it."""
        span = self._spans.get(span_id) if span_id in self._roots else None
        if span is None:
            return None
        carrier: dict[str, str] = {}
        _TRACE_CONTEXT.inject(carrier, context=trace.set_span_in_context(span))
        return carrier or None  # none from a no-op provider: its spans have no ids

    def _start(self, event: TraceEvent) -> None:
        if event.parent_id is not None:
            parent = self._contexts.get(event.parent_id)
        else:
            parent = _caller(event)
        if event.kind == "run":
            self._contexts[event.id] = parent
            return
        name, kind, attributes = _describe(event)
        attributes[RUN_ID] = event.run_id
        agent = self._spans.get(event.parent_id or "") if event.kind == "model" else None
        if agent is not None and event.parent_id not in self._provided:
            # The agent's provider (required on its span) is known at its first model call.
            self._provided.add(event.parent_id or "")
            self._first_chats[event.id] = event.parent_id or ""
            agent.set_attribute(PROVIDER, attributes[PROVIDER])
        span = self._tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
        self._spans[event.id] = span
        if event.kind == "model":
            self._chat_parents[event.id] = parent
        within = otel_context.get_current() if parent is None else parent  # as start_span reads
        if not trace.get_current_span(within).get_span_context().is_valid:
            self._roots.add(event.id)
        # Its children inherit what its parent carries (the caller's baggage) beside the span.
        self._contexts[event.id] = trace.set_span_in_context(span, parent)

    def _fall_back(self, failed: Span, event: TraceEvent, following: str) -> None:
        """A model of a fallback list failed (`event`, its note) and `following` is asked: the
        failed one's chat span ends, failed, and the next one's starts beside it, the call's
        span from now on (its events, its end)."""
        assert isinstance(event.output, dict)
        _name_the_model(failed, event.name)
        for field in ("server_address", "server_port"):
            value = event.output.get(field)
            if isinstance(value, str | int) and not isinstance(value, bool):
                failed.set_attribute(_RESPONSE[field], value)
        said = event.output.get("error")
        failed.set_status(Status(StatusCode.ERROR, said if isinstance(said, str) else None))
        failed.set_attribute("error.type", event.error_type or "_OTHER")
        failed.end()
        span_id = event.parent_id or ""
        parent = self._chat_parents.get(span_id)
        name, kind, attributes = _describe(event.model_copy(update={"name": following}))
        attributes[RUN_ID] = event.run_id
        span = self._tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
        self._spans[span_id] = span
        self._contexts[span_id] = trace.set_span_in_context(span, parent)
        agent = self._spans.get(self._first_chats.get(span_id, ""))
        if agent is not None:  # the agent's provider is the one its call went on to
            agent.set_attribute(PROVIDER, attributes[PROVIDER])

    def _approval(self, event: TraceEvent) -> None:
        """A call waiting for a person's approval: an `await_approval {tool}` span, from the
        wait to the decision (`agent_gateway.approval.decision`)."""
        assert isinstance(event.output, dict)
        parent_id, call = event.parent_id or "", str(event.output.get("call"))
        waits = self._waits.setdefault(parent_id, {})
        if _approval(event) == "waiting":
            attributes = {
                "gen_ai.tool.name": event.name,
                "agent_gateway.approval.call": call,
                RUN_ID: event.run_id,
            }
            waits[call] = self._tracer.start_span(
                f"await_approval {event.name}",
                context=self._contexts.get(parent_id),
                attributes=attributes,
            )
            return
        wait = waits.pop(call, None)
        if wait is not None:
            wait.set_attribute(APPROVAL_DECISION, str(_approval(event)))
            wait.end()

    def _handoff(self, span: Span, to: str, event: TraceEvent) -> None:
        """An item of the agent's span answered by the agent it was handed to: an
        `agent.handoff` event, and the span's `agent_gateway.handoff` lists whom (a run of
        many items may hand each to another)."""
        item = event.output.get("item") if isinstance(event.output, dict) else None
        span.add_event(
            "agent.handoff", {"to": to, **({"item": item} if isinstance(item, int) else {})}
        )
        handed = self._handed.setdefault(event.parent_id or "", [])
        if to not in handed:
            handed.append(to)
            span.set_attribute(HANDOFF, handed)

    def _finish(
        self, span: Span, event: TraceEvent, failed_call: tuple[str, str | None] | None
    ) -> None:
        if event.waited_ms is not None and event.busy_ms is not None:
            span.set_attributes({WAITED: event.waited_ms, BUSY: event.busy_ms})
        if event.kind == "model" and isinstance(event.output, dict):
            usage = event.output.get("usage")
            if isinstance(usage, dict):
                for field, attribute in _USAGE.items():
                    value = usage.get(field)
                    if isinstance(value, int):
                        span.set_attribute(attribute, value)
            reason = _finish_reason(event.output)
            if reason is not None:
                span.set_attribute("gen_ai.response.finish_reasons", [reason])
            for field, attribute in _RESPONSE.items():
                value = event.output.get(field)
                if isinstance(value, str | int) and not isinstance(value, bool):
                    span.set_attribute(attribute, value)
        if event.phase == "error" and event.paused is not None:
            # Stopped to wait (for a person, a client's answer), not failed: its status unset.
            span.set_attribute(PAUSED, event.paused)
        elif event.phase == "error":
            # A tool's words, or a provider's, stay out: the gateway's own (`error_public`) stay.
            said = event.error_public if event.error_private else event.error
            span.set_status(Status(StatusCode.ERROR, said))
            span.set_attribute("error.type", _error_type(event))
        elif event.kind == "agent" and (failure := _run_failed(event.output, failed_call)):
            # Every item failed (max iterations, the provider refused it): the run failed,
            # though its agent ended as planned.
            error_type, said = failure
            span.set_status(Status(StatusCode.ERROR, said))
            span.set_attribute("error.type", error_type)
        span.end()


def _approval(event: TraceEvent) -> JsonValue:
    """An approval note's word (`waiting`, `approved`, `denied`, `refused`), else None."""
    return event.output.get("approval") if isinstance(event.output, dict) else None


def _run_failed(
    output: JsonValue, failed_call: tuple[str, str | None] | None
) -> tuple[str, str | None] | None:
    """An agent span's `error.type` and description when every item of its output (`{"error":
    ...}` or `{"output": ...}` each) failed, as its run then did; else None. The cause is the
    first item's: max iterations (`MaxIterations`, the gateway's words), else the agent's last
    failed model call (`ModelHTTPError`, without the provider's words), else `item_failed`,
    undescribed (its error may quote the call)."""
    if not isinstance(output, list) or not output:
        return None
    errors = [item.get("error") if isinstance(item, dict) else None for item in output]
    if not all(isinstance(error, str) for error in errors):
        return None
    first = errors[0]
    if isinstance(first, str) and reached_max_iterations(first):
        return "MaxIterations", first
    return failed_call or ("item_failed", None)


def _caller(event: TraceEvent) -> Context | None:
    """What a span with no parent here continues: the span current where it starts (the MCP
    SDK's span of the request being served, itself continuing the client's trace), else the
    trace the client sent with a run started earlier (resumed now), else nothing. The client's
    baggage goes on either way."""
    current = otel_context.get_current()
    if trace.get_current_span(current).get_span_context().is_valid:
        if event.caller_trace is None:
            return current
        # The SDK's span continues the client's trace but not its baggage: it makes its span
        # current in the context it found, not in the one it read from the request.
        return _BAGGAGE.extract(event.caller_trace, context=current)
    if event.caller_trace is not None:
        return _PROPAGATOR.extract(event.caller_trace)  # a malformed one is ignored
    return None


def _describe(event: TraceEvent) -> tuple[str, SpanKind, dict[str, Any]]:
    """The span's name, kind and attributes known at its start."""
    if event.kind == "agent":
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": event.name,
        }
        session = event.input.get("session_id") if isinstance(event.input, dict) else None
        if isinstance(session, str):
            attributes["gen_ai.conversation.id"] = session
        return f"invoke_agent {event.name}", SpanKind.INTERNAL, attributes
    if event.kind == "model":
        provider, model = _provider_and_model(event.name)
        attributes = {
            "gen_ai.operation.name": "chat",
            PROVIDER: provider,
            "gen_ai.request.model": model,
        }
        return f"chat {model}", SpanKind.CLIENT, attributes
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": event.name,
        # The model wrote the call, the gateway runs it (an MCP server's tool, a function, an
        # agent), as function calling goes.
        "gen_ai.tool.type": "function",
    }
    if event.call_id is not None:
        attributes["gen_ai.tool.call.id"] = event.call_id
    return f"execute_tool {event.name}", SpanKind.INTERNAL, attributes


def _name_the_model(span: Span, name: str) -> None:
    """Name the chat span for model `name` (a fallback list's span is named by its first)."""
    provider, model = _provider_and_model(name)
    span.update_name(f"chat {model}")
    span.set_attributes({"gen_ai.provider.name": provider, "gen_ai.request.model": model})


def _provider_and_model(name: str) -> tuple[str, str]:
    """`openai:gpt-4.1-mini` → (`openai`, `gpt-4.1-mini`); a fallback chain is its first model
    (each model asked after it has a span of its own); a model without a spec prefix (the client's own, via
    sampling) is its own provider."""
    if name.startswith(_CHAIN) and name.endswith(")"):
        name = name.removeprefix(_CHAIN).removesuffix(")").split(", ")[0]
    prefix, colon, rest = name.partition(":")
    if not colon:
        return name, name
    if prefix == "openai-compatible" or (prefix == "openai-responses" and "#" in rest):
        # A server of its own (`URL#MODEL`): not OpenAI, whichever of its APIs it speaks.
        return "openai-compatible", rest.rpartition("#")[2] or rest
    return _PROVIDERS.get(prefix, prefix), rest


def _error_type(event: TraceEvent) -> str:
    """`cancelled`; an exception's class name (`ModelConnectionError`, `ModelTimeout`); a tool
    call that failed without one (the tool said so, or the agent refused it): `tool_error`."""
    if event.error == "cancelled":
        return "cancelled"
    if event.error_type is not None:
        return event.error_type
    return "tool_error" if event.kind == "tool" else "_OTHER"


def _finish_reason(output: dict[str, JsonValue]) -> str | None:
    """The GenAI finish reason of a model's answer: its common ones by their names there
    (`stop`, `tool_call`, `length`, `content_filter`), others as the provider named them."""
    reason = output.get("stop_reason")
    if not isinstance(reason, str):
        return None
    known = _FINISH_REASONS.get(reason)
    if known is not None:
        return known
    detail = output.get("stop_detail")
    return detail if isinstance(detail, str) and detail else reason


def _flat(value: JsonValue) -> dict[str, Any]:
    """Event attributes: scalars as they are, anything else as JSON text."""
    if not isinstance(value, dict):
        return {} if value is None else {"value": json.dumps(value, default=str)}
    flat: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, str | int | float | bool):
            flat[key] = item
        elif item is not None:
            flat[key] = json.dumps(item, separators=(",", ":"), default=str)
    return flat
