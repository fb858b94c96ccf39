"""What the agent a conversation is handed to is asked (README, "Handoffs").

The user's message as it came, with the handing agent's `context` (`handoff_prompt`), after
the conversation before it: the handing item's own history (a caller that keeps it, as an
OpenAI-style client does), else its session's as the handing agent's memory gives it to its
model (its window of turns, its summary). The turn in progress is not part of it: the handing
agent's calls of this turn reach the specialist only through what it writes in `context`.
The item is made once: a run stopped inside the specialist resumes with the one stored.
"""

from __future__ import annotations

from agent import Action, AgentItem, ChatMemory, ChatMessage

from .run_state import RunState

__all__ = ["handed_item"]


async def handed_item(
    prompt: str, state: RunState, action: Action, memory: ChatMemory | None
) -> AgentItem:
    """The one item of the agent that `action` (of the run `state`) hands its item to: asked
    `prompt` after that item's conversation so far, with its context. Raises
    `MemoryStoreError` when the session cannot be read (the run stops, as when the handing
    agent's own history cannot be)."""
    item = state.items[action.item_index]
    history: list[ChatMessage] = []
    if item.history is not None:
        history = list(item.history)
    elif memory is not None and item.session_id is not None:
        history = list((await memory.load(item.session_id)).messages)
    return AgentItem(prompt=prompt, context=item.context, history=history or None)
