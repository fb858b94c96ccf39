"""A result of text alone is taken and shaped as the SDK's models take and shape it, in every
era; anything the models could refuse or change is left to them."""

from __future__ import annotations

import json
import math
from typing import Any

import mcp_types
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import serialize_server_result

from toolkits.mcp import is_plain_text, plain_for_era

ERAS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()  # NaN and infinity too: what JSON mode writes as null
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
metas = st.dictionaries(
    st.sampled_from(["k", "progressToken", SERVER_INFO_META_KEY]) | st.text(max_size=4),
    json_values,
    max_size=3,
)
text_blocks = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=8)})
plain_results = st.fixed_dictionaries(
    {"content": st.lists(text_blocks, max_size=3)},
    optional={
        "isError": st.booleans(),
        "_meta": metas,
        "resultType": st.just("complete"),
    },
)
near_blocks = (
    text_blocks
    | st.fixed_dictionaries(
        {"type": st.just("text"), "text": st.text(max_size=4)},
        optional={"annotations": json_values, "_meta": json_values},
    )
    | st.fixed_dictionaries(
        {
            "type": st.sampled_from(["text", "image", "resource_link", "Text"]),
            "text": st.text(max_size=4) | st.integers() | st.none(),
        }
    )
    | json_values
)
near_results = (
    st.fixed_dictionaries(
        {"content": st.lists(near_blocks, max_size=3) | json_values},
        optional={
            "isError": st.booleans() | st.sampled_from([0, 1, "true", None]),
            "_meta": metas | json_values,
            "resultType": st.sampled_from(["complete", "input_required", "other", None]),
            "structuredContent": json_values,
            "extra": json_values,
        },
    )
    | st.dictionaries(st.sampled_from(["isError", "_meta", "resultType"]), json_values)
    | json_values
)


def _sdk_shaped(result: dict[str, Any], version: str) -> dict[str, Any]:
    return serialize_server_result("tools/call", version, {"resultType": "complete", **result})


def _without_stamp(shaped: dict[str, Any]) -> str:
    """`shaped` as JSON, keys in their order, the server's stamp left out (a gateway replaces
    it; it is passed as it came)."""
    meta: dict[str, Any] | None = shaped.get("_meta")
    if meta is not None:
        shaped = {**shaped, "_meta": {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY}}
    return json.dumps(shaped)


def _finite(value: Any) -> bool:
    """Whether no float in decoded JSON `value` is NaN or infinite."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


@settings(max_examples=1_000, deadline=None)
@given(plain_results)
def test_a_result_of_text_alone_is_taken_and_shaped_as_the_sdk_does(result: dict[str, Any]) -> None:
    assert is_plain_text(result)
    checked = mcp_types.CallToolResult.model_validate(result)
    assert checked.is_error == result.get("isError", False)
    meta = {k: v for k, v in result.get("_meta", {}).items() if k != SERVER_INFO_META_KEY}
    for version in ERAS:
        shaped = plain_for_era(result, version)
        # The models write NaN and infinity as null, and a 2026-07-28 `_meta` drops a null:
        # theirs to shape.
        if not _finite(meta) or (version == "2026-07-28" and None in meta.values()):
            assert shaped is None
            continue
        assert shaped is not None
        assert _without_stamp(shaped) == _without_stamp(_sdk_shaped(result, version))


@settings(max_examples=2_000, deadline=None)
@given(near_results)
def test_only_what_the_sdk_takes_unchanged_is_taken_as_plain(result: Any) -> None:
    if not is_plain_text(result):
        return
    mcp_types.CallToolResult.model_validate(result)  # never refused
    for version in ERAS:
        shaped = plain_for_era(result, version)
        if shaped is not None:
            assert _without_stamp(shaped) == _without_stamp(_sdk_shaped(result, version))


def test_what_is_not_text_alone_is_left_to_the_models() -> None:
    text = {"type": "text", "text": "hi"}
    assert is_plain_text({"content": [text], "isError": False, "_meta": {}})
    for not_plain in [
        {"content": [text], "structuredContent": {"result": "hi"}},
        {"content": [{**text, "annotations": {"priority": 1}}]},
        {"content": [{"type": "image", "data": "", "mimeType": "image/png"}]},
        {"content": [text], "isError": 1},
        {"content": [text], "resultType": "input_required"},
        {"content": [text], "_meta": None},
        {"content": "hi"},
        {"isError": False},
        [text],
    ]:
        assert not is_plain_text(not_plain), not_plain


def test_an_unknown_version_or_a_meta_the_models_would_change_is_not_shaped() -> None:
    assert plain_for_era({"content": []}, "2099-01-01") is None
    assert plain_for_era({"content": [], "_meta": {"n": math.nan}}, "2026-07-28") is None
    assert plain_for_era({"content": [], "_meta": {"n": None}}, "2026-07-28") is None
    assert plain_for_era({"content": [], "_meta": {"n": None}}, "2025-11-25") is not None
    stamp = {SERVER_INFO_META_KEY: {"name": "s", "version": math.inf}}
    assert plain_for_era({"content": [], "_meta": stamp}, "2026-07-28") is not None
