"""Native structured output: the provider held to the answer's schema, not a `final_result` tool.

With `AgentOptions(output_mode="native")` the agent offers no `final_result` tool: each model
call of an item is made inside `native_output(schema)`, and providers that can constrain their
answer read `native_output_schema()` when they build the request (OpenAI's `response_format`
`json_schema` strict, Anthropic's `output_config.format`, Gemini's `responseJsonSchema`); the
answer is the JSON text, read and validated as a text answer is (`OutputSchema.from_text`),
sent back on the same retry path. A model that has not declared the mode (`HoldsOutputSchema`)
is refused it with `ModelConfigError` before it is called (`held_to`), and a provider that
cannot hold a given schema raises it rather than answer unconstrained. Set by a context
variable, as `answer_token_limit` is, so it passes any wrapper (a fallback, a retry, a trace)
and no summary call of the memory, made outside the block, gets it.

OpenAI's strict mode takes a subset of JSON Schema: every object closed (`additionalProperties:
false`) with every property required. `strict_schema` makes a schema so: an optional property
becomes required and nullable, and `without_added_nulls` takes the nulls the model writes there
back out before validation (so a default applies), at any depth: inside the `anyOf`/`oneOf`
branch the answer fits too. A schema that cannot be made strict (a map
with free keys, `allOf`, `patternProperties`...) is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import JsonValue

from .errors import ModelConfigError
from .model import ChatModel, holds_output_schema

if TYPE_CHECKING:
    from .output import OutputSchema

__all__ = [
    "NATIVE_OUTPUT_NAME",
    "OutputMode",
    "held_to",
    "native_output",
    "native_output_schema",
    "native_schema",
    "strict_schema",
    "without_added_nulls",
]

OutputMode = Literal["tool", "native"]
NATIVE_OUTPUT_NAME = "final_result"
"""The name a provider's schema is sent under (OpenAI requires one)."""

_native: ContextVar[dict[str, JsonValue] | None] = ContextVar("agent.native_output", default=None)

# JSON Schema that OpenAI's strict mode refuses; said at config load, not at the first call.
_NOT_STRICT = (
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "propertyNames",
)
_DROPPED = ("default", "$schema")  # refused by strict mode; our own validation applies them


@contextmanager
def native_output(schema: dict[str, JsonValue]) -> Generator[None]:
    """Model calls made in the block are held to `schema` (a `strict_schema`), natively."""
    token = _native.set(schema)
    try:
        yield
    finally:
        _native.reset(token)


def held_to(schema: dict[str, JsonValue] | None, model: ChatModel) -> AbstractContextManager[None]:
    """`native_output(schema)` for `model`'s calls in the block, or nothing for no schema.
    Raises `ModelConfigError` for a model that has not declared it holds a schema
    (`HoldsOutputSchema`): it would not be told the schema, and its answer would be taken
    unconstrained."""
    if schema is None:
        return nullcontext()
    if not holds_output_schema(model):
        raise ModelConfigError(
            f"{model.name} has no native structured output (a model of one's own declares it: "
            "agent.HoldsOutputSchema): use output_mode = 'tool'"
        )
    return native_output(schema)


def native_output_schema() -> dict[str, JsonValue] | None:
    """The strict schema the calling block holds answers to, if any (for providers)."""
    return _native.get()


def native_schema(output: OutputSchema | None, mode: OutputMode) -> dict[str, JsonValue] | None:
    """What `AgentOptions.native_schema` is for `output` in `mode`. Raises `ValueError` for a
    mode that is neither, or native without a schema or with one that cannot be strict."""
    if mode not in ("tool", "native"):
        raise ValueError(f"output_mode is 'tool' or 'native', not {mode!r}")
    if mode == "tool":
        return None
    if output is None:
        raise ValueError("output_mode 'native' needs an output schema")
    try:
        return output.native_schema()
    except ValueError as exc:
        raise ValueError(f"output_mode 'native': {exc}") from None


