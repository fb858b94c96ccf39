"""What every part of one run shares, however deeply agents nest: its tracer, the chain of
agents that led here, and the token budget of the whole tree (and of a sub-agent's subtree,
when it has its own)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agent import ChatModel, Usage
from toolkits import ServerRequestHandler

from .approval import Approver
from .journal import call_key
from .limits import PerNode
from .node_slots import LENT_META_KEY
from .trace import Tracer

__all__ = [
    "HOPS_HEADER",
    "HOPS_META_KEY",
    "UNATTENDED",
    "ClientQuestions",
    "RunContext",
    "TokenBudget",
    "budget_spent",
]

HOPS_META_KEY = "agent-gateway/hops"
"""The `_meta` key of an MCP request that says how many gateways it already passed through."""

HOPS_HEADER = "x-agent-gateway-hops"
"""The HTTP header of a model request that says the same (`RunContext.depth`): a model that is
a gateway's `/v1` reads it, so gateways whose agents are each other's models end a loop."""


UNATTENDED = (
    "the tool was called by an agent whose run nobody attends: there is no person or client to ask"
)
"""Why a server's elicitation during an agent's tool call is refused, when no client is there."""


@dataclass(frozen=True, slots=True)
class ClientQuestions:
    """The MCP client attending a served run, for the elicitations of its tools' servers: who
    puts a question to it (during the run's request), and what it answers (its declared
    `elicitation` capability, as client capabilities in wire JSON)."""

    ask: ServerRequestHandler
    answerable: Mapping[str, Any]


@dataclass
class TokenBudget:
    """Tokens spent by every model call of a run tree (or of a sub-agent's subtree, within
    the budget of the tree around it: `within`), against an optional limit."""

    limit: int | None = None
    used: Usage = field(default_factory=Usage)
    around: TokenBudget | None = None
    """The budget of the tree this sub-agent's is in: charged with all this one is."""
    owner: str | None = None
    """The sub-agent whose own budget this is; None: the run's."""

    def within(self, limit: int | None, owner: str, used: Usage) -> TokenBudget:
        """The budget of sub-agent `owner`'s subtree (its own `limit`, `used` so far), inside
        this one; without a limit of its own, it spends this one."""
        if limit is None:
            return self
        return TokenBudget(limit, used, around=self, owner=owner)

    def charge(self, usage: Usage) -> None:
        self.used += usage
        if self.around is not None:
            self.around.charge(usage)

    @property
    def exceeded(self) -> bool:
        return self._own_exceeded or (self.around is not None and self.around.exceeded)

    @property
    def _own_exceeded(self) -> bool:
        return self.limit is not None and self.used.total_tokens >= self.limit

    def message(self) -> str:
        """Why the run (or the sub-agent) stopped; `budget_spent` knows it again."""
        if self.around is not None and self.around.exceeded:
            return self.around.message()  # the wider budget's: it stops more than this agent
        if self.owner is not None:
            return (
                f"Token budget ({self.limit}) of agent {self.owner!r} exceeded: it used "
                f"{self.used.total_tokens} tokens and was stopped."
            )
        return (
            f"Token budget ({self.limit}) exceeded: the run used {self.used.total_tokens} tokens "
            "and was stopped."
        )


_SPENT = re.compile(r"Token budget \(\d+\)( of agent .+)? exceeded: ")


def budget_spent(error: str | None) -> bool:
    """Whether an item's `error` is a `TokenBudget.message`: the run stopped when its budget
    was spent, before the item had its answer."""
    return error is not None and _SPENT.match(error) is not None


@dataclass(frozen=True)
class RunContext:
    tracer: Tracer
    budget: TokenBudget
    quota: PerNode
    """The calling client's share of the nodes, for every call of the run's tree."""
    chain: tuple[str, ...] = ()
    """The agents from the outermost run down to the current one."""
    path: str = ""
    """The tool calls that led to the current agent, each by its `journal.call_key` (`h1/`,
    `1:h1/m2/` under the run's item 1): a call's name in its run is its path and its own name,
    as the journal records it, so two items' calls with the same ids have two names."""
    item: int | None = None
    """The run's item the current agent works for, inside an agent run as a tool; None in
    the run's own agent, whose every call names its item."""
    hops: int = 0
    """How deep this run's request came from the gateways before us (from `_meta`): each
    gateway that relayed it, and each agent of theirs that led to it, counts one."""
    lent: tuple[str, ...] = ()
    """The slots its request's callers lent it (`node_slots`, from `_meta`), lent on by its
    calls."""
    client_model: ChatModel | None = None
    """The calling MCP client's own model, for every agent of the tree configured to use it."""
    model: ChatModel | None = None
    """The current agent's model (it also answers its tools' servers' sampling requests)."""
    stream: bool = False
    """Ask the models to stream: their text deltas become `token` trace events."""
    answers: bool = True
    """Whether the current agent's text is the run's answer's: the run's own agent, or one a
    conversation was handed to from it (its `token` events say `answer`); an agent tool's is
    not."""
    approver: Approver | None = None
    """Who decides on the calls that need a person's approval (None: nobody can)."""
    questions: ClientQuestions | str = UNATTENDED
    """Who answers its tools' servers' elicitations (the client attending a served run), or
    why nobody can."""

    @property
    def depth(self) -> int:
        """How deep this run is nested, counting agents here and what came before us (`hops`):
        what `max_depth` limits, sent on as the hop count."""
        return self.hops + len(self.chain)

    def too_deep(self, agent: str, limit: int) -> str | None:
        """Why running `agent` as a tool of the current agent would nest the run deeper than
        `limit` (`max_depth`), saying what was counted; None if it may run."""
        if self.depth < limit:
            return None
        chain = " -> ".join((*self.chain, agent))
        said = f"agent depth limit ({limit}, max_depth) reached: {chain} would be "
        if not self.hops:
            return f"{said}{self.depth + 1} agents deep"
        return (
            f"{said}{self.depth + 1} levels deep: {len(self.chain) + 1} agents here, after "
            f"{self.hops} before this gateway (each agent on the calling gateways that led "
            "here, and each gateway that relayed the request)"
        )

    def call_meta(self) -> dict[str, Any]:
        """The `_meta` for MCP calls made from this run: one more hop, the slots lent on."""
        if self.lent:
            return {HOPS_META_KEY: self.depth, LENT_META_KEY: list(self.lent)}
        return {HOPS_META_KEY: self.depth}

    def enter(self, agent: str, model: ChatModel) -> RunContext:
        return replace(self, chain=(*self.chain, agent), model=model)

    def item_of(self, own: int) -> int:
        """The run's item a call of the current agent's item `own` works for."""
        return own if self.item is None else self.item

    def inside(
        self, item: int, call_id: str, budget: TokenBudget, *, handed: bool = False
    ) -> RunContext:
        """The context of an agent run as the tool call `call_id` of the current agent's item
        `item`, spending `budget` (its own, within this one's, or this one's); `handed`: the
        conversation is handed to it, so its text is the answer's if the current agent's is."""
        return replace(
            self,
            path=f"{self.path}{call_key(item, call_id)}/",
            item=self.item_of(item),
            budget=budget,
            answers=self.answers and handed,
        )
