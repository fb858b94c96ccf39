"""A tool's media in the agent's step: handed to the model with the observation, kept in the
run's metadata (version 2 only while it holds some), left out of chat memory and results."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import anyio
import pytest
from pydantic import JsonValue

from agent import (
    ActionResponse,
    AgentItem,
    AgentOptions,
    AgentRequestMetadata,
    AgentResult,
    EngineRequest,
    EngineResponse,
    InProcessStore,
    MediaPart,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
    ToolDefinition,
    ToolMessage,
    ToolsAgent,
    scratchpad,
)
from agent.context_window import MEDIA_TOKENS, estimate_tokens
from gateway import AgentSpec, Gateway
from tests.servers.real import filesystem_stdio
from toolkits.mcp import McpToolkit

pytestmark = pytest.mark.anyio

SHOT = ToolDefinition(name="srv__screenshot", source_node="srv", is_from_toolkit=True)
ITEM = [AgentItem(prompt="What is on screen?", session_id="s")]
LOOK = [AgentItem(prompt="look")]
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
IMAGE = MediaPart(type="image", media_type="image/png", data=PNG)
SEEN = "[image: image/png, 70 bytes]"


def shoot(n: int = 1) -> ScriptedAnswer:
    return ScriptedAnswer(
        tool_calls=[ScriptedCall(name=SHOT.name, arguments={"n": i}) for i in range(n)]
    )


def answered(request: EngineRequest, *media: MediaPart) -> EngineResponse:
    responses = [
        ActionResponse(action=action, data={"response": SEEN}, media=media)
        for action in request.actions
    ]
    return EngineResponse(action_responses=responses, metadata=request.metadata)


def tool_messages(model: ScriptedModel, call: int) -> list[ToolMessage]:
    return [m for m in model.calls[call][0] if isinstance(m, ToolMessage)]


async def test_the_model_gets_the_media_and_memory_keeps_the_text() -> None:
    model = ScriptedModel([shoot(), shoot(), "a red pixel"])
    memory = SessionMemory(InProcessStore())
    agent = ToolsAgent(model=model, tools=[SHOT], memory=memory)
    first = await agent.step(ITEM)
    assert isinstance(first, EngineRequest)
    assert first.metadata.version == 1  # nothing it holds needs more
    second = await agent.step(ITEM, answered(first, IMAGE))
    assert isinstance(second, EngineRequest)
    [seen] = tool_messages(model, 1)
    assert (seen.content, seen.media) == (SEEN, (IMAGE,))
    # The step's media travel in its metadata: version 2, which older agents refuse.
    assert second.metadata.version == 2
    stored = second.model_dump_json()
    resumed = EngineRequest.model_validate_json(stored)
    assert resumed.metadata.previous_steps[0][0].media == (IMAGE,)

    result = await agent.step(ITEM, answered(resumed))  # the second shot showed nothing
    assert isinstance(result, AgentResult)
    assert result.items[0].output == "a red pixel"
    assert [m.media for m in tool_messages(model, 2)] == [(IMAGE,), ()]
    remembered = (await memory.load("s")).messages
    tools = [m for m in remembered if isinstance(m, ToolMessage)]
    assert [(m.content, m.media) for m in tools] == [(SEEN, ()), (SEEN, ())]


@pytest.mark.integration
async def test_an_image_a_server_repeats_in_its_structured_content_is_shown_once(
    tmp_path: Path,
) -> None:
    """server-filesystem's read_media_file sends its image block and `{"content": [that
    block]}`: once the model read the base64 as text (up to 100,000 characters) beside the
    image, and chat memory kept it for every later turn."""
    (tmp_path / "dot.png").write_bytes(base64.b64decode(PNG))
    read = ScriptedCall(name="fs__read_media_file", arguments={"path": str(tmp_path / "dot.png")})
    model = ScriptedModel([ScriptedAnswer(tool_calls=[read]), "a dot", "still a dot"])
    spec = AgentSpec("viewer", model, tools=["fs"])
    async with McpToolkit("fs", filesystem_stdio(tmp_path)) as fs:
        gateway = Gateway([fs], [spec], memory=SessionMemory(InProcessStore()))
        with anyio.fail_after(30):
            assert (await gateway.run("viewer", "what is it?", session_id="s")).output == "a dot"
            await gateway.run("viewer", "and now?", session_id="s")
    [seen] = tool_messages(model, 1)
    assert (seen.content, seen.media) == (SEEN, (IMAGE,))
    [remembered] = tool_messages(model, 2)  # the next turn, from memory
    assert (remembered.content, remembered.media) == (SEEN, ())


async def test_results_say_what_media_there_was_without_their_bytes() -> None:
    model = ScriptedModel([shoot(), "done"])
    agent = ToolsAgent(
        model=model, tools=[SHOT], options=AgentOptions(return_intermediate_steps=True)
    )
    first = await agent.step(LOOK)
    assert isinstance(first, EngineRequest)
    result = await agent.step(LOOK, answered(first, IMAGE))
    assert isinstance(result, AgentResult)
    [step] = result.items[0].steps or []
    assert (step.observation, step.media) == (SEEN, ())
    assert "media" not in result.model_dump_json()


async def test_a_run_stored_before_media_existed_resumes() -> None:
    """Metadata as version 1 wrote it: no `media` anywhere."""
    model = ScriptedModel([shoot(), "done"])
    agent = ToolsAgent(model=model, tools=[SHOT])
    request = await agent.step(LOOK)
    assert isinstance(request, EngineRequest)
    action = request.actions[0].model_dump(mode="json")
    pending = request.metadata.pending[0].model_dump(mode="json")
    old: dict[str, JsonValue] = {
        "action_responses": [{"action": action, "data": {"response": "ok"}, "error": None}],
        "metadata": {"version": 1, "pending": {"0": pending}, "iteration_count": 1,
                     "iterations": {"0": 1}},
    }  # fmt: skip
    response = EngineResponse.model_validate_json(json.dumps(old))
    result = await agent.step(LOOK, response)
    assert isinstance(result, AgentResult)
    assert result.items[0].output == "done"
    assert tool_messages(model, 1)[0].content == "ok"


async def test_a_result_without_media_is_stored_as_before() -> None:
    """No `media` key where there are none: what older versions read, and what a resumed
    run's recorded model calls are looked up by, stays the same."""
    model = ScriptedModel([shoot(), "done"])
    agent = ToolsAgent(model=model, tools=[SHOT])
    request = await agent.step(LOOK)
    assert isinstance(request, EngineRequest)
    response = EngineResponse(
        action_responses=[ActionResponse(action=request.actions[0], data="ok")],
        metadata=request.metadata,
    )
    assert "media" not in response.model_dump_json()
    await agent.step(LOOK, response)
    message = tool_messages(model, 1)[0]
    assert message.model_dump() == {
        "role": "tool", "tool_call_id": message.tool_call_id, "name": SHOT.name, "content": "ok"
    }  # fmt: skip


async def test_a_call_carries_the_newest_media_up_to_its_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scratchpad, "MEDIA_BYTES_PER_CALL", IMAGE.size * 2)
    model = ScriptedModel([shoot(2), shoot(), "done"])
    agent = ToolsAgent(model=model, tools=[SHOT])
    items = LOOK
    first = await agent.step(items)
    assert isinstance(first, EngineRequest)
    second = await agent.step(items, answered(first, IMAGE))
    assert isinstance(second, EngineRequest)
    assert [m.media for m in tool_messages(model, 1)] == [(IMAGE,), (IMAGE,)]
    await agent.step(items, answered(second, IMAGE))
    # three images now, room for two: the oldest is left out (its text still says it was there)
    messages = tool_messages(model, 2)
    assert [m.media for m in messages] == [(), (IMAGE,), (IMAGE,)]
    assert messages[0].content == SEEN


def test_media_count_towards_the_context_window_estimate() -> None:
    plain = ToolMessage(tool_call_id="c", name="t", content=SEEN)
    shown = plain.model_copy(update={"media": (IMAGE, IMAGE)})
    assert estimate_tokens([shown], ())[0] == estimate_tokens([plain], ())[0] + 2 * MEDIA_TOKENS


def test_metadata_of_unknown_versions_is_still_refused() -> None:
    with pytest.raises(
        ValueError, match="version 8; this agent resumes versions 1, 2, 3, 4, 5, 6 and 7 only"
    ):
        AgentRequestMetadata.model_validate({"version": 8})