def strict_schema(schema: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """`schema` as OpenAI's strict mode takes it. Raises `ValueError` saying why it cannot
    be made so (and where). The root must be an object schema."""
    return cast(dict[str, JsonValue], _strict(schema, "the schema"))


def _strict(node: Any, where: str) -> Any:
    if not isinstance(node, dict):
        if node is True or node == {}:
            raise ValueError(f"{where} allows any value, which strict output cannot say")
        return node
    node = cast(dict[str, Any], node)
    for key in _NOT_STRICT:
        if key in node:
            raise ValueError(f"{where} uses {key!r}, which strict output does not take")
    out = {k: v for k, v in node.items() if k not in _DROPPED}
    if not out or set(out) <= {"title", "description"}:
        raise ValueError(f"{where} allows any value, which strict output cannot say")
    if _is_object(out):
        extra = out.get("additionalProperties", False)
        if extra is not False:
            raise ValueError(
                f"{where} is a map with free keys (additionalProperties), which strict output "
                "cannot say: give it its properties"
            )
        properties = cast(dict[str, Any], out.get("properties") or {})
        if not properties:
            raise ValueError(
                f"{where} is an object without properties, which strict output cannot say"
            )
        required = set(cast(list[str], out.get("required") or []))
        out["properties"] = {
            name: _strict(value, f"{where} at {name!r}")
            if name in required
            else _nullable(_strict(value, f"{where} at {name!r}"))
            for name, value in properties.items()
        }
        out["required"] = list(properties)
        out["additionalProperties"] = False
    for key in ("items", "anyOf", "oneOf", "prefixItems", "$defs", "definitions"):
        if key not in out:
            continue
        value = out[key]
        if isinstance(value, list):
            out[key] = [_strict(v, f"{where} ({key})") for v in cast(list[Any], value)]
        elif key in ("$defs", "definitions"):
            defs = cast(dict[str, Any], value)
            out[key] = {n: _strict(v, f"{where} ({key}.{n})") for n, v in defs.items()}
        else:
            out[key] = _strict(value, f"{where} ({key})")
    if "oneOf" in out:  # strict output takes `anyOf` only; one answer fits one branch either way
        out["anyOf"] = out.pop("oneOf")
    return out


def _is_object(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "object" or "properties" in node or "additionalProperties" in node


def _nullable(node: Any) -> Any:
    if _accepts_null(node):
        return node
    return {"anyOf": [node, {"type": "null"}]}


def _accepts_null(node: Any) -> bool:
    if not isinstance(node, dict):
        return node is True
    node = cast(dict[str, Any], node)
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    branches = cast(list[Any], node.get("anyOf") or node.get("oneOf") or [])
    return any(_accepts_null(b) for b in branches)


def without_added_nulls(value: Any, schema: Mapping[str, Any]) -> Any:
    """`value` with the nulls taken out that `strict_schema` let the model write for an
    optional property its schema does not let be null (so the property is left out), at any
    depth: in items, tuples, and the branch of an `anyOf`/`oneOf` the value fits."""
    # Imported here, as `OutputSchema.from_json_schema` does: only native mode needs it.
    from jsonschema import validators

    validator: Any = validators.validator_for(schema)(schema)  # pyright: ignore[reportUnknownMemberType]

    def fits(item: Any, branch: Any) -> bool:
        # Evolved from the whole schema's validator, so a `$ref` in the branch resolves.
        return bool(validator.evolve(schema=branch).is_valid(item))

    return _drop(value, schema, schema, fits)


_Fits = Callable[[Any, Any], bool]


def _drop(value: Any, node: Any, root: Mapping[str, Any], fits: _Fits) -> Any:
    node = _resolved(node, root)
    if not isinstance(node, dict):
        return value
    node = cast(dict[str, Any], node)
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            value = _in_branch(value, cast(list[Any], node[key]), root, fits)
    if isinstance(value, dict) and isinstance(node.get("properties"), dict):
        properties = cast(dict[str, Any], node["properties"])
        required = set(cast(list[str], node.get("required") or []))
        kept: dict[str, Any] = {}
        for key, item in cast(dict[str, Any], value).items():
            spec = properties.get(key)
            optional = item is None and key not in required and spec is not None
            if optional and not _accepts_null(_resolved(spec, root)):
                continue
            kept[key] = _drop(item, spec, root, fits) if spec is not None else item
        return kept
    if isinstance(value, list):
        items = cast(list[Any], value)
        prefix = cast(list[Any], node.get("prefixItems") or [])
        rest = node.get("items")
        return [
            _drop(item, prefix[n] if n < len(prefix) else rest, root, fits)
            for n, item in enumerate(items)
        ]
    return cast(Any, value)


def _in_branch(value: Any, branches: list[Any], root: Mapping[str, Any], fits: _Fits) -> Any:
    """`value` without the added nulls of the first branch it then fits; as it is if none
    (the answer's validation then says what is wrong)."""
    for branch in branches:
        cleaned = _drop(value, branch, root, fits)
        if fits(cleaned, branch):
            return cleaned
    return value


def _resolved(node: Any, root: Mapping[str, Any]) -> Any:
    """A local `$ref` (`#/$defs/Name`) followed, once per hop, to its schema."""
    seen: set[str] = set()
    while isinstance(node, dict) and isinstance(cast(dict[str, Any], node).get("$ref"), str):
        ref = cast(str, cast(dict[str, Any], node)["$ref"])
        if not ref.startswith("#/") or ref in seen:
            return cast(Any, node)
        seen.add(ref)
        target: Any = root
        for part in ref[2:].split("/"):
            target = cast(dict[str, Any], target).get(part) if isinstance(target, dict) else None
        if target is None:
            return cast(Any, node)
        node = target
    return cast(Any, node)
