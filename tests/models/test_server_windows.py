"""The context window an OpenAI-compatible server reports: llama.cpp's and LM Studio's, each
in its own wire format."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agent.models import OpenAICompatibleModel

from .support import FakeProvider, json_response

pytestmark = pytest.mark.anyio

LLAMACPP_MODELS = {
    "models": [
        {
            "name": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            "model": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            "modified_at": "",
            "size": "",
            "digest": "",
            "type": "model",
            "description": "",
            "tags": [""],
            "capabilities": ["completion"],
            "parameters": "",
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": "",
                "families": [""],
                "parameter_size": "",
                "quantization_level": "",
            },
        }
    ],
    "object": "list",
    "data": [
        {
            "id": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            "object": "model",
            "created": 1750000000,
            "owned_by": "llamacpp",
            "meta": {
                "vocab_type": 2,
                "n_vocab": 151936,
                "n_ctx_train": 32768,
                "n_embd": 1536,
                "n_params": 1543714304,
                "size": 1104464384,
            },
        }
    ],
}
LLAMACPP_PROPS = {
    "default_generation_settings": {
        "id": 0,
        "id_task": -1,
        "n_ctx": 4096,
        "speculative": False,
        "is_processing": False,
        "params": {"n_predict": -1, "temperature": 0.8},
    },
    "total_slots": 1,
    "model_path": "/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    "chat_template": "{%- for message in messages %}...",
    "build_info": "b5902-4a4f4269",
}
LMSTUDIO_MODELS = {
    "data": [
        {"id": "qwen2.5-7b-instruct", "object": "model", "owned_by": "organization_owner"},
        {
            "id": "text-embedding-nomic-embed-text-v1.5",
            "object": "model",
            "owned_by": "organization_owner",
        },
    ],
    "object": "list",
}


def lmstudio_api_models(*, loaded: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": "qwen2.5-7b-instruct",
        "object": "model",
        "type": "llm",
        "publisher": "lmstudio-community",
        "arch": "qwen2",
        "compatibility_type": "gguf",
        "quantization": "Q4_K_M",
        "state": "loaded" if loaded else "not-loaded",
        "max_context_length": 32768,
    }
    if loaded:
        entry["loaded_context_length"] = 8192
    embedding = {
        "id": "text-embedding-nomic-embed-text-v1.5",
        "object": "model",
        "type": "embeddings",
        "state": "not-loaded",
        "max_context_length": 2048,
    }
    return {"object": "list", "data": [embedding, entry]}


def local(fake: FakeProvider, base: str, model: str) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(base, model, http_client=fake.client())


async def test_llamacpps_window_is_its_props_n_ctx_whatever_the_model_is_called() -> None:
    fake = FakeProvider(json_response(200, LLAMACPP_MODELS), json_response(200, LLAMACPP_PROPS))
    model = local(fake, "http://127.0.0.1:8080/v1", "qwen2.5")
    assert await model.context_window() == 4096
    assert await model.context_window() == 4096  # asked once
    assert [r.url.path for r in fake.requests] == ["/v1/models", "/props"]


async def test_without_props_llamacpps_trained_size_will_do() -> None:
    fake = FakeProvider(json_response(200, LLAMACPP_MODELS), json_response(404, {"error": "x"}))
    assert await local(fake, "http://127.0.0.1:8080/v1", "m").context_window() == 32768


@pytest.mark.parametrize(("loaded", "window"), [(True, 8192), (False, 32768)])
async def test_lm_studios_window_comes_from_its_own_api(loaded: bool, window: int) -> None:
    fake = FakeProvider(
        json_response(200, LMSTUDIO_MODELS), json_response(200, lmstudio_api_models(loaded=loaded))
    )
    model = local(fake, "http://127.0.0.1:1234/v1/", "qwen2.5-7b-instruct")
    assert await model.context_window() == window
    assert [str(r.url) for r in fake.requests] == [
        "http://127.0.0.1:1234/v1/models",
        "http://127.0.0.1:1234/api/v0/models",
    ]


async def test_a_server_that_tells_no_window_is_asked_nothing_more() -> None:
    ollama = {
        "object": "list",
        "data": [
            {"id": "qwen2.5", "object": "model", "created": 1750000000, "owned_by": "library"},
            {"id": "llama3.2", "object": "model", "created": 1750000000, "owned_by": "library"},
        ],
    }
    fake = FakeProvider(json_response(200, ollama))
    assert await local(fake, "http://127.0.0.1:11434/v1", "qwen2.5").context_window() is None
    assert len(fake.requests) == 1
    broken = FakeProvider(json_response(200, LMSTUDIO_MODELS), httpx.ReadError("reset"))
    model = local(broken, "http://127.0.0.1:1234/v1", "qwen2.5-7b-instruct")
    assert await model.context_window() is None
