"""Many MCP servers at once: concurrent start, names resolved across nodes, health in one place.

    async with McpToolkitGroup(load_mcp_servers(path)) as group:
        for node in group.nodes:           # each a Toolkit
            ...
        print(group.health_report())

Entering starts every node's owner task concurrently (the process's open-files limit raised for
them first: `open_files`) and returns once each has settled (ready, or failed and retrying in
the background): a server that cannot start never holds the others back. With `settle_within`,
it returns after that long at most: a server still starting goes on in the background, and its
node says when its tools arrive (`subscribe`); `wait_for` names the servers worth waiting for at
all (the others start in the background too). `on_waiting` hears which servers it still waits
for, whenever that changes, and `[]` once it stops waiting (a terminal's status line). Tool
names with `prefix="auto"` are resolved across all nodes, again whenever any node's listing
changes: a node's tools may so be renamed while the group runs (one warning per such change,
naming the tools and why; `McpToolkit.now_named` answers for an old name).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import partial

import anyio
import anyio.abc

from ..background import InBackground
from ..base import Tool
from ..capabilities import ListChangedCallback
from ..health import NodeHealth
from ..open_files import files_for_servers, reserved_files
from .backoff import DEFAULT_BACKOFF, Backoff
from .config import McpServerConfig
from .naming import reserved_clashes, resolve_tool_names
from .node import McpToolkit
from .session import Target

__all__ = ["McpToolkitGroup"]

log = logging.getLogger(__name__)


class McpToolkitGroup(InBackground):
    """The MCP toolkit nodes of one process, keyed by server name (config order kept)."""

    def __init__(
        self,
        configs: Mapping[str, McpServerConfig],
        *,
        targets: Mapping[str, Target] | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        settle_within: float | None = None,
        wait_for: Collection[str] | None = None,
        on_waiting: Callable[[Sequence[str]], None] | None = None,
        reserved_names: Mapping[str, str] | None = None,
    ) -> None:
        """`targets` replaces the transport of the servers it names (tests, embedding).

        `reserved_names` are tool names other nodes hold that have no prefix to give (a
        gateway's local tools and agents), each with what holds it (`"local tool"`): a
        server's tool of such a name is offered as `server__tool` (warned once), whatever its
        prefix policy, so every listing and every call agrees on what the bare name is.
        """
        self._settle_within = settle_within
        self._reserved = dict(reserved_names or {})
        self._moved: set[tuple[str, str]] = set()
        """The (server, tool) already warned of as moved off a reserved name."""
        self._wait_for = wait_for
        self._on_waiting = on_waiting
        self._warned: set[tuple[str, ...]] = set()
        """Name clashes warned of: the names are resolved again as each node settles."""
        self._names: dict[str, dict[str, str]] = {}
        """The names last resolved, by node: original to model name."""
        self._started = False
        """Whether entering has returned: a rename before that, nobody has seen the names."""
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

    def _resolve_names(self, changed: str) -> Sequence[McpToolkit]:
        """Name every node's tools again, `changed`'s listing being new."""
        listed = [node.node_tools for node in self._nodes.values()]
        names = resolve_tool_names(listed, self._reserved, warned=self._warned)
        before, self._names = self._names, names
        if self._started:
            self._say_renamed(changed, before.get(changed, {}), before, names)
        for server, tool, bare in reserved_clashes(listed, self._reserved):
            if (server, tool) not in self._moved:
                self._moved.add((server, tool))
                log.warning(
                    "server %r: its tool %r has the name of the %s %r, which has no prefix: "
                    "offering the server's as %r",
                    server,
                    tool,
                    self._reserved[bare],
                    bare,
                    names[server][tool],
                )
        return [node for node in self._nodes.values() if node.apply_names(names[node.name])]

    def _say_renamed(
        self,
        changed: str,
        was_listed: Mapping[str, str],
        before: Mapping[str, Mapping[str, str]],
        after: Mapping[str, Mapping[str, str]],
    ) -> None:
        """One warning for the tools `changed`'s new listing renamed (auto/never names follow
        which servers list tools): a client's or a model's names for them stop working."""
        renamed = [
            f"{was} -> {name}"
            for node, names in after.items()
            for orig, name in names.items()
            if (was := before.get(node, {}).get(orig, name)) != name
        ]
        if not renamed:
            return
        now = after.get(changed, {})
        why = (
            "now lists its tools"
            if now and not was_listed
            else "lists no tools any more"
            if was_listed and not now
            else "changed its tools"
        )
        shown = ", ".join(renamed[:10]) + (
            f" and {len(renamed) - 10} more" if len(renamed) > 10 else ""
        )
        log.warning(
            "%d tool%s renamed because server %r %s (prefix 'auto' and 'never' names depend on "
            "which servers are up; 'always' keeps them stable): %s",
            len(renamed),
            "s" if len(renamed) > 1 else "",
            changed,
            why,
            shown,
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run every node until cancelled; `started()` once all of them have settled, or
        `settle_within` s have passed (a node still starting then lists no tools until ready)."""
        # Reserved before any starts: the process's limit raised to fit them all, or one
        # warning saying it cannot (each server that fails would only say "Too many open files").
        count = len(self._nodes)
        what = f"{count} MCP server{'' if count == 1 else 's'} starting at once"
        with reserved_files(files_for_servers(count), what):
            async with anyio.create_task_group() as tg:
                settled = {node: _Settled() for node in self._nodes.values()}
                for node, status in settled.items():
                    tg.start_soon(partial(node.run, task_status=status))
                if self._wait_for is not None:  # the others join when ready
                    waited = set(self._wait_for)
                    for node in [n for n in settled if n.name not in waited]:
                        node.stop_awaiting()
                        del settled[node]
                told: list[str] | None = None
                # Woken as any node settles, in whatever order: `on_waiting` hears of each then,
                # not once the first still starting in the config's order has.
                wakeup = _Wakeup()
                for status in settled.values():
                    status.wakeup = wakeup
                with anyio.move_on_after(self._settle_within):
                    while pending := [n.name for n, s in settled.items() if not s.event.is_set()]:
                        if self._on_waiting is not None and pending != told:
                            self._on_waiting(pending)
                            told = pending
                        await wakeup.wait()
                if told is not None and self._on_waiting is not None:
                    self._on_waiting([])
                for node, status in settled.items():
                    if not status.event.is_set():
                        node.stop_awaiting()
                self._started = True
                task_status.started()


class _Settled(anyio.abc.TaskStatus[None]):
    """A node's owner task's `started()`, heard without waiting on the task itself."""

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.wakeup: _Wakeup | None = None

    def started(self, value: None = None) -> None:
        self.event.set()
        if self.wakeup is not None:
            self.wakeup.set()


class _Wakeup:
    """Wakes whoever waits (`wait`) when any of the nodes settles (`set`)."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event = anyio.Event()


def _all(unsubscribers: list[Callable[[], None]]) -> Callable[[], None]:
    def unsubscribe() -> None:
        for undo in unsubscribers:
            undo()

    return unsubscribe
