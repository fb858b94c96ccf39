"""A node's settings that match none of its server's tools, said once for each change.

A typo in `include` leaves the agent without the tool, one in `require_approval` leaves the
tool ungated, one in `tool_timeouts` cuts the slow tool short, and a `forward_context` no tool
takes passes the run's context to none; nothing else would say so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from .config import McpServerConfig
from .context_argument import forwarded_to_none
from .naming import globs_unmatched, rule_names, unmatched_globs

__all__ = ["UnmatchedSettings"]


class UnmatchedSettings:
    """What of a node's `config` the last listing had no tool for (`note`)."""

    def __init__(self, node: str, config: McpServerConfig, log: logging.Logger) -> None:
        self._node = node
        self._config = config
        self._log = log
        self._said: tuple[tuple[str, ...], ...] = ((), (), (), (), ())

    def note(self, names: Sequence[str], offered: Mapping[str, Any]) -> None:
        """Warn of the `include`/`exclude`/`require_approval`/`tool_timeouts` globs that match
        none of the server's tools (`names`), and a `forward_context` none of the `offered`
        tools takes; once for each change of what is unmatched."""
        config = self._config
        approval = config.require_approval
        unmatched = (
            unmatched_globs(config.include or (), names),
            unmatched_globs(config.exclude, names),
            # A rule matches the server's names and `NODE__TOOL` too (`rule_names`).
            unmatched_globs(
                approval if isinstance(approval, list) else (),
                [form for name in names for form in rule_names(self._node, name)],
            ),
            unmatched_globs(tuple(config.tool_timeouts), names),
            forwarded_to_none(offered, forward=config.forward_context),
        )
        if unmatched == self._said:
            return
        self._said = unmatched
        include, exclude, approval, timeouts, forwarding = unmatched
        if include:
            self._log.warning("%s", globs_unmatched("include", include, names, listing=True))
        if exclude:
            self._log.info("%s", globs_unmatched("exclude", exclude, names))
        if approval:
            said = globs_unmatched("require_approval", approval, names)
            them = "it" if len(approval) == 1 else "them"
            self._log.warning("%s, so no call is gated by %s", said, them)
        if timeouts:
            said = globs_unmatched("tool_timeouts", timeouts, names, listing=True)
            self._log.warning("%s", said)
        for said in forwarding:
            self._log.warning("%s", said)
