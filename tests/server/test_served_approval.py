"""A served agent's calls that need approval are asked of the MCP client that called it: by
elicitation (2025-11-25) or in an input-required round (2026-07-28), with a real SDK client.
A client that declared neither is not asked: the call is refused and the model told why."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from agent import (
    AssistantMessage,
    ChatMessage,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    TokenCallback,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from gateway import AgentSpec, Gateway
from gateway.approval import (
    CANCELLED,
    DECLINED,
    NOBODY_TO_ASK,
    NOT_ASKED,
    ApprovalRequest,
    ApprovalRule,
    Decision,
)
from gateway.limits import NodeLimits, PerNode
from gateway.remote_approvals import RemoteApprovals
from gateway.run_context import RunContext, TokenBudget
from gateway.server.client_requests.approvals import decision_of, question
from gateway.trace import Tracer
from toolkits import FunctionToolkit, function_tool

from .support import ERAS, Blocker, LogLog, serve

pytestmark = pytest.mark.anyio


class Person:
    """The client's user: answers each question with `approve` and `message`."""

    def __init__(self, *, approve: bool, message: str | None = None) -> None:
        self.approve = approve
        self.message = message
        self.asked: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        assert params.requested_schema["required"] == ["approve"]
        self.asked.append(params.message)
        content: dict[str, str | int | float | bool | list[str] | None] = {"approve": self.approve}
        if self.message is not None:
            content["message"] = self.message
        return types.ElicitResult(action="accept", content=content)


def _gateway(log: list[str], *agents: AgentSpec) -> Gateway:
    def note(text: str) -> str:
        """Note a text."""
        log.append(text)
        return f"noted {text}"

    def erase(text: str) -> str:
        """Erase a text."""
        log.append(f"erased {text}")
        return f"erased {text}"

    return Gateway([FunctionToolkit("log", [function_tool(note), function_tool(erase)])], agents)


def _calls(*calls: tuple[str, str, str]) -> ScriptedAnswer:
    return ScriptedAnswer(
        tool_calls=[ScriptedCall(name=n, id=i, arguments={"text": t}) for n, i, t in calls]
    )


def _told(model: ScriptedModel, call: int) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in model.calls[call][0] if isinstance(m, ToolMessage)}


@pytest.mark.parametrize("era", ERAS)
async def test_the_client_approves_a_call_and_the_step_runs_each_call_once(era: str) -> None:
    log: list[str] = []
    model = ScriptedModel([_calls(("note", "a", "A"), ("erase", "b", "B")), "done"])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    person = Person(approve=True)
    heard = LogLog()
    async with Client(
        serve(_gateway(log, spec)),
        mode=era,
        elicitation_callback=person,
        logging_callback=heard,
        log_level="info",
    ) as client:
        result = await client.call_tool("assistant", {"prompt": "go"})
    assert not result.is_error, result.content
    assert result.content == [types.TextContent(text="done")]
    # 2026-07-28: one input-required round; 2025-11-25: asked during the call.
    rounds = heard.lines.count("info: agent assistant: waiting for the client's approval")
    assert rounds == (0 if era == "legacy" else 1), heard.lines
    assert person.asked == ['Agent \'assistant\' wants to call erase with {"text": "B"}. Allow it?']
    assert sorted(log) == ["A", "erased B"]  # the other call ran once, in a round or not
    assert _told(model, 1) == {"a": "noted A", "b": "erased B"}


@pytest.mark.parametrize("era", ERAS)
async def test_every_gated_call_of_a_step_is_asked_in_one_round(era: str) -> None:
    """Two calls of one step need approval: a 2026-07-28 client gets both questions in one
    input-required round (its retry carries both answers), not a round for each."""
    log: list[str] = []
    model = ScriptedModel([_calls(("erase", "a", "A"), ("erase", "b", "B")), "done"])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    person = Person(approve=True)
    heard = LogLog()
    async with Client(
        serve(_gateway(log, spec)),
        mode=era,
        elicitation_callback=person,
        logging_callback=heard,
        log_level="info",
    ) as client:
        result = await client.call_tool("assistant", {"prompt": "go"})
    assert result.content == [types.TextContent(text="done")]
    rounds = heard.lines.count("info: agent assistant: waiting for the client's approval")
    assert rounds == (0 if era == "legacy" else 1), heard.lines
    assert sorted(person.asked) == [
        f'Agent \'assistant\' wants to call erase with {{"text": "{text}"}}. Allow it?'
        for text in ("A", "B")
    ]
    assert sorted(log) == ["erased A", "erased B"]


