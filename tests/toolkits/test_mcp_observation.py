from __future__ import annotations

import mcp_types as types

from tests.servers.inprocess import content_kinds_result, text_result
from toolkits.observation import result_data, result_text, truncate


def test_every_content_kind_has_a_compact_text() -> None:
    result = content_kinds_result()
    result.structured_content = None
    assert result_text(result).splitlines() == [
        "all kinds",
        "[image: image/png, 48 bytes]",
        "[audio: audio/wav, 100 bytes]",
        "[resource: memo://notes/1 (text/plain)]",
        "note one",
        "[resource: memo://blobs/1, application/octet-stream, 3 bytes]",
        "[resource link 'report': memo://reports/7, application/pdf]",
    ]


def test_structured_content_is_the_observation_when_present() -> None:
    assert result_data(content_kinds_result()) == {"kinds": 6}
    assert result_data(text_result("hello")) == {"response": "hello"}


def test_long_text_is_cut_with_a_notice() -> None:
    text = "x" * 200_000
    assert truncate(text, 100) == "x" * 100 + "\n... [truncated 199900 of 200000 chars]"
    assert (
        result_text(text_result(text)) == "x" * 100_000 + "\n... [truncated 100000 of 200000 chars]"
    )
    assert truncate("short", 100) == "short"


def test_large_structured_content_falls_back_to_truncated_json() -> None:
    result = types.CallToolResult(content=[], structured_content={"rows": list(range(1000))})
    data = result_data(result, max_chars=50)
    assert isinstance(data, dict)
    response = data["response"]
    assert isinstance(response, str)
    assert response.startswith('{"rows":[0,1,2,')
    assert "truncated" in response


def test_large_structured_content_with_text_beside_it_gives_the_text_truncated() -> None:
    long = "x" * 200
    result = types.CallToolResult(
        content=[types.TextContent(text=long)], structured_content={"response": long}
    )
    assert result_data(result, max_chars=50) == {"response": truncate(long, 50)}


def test_missing_mime_types_are_named() -> None:
    result = types.CallToolResult(content=[types.ResourceLink(name="", uri="memo://x")])
    assert result_text(result) == "[resource link: memo://x]"
