"""Exceptions raised by the gateway package.

    GatewayError
    ├── ConfigError          the configuration is invalid (the message names the key)
    ├── UnknownAgent         no agent of that name is configured
    ├── UnknownTool          no tool of that name is offered
    └── ToolConflict         two nodes offer a tool under the same name to one agent

Model failures keep their own type (`agent.ModelError`) and toolkit failures theirs
(`toolkits.ToolkitError`); a failing tool never fails a run, it becomes an observation.
"""

from __future__ import annotations

__all__ = ["ConfigError", "GatewayError", "ToolConflict", "UnknownAgent", "UnknownTool"]


class GatewayError(Exception):
    """Base of every error the gateway package raises."""


class ConfigError(GatewayError):
    """The configuration is invalid."""


class UnknownAgent(GatewayError):
    """No agent of that name is configured."""


class UnknownTool(GatewayError):
    """No tool of that name is offered."""


class ToolConflict(GatewayError):
    """Two nodes offer a tool under the same name to one agent."""
