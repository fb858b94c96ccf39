from __future__ import annotations

import base64
import json

import mcp_types as types
import pytest

from tests.servers.inprocess import PNG_BYTES, WAV_BYTES, content_kinds_result, text_result
from toolkits.observation import (
    MAX_MEDIA_BYTES,
    Media,
    observed_text,
    result_data,
    result_media,
    result_text,
    truncate,
)

PNG = base64.b64encode(PNG_BYTES).decode()
WAV = base64.b64encode(WAV_BYTES).decode()


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


def test_structured_content_alone_is_the_observation_when_the_text_repeats_it() -> None:
    def result(*texts: str, structured: dict[str, object]) -> types.CallToolResult:
        blocks: list[types.ContentBlock] = [types.TextContent(text=text) for text in texts]
        return types.CallToolResult(content=blocks, structured_content=structured)

    chart: dict[str, object] = {"chart": "bars", "n": 3}
    assert result_data(result(json.dumps(chart, indent=2), structured=chart)) == chart
    assert result_data(result(structured=chart)) == chart
    # the Python SDK's wrapped values, and a local tool's
    assert result_data(result("5", structured={"result": 5})) == {"result": 5}
    assert result_data(result('"a"', '"b"', structured={"result": ["a", "b"]})) == {
        "result": ["a", "b"]
    }
    assert result_data(result("9.99", structured={"response": "9.99"})) == {"response": "9.99"}
    # a field of it (server-filesystem's read_text_file)
    assert result_data(result("kept", structured={"content": "kept"})) == {"content": "kept"}
    assert result_data(text_result("hello")) == {"response": "hello"}


def test_structured_content_beside_other_content_is_given_with_all_of_it() -> None:
    """Once the model got only `{"kinds":6}`, not the text, image and resources beside it."""
    assert result_data(content_kinds_result()) == {
        "response": result_text(content_kinds_result()) + '\n{"kinds":6}'
    }
    mixed = types.CallToolResult(
        content=[
            types.TextContent(text="here is a chart"),
            types.ImageContent(data=PNG, mime_type="image/png"),
        ],
        structured_content={"chart": "bars"},
    )
    text = f'here is a chart\n[image: image/png, {len(PNG_BYTES)} bytes]\n{{"chart":"bars"}}'
    assert result_data(mixed) == {"response": text}
    assert observed_text(mixed) == text
    caption = types.CallToolResult(
        content=[types.TextContent(text="21.5 degrees")], structured_content={"temp": 21.5}
    )
    assert result_data(caption) == {"response": '21.5 degrees\n{"temp":21.5}'}


def test_an_error_keeps_its_structured_content() -> None:
    only = types.CallToolResult(
        content=[], structured_content={"code": "E42", "field": "id"}, is_error=True
    )
    assert observed_text(only) == '{"code":"E42","field":"id"}'
    both = only.model_copy(update={"content": [types.TextContent(text="bad id")]})
    assert observed_text(both) == 'bad id\n{"code":"E42","field":"id"}'


def test_a_text_blob_shows_its_text() -> None:
    def blob(mime_type: str, data: bytes) -> types.CallToolResult:
        encoded = base64.b64encode(data).decode()
        resource = types.BlobResourceContents(
            uri="file:///n.txt", mime_type=mime_type, blob=encoded
        )
        return types.CallToolResult(content=[types.EmbeddedResource(resource=resource)])

    assert result_text(blob("text/plain", "café\nline 2".encode())) == (
        "[resource: file:///n.txt (text/plain)]\ncafé\nline 2"
    )
    assert result_text(blob("application/json; charset=utf-8", b'{"a":1}')).endswith('\n{"a":1}')
    assert result_text(blob("text/plain", b"\xff\xfeok")).endswith("\n\ufffd\ufffdok")
    assert result_text(blob("application/zip", b"PK\x03\x04")) == (
        "[resource: file:///n.txt, application/zip, 4 bytes]"
    )


