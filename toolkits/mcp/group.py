"""Many MCP servers at once: concurrent start, names resolved across nodes, health in one place.

    async with McpToolkitGroup(load_mcp_servers(path)) as group:
        for node in group.nodes:           # each a Toolkit
            ...
        print(group.health_report())

Entering starts every node's owner task concurrently and returns once each has settled (ready,
or failed and retrying in the background): a server that cannot start never holds the others
back. Tool names with `prefix="auto"` are resolved across all nodes, again whenever any node's
listing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import anyio
import anyio.abc

from ..background import InBackground
from ..base import Tool
from ..capabilities import ListChangedCallback
from ..health import NodeHealth
from .config import McpServerConfig
from .naming import resolve_tool_names
from .node import McpToolkit
from .session import DEFAULT_BACKOFF, Backoff, Target

__all__ = ["McpToolkitGroup"]


class McpToolkitGroup(InBackground):
    """The MCP toolkit nodes of one process, keyed by server name (config order kept)."""

    def __init__(
        self,
        configs: Mapping[str, McpServerConfig],
        *,
        targets: Mapping[str, Target] | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        """`targets` replaces the transport of the servers it names (tests, embedding)."""
        targets = targets or {}
        unknown = set(targets) - set(configs)
        if unknown:
            raise ValueError(f"targets for unconfigured servers: {sorted(unknown)}")
        self._nodes = {
            name: McpToolkit(
                name,
                config,
                target=targets.get(name),
                backoff=backoff,
                resolve_names=self._resolve_names,
            )
            for name, config in configs.items()
        }

    def __repr__(self) -> str:
        return f"McpToolkitGroup({list(self._nodes)})"

    @property
    def nodes(self) -> Sequence[McpToolkit]:
        return tuple(self._nodes.values())

    def __getitem__(self, name: str) -> McpToolkit:
        return self._nodes[name]

    def __iter__(self) -> Iterator[McpToolkit]:
        return iter(self._nodes.values())

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def health(self) -> dict[str, NodeHealth]:
        return {name: node.health for name, node in self._nodes.items()}

    def health_report(self) -> str:
        """One line per server, e.g. `time: ready since ..., 2 tools, protocol 2026-07-28`."""
        return "\n".join(str(health) for health in self.health.values())

    async def list_tools(self) -> list[Tool]:
        """Every node's tools (names are unique across the group)."""
        return [tool for node in self._nodes.values() for tool in await node.list_tools()]

    def subscribe(self, callback: ListChangedCallback) -> Callable[[], None]:
        """Call `callback(node_name)` whenever any node's offered tools change."""
        return _all([node.subscribe(callback) for node in self._nodes.values()])

    def subscribe_prompts(self, callback: ListChangedCallback) -> Callable[[], None]:
        """Call `callback(node_name)` whenever any node's server says its prompts changed."""
        return _all([node.subscribe_prompts(callback) for node in self._nodes.values()])

    def subscribe_resources(self, callback: ListChangedCallback) -> Callable[[], None]:
        """Call `callback(node_name)` whenever any node's server says its resources changed."""
        return _all([node.subscribe_resources(callback) for node in self._nodes.values()])

    def _resolve_names(self) -> Sequence[McpToolkit]:
        names = resolve_tool_names([node.node_tools for node in self._nodes.values()])
        return [node for node in self._nodes.values() if node.apply_names(names[node.name])]

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run every node until cancelled; `started()` once all of them have settled."""
        async with anyio.create_task_group() as tg:
            async with anyio.create_task_group() as starting:
                for node in self._nodes.values():
                    # Each node's owner task lives in `tg`; `starting` only waits for it to settle.
                    starting.start_soon(tg.start, node.run)
            task_status.started()


def _all(unsubscribers: list[Callable[[], None]]) -> Callable[[], None]:
    def unsubscribe() -> None:
        for undo in unsubscribers:
            undo()

    return unsubscribe