@pytest.mark.parametrize("era", ERAS)
async def test_the_clients_refusal_reaches_the_model_with_its_message(era: str) -> None:
    log: list[str] = []
    model = ScriptedModel([_calls(("erase", "b", "B")), "I left B alone."])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    person = Person(approve=False, message="B stays")
    async with Client(serve(_gateway(log, spec)), mode=era, elicitation_callback=person) as client:
        result = await client.call_tool("assistant", {"prompt": "go"})
    assert result.content == [types.TextContent(text="I left B alone.")]
    assert log == []
    assert _told(model, 1) == {
        "b": "The user rejected the tool call to erase; it did not run. The user said: B stays"
    }


@pytest.mark.parametrize("era", ERAS)
async def test_the_clients_approval_reaches_the_model_with_its_message(era: str) -> None:
    """A message written with an approval was dropped: the model got the result alone."""
    log: list[str] = []
    model = ScriptedModel([_calls(("erase", "b", "B")), "Erased, once."])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    person = Person(approve=True, message="only this once")
    async with Client(serve(_gateway(log, spec)), mode=era, elicitation_callback=person) as client:
        result = await client.call_tool("assistant", {"prompt": "go"})
    assert result.content == [types.TextContent(text="Erased, once.")]
    assert log == ["erased B"]
    assert _told(model, 1) == {
        "b": "erased B\n\nThe user approved this call and said: only this once"
    }


class Unanswered:
    """The client's side of a form nobody filled in: declined, cancelled, or its own error."""

    def __init__(self, answer: types.ElicitResult | types.ErrorData) -> None:
        self.answer = answer

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return self.answer


UNANSWERED = [
    *((era, types.ElicitResult(action="decline"), "the user declined.") for era in ERAS),
    *((era, types.ElicitResult(action="cancel"), "the approval was cancelled.") for era in ERAS),
    # Only a 2025-11-25 client answers a form with an error: the SDK's 2026-07-28 round
    # raises it in the client instead.
    (
        "legacy",
        types.ErrorData(code=types.INTERNAL_ERROR, message="the form broke"),
        "the approval could not be asked: the form broke.",
    ),
]


@pytest.mark.parametrize(("era", "answer", "told"), UNANSWERED)
async def test_a_form_nobody_filled_in_is_told_to_the_model_as_what_it_was(
    era: str, answer: types.ElicitResult | types.ErrorData, told: str
) -> None:
    log: list[str] = []
    model = ScriptedModel([_calls(("erase", "b", "B")), "I left B alone."])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    async with Client(
        serve(_gateway(log, spec)), mode=era, elicitation_callback=Unanswered(answer)
    ) as client:
        result = await client.call_tool("assistant", {"prompt": "go"})
    assert result.content == [types.TextContent(text="I left B alone.")]
    assert log == []
    # Nobody "said" anything, nor "rejected" the call.
    assert _told(model, 1) == {"b": f"The tool call to erase did not run: {told}"}


@pytest.mark.parametrize("era", ERAS)
async def test_a_sub_agents_call_is_asked_and_the_sub_agent_goes_on_in_place(era: str) -> None:
    log: list[str] = []
    model = ScriptedModel(
        [
            ScriptedAnswer(
                tool_calls=[ScriptedCall(name="leaf", id="l1", arguments={"prompt": "erase W"})]
            ),
            _calls(("erase", "w1", "W")),
            "leaf: erased W",
            "lead: the leaf erased W",
        ]
    )
    lead = AgentSpec("lead", model, tools=["leaf"])
    leaf = AgentSpec("leaf", model, tools=["log"], approval=ApprovalRule(["erase"]))
    person = Person(approve=True)
    async with Client(
        serve(_gateway(log, lead, leaf)), mode=era, elicitation_callback=person
    ) as client:
        result = await client.call_tool("lead", {"prompt": "go"})
    assert result.content == [types.TextContent(text="lead: the leaf erased W")]
    assert person.asked == ['Agent \'leaf\' wants to call erase with {"text": "W"}. Allow it?']
    assert log == ["erased W"]
    assert len(model.calls) == 4  # no model call was made twice across the round


