"""What every part of one run shares, however deeply agents nest: its tracer, the chain of
agents that led here, and the token budget of the whole tree."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from agent import Usage

from .trace import Tracer

__all__ = ["RunContext", "TokenBudget"]


@dataclass
class TokenBudget:
    """Tokens spent by every model call of a run tree, against an optional limit."""

    limit: int | None = None
    used: Usage = field(default_factory=Usage)

    def charge(self, usage: Usage) -> None:
        self.used += usage

    @property
    def exceeded(self) -> bool:
        return self.limit is not None and self.used.total_tokens >= self.limit

    def message(self) -> str:
        return (
            f"Token budget ({self.limit}) exceeded: the run used {self.used.total_tokens} tokens "
            "and was stopped."
        )


@dataclass(frozen=True)
class RunContext:
    tracer: Tracer
    budget: TokenBudget
    chain: tuple[str, ...] = ()
    """The agents from the outermost run down to the current one."""

    def enter(self, agent: str) -> RunContext:
        return replace(self, chain=(*self.chain, agent))
