"""The limiter itself: a node's slots shared fairly between clients, each within its quota,
and no slot lost to a call cancelled while it waits."""

from __future__ import annotations

from typing import Any, Self

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from gateway.limits import NodeLimit, NodeLimits, PerNode, Share

pytestmark = pytest.mark.anyio


def clients(count: int, *, node_limit: int, quota: int = 16) -> tuple[NodeLimit, list[Share]]:
    nodes = NodeLimits(node_limit)
    return nodes.of("n"), [PerNode(quota, nodes).limiter("n") for _ in range(count)]


class Holder:
    """Calls that take a slot of a share and hold it until released, in the order they got it
    (running in a task group of its own while `async with` it)."""

    def __init__(self) -> None:
        self._tg: anyio.abc.TaskGroup | None = None
        self.order: list[str] = []
        self._releases: dict[str, anyio.Event] = {}
        self.scopes: dict[str, anyio.CancelScope] = {}

    async def __aenter__(self) -> Self:
        self._tg = await anyio.create_task_group().__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._tg is not None
        return await self._tg.__aexit__(*exc)

    def start(self, share: Share, name: str) -> None:
        assert self._tg is not None
        self._releases[name] = anyio.Event()
        self.scopes[name] = anyio.CancelScope()
        self._tg.start_soon(self._hold, share, name)

    async def _hold(self, share: Share, name: str) -> None:
        with self.scopes[name]:
            async with share:
                self.order.append(name)
                await self._releases[name].wait()

    def release(self, name: str) -> None:
        self._releases[name].set()


async def settled() -> None:
    """Let every task that can run, run (what waits, waits)."""
    for _ in range(10):
        await anyio.lowlevel.checkpoint()


async def test_a_freed_slot_goes_to_the_client_with_the_fewest_calls_running() -> None:
    node, (a, b, c) = clients(3, node_limit=2)
    with anyio.fail_after(5):
        async with Holder() as calls:
            for i in range(5):
                calls.start(a, f"a{i}")
            await settled()
            calls.start(b, "b0")
            calls.start(b, "b1")
            await settled()
            calls.start(c, "c0")
            await settled()
            assert calls.order == ["a0", "a1"]
            assert list(node.waiting) == [a, b, c]
            calls.release("a0")  # a runs 1, b and c none: b waited longer
            await settled()
            calls.release("a1")  # a runs 0 (waiting longest), b 1, c 0
            await settled()
            assert calls.order == ["a0", "a1", "b0", "a2"]
            calls.release("a2")  # c runs none
            await settled()
            assert calls.order[-1] == "c0"
            for name in ("b0", "c0", "b1", "a3", "a4"):
                calls.release(name)
                await settled()
        assert calls.order == ["a0", "a1", "b0", "a2", "c0", "b1", "a3", "a4"]
    assert node.free == 2
    assert not node.waiting


async def test_a_client_at_its_quota_leaves_the_free_slot_to_others() -> None:
    node, (a, b) = clients(2, node_limit=3, quota=2)
    with anyio.fail_after(5):
        async with Holder() as calls:
            for i in range(4):
                calls.start(a, f"a{i}")
            await settled()
            assert calls.order == ["a0", "a1"]  # its quota: the node's third slot stays free
            assert node.free == 1
            calls.start(b, "b0")
            await settled()
            assert calls.order == ["a0", "a1", "b0"]
            for name in ("a0", "b0", "a1", "a2", "a3"):
                calls.release(name)
        assert calls.order == ["a0", "a1", "b0", "a2", "a3"]
    assert node.free == 3


async def test_a_call_cancelled_while_it_waits_leaks_no_slot() -> None:
    node, (a, b) = clients(2, node_limit=1)
    with anyio.fail_after(5):
        async with Holder() as calls:
            calls.start(a, "a0")
            calls.start(b, "b0")
            calls.start(b, "b1")
            await settled()
            calls.scopes["b0"].cancel()
            await settled()
            assert b.waiting == 1
            calls.scopes["b1"].cancel()
            await settled()
            assert b.waiting == 0
            assert not node.waiting
            calls.release("a0")
        assert calls.order == ["a0"]
        assert node.free == 1
        async with b:  # the slot is there to take at once
            assert node.free == 0
    assert node.free == 1


async def test_a_call_cancelled_as_it_is_handed_a_slot_leaks_it_not() -> None:
    node, (a, b, c) = clients(3, node_limit=1)
    with anyio.fail_after(5):
        async with Holder() as calls:
            async with a:
                calls.start(b, "b0")
                calls.start(c, "c0")
                await settled()
                assert list(node.waiting) == [b, c]
            # Leaving the block handed b0 the slot; b0 is cancelled before it wakes (no
            # checkpoint between): it lets go of the slot, at once or as its block ends.
            assert b.running == 1
            calls.scopes["b0"].cancel()
            await settled()
            assert b.running == 0
            assert calls.order[-1] == "c0"
            calls.release("c0")
    assert node.free == 1
    assert not node.waiting


async def test_calls_of_one_client_go_first_come_first_served() -> None:
    _node, (a,) = clients(1, node_limit=1)
    with anyio.fail_after(5):
        async with Holder() as calls:
            for i in range(4):
                calls.start(a, f"a{i}")
                await settled()
            for i in range(4):
                calls.release(f"a{i}")
                await settled()
    assert calls.order == ["a0", "a1", "a2", "a3"]