def test_images_and_audio_are_given_as_media_up_to_the_cap() -> None:
    assert result_media(content_kinds_result()) == (
        Media(kind="image", mime_type="image/png", data=PNG),
        Media(kind="audio", mime_type="audio/wav", data=WAV),
    )
    as_resource = types.EmbeddedResource(
        resource=types.BlobResourceContents(uri="file:///a.jpg", mime_type="Image/JPEG", blob=PNG)
    )
    huge = "A" * (MAX_MEDIA_BYTES // 3 * 4 + 4)
    over = types.ImageContent(data=huge, mime_type="image/png")
    result = types.CallToolResult(content=[as_resource, over])
    assert result_media(result) == (Media(kind="image", mime_type="image/jpeg", data=PNG),)
    described = result_text(result).splitlines()
    assert described[1] == (
        f"[image: image/png, {len(huge) * 3 // 4} bytes; too large to show the model "
        f"(over {MAX_MEDIA_BYTES} bytes)]"
    )
    assert result_media(text_result("no media")) == ()


@pytest.mark.parametrize("mime_type", ["", "application/pdf"])
def test_other_blobs_are_no_media(mime_type: str) -> None:
    resource = types.BlobResourceContents(uri="file:///x", mime_type=mime_type or None, blob=PNG)
    result = types.CallToolResult(content=[types.EmbeddedResource(resource=resource)])
    assert result_media(result) == ()


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


def test_structured_content_that_repeats_the_blocks_is_not_read_again() -> None:
    """server-filesystem's read_media_file: `{"content": [its block]}` beside the block."""

    def wire(block: types.ContentBlock) -> dict[str, object]:
        return block.model_dump(mode="json", by_alias=True, exclude_none=True)

    image = types.ImageContent(data=PNG, mime_type="image/png")
    caption = types.TextContent(text="a caption")
    blob = types.EmbeddedResource(
        resource=types.BlobResourceContents(uri="file:///a.bin", mime_type="x/y", blob=PNG)
    )
    cases: list[tuple[list[types.ContentBlock], dict[str, object]]] = [
        ([image], {"content": [wire(image)]}),
        ([image], {"image": wire(image)}),  # a lone block as the field itself
        ([caption, image], {"content": [wire(caption), wire(image)]}),
        ([blob], {"content": [wire(blob)]}),
    ]
    for blocks, structured in cases:
        result = types.CallToolResult(content=blocks, structured_content=structured)
        text = result_text(result)
        assert PNG not in text
        assert result_data(result) == {"response": text}
        assert observed_text(result) == text
        assert observed_text(result.model_copy(update={"is_error": True})) == text
    # More than the blocks again: read whole, as any structured content beside an image.
    more = types.CallToolResult(
        content=[image], structured_content={"content": [wire(image)], "path": "/a.png"}
    )
    assert result_data(more) == {"response": observed_text(more)}
    assert observed_text(more).startswith(f'{result_text(more)}\n{{"content":[{{')
    assert observed_text(more).endswith('"path":"/a.png"}')


def test_structured_content_that_is_no_object_is_read_as_the_value_it_is() -> None:
    """The 2026 era lets a tool's structured content be any JSON value (a list, a number):
    once `.values()` of a list crashed every such call through a gateway."""
    blocks: list[types.ContentBlock] = [types.TextContent(text="[1, 2]")]
    repeated = types.CallToolResult(content=blocks, structured_content=[1, 2])
    assert result_data(repeated) == [1, 2]
    assert observed_text(repeated) == "[1, 2]"
    caption: list[types.ContentBlock] = [types.TextContent(text="two numbers")]
    beside = types.CallToolResult(content=caption, structured_content=[1, 2])
    assert observed_text(beside) == "two numbers\n[1,2]"
    assert result_data(types.CallToolResult(content=[], structured_content=7)) == 7
    image = types.ImageContent(data=PNG, mime_type="image/png")
    wire = image.model_dump(mode="json", by_alias=True, exclude_none=True)
    echoed = types.CallToolResult(content=[image], structured_content=[wire])
    assert PNG not in observed_text(echoed)


def test_a_text_that_looks_like_json_nested_past_what_python_reads_is_text() -> None:
    """A local tool's string comes as its text and `{"result": text}`: comparing the two
    reads the text as JSON, which Python cannot past ~1,000 levels (it raised, and the run
    that called the tool failed)."""
    deep = "[" * 5000 + "]" * 5000
    result = types.CallToolResult(
        content=[types.TextContent(text=deep)], structured_content={"result": deep}
    )
    assert result_data(result) == {"result": deep}
    assert observed_text(result, max_chars=20_000) == deep
