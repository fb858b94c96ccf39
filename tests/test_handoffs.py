"""Handoffs: an agent hands the conversation to another, whose answer is the answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from io import StringIO
from pathlib import Path

import pytest
from pydantic import JsonValue

from agent import (
    AgentItem,
    AgentOptions,
    AssistantMessage,
    ChatMessage,
    OutputSchema,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    ToolMessage,
    UserMessage,
)
from agent.errors import MemoryStoreError
from agent.memory import InProcessStore, SessionMemory, SQLiteStore, store_from_url
from gateway import AgentSpec, Gateway, RunState, TraceEvent
from gateway.approval import ApprovalRequest, ApprovalRule, Decision
from gateway.assembly import open_gateway
from gateway.config import parse_config
from gateway.errors import ConfigError
from gateway.trace import TracePrinter
from toolkits import FunctionToolkit, calculator, function_tool

pytestmark = pytest.mark.anyio

QUESTION = "Why was I charged twice in March?"
ANSWER = "The second charge was a pre-authorisation; it is released within 3 days."


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


def calls(*pairs: tuple[str, dict[str, JsonValue]]) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=n, arguments=a) for n, a in pairs])


def told(model: ScriptedModel, call: int) -> list[str]:
    """What the model read of its tool calls in its `call`th call."""
    return [m.content for m in model.calls[call][0] if isinstance(m, ToolMessage)]


def support(
    lead: ScriptedModel,
    billing: ScriptedModel,
    *,
    refunds: ScriptedModel | None = None,
    **lead_options: object,
) -> Gateway:
    specs = [
        AgentSpec(
            "triage",
            lead,
            tools=["calculator"],
            handoffs=["billing", "refunds"],
            **lead_options,  # type: ignore[arg-type]
        ),
        AgentSpec("billing", billing, description="Answers billing questions."),
        AgentSpec("refunds", refunds or ScriptedModel([])),
    ]
    return Gateway([FunctionToolkit("calculator", [calculator])], specs)


async def test_the_specialists_answer_is_the_answer_with_no_further_call_of_the_lead() -> None:
    lead = ScriptedModel([call("billing")])  # a second call of it would find no answer
    billing = ScriptedModel([ANSWER])
    result = await support(lead, billing).run("triage", QUESTION)

    assert result.error is None
    assert result.output == ANSWER
    assert result.items[0].handoff == "billing"
    assert len(lead.calls) == 1
    # The specialist reads the user's message as it came, not the lead's paraphrase.
    asked = [m.content for m in billing.calls[0][0] if isinstance(m, UserMessage)]
    assert asked == [QUESTION]
    offered = {tool.name: tool for tool in lead.calls[0][1]}
    assert offered["billing"].hands_off
    assert offered["billing"].description.startswith("Hand the conversation over to")
    assert "Answers billing questions." in offered["billing"].description
    assert not offered["calculator"].hands_off
    assert result.usage.requests == 2  # the lead's one call and the specialist's


async def test_the_leads_context_goes_with_the_users_message() -> None:
    lead = ScriptedModel([call("billing", context="The user is on the Pro plan.")])
    billing = ScriptedModel([ANSWER])
    await support(lead, billing).run("triage", QUESTION)
    asked = [m.content for m in billing.calls[0][0] if isinstance(m, UserMessage)]
    assert asked == [
        f"{QUESTION}\n\n(Context from the agent 'triage', which handed this over: "
        "The user is on the Pro plan.)"
    ]


def said(messages: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


EARLIER = [
    ("user", "Hi, I am Ana."),
    ("assistant", "Hello Ana, how can I help?"),
    ("user", "My plan is Pro."),
    ("assistant", "Noted: Pro."),
]


@pytest.fixture(params=["memory://", "sqlite"])
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionMemory]:
    url = f"sqlite:///{tmp_path / 'memory.db'}" if request.param == "sqlite" else request.param
    store = store_from_url(url)
    try:
        yield SessionMemory(store)
    finally:
        if isinstance(store, SQLiteStore):
            await store.aclose()


async def test_the_specialist_reads_the_sessions_earlier_turns(memory: SessionMemory) -> None:
    lead = ScriptedModel([EARLIER[1][1], EARLIER[3][1], call("billing", context="Pro plan.")])
    billing = ScriptedModel([ANSWER])
    gateway = support(lead, billing)
    gateway.memory = memory
    for question in ("Hi, I am Ana.", "My plan is Pro.", QUESTION):
        result = await gateway.run("triage", question, session_id="s1")
    assert (result.output, result.items[0].handoff) == (ANSWER, "billing")

    # The conversation so far, then the user's message as it came (and the lead's context).
    sent = billing.calls[0][0]
    assert sent[0].role == "system"
    asked = f"{QUESTION}\n\n(Context from the agent 'triage', which handed this over: Pro plan.)"
    assert said(sent[1:]) == [*EARLIER, ("user", asked)]
    # The session goes on as the lead's, the specialist's answer its last turn.
    history = (await memory.load("s1")).messages
    assert said(history) == [*EARLIER, ("user", QUESTION), ("assistant", ANSWER)]


async def test_the_specialist_reads_the_window_and_summary_the_lead_reads(tmp_path: Path) -> None:
    memory = SessionMemory(InProcessStore(), turns=1, summarise=True)
    lead = ScriptedModel(
        [EARLIER[1][1], EARLIER[3][1], "Ana greeted us.", call("billing")]  # 3rd: the summary
    )
    billing = ScriptedModel([ANSWER])
    gateway = support(lead, billing)
    gateway.memory = memory
    for question in ("Hi, I am Ana.", "My plan is Pro.", QUESTION):
        await gateway.run("triage", question, session_id="s1")
    system, *rest = billing.calls[0][0]
    assert system.content.endswith("Ana greeted us.")  # the summary joins its system message
    assert said(rest) == [*EARLIER[2:], ("user", QUESTION)]


async def test_with_handoff_history_off_the_specialist_reads_the_message_alone() -> None:
    lead = ScriptedModel([EARLIER[1][1], call("billing")])
    billing = ScriptedModel([ANSWER])
    gateway = support(lead, billing, handoff_history=False)
    gateway.memory = SessionMemory(InProcessStore())
    for question in ("Hi, I am Ana.", QUESTION):
        await gateway.run("triage", question, session_id="s1")
    assert said(billing.calls[0][0][1:]) == [("user", QUESTION)]


async def test_an_items_own_history_reaches_the_specialist() -> None:
    lead, billing = ScriptedModel([call("billing")]), ScriptedModel([ANSWER])
    history: list[ChatMessage] = [
        UserMessage(content="Hi, I am Ana."),
        AssistantMessage(content="Hello Ana, how can I help?"),
    ]
    item = AgentItem(prompt=QUESTION, history=history)
    await support(lead, billing).run("triage", [item])
    assert said(billing.calls[0][0][1:]) == [*EARLIER[:2], ("user", QUESTION)]


async def test_the_other_calls_of_the_answer_run_then_the_handoff_answers() -> None:
    ran: list[str] = []

    @function_tool(name="calculator")
    def counting(expression: str) -> str:
        ran.append(expression)
        return "6"

    lead = ScriptedModel([calls(("calculator", {"expression": "2 * 3"}), ("billing", {}))])
    spec = AgentSpec(
        "triage",
        lead,
        tools=["calculator"],
        handoffs=["billing"],
        options=AgentOptions(return_intermediate_steps=True),
    )
    gateway = Gateway(
        [FunctionToolkit("calculator", [counting])],
        [spec, AgentSpec("billing", ScriptedModel([ANSWER]))],
    )
    result = await gateway.run("triage", QUESTION)
    assert result.output == ANSWER
    assert ran == ["2 * 3"]
    steps = result.items[0].steps or []
    assert [(s.tool, s.observation) for s in steps] == [("calculator", "6"), ("billing", ANSWER)]


async def test_the_trace_notes_to_whom_the_item_was_handed_after_the_specialist() -> None:
    events: list[TraceEvent] = []

    async def keep(event: TraceEvent) -> None:
        events.append(event)

    lines = StringIO()
    lead, billing = ScriptedModel([call("billing")]), ScriptedModel([ANSWER])
    await support(lead, billing).run("triage", QUESTION, hooks=[keep, TracePrinter(lines)])

    noted = [(e.kind, e.name, e.output) for e in events if e.phase == "note"]
    assert noted == [("agent", "triage", {"handed_off_to": "billing", "item": 0})]
    order = [(e.kind, e.name, e.phase) for e in events if e.phase != "start"]
    at = order.index(("agent", "triage", "note"))
    assert order[at - 1] == ("tool", "billing", "end")  # the specialist's call ended first
    assert order[at + 1] == ("agent", "triage", "end")
    assert 'agent triage out={"handed_off_to":"billing","item":0}' in lines.getvalue()


async def test_a_streamed_handoffs_tokens_say_they_are_the_answers_an_agent_tools_do_not() -> None:
    tokens: list[tuple[str, str, bool]] = []
    models: dict[str, str] = {}

    async def keep(event: TraceEvent) -> None:
        if event.phase == "start" and event.kind == "model":
            models[event.id] = event.name
        elif event.phase == "token" and isinstance(event.output, dict):
            text, answer = event.output["text"], event.output.get("answer") is True
            tokens.append((models[event.parent_id or ""], str(text), answer))

    asking = ScriptedAnswer(
        content="Let me check.",
        tool_calls=[ScriptedCall(name="helper", arguments={"prompt": "?"})],
    )
    specs = [
        AgentSpec("triage", ScriptedModel([asking, call("billing")], name="lead"),
                  tools=["helper"], handoffs=["billing"]),
        AgentSpec("billing", ScriptedModel([ANSWER], name="billing")),
        AgentSpec("helper", ScriptedModel(["Helper words here."], name="helper")),
    ]  # fmt: skip
    result = await Gateway([], specs).run("triage", QUESTION, hooks=[keep], stream=True)

    assert result.output == ANSWER
    answer = [text for _, text, said in tokens if said]
    assert "".join(answer) == "Let me check." + ANSWER  # the preamble, then the handoff's
    assert len([m for m, _, said in tokens if m == "billing" and said]) > 2  # word by word
    assert {m for m, _, said in tokens if not said} == {"helper"}


async def test_a_failed_handoff_is_noted_for_the_answers_readers() -> None:
    events: list[TraceEvent] = []

    async def keep(event: TraceEvent) -> None:
        events.append(event)

    lead = ScriptedModel([call("billing"), "I will answer myself."])
    cut = ScriptedAnswer(content="Your second charge", stop_reason="max_tokens")
    result = await support(lead, ScriptedModel([cut])).run(
        "triage", QUESTION, hooks=[keep], stream=True
    )
    assert result.output == "I will answer myself."
    noted = [e for e in events if isinstance(e.output, dict) and "handoff_failed" in e.output]
    assert len(noted) == 1
    note = noted[0]
    assert (note.kind, note.name, note.phase) == ("agent", "triage", "note")
    assert isinstance(note.output, dict)
    assert note.output["handoff_failed"] == "billing"
    assert str(note.output["error"]).startswith("the answer was cut off at the model")
    tool = next(e for e in events if e.id == note.parent_id)  # under the handoff's call
    assert (tool.kind, tool.name) == ("tool", "billing")


async def test_a_failed_handoff_is_not_noted_the_one_that_answers_is() -> None:
    events: list[TraceEvent] = []

    async def keep(event: TraceEvent) -> None:
        events.append(event)

    lead = ScriptedModel([call("billing"), call("refunds")])
    billing = ScriptedModel([""])  # an empty answer: the handoff failed
    refunds = ScriptedModel([ANSWER])
    result = await support(lead, billing, refunds=refunds).run("triage", QUESTION, hooks=[keep])
    assert result.items[0].handoff == "refunds"
    handed = [
        e.output for e in events if isinstance(e.output, dict) and "handed_off_to" in e.output
    ]
    assert handed == [{"handed_off_to": "refunds", "item": 0}]


async def test_two_handoffs_in_one_answer_the_first_is_made_the_other_is_refused() -> None:
    lead = ScriptedModel([calls(("billing", {}), ("refunds", {}))])
    refunds = ScriptedModel([])  # asked, it would fail the run: it has no answer
    result = await support(
        lead, ScriptedModel([ANSWER]), refunds=refunds,
        options=AgentOptions(return_intermediate_steps=True),
    ).run("triage", QUESTION)  # fmt: skip
    assert result.output == ANSWER
    assert result.items[0].handoff == "billing"
    assert refunds.calls == []
    steps = {s.tool: s.observation for s in result.items[0].steps or []}
    assert steps["refunds"] == (
        "Error: not made: this answer hands the conversation to 'billing' (its first "
        "handoff); one answer hands it to one agent only"
    )


async def test_a_handoff_whose_arguments_are_refused_does_not_block_the_next_one() -> None:
    """Once the refused first handoff was still the answer's first: the second was not made,
    told the conversation went to the first, and neither was made."""
    lead = ScriptedModel([calls(("billing", {"context": 5}), ("refunds", {}))])
    billing = ScriptedModel([])  # asked, it would fail the run: it has no answer
    result = await support(
        lead, billing, refunds=ScriptedModel([ANSWER]),
        options=AgentOptions(return_intermediate_steps=True),
    ).run("triage", QUESTION)  # fmt: skip
    assert (result.output, result.items[0].handoff) == (ANSWER, "refunds")
    assert billing.calls == []
    steps = {s.tool: s.observation for s in result.items[0].steps or []}
    assert steps["billing"] == (
        "Error: `context` must be text (what the agent needs beyond the user's message), not a "
        "number: call again with it as a string, or without it"
    )


async def test_a_failed_handoff_is_told_to_the_lead_which_answers_itself() -> None:
    lead = ScriptedModel([call("billing"), "Billing is not answering; please write to us."])
    billing = ScriptedModel([""])  # an empty answer fails its item
    result = await support(lead, billing).run("triage", QUESTION)
    assert result.output == "Billing is not answering; please write to us."
    assert result.items[0].handoff is None
    assert told(lead, 1) == [
        "Error: agent 'billing' gave an empty answer (the model's final answer was empty)"
    ]


async def test_a_handoff_that_keeps_failing_is_told_to_the_lead_as_a_failure_never_the_answer() -> (
    None
):
    # The third identical call is answered by the repeat guard, not made: its notice is no
    # answer of the specialist's, so the lead reads it as the failure it is and goes on.
    lead = ScriptedModel([call("billing"), call("billing"), call("billing"), "Try again later."])
    billing = ScriptedModel(["", ""])  # an empty answer fails its item, each time
    gateway = support(lead, billing)
    gateway.memory = SessionMemory(InProcessStore())
    result = await gateway.run("triage", QUESTION, session_id="s1")

    assert (result.error, result.output) == (None, "Try again later.")
    assert result.items[0].handoff is None
    assert len(lead.calls) == 4
    assert len(billing.calls) == 2
    notice = told(lead, 3)[-1]
    assert notice.startswith("Error: Not run again: you already called 'billing'")
    assert "Its result was: Error: agent 'billing' gave an empty answer" in notice
    history = (await gateway.memory.load("s1")).messages
    assert (history[-1].role, history[-1].content) == ("assistant", "Try again later.")


async def test_a_handoffs_bad_arguments_are_refused_and_told_not_dropped() -> None:
    lead = ScriptedModel(
        [
            calls(("billing", {"context": 42})),
            calls(("billing", {"context": {"plan": "Pro"}, "note": 1})),
            call("billing", context=None),  # no context: the user's message alone
        ]
    )
    billing = ScriptedModel([ANSWER])
    result = await support(lead, billing).run("triage", QUESTION)
    assert (result.output, result.items[0].handoff) == (ANSWER, "billing")
    assert told(lead, 1) == [
        "Error: `context` must be text (what the agent needs beyond the user's message), not a "
        "number: call again with it as a string, or without it"
    ]
    assert told(lead, 2)[-1] == (
        "Error: a handoff takes one optional argument, `context` (text), not `note`: the "
        "user's message is passed on as it is; call again with `context` alone, or none"
    )
    assert len(billing.calls) == 1  # only the call it could read was made
    asked = [m.content for m in billing.calls[0][0] if isinstance(m, UserMessage)]
    assert asked == [QUESTION]


class Person:
    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.asked: list[str] = []

    async def decide(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request.tool)
        return Decision(approved=self.approve, message=None if self.approve else "not now")


async def test_a_denied_handoff_is_a_failed_call_not_an_answer() -> None:
    lead = ScriptedModel([call("billing"), "I cannot pass you to billing."])
    billing = ScriptedModel([])
    gateway = support(lead, billing, approval=ApprovalRule(["billing"]))
    person = Person(approve=False)
    result = await gateway.run("triage", QUESTION, approver=person)
    assert person.asked == ["billing"]
    assert result.output == "I cannot pass you to billing."
    assert billing.calls == []
    assert told(lead, 1) == [
        "Error: The user rejected the tool call to billing; it did not run. The user said: not now"
    ]


async def test_an_approved_handoff_answers() -> None:
    lead = ScriptedModel([call("billing")])
    gateway = support(lead, ScriptedModel([ANSWER]), approval=ApprovalRule(["billing"]))
    result = await gateway.run("triage", QUESTION, approver=Person(approve=True))
    assert result.output == ANSWER


TICKET = OutputSchema.from_json_schema(
    {
        "type": "object",
        "properties": {"team": {"type": "string"}, "reply": {"type": "string"}},
        "required": ["team", "reply"],
    }
)


async def test_with_an_output_schema_the_handoffs_answer_is_the_structured_answer() -> None:
    lead = ScriptedModel([call("billing")])
    billing = ScriptedModel(
        [call("final_result", team="billing", reply="Refunded.")]  # its own schema's tool
    )
    gateway = Gateway(
        [],
        [
            AgentSpec("triage", lead, handoffs=["billing"], options=AgentOptions(output=TICKET)),
            AgentSpec("billing", billing, options=AgentOptions(output=TICKET)),
        ],
    )
    events: list[TraceEvent] = []

    async def keep(event: TraceEvent) -> None:
        events.append(event)

    result = await gateway.run("triage", QUESTION, hooks=[keep], stream=True)
    assert result.items[0].structured == {"team": "billing", "reply": "Refunded."}
    assert result.items[0].handoff == "billing"
    assert not [e for e in events if isinstance(e.output, dict) and "handoff_failed" in e.output]


async def test_an_answer_that_does_not_fit_the_leads_schema_goes_back_to_the_lead() -> None:
    lead = ScriptedModel([call("billing"), call("final_result", team="triage", reply="Sorry.")])
    gateway = Gateway(
        [],
        [
            AgentSpec("triage", lead, handoffs=["billing"], options=AgentOptions(output=TICKET)),
            AgentSpec("billing", ScriptedModel(["plain text"])),
        ],
    )
    events: list[TraceEvent] = []

    async def keep(event: TraceEvent) -> None:
        events.append(event)

    result = await gateway.run("triage", QUESTION, hooks=[keep], stream=True)
    assert result.items[0].structured == {"team": "triage", "reply": "Sorry."}
    assert result.items[0].handoff is None
    (said,) = told(lead, 1)
    assert said.startswith("Error: the answer of 'billing' does not fit the output schema")
    assert said.endswith("It said: plain text")
    # Its streamed "plain text" was not the answer: the streams' readers are told.
    failed = [
        e.output for e in events if isinstance(e.output, dict) and "handoff_failed" in e.output
    ]
    assert len(failed) == 1
    assert str(failed[0]["error"]).startswith(
        "the answer does not fit the output schema of 'triage'"
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_the_session_keeps_the_question_and_the_answer_once(stream: bool) -> None:
    memory = SessionMemory(InProcessStore())
    lead = ScriptedModel([call("billing"), "Anything else?"])
    billing = ScriptedModel([ANSWER])
    gateway = support(lead, billing)
    gateway.memory = memory
    streamed: list[str] = []

    async def keep(event: TraceEvent) -> None:
        if event.phase == "token" and isinstance(event.output, dict) and event.output["answer"]:
            streamed.append(str(event.output["text"]))

    await gateway.run("triage", QUESTION, session_id="s1", stream=stream, hooks=[keep])
    assert "".join(streamed) == (ANSWER if stream else "")  # streamed, the session the same

    history = (await memory.load("s1")).messages
    assert [(m.role, m.content) for m in history] == [("user", QUESTION), ("assistant", ANSWER)]
    await gateway.run("triage", "Thanks!", session_id="s1")
    # The next turn reads the answer as the lead's own, and no dangling call.
    sent = [(m.role, getattr(m, "content", "")) for m in lead.calls[1][0]]
    assert sent[1:] == [("user", QUESTION), ("assistant", ANSWER), ("user", "Thanks!")]


async def test_the_session_keeps_the_other_calls_of_the_answer_that_handed_off() -> None:
    """As for any turn, each call with its result is kept; the handoff's call is not (its
    result is the turn's answer, kept once)."""
    memory = SessionMemory(InProcessStore())
    lead = ScriptedModel(
        [calls(("calculator", {"expression": "2 * 3"}), ("billing", {})), "Anything else?"]
    )
    gateway = support(lead, ScriptedModel([ANSWER]))
    gateway.memory = memory
    await gateway.run("triage", QUESTION, session_id="s1")

    history = (await memory.load("s1")).messages
    assert [(m.role, m.content) for m in history] == [
        ("user", QUESTION),
        ("assistant", ""),
        ("tool", "6"),
        ("assistant", ANSWER),
    ]
    handing = history[1]
    assert isinstance(handing, AssistantMessage)
    assert [(c.name, c.arguments) for c in handing.tool_calls] == [
        ("calculator", {"expression": "2 * 3"})
    ]
    await gateway.run("triage", "Thanks!", session_id="s1")
    # The next turn reads the calculator's call and result, and no dangling handoff call.
    sent = [(m.role, getattr(m, "content", "")) for m in lead.calls[1][0]]
    assert sent[1:] == [
        ("user", QUESTION),
        ("assistant", ""),
        ("tool", "6"),
        ("assistant", ANSWER),
        ("user", "Thanks!"),
    ]


