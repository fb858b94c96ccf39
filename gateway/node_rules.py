"""What nodes' own settings say of how their tools are called, as a gateway's approval rules
and node limits.

An MCP server's `max_concurrency`, `require_approval` and `require_approval_if_destructive`
are the node's (`toolkits.HasCallRules`), so every `Gateway` applies them, built from a config
file (`open_gateway`) or in code from an `McpToolkitGroup`'s nodes: a server said to need a
person's approval is never called without one because of how its gateway was put together.
What the `Gateway`'s builder gives adds to them: more tools to approve, another limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from toolkits import CallRules, HasCallRules, Toolkit

from .approval import ApprovalRule
from .errors import ConfigError

__all__ = ["approval_rule", "approvals_of", "limits_of"]


def approval_rule(require_approval: bool | Sequence[str], if_destructive: bool) -> ApprovalRule:
    """The rule of a node's `require_approval` (all its tools, or globs on their names) and
    `require_approval_if_destructive`."""
    tools = ["*"] if require_approval is True else list(require_approval or [])
    return ApprovalRule(tools, if_destructive)


def approvals_of(
    nodes: Sequence[Toolkit], given: Mapping[str, ApprovalRule] | None = None
) -> dict[str, ApprovalRule]:
    """Each node's approval rule: its own (`call_rules`) with what `given` adds for it (both
    apply: a call either covers needs a person).

    Raises `ConfigError` for a key of `given` that names no node (a typo would approve nothing).
    """
    _known("approvals", nodes, given)
    rules = {
        node.name: approval_rule(rules.require_approval, rules.require_approval_if_destructive)
        for node, rules in _rules_of(nodes)
        if rules.require_approval or rules.require_approval_if_destructive
    }
    for name, rule in (given or {}).items():
        own = rules.get(name)
        rules[name] = rule if own is None else _both(own, rule)
    return rules


def limits_of(nodes: Sequence[Toolkit], given: Mapping[str, int] | None = None) -> dict[str, int]:
    """How many calls each node takes at once, where it is not the gateway's default: its own
    `max_concurrency`, unless `given` names another.

    Raises `ConfigError` for a key of `given` that names no node, or a limit below 1 (no call
    would ever run), as a server's own `max_concurrency` is checked.
    """
    _known("node_limits", nodes, given)
    for name, limit in (given or {}).items():
        if type(limit) is not int or limit < 1:  # True is an int, and no limit
            raise ConfigError(f"node_limits: {name!r}: {limit!r} is not a whole number >= 1")
    own = {
        node.name: rules.max_concurrency
        for node, rules in _rules_of(nodes)
        if rules.max_concurrency is not None
    }
    return {**own, **(given or {})}


def _known(key: str, nodes: Sequence[Toolkit], given: Mapping[str, object] | None) -> None:
    names = [node.name for node in nodes]
    for name in given or {}:
        if name not in names:
            raise ConfigError(f"{key}: no node named {name!r} (nodes: {', '.join(names)})")


def _rules_of(nodes: Iterable[Toolkit]) -> list[tuple[Toolkit, CallRules]]:
    return [(node, node.call_rules) for node in nodes if isinstance(node, HasCallRules)]


def _both(one: ApprovalRule, other: ApprovalRule) -> ApprovalRule:
    tools = list(dict.fromkeys((*one.tools, *other.tools)))
    return ApprovalRule(tools, one.destructive or other.destructive)
