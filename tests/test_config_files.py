"""Config files as written: JSON or TOML whatever the case of the name, a byte order mark, a
key that JSON gives twice; what is read as one (a regular file, a pipe) and what is not."""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path

import pytest

from gateway.config import load_config
from gateway.config_files import MAX_CONFIG_BYTES, read_config_bytes
from gateway.errors import ConfigError

SERVER = {"command": "srv", "args": ["first"]}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        # A second server of one name replaced the first, and a second agent the first.
        ('{"mcpServers": {"s": {"command": "a"}, "s": {"command": "b"}}}', "mcpServers.s"),
        ('{"agents": {"a": {"tools": []}, "a": {}}}', "agents.a"),
        ('{"mcpServers": {"s": {"command": "a", "args": ["x"], "args": []}}}', "mcpServers.s.args"),
        (
            '{"mcpServers": {"Google Drive": {"url": "u"}, "Google Drive": {}}}',
            'mcpServers."Google Drive"',
        ),
        ('{"agents": {}, "agents": {}}', "agents"),
    ],
)
def test_a_key_json_gives_twice_is_refused_as_toml_refuses_it(
    tmp_path: Path, text: str, where: str
) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}: {where}: given twice in one object; keep one of them"


@pytest.mark.parametrize(
    ("text", "kind"),
    [("[1, 2]", "an array"), ('"servers.toml"', "a string"), ("null", "null"), ("42", "a number")],
)
def test_a_json_config_that_is_no_object_says_what_a_config_is(
    tmp_path: Path, text: str, kind: str
) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f'{path}: a config is a JSON object of keys, like {{"mcpServers": {{...}}, '
        f'"agents": {{...}}}}, not {kind} ({text!r})'
    )


def test_the_same_key_in_two_objects_is_no_repeat(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    servers = {"a": {"command": "x", "args": ["1"]}, "b": {"command": "y", "args": ["2"]}}
    path.write_text(json.dumps({"mcpServers": servers}))
    assert list(load_config(path).mcp_servers) == ["a", "b"]


@pytest.mark.parametrize("name", ["agent-gateway.toml", "c.json"])
def test_a_byte_order_mark_is_no_part_of_the_config(tmp_path: Path, name: str) -> None:
    """A Windows editor's BOM made 'not valid TOML: Invalid statement (at line 1, column 1)',
    and JSON's error said to 'decode using utf-8-sig'."""
    path = tmp_path / name
    text = (
        '[mcpServers.s]\ncommand = "srv"\n'
        if name.endswith(".toml")
        else json.dumps({"mcpServers": {"s": SERVER}})
    )
    path.write_bytes(codecs.BOM_UTF8 + text.encode())
    assert list(load_config(path).mcp_servers) == ["s"]


@pytest.mark.parametrize("name", ["MCP.JSON", "servers.Json", "mcp-config", "servers.conf"])
def test_json_is_json_whatever_its_name(tmp_path: Path, name: str) -> None:
    """`UPPER.JSON`, or a file with no extension, was read as TOML: 'Invalid statement'."""
    path = tmp_path / name
    # A client's file: its own keys beside ours are ignored, as in any .json file.
    path.write_text(json.dumps({"mcpServers": {"Google Drive": SERVER}, "globalShortcut": "x"}))
    assert list(load_config(path).mcp_servers) == ["Google_Drive"]


@pytest.mark.parametrize("name", ["c.toml", "c.json"])
@pytest.mark.parametrize("levels", [101, 400, 5000])
def test_a_config_nested_too_deeply_is_one_clear_error(
    tmp_path: Path, name: str, levels: int
) -> None:
    """About 1,000 levels was a RecursionError's traceback (exit 1); 300-400 levels an error
    naming a key 1.9 kB long (`agents.a.extra_body.x.list.0.list.0...`)."""
    path = tmp_path / name
    inner = levels - 4  # agents.a.extra_body.x
    value = "[" * inner + "]" * inner
    if name.endswith(".toml"):
        path.write_text(f'[agents.a]\nmodel = "scripted:s.json"\nextra_body = {{ x = {value} }}\n')
    else:
        path.write_text(f'{{"agents": {{"a": {{"extra_body": {{"x": {value}}}}}}}}}')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    counted = f"{levels} levels; " if levels < 900 else ""
    assert str(caught.value) == (
        f"{path}: nested too deeply ({counted}at most 100 levels of tables and arrays)"
    )


def test_toml_by_any_other_name_is_toml(tmp_path: Path) -> None:
    path = tmp_path / "gateway.conf"
    path.write_text('[mcpServers.s]\ncommand = "srv"\n')
    assert list(load_config(path).mcp_servers) == ["s"]
    path.write_text("[mcpServers.s\n")
    with pytest.raises(ConfigError, match=r"gateway\.conf: not valid TOML"):
        load_config(path)


posix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")


@posix_only
def test_a_config_from_a_pipe_is_read_as_its_writer_writes_it() -> None:
    """`--config <(...)`: the shell's pipe, `/dev/fd/N`."""
    read, write = os.pipe()
    try:
        os.write(write, b"[agents.a]\ntools = []\n")
        os.close(write)
        config = load_config(f"/dev/fd/{read}")
    finally:
        os.close(read)
    assert list(config.agents) == ["a"]


@posix_only
def test_a_pipe_still_being_written_after_the_wait_is_refused() -> None:
    read, write = os.pipe()
    try:
        os.write(write, b"[agents.a]\n")  # and its writer never closes it
        with pytest.raises(ConfigError, match=r"a pipe still being written after 0\.2 s$"):
            read_config_bytes(Path(f"/dev/fd/{read}"), pipe_wait=0.2)
    finally:
        os.close(read)
        os.close(write)


@posix_only
@pytest.mark.timeout(10)
def test_a_fifo_without_a_writer_is_refused_at_once(tmp_path: Path) -> None:
    """Was: the command waited for a writer for ever, deaf to Ctrl-C and SIGTERM."""
    fifo = tmp_path / "ff.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as refused:
        load_config(fifo)
    assert str(refused.value) == (
        f"cannot read config {fifo}: a pipe with nothing in it (a FIFO nothing writes to?)"
    )


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_device_is_refused_unread() -> None:
    """Was: `/dev/zero` read until the memory ran out (19 GB)."""
    with pytest.raises(ConfigError) as refused:
        load_config("/dev/zero")
    assert str(refused.value) == "cannot read config /dev/zero: not a regular file (a device?)"


def test_a_config_larger_than_the_most_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    with big.open("wb") as file:
        file.truncate(MAX_CONFIG_BYTES + 1)  # sparse: no disk used
    with pytest.raises(ConfigError) as refused:
        load_config(big)
    assert str(refused.value) == f"cannot read config {big}: larger than 16 MB, not a config"
