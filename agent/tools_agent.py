"""The Tools Agent as a pure, resumable step.

`ToolsAgent.step(items, response)` calls the model once for every unfinished item of the
current batch, concurrently, and returns either an `AgentResult` (every item finished) or an
`EngineRequest` for the engine to run. It never runs a tool; everything it must remember
travels in the request's metadata.

Items run in batches of `batch_size` (n8n's option): a batch runs to its end before the next
starts, `delay_between_batches` seconds later. An item fails on its own (max iterations, a
model that rejected its request, a request too long for the context window) and the others go
on, unless `fail_fast`. Any other model failure interrupts the step (`StepInterrupted`) with
the progress of every other item, so a retry repeats no finished model call and saves no turn
twice; so does a pause (a signal, not an `AgentError`) in some items' calls (`StepPaused`).

Calls the agent answers itself, without the engine: an unknown tool, arguments that are not a
JSON object (or were cut off at the model's token limit), and a call repeated once too often.
An answer without calls that stopped short (`stopped_short`: cut off, filtered, refused) fails
its item with the reason, keeping its text as the output. The model may repeat a call once (a
clock or a search may answer differently the second time); the second repeat of the identical
call (same tool, same arguments) and every later one are not run again: the observation says
so and gives the result the model already has. Within one answer an identical call runs once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import nullcontext
from copy import deepcopy
from dataclasses import dataclass, field
from functools import partial
from typing import cast

import anyio
from pydantic import JsonValue

from .agent_options import DEFAULT_SYSTEM_MESSAGE, AgentOptions
from .batch_step import advance_together, in_turn
from .call_order import StepCalls
from .call_problems import planned_calls
from .context_window import ReportsContextWindow, estimate_tokens, fit_history
from .errors import (
    AgentError,
    ContextWindowExceeded,
    ModelError,
    StepInterrupted,
    StepPaused,
    exceeds_context_window,
    fails_only_its_item,
)
from .handoff import Handoff, handed_off, kept_of_turn
from .memory import ChatMemory
from .messages import AssistantMessage, ChatMessage, ToolDefinition, Usage, UserMessage
from .model import ChatModel
from .native_output import held_to
from .output import FINAL_RESULT_TOOL, NOT_AN_ANSWER, OutputInvalid, OutputSchema, structured_answer
from .output_validator import (
    AnswerInfo,
    ModelRetry,
    ValidatorFailed,
    failed_after,
    told_again,
    validated_answer,
)
from .protocol import (
    Action,
    AgentItem,
    AgentRequestMetadata,
    AgentResult,
    EngineRequest,
    EngineResponse,
    ItemResult,
    ToolCallStep,
    UnsavedTurn,
    metadata_version,
)
from .resume_check import items_digest, resumed_state
from .scratchpad import (
    build_steps,
    prompt_messages,
    renamed_calls_notice,
    scratchpad_messages,
    tool_usage,
    with_unique_call_ids,
)
from .session_turns import save_turn, session_history
from .stopped import (
    UNREADABLE_CALL_RETRIES,
    ask_again,
    max_iterations_reached,
    stopped_short,
    times_asked_again,
    unreadable_call,
    why_stopped,
)
from .system_prompt import SystemMessageFailed, system_message_for

__all__ = ["DEFAULT_SYSTEM_MESSAGE", "AgentOptions", "ToolsAgent", "WarningCallback"]

WarningCallback = Callable[[int, str], Awaitable[None]]
"""Told (item index, what happened) when the agent goes on past a problem the user should
know of: history left out to fit the context window, a summary that failed."""


@dataclass(frozen=True, slots=True)
class ToolsAgent:
    model: ChatModel
    tools: Sequence[ToolDefinition] = ()
    options: AgentOptions = field(default_factory=AgentOptions)
    memory: ChatMemory | None = None
    run_id: str | None = None
    """Names the turns this run saves to memory (`<run_id>:<item>`), so saving one again
    (a retried step) stores nothing twice. Without it each turn gets a random key."""
    fit_history_to_window: bool = False
    """Leave a session's oldest turns out of a call that would not fit the context window the
    model reports (`ReportsContextWindow`), rather than send it (the gateway's models check
    the window before sending: the call would be refused). Off, no window is asked for."""
    on_warning: WarningCallback | None = None
    summary_model: ChatModel | None = None
    """Writes the memory's summaries (None: `model`); the gateway's does not stream, as its
    text is no part of the answer."""
    why_missing: Callable[[str], str | None] | None = None
    """Why a tool the model called is not among `tools`, if the engine knows (its server is
    down): said to the model instead of that no such tool exists."""
    _by_name: Mapping[str, ToolDefinition] = field(init=False, repr=False, compare=False)
    """The tools by name, made once: a step with 100 tools spent ~5 % of its time on it."""
    _knows_window: bool = field(init=False, repr=False, compare=False)
    """Whether the model tells its context window, for fitting the memory's history to it
    (asked once, and only with memory: a runtime protocol check is slow on Python 3.11)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {tool.name: tool for tool in self.tools})
        knows = (
            self.fit_history_to_window
            and self.memory is not None
            and isinstance(self.model, ReportsContextWindow)
        )
        object.__setattr__(self, "_knows_window", knows)

    async def step(
        self, items: Sequence[AgentItem], response: EngineResponse | None = None
    ) -> AgentResult | EngineRequest:
        """Advance every unfinished item of the current batch by one model call.

        Raises `StepInterrupted` when a model (or the memory) fails in a way that stops the
        run; the response passed in stays valid too, so the step can be retried either way.
        A model call that raises anything else (a signal, such as a pause for an answer from
        outside) lets it through as itself in a step of one item, and as `StepPaused`, with
        the other items' progress, in a step of several.
        Raises `StateError` for a response that is not of a run over `items`, and
        `ValueError` for no items.
        """
        digest = items_digest(items)  # once: it reads every prompt
        state = resumed_state(items, response, digest)  # a response, for no items: StateError
        if not items:
            raise ValueError("a step needs one item or more")
        finished = dict(state.finished_items)
        iterations = dict(state.iterations)
        invalid_answers = dict(state.invalid_answers)
        usage = state.usage + tool_usage(response)
        batch = in_turn(self._batch(len(items), finished), items)
        if self._starts_late_batch(batch, iterations):
            await anyio.sleep(self.options.delay_between_batches)

        outcomes, signals = await advance_together(
            batch, lambda index, order: self._advance(items[index], index, response, state, order)
        )

        previous_steps: dict[int, list[ToolCallStep]] = {}
        pending: dict[int, AssistantMessage] = {}
        handed: dict[int, str] = {}
        unsaved: dict[int, UnsavedTurn] = {}
        actions: list[Action] = []
        failures: list[AgentError] = []
        failed_item: int | None = None
        for index in batch:
            if index in signals:  # its call is made again when the step is
                previous_steps[index] = build_steps(response, index)
                continue
            outcome = outcomes[index]
            usage += outcome.usage
            if outcome.called_model:
                iterations[index] = iterations.get(index, 0) + 1
            if outcome.invalid_answer:
                invalid_answers[index] = invalid_answers.get(index, 0) + 1
            if outcome.result is not None:
                finished[index] = outcome.result
                if outcome.result.error is not None and failed_item is None:
                    failed_item = index
            elif outcome.interrupted is not None:
                failures.append(outcome.interrupted)
                previous_steps[index] = outcome.steps
                if outcome.handoff is not None:  # answered: the resumed step saves the turn
                    handed[index] = outcome.handoff.call_id
                if outcome.unsaved is not None:
                    unsaved[index] = outcome.unsaved
            else:
                assert outcome.answer is not None
                previous_steps[index] = outcome.steps
                pending[index] = outcome.answer
                actions += outcome.actions

        if failed_item is not None and self.options.fail_fast:
            reason = f"not finished: item {failed_item} failed and fail_fast is set"
            for index in range(len(items)):
                if index not in finished:
                    steps = previous_steps.get(index) or build_steps(response, index)
                    finished[index] = ItemResult(error=reason, steps=steps)
        # A step that only found items out of iterations called no model: it is no iteration.
        called = any(outcome.called_model for outcome in outcomes.values())
        iteration_count = state.iteration_count + called
        metadata = AgentRequestMetadata(
            version=metadata_version(previous_steps, actions, finished, handed, unsaved),
            items_digest=digest,
            previous_steps=previous_steps,
            pending=pending,
            iteration_count=iteration_count,
            iterations=iterations,
            invalid_answers=invalid_answers,
            finished_items=finished,
            handed_off=handed,
            unsaved=unsaved,
            usage=usage,
        )
        if failures and len(finished) < len(items):
            raise StepInterrupted(failures[0], EngineRequest(actions=actions, metadata=metadata))
        if signals and len(finished) < len(items):
            paused = [signals[index] for index in sorted(signals)]
            raise StepPaused(paused, EngineRequest(actions=actions, metadata=metadata))
        if len(finished) == len(items):
            results = [finished[i] for i in range(len(items))]
            return AgentResult(items=results, usage=usage, iterations=iteration_count)
        # An empty request when a batch just ended: the engine resumes at once with the next.
        return EngineRequest(actions=actions, metadata=metadata)

    async def stop(
        self, items: Sequence[AgentItem], response: EngineResponse | None, error: str
    ) -> AgentResult:
        """End the run now, calling no model: an item that has its answer already (kept in
        the run's progress because its save failed, or a handoff's) ends with it once its
        session keeps the turn, as a resumed step ends it; the other unfinished items fail
        with `error` and keep their steps so far.

        Raises the memory's `AgentError` when such a turn cannot be saved: the run stops
        where it was, its answer still kept in the progress for a resume. Raises
        `StateError` for a response that is not of a run over `items`.
        """
        state = resumed_state(items, response)
        finished = dict(state.finished_items)
        for index, item in enumerate(items):
            if index in finished:
                continue
            steps = build_steps(response, index)
            answered = await self._answered(item, index, steps, response, state)
            if answered is None:
                finished[index] = ItemResult(error=error, steps=steps)
            elif answered.interrupted is not None:
                raise answered.interrupted
            else:
                assert answered.result is not None
                finished[index] = answered.result
        results = [finished[index] for index in range(len(items))]
        usage = state.usage + tool_usage(response)
        return AgentResult(items=results, usage=usage, iterations=state.iteration_count)

    def _batch(self, count: int, finished: dict[int, ItemResult]) -> list[int]:
        """The unfinished items of the first batch that has any."""
        size = self.options.batch_size
        for start in range(0, count, size):
            batch = [i for i in range(start, min(start + size, count)) if i not in finished]
            if batch:
                return batch
        return []

    def _starts_late_batch(self, batch: list[int], iterations: dict[int, int]) -> bool:
        if not batch or not self.options.delay_between_batches:
            return False
        return batch[0] >= self.options.batch_size and not any(i in iterations for i in batch)

    async def _advance(
        self,
        item: AgentItem,
        index: int,
        response: EngineResponse | None,
        state: AgentRequestMetadata,
        order: StepCalls | None = None,
    ) -> _Outcome:
        """One model call for one item, and what came of it. Never raises an `AgentError`."""
        steps, options = build_steps(response, index), self.options
        answered = await self._answered(item, index, steps, response, state)
        if answered is not None:
            return answered
        if state.iterations.get(index, 0) >= self.options.max_iterations:
            return _Outcome(
                steps,
                result=ItemResult(
                    error=max_iterations_reached(self.options.max_iterations), steps=steps
                ),
            )
        usage = Usage()
        try:
            # Made for each call (its clock, the context it reads); never kept in memory.
            system = await system_message_for(self.options.system_message, item.context)
        except SystemMessageFailed as exc:
            return _Outcome(steps, result=ItemResult(error=str(exc), steps=steps))
        try:
            history, usage = await self._history(item, index)
            messages = await self._within_window(system, history, item, index, steps)
            with (
                order.calling(index) if order is not None else nullcontext(),
                held_to(options.native_schema, self.model),
            ):
                answer = await self.model.invoke(messages, self._offered())
        except ModelError as exc:
            if fails_only_its_item(exc) and not self.options.refusal_stops:
                # Unsent when it would not fit the window: said so, not "rejected"; by code
                # for a client to trim and ask again, unless this run's results overflowed it.
                trim = exceeds_context_window(exc) and not steps
                code = "context_length_exceeded" if trim else None
                unsent = isinstance(exc, ContextWindowExceeded)
                error = str(exc) if unsent else f"the model rejected the request: {exc}"
                result = ItemResult(error=error, error_code=code, steps=steps)
                return _Outcome(steps, usage=usage, result=result)
            return _Outcome(steps, usage=usage, interrupted=exc)
        except AgentError as exc:  # the memory's storage, or a model's configuration
            return _Outcome(steps, usage=usage, interrupted=exc)
        usage += answer.usage
        if unreadable_call(answer) and times_asked_again(steps) < UNREADABLE_CALL_RETRIES:
            # The provider lost a call it could not parse: the model gets to write it again.
            if self.on_warning is not None:
                await self.on_warning(index, f"{why_stopped(answer)}; asking it again")
            return _Outcome(
                [*steps, ask_again(answer, steps)], usage=usage, called_model=True, answer=answer
            )
        if stopped_short(answer):
            # Cut off, filtered or refused: not an answer to give as whole. The item fails and
            # says why; what text there was stays in its output.
            result = ItemResult(
                output=answer.content or None, error=why_stopped(answer), steps=steps
            )
            return _Outcome(steps, usage=usage, called_model=True, result=result)
        if answer.tool_calls:
            answer, renamed = with_unique_call_ids(answer, messages, steps)
            if renamed and self.on_warning is not None:
                await self.on_warning(index, renamed_calls_notice(renamed))
        output = self.options.output
        value: JsonValue | object = NOT_AN_ANSWER
        if output is not None:
            try:
                value = structured_answer(output, answer, native=options.native_schema is not None)
            except OutputInvalid as invalid:
                return self._refused(answer, index, steps, usage, state, invalid)
        if value is NOT_AN_ANSWER and answer.tool_calls:
            answered_here, actions = self._plan(answer, index, steps)
            sent = steps + answered_here
            return _Outcome(sent, usage, called_model=True, answer=answer, actions=actions)
        if self.options.output_validator is not None:
            retry = state.invalid_answers.get(index, 0)
            info = AnswerInfo(
                item.prompt, index, item.session_id, retry, self.run_id, deepcopy(item.context)
            )
            try:
                answer, value = await validated_answer(
                    self.options.output_validator, output, answer, value, info
                )
            except ModelRetry as refused:
                refusal = OutputInvalid([str(refused)], what=str(refused))
                return self._refused(answer, index, steps, usage, state, refusal, validator=True)
            except ValidatorFailed as exc:
                failed = ItemResult(error=str(exc), steps=steps)
                return _Outcome(steps, usage=usage, called_model=True, result=failed)
        return await self._finish(item, index, steps, answer, usage, value)

    async def _answered(
        self,
        item: AgentItem,
        index: int,
        steps: list[ToolCallStep],
        response: EngineResponse | None,
        state: AgentRequestMetadata,
    ) -> _Outcome | None:
        """The outcome of an item whose answer needs no model call: one answered before its
        save failed (only the save is made again), or one a handoff answered; else None."""
        unsaved = state.unsaved.get(index)
        if unsaved is not None:
            return await self._save(item, index, steps, unsaved, Usage(), called_model=False)
        output = self.options.output
        handoff = handed_off(response, index, steps, self._by_name, output)
        if handoff is None:
            return None
        answer = AssistantMessage(content=handoff.output)
        structured = NOT_AN_ANSWER if output is None else handoff.structured
        return await self._finish(item, index, steps, answer, Usage(), structured, handoff)

    def _refused(
        self,
        answer: AssistantMessage,
        index: int,
        steps: list[ToolCallStep],
        usage: Usage,
        state: AgentRequestMetadata,
        invalid: OutputInvalid,
        *,
        validator: bool = False,
    ) -> _Outcome:
        """An answer the schema or the validator refused goes back to the model with what is
        wrong; past `output_retries`, the item fails."""
        retries = self.options.output_retries
        if state.invalid_answers.get(index, 0) >= retries:
            failed = ItemResult(error=failed_after(retries, invalid, validator), steps=steps)
            return _Outcome(steps, usage=usage, called_model=True, result=failed)
        options = self.options
        native = options.native_schema is not None
        told = partial(told_again, options.output, invalid, validator, native)  # (a call's own)
        actions: list[Action] = []
        if not answer.tool_calls:  # a text answer: the correction follows as the user's turn
            retry = ToolCallStep(
                tool_call_id=f"retry_{len(steps) + 1}",
                tool=FINAL_RESULT_TOOL if self._final_result is not None else "",
                tool_input={},
                observation=told(),
                message=answer,
            )
            sent = [*steps, retry]
        else:
            answered, actions = self._plan(answer, index, steps)
            sent = steps + [  # each `final_result` call told its own refusal
                s.model_copy(update={"observation": told(s.tool_call_id), "is_error": True})
                if s.tool == FINAL_RESULT_TOOL
                else s
                for s in answered
            ]
        return _Outcome(
            sent, usage, called_model=True, answer=answer, actions=actions, invalid_answer=True
        )

    async def _finish(
        self,
        item: AgentItem,
        index: int,
        steps: list[ToolCallStep],
        answer: AssistantMessage,
        usage: Usage,
        structured: JsonValue | object,
        handoff: Handoff | None = None,
    ) -> _Outcome:
        """The item's answer (the model's, or the agent's it was handed to): its turn saved,
        its result made. An answer without text saves no turn (as n8n saves only an output):
        the engine fails it, and a later turn of the session would read a question answered
        by nothing."""
        final = answer
        if structured is NOT_AN_ANSWER:
            text, structured = answer.content, None
        else:
            text = json.dumps(structured, ensure_ascii=False)
            if answer.tool_calls:  # answered by `final_result`: the turn ends in the answer itself
                final = AssistantMessage(content=text, usage=answer.usage)
        keep = steps if self.options.return_intermediate_steps else None
        result = ItemResult(
            output=text,
            structured=cast(JsonValue, structured),
            steps=keep,
            handoff=handoff.tool if handoff is not None else None,
        )
        if not text.strip():
            return _Outcome(steps, usage=usage, called_model=handoff is None, result=result)
        # Text only: the media were for this turn's calls, and would weigh on every later
        # turn of the session (and on its stored rows).
        kept = steps if handoff is None else kept_of_turn(steps, handoff)
        turn = UnsavedTurn(messages=[*scratchpad_messages(kept, media=False), final], result=result)
        return await self._save(item, index, steps, turn, usage, handoff is None, handoff)

    async def _save(
        self,
        item: AgentItem,
        index: int,
        steps: list[ToolCallStep],
        turn: UnsavedTurn,
        usage: Usage,
        called_model: bool,
        handoff: Handoff | None = None,
    ) -> _Outcome:
        """The item ends with `turn`'s answer once its session keeps the turn. A save that
        fails keeps the answer in the run's progress (a handoff's, by its call's id), so a
        resumed step saves it again under the same key, asking no model."""
        try:
            await self._remember(item, index, list(turn.messages))
        except AgentError as exc:
            unsaved = turn if handoff is None else None
            return _Outcome(
                steps, usage, called_model, interrupted=exc, handoff=handoff, unsaved=unsaved
            )
        return _Outcome(steps, usage=usage, called_model=called_model, result=turn.result)

    def _plan(
        self, answer: AssistantMessage, index: int, steps: Sequence[ToolCallStep]
    ) -> tuple[list[ToolCallStep], list[Action]]:
        return planned_calls(
            answer, index, steps, self._by_name, self.tools, self._final_result, self.why_missing
        )

    def _offered(self) -> Sequence[ToolDefinition]:
        output = self._final_result
        return self.tools if output is None else [*self.tools, output.tool()]

    @property
    def _final_result(self) -> OutputSchema | None:
        """The schema of the `final_result` tool offered, if one is (not in native mode)."""
        return None if self.options.native_schema is not None else self.options.output

    async def _within_window(
        self,
        system: str,
        history: list[ChatMessage],
        item: AgentItem,
        index: int,
        steps: list[ToolCallStep],
    ) -> list[ChatMessage]:
        """The call's messages. A session history that would not let the call fit the
        model's context window loses its oldest turns for this call (they stay stored; the
        warning says so): a session that outgrew the window would otherwise fail every turn
        from then on, whatever was asked."""
        messages = prompt_messages(system, history, item.prompt, steps)
        if not history or not self._knows_window:
            return messages
        window = await cast(ReportsContextWindow, self.model).context_window()
        offered = self._offered()
        if window is None or sum(estimate_tokens(messages, offered)) <= window:
            return messages
        fitted = fit_history(
            history,
            prompt_messages(system, [], item.prompt, steps),
            offered,
            window,
        )
        if self.on_warning is not None:
            parts: list[str] = []
            if fitted.turns_left_out:
                parts.append(f"its {fitted.turns_left_out} oldest of {fitted.turns} turns")
            if fitted.summary_left_out:
                parts.append("its summary")
            await self.on_warning(
                index,
                f"the session's history did not fit the model's context window "
                f"({window} tokens) with this turn; left out of this call (still stored): "
                f"{' and '.join(parts)}. The memory's max_tokens (or turns) sets how much of "
                "the history the model sees; /reset or `sessions delete` starts afresh.",
            )
        return prompt_messages(system, fitted.messages, item.prompt, steps)

    async def _history(self, item: AgentItem, index: int) -> tuple[list[ChatMessage], Usage]:
        """The item's session history (see `session_history`). An item that brings its own
        history has that (fitted to the window as a session's is)."""
        if item.history is not None:
            return list(item.history), Usage()
        if self.memory is None or item.session_id is None:
            return [], Usage()
        window = None
        if self._knows_window:
            window = await cast(ReportsContextWindow, self.model).context_window()

        async def warn(message: str) -> None:
            if self.on_warning is not None:
                await self.on_warning(index, message)

        model, own = self.summary_model or self.model, self._key(index)
        return await session_history(
            self.memory, item.session_id, model, window=window, warn=warn, without=own
        )

    def _key(self, index: int) -> str | None:  # the item's turn's, one per run and item
        return f"{self.run_id}:{index}" if self.run_id else None

    async def _remember(self, item: AgentItem, index: int, turn: list[ChatMessage]) -> None:
        if self.memory is None or item.session_id is None:
            return
        key = self._key(index) or uuid.uuid4().hex
        messages = [UserMessage(content=item.prompt), *turn]
        await save_turn(self.memory, item.session_id, key, messages)


@dataclass(slots=True)
class _Outcome:
    """What one item's part of a step came to: finished (`result`), interrupted, or calls."""

    steps: list[ToolCallStep]
    usage: Usage = field(default_factory=Usage)
    called_model: bool = False
    result: ItemResult | None = None
    interrupted: AgentError | None = None
    answer: AssistantMessage | None = None
    actions: list[Action] = field(default_factory=list[Action])
    invalid_answer: bool = False
    handoff: Handoff | None = None
    """The handoff that answered an item whose turn then failed to save (`interrupted`)."""
    unsaved: UnsavedTurn | None = None
    """The model's answer to an item whose turn then failed to save (`interrupted`)."""