class AfterTheNote:
    """The scripted model, whose answer to the sub-agent's question waits until `note` ran:
    the sub-agent asks its question once the outer step's other call has ended."""

    def __init__(self, model: ScriptedModel, noted: anyio.Event) -> None:
        self._model = model
        self._noted = noted
        self.name = model.name

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        if messages[-1] == UserMessage(content="erase W"):
            await self._noted.wait()
        return await self._model.invoke(messages, tools, on_token=on_token)


@pytest.mark.parametrize("era", ERAS)
async def test_a_sub_agents_round_runs_none_of_the_steps_ended_calls_again(era: str) -> None:
    """Without a run store, a 2026-07-28 client's round for a sub-agent's question resumes
    the run from the state it carried: the calls of the outer step that had ended (here
    `note`, beside the sub-agent) are in it, and do not run again."""
    log: list[str] = []
    noted = anyio.Event()

    async def note(text: str) -> str:
        """Note a text."""
        log.append(text)
        noted.set()
        return f"noted {text}"

    def erase(text: str) -> str:
        """Erase a text."""
        log.append(f"erased {text}")
        return f"erased {text}"

    scripted = ScriptedModel(
        [
            ScriptedAnswer(
                tool_calls=[
                    ScriptedCall(name="note", id="n1", arguments={"text": "A"}),
                    ScriptedCall(name="leaf", id="l1", arguments={"prompt": "erase W"}),
                ]
            ),
            _calls(("erase", "w1", "W")),
            "leaf: erased W",
            "lead: done",
        ]
    )
    model = AfterTheNote(scripted, noted)
    lead = AgentSpec("lead", model, tools=["log", "leaf"])
    leaf = AgentSpec("leaf", model, tools=["log"], approval=ApprovalRule(["erase"]))
    tools = FunctionToolkit("log", [function_tool(note), function_tool(erase)])
    person = Person(approve=True)
    async with Client(
        serve(Gateway([tools], [lead, leaf])), mode=era, elicitation_callback=person
    ) as client:
        result = await client.call_tool("lead", {"prompt": "go"})
    assert result.content == [types.TextContent(text="lead: done")]
    assert log == ["A", "erased W"]  # `note` ran once, round or not
    assert _told(scripted, 3) == {"n1": "noted A", "l1": "leaf: erased W"}


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_that_cannot_be_asked_gets_the_call_refused(era: str) -> None:
    log: list[str] = []
    model = ScriptedModel([_calls(("erase", "b", "B")), "I could not."])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    async with Client(serve(_gateway(log, spec)), mode=era) as client:  # no elicitation
        result = await client.call_tool("assistant", {"prompt": "go"})
    assert result.content == [types.TextContent(text="I could not.")]
    assert log == []
    assert _told(model, 1) == {"b": f"Error: {NOBODY_TO_ASK}"}


