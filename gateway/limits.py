"""How many node calls run at once: per node for everyone, and per client for each node.

A node (an MCP server, a set of local functions) takes at most its own limit of calls at once,
whoever makes them, so no server is flooded. Within that, each client (an MCP client
connection, a 2026-07-28 HTTP caller, or one run started from the command line: see
`server.serving.ClientQuotas`) has a quota per node: its calls beyond it wait in that
client's own queue, and a call to one node never waits for calls to another (a local tool
never waits behind a slow server).

A full node shares its slots fairly: a slot that frees goes to the waiting client with the
fewest calls running on that node (among equals, the one served longest ago), so a client's
first call waits for one call to end, never behind another client's queue. Within one client,
first come, first served.

A client's calls on a node (`Share`) take a slot with a counter check and no allocation when
nothing waits: every proxied call passes here. A call that waits does so for at most the node's
`wait_limit` (an MCP server's `timeout`), then fails with `SlotTimeout`, naming the limit it
waited on: a call that waits for ever helps nobody, and one that waits on its own caller (see
`node_slots`) would.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from types import TracebackType

import anyio

from toolkits import ProgressCallback, ToolTimeout

__all__ = [
    "DEFAULT_CLIENT_LIMIT",
    "DEFAULT_NODE_LIMIT",
    "NodeLimit",
    "NodeLimits",
    "PerNode",
    "Share",
    "SlotTimeout",
    "waiting_said",
]

DEFAULT_CLIENT_LIMIT = 16
"""Calls one client may have in flight on one node."""
DEFAULT_NODE_LIMIT = 64
"""Calls one node takes at once, across all clients."""


class SlotTimeout(ToolTimeout):
    """No slot of the node came free within its wait limit: the call was never made."""

    def __init__(self, message: str, *, node: str, seconds: float) -> None:
        super().__init__(message, node=node, tool="", seconds=seconds)


class NodeLimit:
    """One node's slots, shared by its clients' `Share`s."""

    __slots__ = ("capacity", "free", "name", "wait_limit", "waiting")

    def __init__(self, capacity: int, name: str = "", wait_limit: float | None = None) -> None:
        self.name = name
        self.capacity = capacity
        self.wait_limit = wait_limit
        """Seconds a call waits for a slot before it fails (None: as long as it takes)."""
        self.free = capacity
        self.waiting: dict[Share, None] = {}
        """The shares with calls waiting, in the order they were last served (a set, ordered)."""

    def hand_out(self) -> None:
        """Give the free slots to the waiting calls, fairly (see the module docstring)."""
        while self.free > 0:
            chosen: Share | None = None
            for share in self.waiting:
                if share.running < share.quota and (
                    chosen is None or share.running < chosen.running
                ):
                    chosen = share
            if chosen is None:  # every waiting client is at its own quota
                return
            chosen.grant()


class NodeLimits:
    """The nodes' own limits, each made on first use."""

    def __init__(
        self,
        default: int,
        limits: Mapping[str, int] | None = None,
        wait_limits: Mapping[str, float] | None = None,
    ) -> None:
        """`wait_limits`: seconds a call waits for a slot of each node named (others: no limit)."""
        self._default = default
        self._limits = dict(limits or {})
        self._wait_limits = dict(wait_limits or {})
        self._by_node: dict[str, NodeLimit] = {}

    def of(self, node: str) -> NodeLimit:
        limit = self._by_node.get(node)
        if limit is None:
            capacity = self._limits.get(node, self._default)
            limit = NodeLimit(capacity, node, self._wait_limits.get(node))
            self._by_node[node] = limit
        return limit


def waiting_said(why: str) -> str:
    """What a call's progress says while it waits for a slot, for `why` (`why_waiting`)."""
    return f"waiting for {why}"


class Share:
    """One client's calls on one node: `async with share:` holds a slot of the node's, at most
    `quota` of them at once."""

    __slots__ = ("_node", "_queue", "quota", "running")

    def __init__(self, quota: int, node: NodeLimit) -> None:
        self.quota = quota
        self.running = 0
        """Calls holding a slot now."""
        self._node = node
        self._queue: deque[anyio.Event] | None = None
        """The calls waiting, first come first (made when one first waits)."""

    @property
    def waiting(self) -> int:
        return len(self._queue) if self._queue is not None else 0

    @property
    def would_wait(self) -> bool:
        """Whether a call entering now would wait for a slot."""
        return not (self.running < self.quota and self._node.free > 0 and not self._queue)

    def why_waiting(self) -> str:
        """What a call waiting here waits on, for a person: the node's limit, or the client's."""
        node = self._node
        if self.running >= self.quota:
            return (
                f"one of this client's {self.quota} running calls on {node.name!r} to end "
                "([gateway] max_concurrency)"
            )
        return f"a free slot of {node.name!r} (max_concurrency {node.capacity})"

    async def __aenter__(self) -> None:
        node = self._node
        # Nothing of ours waits, so no other client's waiting call could have this slot: a
        # waiting client below its quota is handed a slot the moment one frees.
        if self.running < self.quota and node.free > 0 and not self._queue:
            self.running += 1
            node.free -= 1
            return
        await self._wait()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    async def take(self, progress: ProgressCallback) -> None:
        """As `async with share:` enters (`release` once done), telling a proxied call's
        client in `progress` why it waits, if it does: only then, off the hot path."""
        node = self._node
        if self.running < self.quota and node.free > 0 and not self._queue:
            self.running += 1
            node.free -= 1
            return
        await progress(0, None, waiting_said(self.why_waiting()))
        await self._wait()

    def release(self) -> None:
        self.running -= 1
        node = self._node
        node.free += 1
        if node.waiting:
            node.hand_out()

    def grant(self) -> None:
        """Give this share's first waiting call a slot (`NodeLimit.hand_out`)."""
        queue = self._queue
        assert queue
        node = self._node
        self.running += 1
        node.free -= 1
        del node.waiting[self]
        if len(queue) > 1:  # served: behind the other waiting clients now
            node.waiting[self] = None
        queue.popleft().set()

    async def _wait(self) -> None:
        queue = self._queue
        if queue is None:
            queue = self._queue = deque()
        if not queue:
            self._node.waiting[self] = None
        granted = anyio.Event()
        queue.append(granted)
        limit = self._node.wait_limit
        why = self.why_waiting()
        try:
            with anyio.fail_after(limit):
                await granted.wait()
        except BaseException as exc:  # cancelled: a slot handed out meanwhile goes to the next
            if granted.is_set():
                self.release()
            else:
                queue.remove(granted)
                if not queue:
                    del self._node.waiting[self]
            if isinstance(exc, TimeoutError) and limit is not None:
                raise SlotTimeout(
                    f"waited {limit:g} s for {why}, in vain: every slot is held by calls still "
                    "running (one may be waiting on this call); the call was not made",
                    node=self._node.name,
                    seconds=limit,
                ) from None
            raise


class PerNode:
    """One client's quota on every node: a `Share` of each, made on first use."""

    __slots__ = ("_by_node", "_nodes", "_quota")

    def __init__(self, quota: int, nodes: NodeLimits) -> None:
        self._quota = quota
        self._nodes = nodes
        self._by_node: dict[str, Share] = {}

    def limiter(self, node: str) -> Share:
        share = self._by_node.get(node)
        if share is None:
            share = self._by_node[node] = Share(self._quota, self._nodes.of(node))
        return share

    @property
    def idle(self) -> bool:
        """Whether none of its calls runs or waits (so a fresh quota could stand in for it)."""
        return not any(share.running or share.waiting for share in self._by_node.values())
