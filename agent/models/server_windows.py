"""The context window an OpenAI-compatible server reports, wherever it keeps it.

- `{base}/models` (the OpenAI listing): vLLM's `max_model_len`, OpenRouter's and Azure's
  `context_length`, llama-swap's `meta.n_ctx`;
- llama.cpp's server (`owned_by: llamacpp`) lists its GGUF file, whatever the model's name, with
  the size it was trained for (`meta.n_ctx_train`); the window it runs with is in `/props`
  (`default_generation_settings.n_ctx`, the context of one slot);
- LM Studio (`owned_by: organization_owner`) lists names only; its own API,
  `/api/v0/models`, has the loaded window (`loaded_context_length`) and the most the model
  takes (`max_context_length`).

Each is asked at most once, and only where the listing points to it; a failed answer is no
window, never an error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ._http import endpoint
from ._json import JSONObject, arr, obj

__all__ = ["server_window"]

GetJSON = Callable[[str, Mapping[str, str]], Awaitable[Any]]
"""GET a URL once; its JSON, or None when it failed (`ProviderHTTP.get_json`)."""

_LISTED = ("max_model_len", "context_length", "max_context_length")


async def server_window(
    get_json: GetJSON, base_url: str, model: str, headers: Mapping[str, str]
) -> int | None:
    """The window the server at `base_url` (its OpenAI path, `.../v1`) runs `model` with."""
    listing = await get_json(endpoint(base_url, "/models"), headers)
    entry = _entry(arr(obj(listing).get("data")), model)
    window = _first_size(entry, *_LISTED) or _first_size(obj(entry.get("meta")), "n_ctx")
    if window:
        return window
    owner = entry.get("owned_by")
    root = _server_root(base_url)
    if owner == "llamacpp" or "meta" in entry:
        props = obj(await get_json(endpoint(root, "/props"), headers))
        settings = obj(props.get("default_generation_settings"))
        return (
            _first_size(settings, "n_ctx")
            or _first_size(props, "n_ctx")
            or _first_size(obj(entry.get("meta")), "n_ctx_train")
        )
    if owner == "organization_owner":
        models = arr(obj(await get_json(endpoint(root, "/api/v0/models"), headers)).get("data"))
        entry = _entry(models, model)
        return _first_size(entry, "loaded_context_length", "max_context_length")
    return None


def _entry(listed: list[Any], model: str) -> JSONObject:
    """The listing's entry for `model`; the only one when the server lists one (llama.cpp
    names its GGUF file there, whatever the model is called)."""
    entries = [obj(item) for item in listed]
    for entry in entries:
        if entry.get("id") == model:
            return entry
    return entries[0] if len(entries) == 1 else {}


def _first_size(entry: JSONObject, *keys: str) -> int | None:
    for key in keys:
        value = entry.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _server_root(base_url: str) -> str:
    """`base_url` without its trailing `/v1`: llama.cpp's and LM Studio's own endpoints live
    beside the OpenAI ones, not under them."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    path = path.removesuffix("/v1")
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