class SavesAfterOneFailure(InProcessStore):
    """A store whose first save fails, as a database that is briefly away."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def append(
        self, session_id: str, key: str, messages: Sequence[ChatMessage], tokens: Sequence[int]
    ) -> bool:
        if not self.failed:
            self.failed = True
            raise MemoryStoreError("the store is away")
        return await super().append(session_id, key, messages, tokens)


async def test_a_turn_that_failed_to_save_is_saved_on_resume_with_no_call_of_the_lead() -> None:
    store = SavesAfterOneFailure()
    lead, billing = ScriptedModel([call("billing")]), ScriptedModel([ANSWER])
    gateway = support(lead, billing)
    gateway.memory = SessionMemory(store)
    states: list[RunState] = []

    async def keep(state: RunState) -> None:
        states.append(state)

    with pytest.raises(MemoryStoreError):
        await gateway.run("triage", QUESTION, session_id="s1", checkpoint=keep)
    state = RunState.model_validate_json(states[-1].model_dump_json())
    # The state names the handoff that answered (not a step's text): version 5 while it does.
    assert state.request is not None
    assert state.request.metadata.handed_off == {0: "call_1"}
    assert state.request.metadata.version == 5
    fresh_lead = ScriptedModel([])  # asked, it would stop the run: it has no answer
    again = support(fresh_lead, ScriptedModel([]))
    again.memory = gateway.memory
    result = await again.resume(state)
    assert (result.output, result.items[0].handoff) == (ANSWER, "billing")
    assert fresh_lead.calls == []
    history = (await gateway.memory.load("s1")).messages
    assert [(m.role, m.content) for m in history] == [("user", QUESTION), ("assistant", ANSWER)]


async def test_a_run_stopped_inside_the_specialist_resumes_there_and_the_lead_is_not_asked() -> (
    None
):
    class Stop(Exception):
        pass

    stored: list[str] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(state.model_dump_json())
        billing = state.children.get("call_1")
        if billing is not None and billing.response is not None:  # its calculator ran
            raise Stop

    lead = ScriptedModel([call("billing")])
    billing = ScriptedModel([call("calculator", expression="2 * 21"), "unused"])
    specs = [
        AgentSpec("triage", lead, handoffs=["billing"]),
        AgentSpec("billing", billing, tools=["calculator"]),
    ]
    toolkit = FunctionToolkit("calculator", [calculator])
    with pytest.raises(Stop):
        await Gateway([toolkit], specs).run("triage", QUESTION, checkpoint=checkpoint)

    state = RunState.model_validate_json(stored[-1])
    fresh_lead, fresh_billing = ScriptedModel([]), ScriptedModel(["It is 42."])
    fresh = Gateway(
        [toolkit],
        [
            AgentSpec("triage", fresh_lead, handoffs=["billing"]),
            AgentSpec("billing", fresh_billing, tools=["calculator"]),
        ],
    )
    result = await fresh.resume(state)
    assert result.output == "It is 42."
    assert result.items[0].handoff == "billing"
    assert fresh_lead.calls == []
    assert told(fresh_billing, 0) == ["42"]


async def test_a_run_resumed_inside_the_specialist_keeps_the_history_it_was_handed() -> None:
    class Stop(Exception):
        pass

    stored: list[str] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(state.model_dump_json())
        billing = state.children.get("call_1")
        if billing is not None and billing.response is not None:  # its calculator ran
            raise Stop

    def specs(lead: ScriptedModel, billing: ScriptedModel) -> list[AgentSpec]:
        return [
            AgentSpec("triage", lead, handoffs=["billing"]),
            AgentSpec("billing", billing, tools=["calculator"]),
        ]

    toolkit = FunctionToolkit("calculator", [calculator])
    memory = SessionMemory(InProcessStore())
    lead = ScriptedModel([EARLIER[1][1], call("billing")])
    billing = ScriptedModel([call("calculator", expression="2 * 21"), "unused"])
    gateway = Gateway([toolkit], specs(lead, billing), memory=memory)
    await gateway.run("triage", EARLIER[0][1], session_id="s1")
    with pytest.raises(Stop):
        await gateway.run("triage", QUESTION, session_id="s1", checkpoint=checkpoint)

    # Resumed where the session's store is another (empty) one: the history came with the run.
    fresh_billing = ScriptedModel(["It is 42."])
    fresh = Gateway(
        [toolkit], specs(ScriptedModel([]), fresh_billing), memory=SessionMemory(InProcessStore())
    )
    result = await fresh.resume(RunState.model_validate_json(stored[-1]))
    assert (result.output, result.items[0].handoff) == ("It is 42.", "billing")
    sent = said(fresh_billing.calls[0][0][1:])
    assert sent[:3] == [*EARLIER[:2], ("user", QUESTION)]


async def test_items_hand_off_on_their_own_and_the_state_says_so_as_version_4() -> None:
    lead = ScriptedModel([call("billing"), "Hello to you too."])
    billing = ScriptedModel([ANSWER])
    states: list[RunState] = []

    async def keep(state: RunState) -> None:
        states.append(state)

    gateway = support(lead, billing, options=AgentOptions(batch_size=1))
    items = [AgentItem(prompt=QUESTION), AgentItem(prompt="Hello!")]
    result = await gateway.run("triage", items, checkpoint=keep)

    assert [(i.output, i.handoff) for i in result.items] == [
        (ANSWER, "billing"),
        ("Hello to you too.", None),
    ]
    # While the first item's result waits in the run's state, the state is of version 4.
    held = [s.request.metadata for s in states if s.request and s.request.metadata.finished_items]
    assert held
    assert all(m.version == 4 for m in held)
    assert held[0].finished_items[0].handoff == "billing"
    # Stored and read back, it still says who answered.
    again = RunState.model_validate_json(states[-1].model_dump_json())
    assert again == states[-1]


async def test_in_a_chain_the_handoff_is_the_agent_that_answered_also_once_resumed() -> None:
    class Stop(Exception):
        pass

    def chain(lead: ScriptedModel, billing: ScriptedModel) -> Gateway:
        specs = [
            AgentSpec("triage", lead, handoffs=["billing"], options=AgentOptions(batch_size=1)),
            AgentSpec("billing", billing, handoffs=["refunds"]),
            AgentSpec("refunds", ScriptedModel(["Refunded."])),
        ]
        return Gateway([], specs)

    stored: list[str] = []
    events: list[TraceEvent] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(state.model_dump_json())
        if state.request is not None and state.request.metadata.finished_items:
            raise Stop  # the first item answered, the second not begun

    async def keep(event: TraceEvent) -> None:
        events.append(event)

    items = [AgentItem(prompt="Money back"), AgentItem(prompt="Hello")]
    gateway = chain(ScriptedModel([call("billing")]), ScriptedModel([call("refunds")]))
    with pytest.raises(Stop):
        await gateway.run("triage", items, checkpoint=checkpoint, hooks=[keep])
    # Each hop is told as it is made: the trace says who handed to whom.
    handed = [(e.name, e.output) for e in events if isinstance(e.output, dict)]
    assert [(name, out["handed_off_to"]) for name, out in handed if "handed_off_to" in out] == [
        ("billing", "refunds"),
        ("triage", "billing"),
    ]
    state = RunState.model_validate_json(stored[-1])
    assert state.handed_on == {0: "refunds"}
    result = await chain(ScriptedModel(["Hello to you."]), ScriptedModel([])).resume(state)
    assert [(i.output, i.handoff) for i in result.items] == [
        ("Refunded.", "refunds"),
        ("Hello to you.", None),
    ]


async def test_config_offers_handoffs_as_tools_that_hand_off() -> None:
    config = parse_config(
        {
            "agents": {
                "triage": {"handoffs": ["billing"]},
                "billing": {"description": "Answers billing questions."},
                "quiet": {"handoffs": ["billing"], "handoff_history": False},
            },
        }
    )
    assert config.nodes_of("triage") == set()
    assert set(config.reached_from(["triage"])) == {"triage", "billing"}
    async with open_gateway(config) as gateway:
        spec = gateway.agents["triage"]
        assert spec.handoffs == ["billing"]
        assert list(await gateway.tools_for(spec)) == ["billing"]
        assert spec.handoff_history
        assert not gateway.agents["quiet"].handoff_history


@pytest.mark.parametrize(
    ("agents", "said"),
    [
        (
            {"triage": {"handoffs": ["biling"]}, "billing": {}},
            "agents.triage.handoffs: no agent named 'biling'; did you mean 'billing'?",
        ),
        (
            {"triage": {"handoffs": ["triage"]}},
            "agents.triage.handoffs: an agent cannot hand the conversation to itself",
        ),
        (
            {
                "triage": {"handoffs": ["billing"], "output_schema": {"type": "object"}},
                "billing": {},
            },
            "agents.triage.handoffs: 'billing' answers without this agent's output_schema",
        ),
    ],
)
def test_config_refuses_a_handoff_that_cannot_work(agents: dict[str, JsonValue], said: str) -> None:
    with pytest.raises(ConfigError, match="handoffs") as caught:
        parse_config({"agents": agents})
    assert said in str(caught.value)


def test_a_handoff_to_no_agent_is_refused_in_python_too() -> None:
    toolkit = FunctionToolkit("calculator", [calculator])
    with pytest.raises(ConfigError, match=r"hands off to no agent: \['calculator'\]"):
        Gateway([toolkit], [AgentSpec("triage", ScriptedModel([]), handoffs=["calculator"])])


async def test_the_runs_context_reaches_the_specialists_system_message() -> None:
    lead, billing = ScriptedModel([call("billing")]), ScriptedModel([ANSWER])
    specs = [
        AgentSpec("triage", lead, handoffs=["billing"]),
        AgentSpec(
            "billing",
            billing,
            options=AgentOptions(system_message="Bill {{ context.customer }} in EUR."),
        ),
    ]
    item = AgentItem(prompt=QUESTION, context={"customer": "ACME"})
    result = await Gateway([], specs).run("triage", [item])
    assert (result.items[0].output, result.items[0].handoff) == (ANSWER, "billing")
    system = billing.calls[0][0][0]
    assert system.content == "Bill ACME in EUR."
