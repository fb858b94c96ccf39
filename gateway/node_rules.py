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

__all__ = ["approval_rule", "approvals_of", "limits_of"]


def approval_rule(require_approval: bool | Sequence[str], if_destructive: bool) -> ApprovalRule:
    """The rule of a node's `require_approval` (all its tools, or globs on their names) and
    `require_approval_if_destructive`."""
    tools = ["*"] if require_approval is True else list(require_approval or [])
    return ApprovalRule(tools, if_destructive)


def approvals_of(
    nodes: Iterable[Toolkit], given: Mapping[str, ApprovalRule] | None = None
) -> dict[str, ApprovalRule]:
    """Each node's approval rule: its own (`call_rules`) with what `given` adds for it (both
    apply: a call either covers needs a person)."""
    rules = {
        node.name: approval_rule(rules.require_approval, rules.require_approval_if_destructive)
        for node, rules in _rules_of(nodes)
        if rules.require_approval or rules.require_approval_if_destructive
    }
    for name, rule in (given or {}).items():
        own = rules.get(name)
        rules[name] = rule if own is None else _both(own, rule)
    return rules


def limits_of(nodes: Iterable[Toolkit], given: Mapping[str, int] | None = None) -> dict[str, int]:
    """How many calls each node takes at once, where it is not the gateway's default: its own
    `max_concurrency`, unless `given` names another."""
    own = {
        node.name: rules.max_concurrency
        for node, rules in _rules_of(nodes)
        if rules.max_concurrency is not None
    }
    return {**own, **(given or {})}


def _rules_of(nodes: Iterable[Toolkit]) -> list[tuple[Toolkit, CallRules]]:
    return [(node, node.call_rules) for node in nodes if isinstance(node, HasCallRules)]


def _both(one: ApprovalRule, other: ApprovalRule) -> ApprovalRule:
    tools = list(dict.fromkeys((*one.tools, *other.tools)))
    return ApprovalRule(tools, one.destructive or other.destructive)
