"""How a Tools Agent works: its system message, limits, batches and answers' schema.

The options of `ToolsAgent` (`tools_agent`), kept apart from the step that reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from .native_output import OutputMode, native_schema
from .output import OutputSchema
from .output_validator import OutputValidator, check_validator
from .system_prompt import SystemPrompt

__all__ = ["DEFAULT_SYSTEM_MESSAGE", "AgentOptions"]

DEFAULT_SYSTEM_MESSAGE = "You are a helpful assistant"


@dataclass(frozen=True, slots=True)
class AgentOptions:
    system_message: str | SystemPrompt = DEFAULT_SYSTEM_MESSAGE
    """Its text, with placeholders for the item's context, the date and time; or a function
    of the context that makes it (`system_prompt`)."""
    max_iterations: int = 10
    """Model calls per item."""
    return_intermediate_steps: bool = False
    batch_size: int = 1
    """Items that run at once; a batch runs to its end before the next starts."""
    delay_between_batches: float = 0.0
    """Seconds to wait before each batch after the first."""
    fail_fast: bool = False
    """End the run at the first item that fails (the others fail with the reason)."""
    output: OutputSchema | None = None
    """The schema answers must fit (see `agent.output`); the run's outputs are then JSON."""
    output_retries: int = 1
    """Answers that do not fit the schema (or that `output_validator` refused) sent back to
    the model before the item fails."""
    output_validator: OutputValidator | None = None
    """Checks each answer beyond the schema, and may change it (see `agent.output_validator`)."""
    output_mode: OutputMode = "tool"
    """How answers are held to `output`: a `final_result` tool, or the provider's own
    structured output (`"native"`, see `agent.native_output`)."""
    refusal_stops: bool = False
    """A model's refusal of an item's request (a 4xx about its content, a window too small)
    stops the run, resumable, instead of failing the item: for a run resumed on a model it
    did not start with, whose refusal says nothing of the run (its own model may take it)."""
    native_schema: dict[str, JsonValue] | None = field(init=False, default=None)
    """`output`'s schema as the provider gets it, in native mode."""

    def __post_init__(self) -> None:
        if self.max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if self.delay_between_batches < 0:
            raise ValueError("delay_between_batches cannot be negative")
        if self.output_retries < 0:
            raise ValueError("output_retries cannot be negative")
        if self.output_validator is not None:
            check_validator(self.output_validator)
        object.__setattr__(self, "native_schema", native_schema(self.output, self.output_mode))
