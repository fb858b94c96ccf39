"""How a node call gets its slot (`limits`): its client's share of the node's, or one a call it
descends from lent it, and what it tells while it waits.

A call to a tool served by another gateway holds a slot of that node while the other gateway
works, and that work may call back here: G1's agent calls G2's agent, which calls G1's agent,
which calls G2 again. Waiting for another slot of the same node, the call coming back would
wait behind its own caller, which waits for it: with `max_concurrency = 1` for ever, with N,
once N such calls overlap. So such a call lends its slot: it is `Leases.lending` while held,
under an id its request carries in `_meta` (`LENT_META_KEY`, a list a gateway passes on with
the client's own keys, one id added per lending hop), and a call here whose request carries
the id of a slot of the node it calls takes that one (`Leases.slot_for`; the innermost, when
several are lent), one call at a time, as a slot takes one call. Its caller is idle on it
meanwhile, waiting for what this call is part of.

Every other wait is bounded by the node's own (`NodeLimit.wait_limit`), and said: a `slot`
note (`waiting`, with what it waits for; `taken` once it has it, or failed) that the run's
status line and its MCP progress show; a proxied call's client is told in its progress
(`waiting_said`).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Mapping
from contextlib import asynccontextmanager, contextmanager
from types import TracebackType
from typing import Any, Protocol, cast

import anyio

from toolkits import ProgressCallback, Tool

from .limits import NodeLimit, PerNode, SlotTimeout, waiting_said
from .loops import VIA_META_KEY

__all__ = ["LENT_META_KEY", "Lease", "Leases", "Slot", "lent_in", "taken"]

LENT_META_KEY = "agent-gateway/lent"
"""The `_meta` key of a request made while callers up its chain hold slots of this gateway's
nodes, on any gateway: the ids of those slots, outermost first."""


def lent_in(meta: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The ids of the slots a request's callers lent it, from its `_meta`."""
    lent: object = meta.get(LENT_META_KEY) if meta else None
    if not isinstance(lent, list):
        return ()
    return tuple(i for i in cast("list[object]", lent) if isinstance(i, str))


class Slot(Protocol):
    """What a call holds of its node while it runs (`limits.Share`, `Lease`)."""

    @property
    def would_wait(self) -> bool: ...

    def why_waiting(self) -> str: ...

    async def __aenter__(self) -> None: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class Lease:
    """A slot held by a call to another gateway, lent to the calls that come back from there,
    one at a time."""

    __slots__ = ("_turn", "node")

    def __init__(self, node: NodeLimit) -> None:
        self.node = node
        self._turn = anyio.Lock()

    @property
    def would_wait(self) -> bool:
        return self._turn.locked()

    def why_waiting(self) -> str:
        return f"the slot of {self.node.name!r} lent by its caller, which another call uses now"

    async def __aenter__(self) -> None:
        limit = self.node.wait_limit
        try:
            with anyio.fail_after(limit):
                await self._turn.acquire()
        except TimeoutError:
            assert limit is not None
            raise SlotTimeout(
                f"waited {limit:g} s for {self.why_waiting()}, in vain; the call was not made",
                node=self.node.name,
                seconds=limit,
            ) from None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._turn.release()


class Leases:
    """The slots this gateway's calls to other gateways hold now, by id."""

    def __init__(self) -> None:
        self._held: dict[str, Lease] = {}

    def slot_for(self, node: NodeLimit, meta: Mapping[str, Any], quota: PerNode) -> Slot:
        """The slot a call of `node` with request `_meta` takes: one lent by a call it descends
        from (the innermost), else its client's share."""
        lent: object = meta.get(LENT_META_KEY) if self._held else None
        if isinstance(lent, list):
            for lease_id in reversed(cast("list[object]", lent)):
                lease = self._held.get(lease_id) if isinstance(lease_id, str) else None
                if lease is not None and lease.node is node:
                    return lease
        return quota.limiter(node.name)

    @contextmanager
    def lending(
        self, node: NodeLimit, tool: Tool, meta: Mapping[str, Any]
    ) -> Generator[Mapping[str, Any]]:
        """While a call of `tool` holds a slot of `node`: its request's `meta`, with the slot
        lent to what comes back, when the tool is served by a gateway (only a gateway's work
        can call back with the id)."""
        definition = tool.definition
        if definition is None or not definition.meta or VIA_META_KEY not in definition.meta:
            yield meta
            return
        lease_id = secrets.token_hex(8)  # not to be guessed: it skips the node's queue
        self._held[lease_id] = Lease(node)
        lent: object = meta.get(LENT_META_KEY)
        before = cast("list[object]", lent) if isinstance(lent, list) else []
        try:
            yield {**meta, LENT_META_KEY: [*before, lease_id]}
        finally:
            del self._held[lease_id]


@asynccontextmanager
async def taken(
    slot: Slot,
    say: Callable[[str | None], Awaitable[None]],
    progress: ProgressCallback | None = None,
) -> AsyncGenerator[None]:
    """Hold `slot` for the block; while it has to wait for it, `say` what it waits for, then
    `say(None)` once it stopped waiting (taken, failed or cancelled). `progress`: a proxied
    call's client's, told of the wait too (an agent's run tells its own from `say`'s note)."""
    if slot.would_wait:
        why = slot.why_waiting()
        await say(why)
        try:
            if progress is not None:
                await progress(0, None, waiting_said(why))
            await slot.__aenter__()
        finally:
            with anyio.CancelScope(shield=True):
                await say(None)
    else:
        await slot.__aenter__()
    try:
        yield
    finally:
        await slot.__aexit__(None, None, None)