class Decides:
    """A calling run's approver that decides every call so."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision

    async def decide(self, request: ApprovalRequest) -> Decision:
        return self.decision


@pytest.mark.parametrize(
    "decision",
    [
        Decision(approved=False, message="B stays"),
        Decision(approved=False, refused_as=DECLINED),
        Decision(approved=False, refused_as=CANCELLED),
        Decision(approved=False, refused_as=f"{NOT_ASKED}: the form broke"),
    ],
)
async def test_a_calling_gateways_decision_reaches_the_served_run_as_it_was(
    decision: Decision,
) -> None:
    """A served agent's question answered by the run of another gateway calling it: the
    decision its approver made arrives as that one (a decline stays a decline)."""
    context = RunContext(
        Tracer("r1"), TokenBudget(), PerNode(1, NodeLimits(1)), approver=Decides(decision)
    )
    asked = ApprovalRequest(call="tool 0 b", tool="erase", input={}, agents=["leaf"], item=0)
    remote = RemoteApprovals(context, call_id="l1", item=0, span_id="s1")
    answer = await remote.answer(question(asked))
    assert decision_of(answer) == decision


async def _first_round(client: Client, spec_prompt: str = "go") -> types.InputRequiredResult:
    first = await client.session.call_tool(
        "assistant", {"prompt": spec_prompt}, allow_input_required=True
    )
    assert isinstance(first, types.InputRequiredResult), first
    return first


def _approval(approve: bool) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": approve})


async def test_a_round_sent_again_gets_the_first_answer_and_runs_nothing_twice() -> None:
    """A 2026-07-28 client that lost the answer to its round and sends it again (no store)."""
    log: list[str] = []
    model = ScriptedModel([_calls(("erase", "b", "B")), "B is erased."])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    async with Client(serve(_gateway(log, spec)), elicitation_callback=Person(approve=True)) as c:
        first = await _first_round(c)
        [key] = first.input_requests or {}
        answers: dict[str, types.InputResponse] = {key: _approval(True)}
        state = first.request_state
        once, again = [
            await c.session.call_tool(
                "assistant",
                {"prompt": "go"},
                input_responses=answers,
                request_state=state,
                allow_input_required=True,
            )
            for _ in range(2)
        ]
        otherwise = await c.session.call_tool(
            "assistant",
            {"prompt": "go"},
            input_responses={key: _approval(False)},
            request_state=state,
            allow_input_required=True,
        )
    assert isinstance(once, types.CallToolResult)
    assert once.content == [types.TextContent(text="B is erased.")]
    assert again == once
    assert log == ["erased B"]  # one approval, one erase
    assert len(model.calls) == 2
    assert isinstance(otherwise, types.CallToolResult)
    assert otherwise.is_error
    assert otherwise.content == [
        types.TextContent(
            text="agent 'assistant': this round was answered already, with other answers, and "
            "its decision stands. Call the tool again to start over."
        )
    ]


async def test_an_approval_round_retried_without_its_answer_is_asked_again_and_then_decided() -> (
    None
):
    """A retry that carries no answer to the round's question decides nothing: the question
    comes again, the answer to it is taken, and the call runs once."""
    log: list[str] = []
    model = ScriptedModel([_calls(("erase", "b", "B")), "B is erased."])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    async with Client(serve(_gateway(log, spec)), elicitation_callback=Person(approve=True)) as c:
        first = await _first_round(c)
        [key] = first.input_requests or {}
        again = await c.session.call_tool(
            "assistant",
            {"prompt": "go"},
            input_responses={},
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(again, types.InputRequiredResult)
        assert list(again.input_requests or {}) == [key]
        assert log == []
        decided = await c.session.call_tool(
            "assistant",
            {"prompt": "go"},
            input_responses={key: _approval(True)},
            request_state=again.request_state,
            allow_input_required=True,
        )
    assert isinstance(decided, types.CallToolResult)
    assert decided.content == [types.TextContent(text="B is erased.")]
    assert log == ["erased B"]


async def test_a_round_whose_first_answer_was_cut_off_is_refused_when_sent_again() -> None:
    """Its request closed while the approved call ran (no store: the run stops with it), so
    the call may have run: the client starts over rather than running it twice."""
    blocker = Blocker()
    model = ScriptedModel(
        [ScriptedAnswer(tool_calls=[ScriptedCall(name="wait_here", id="w")]), "never"]
    )
    spec = AgentSpec("assistant", model, tools=["wait_here"], approval=ApprovalRule(["wait_here"]))
    gateway = Gateway([blocker.node], [spec])
    async with Client(serve(gateway), elicitation_callback=Person(approve=True)) as c:
        first = await _first_round(c)
        [key] = first.input_requests or {}
        answers: dict[str, types.InputResponse] = {key: _approval(True)}

        async def answer() -> types.CallToolResult | types.InputRequiredResult:
            return await c.session.call_tool(
                "assistant",
                {"prompt": "go"},
                input_responses=answers,
                request_state=first.request_state,
                allow_input_required=True,
            )

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(answer)
                await blocker.started.wait()
                tg.cancel_scope.cancel()  # the client goes: its request closes
            await blocker.cancelled.wait()
            again = await answer()
    assert isinstance(again, types.CallToolResult)
    assert again.is_error
    assert again.content == [
        types.TextContent(
            text="agent 'assistant': this round was answered already, but its call ended "
            "before it answered (its request was closed), and what it approved may have run. "
            "Call the tool again to start over."
        )
    ]
