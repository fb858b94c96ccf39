"""Config files: both formats, Claude Desktop's shape, and errors that name the bad key."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from gateway.assembly import open_gateway
from gateway.cli import main
from gateway.config import (
    DEFAULT_CONFIG,
    TOOLBOX_SERVER,
    load_config,
    parse_config,
    with_default_agent,
)
from gateway.errors import ConfigError
from gateway.memory_config import (
    MemoryConfig,
    default_memory_url,
    open_memories,
    stores_keep_days,
)

pytestmark = pytest.mark.anyio

TOML = """
[gateway]
max_concurrency = 4

[mcpServers.time]
command = "mcp-server-time"
args = ["--local-timezone", "UTC"]

[tools.calc]
builtin = "calculator"

[agents.assistant]
model = "scripted:answers.json"
system = "Be brief."
tools = ["calc", "time"]
max_iterations = 3
"""


def test_toml_and_json_with_the_same_keys_give_the_same_config(tmp_path: Path) -> None:
    import tomllib

    toml_file = tmp_path / "agent-gateway.toml"
    toml_file.write_text(TOML)
    json_file = tmp_path / "agent-gateway.json"
    json_file.write_text(json.dumps(tomllib.loads(TOML)))
    from_toml, from_json = load_config(toml_file), load_config(json_file)
    assert from_toml.model_dump() == from_json.model_dump()
    assert (from_toml.source, from_json.source) == (toml_file, json_file)
    assert from_toml.gateway.max_concurrency == 4
    assert from_toml.agents["assistant"].tools == ["calc", "time"]
    assert from_toml.mcp_servers["time"].args == ["--local-timezone", "UTC"]


def test_a_claude_desktop_file_is_read_for_its_servers(tmp_path: Path) -> None:
    desktop = {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {"memory": {"command": "npx", "args": ["-y", "server-memory"]}},
    }
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(desktop))
    assert list(load_config(path).mcp_servers) == ["memory"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"agnts": {}}, "agnts: unknown key"),
        ({"agents": {"a": {"max_iterations": 0}}}, "agents.a.max_iterations:"),
        ({"agents": {"a": {"tools": ["nope"]}}}, "agents.a.tools: no node named 'nope'"),
        ({"tools": {"c": {"builtin": "abacus"}}}, "tools.c: unknown builtin 'abacus'"),
        ({"tools": {"c": {}}}, "tools.c: set exactly one of `builtin` or `python`"),
        ({"tools": {"c": {"python": "no colon"}}}, "tools.c: `python` must look like"),
        ({"mcpServers": {"s": {"command": "x", "tmeout": 1}}, "agents": {}}, "mcpServers.s.tmeout"),
        (
            {"tools": {"x": {"builtin": "calculator"}}, "agents": {"x": {}}},
            "agents.x: the name is already used in tools",
        ),
        ({"agents": {"has space": {}}}, 'agents."has space": names may use'),
    ],
)
def test_bad_config_errors_name_the_key(data: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, source="cfg.toml")
    assert str(caught.value).startswith("cfg.toml: ")
    assert message in str(caught.value)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # TOML's `nan` and `inf`: every run failed on `extra_body` ("Out of range float values
        # are not JSON compliant"), and pruning on `keep_days` ("cannot convert float
        # infinity to integer").
        ({"agents": {"a": {"extra_body": {"penalty": NAN}}}}, "agents.a.extra_body.penalty"),
        ({"agents": {"a": {"extra_body": {"x": {"y": [1, INF]}}}}}, "agents.a.extra_body.x"),
        ({"agents": {"a": {"temperature": NAN}}}, "agents.a.temperature"),
        ({"agents": {"a": {"model_timeout": INF}}}, "agents.a.model_timeout"),
        ({"gateway": {"start_wait": INF}}, "gateway.start_wait"),
        ({"gateway": {"memory": {"keep_days": INF}}}, "gateway.memory.keep_days"),
        ({"store": {"keep_days": INF}}, "store.keep_days"),
        ({"store": {"unreachable_wait": NAN}}, "store.unreachable_wait"),
        ({"mcpServers": {"s": {"command": "x", "timeout": INF}}}, "mcpServers.s.timeout"),
        ({"tools": {"c": {"builtin": "calculator", "timeout": INF}}}, "tools.c.timeout"),
    ],
)
def test_a_float_setting_must_be_a_finite_number(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=r"Input should be a finite number, not (nan|inf)") as e:
        parse_config(data, source="c.toml")
    assert str(e.value).startswith(f"c.toml: {message}")


@pytest.mark.parametrize("table", ["store", "memory"])
def test_keep_days_is_at_most_a_hundred_years(table: str) -> None:
    """`keep_days = 1e18` (or `1e300`) was taken, and every run then warned that pruning
    failed: "Python int too large to convert to C int". 0 is for ever."""
    where: dict[str, object] = {"store": {"keep_days": 1e18}}
    if table == "memory":
        where = {"gateway": {"memory": {"keep_days": 1e18}}}
    with pytest.raises(
        ConfigError, match=r"keep_days: Input should be less than or equal to 36500"
    ):
        parse_config(where, source="c.toml")
    assert parse_config({"store": {"keep_days": 36500}}).store.keep_days == 36500


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        # `true` was 1 (a two-step run failed with "Max iterations (1) reached"), "10" was 10.
        ({"max_iterations": True}, "max_iterations: Input should be a valid integer, not true"),
        (
            {"max_iterations": "10"},
            'max_iterations: Input should be a valid integer, not the string "10" (write it '
            "without quotes)",
        ),
        ({"batch_size": True}, "batch_size: Input should be a valid integer, not true"),
        ({"fail_fast": "yes"}, 'fail_fast: Input should be a valid boolean, not the string "yes"'),
        (
            {"return_intermediate_steps": "false"},
            "return_intermediate_steps: Input should be a valid boolean, not the string "
            '"false" (write it without quotes)',
        ),
        ({"temperature": False}, "temperature: Input should be a valid number, not false"),
    ],
)
def test_a_value_of_another_type_is_refused_not_coerced(
    agent: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"agents": {"a": agent}}, source="c.toml")
    assert str(caught.value) == f"c.toml: agents.a.{message}"
    server = {"command": "srv", "timeout": "60"}
    with pytest.raises(ConfigError, match=r'mcpServers\.s\.timeout: .* not the string "60"'):
        parse_config({"mcpServers": {"s": server}}, source="c.toml")
    # An integer is still a number.
    settings = {"temperature": 1, "model_timeout": 30}
    assert parse_config({"agents": {"a": settings}}).agents["a"].temperature == 1.0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"mcpServers": {"t": {"command": "mcp-server-time", "args": "--local-timezone UTC"}}},
            'mcpServers.t.args: Input should be a valid list, not the string "--local-timezone '
            'UTC" (write it as a list: ["--local-timezone", "UTC"])',
        ),
        (
            {
                "tools": {"calculator": {"builtin": "calculator"}},
                "agents": {"a": {"tools": "calculator"}},
            },
            'agents.a.tools: Input should be a valid list, not the string "calculator" (write it '
            'as a list: ["calculator"])',
        ),
        (
            {"agents": {"a": {"tools": "time, calculator"}}},
            'agents.a.tools: Input should be a valid list, not the string "time, calculator" '
            '(write it as a list: ["time", "calculator"])',
        ),
        ({"agents": {"a": {"tools": 5}}}, "agents.a.tools: Input should be a valid list, not 5"),
    ],
)
def test_a_list_written_as_one_string_is_shown_as_a_list(
    data: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, source="c.toml")
    assert str(caught.value) == f"c.toml: {message}"


def test_an_unknown_node_of_an_agent_is_guessed_and_the_known_ones_are_listed_briefly() -> None:
    servers = {f"tk{n:03}": {"url": f"http://127.0.0.1:1/s{n}/mcp"} for n in range(1, 101)}
    data = {"mcpServers": servers, "agents": {"a1": {"tools": ["tk001", "tk73"]}}}
    with pytest.raises(ConfigError) as caught:
        parse_config(data, source="cfg.toml")
    assert str(caught.value) == (
        "cfg.toml: agents.a1.tools: no node named 'tk73'; did you mean 'tk073'? (known: a1, "
        + ", ".join(f"tk{n:03}" for n in range(1, 20))
        + " and 81 more)"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"agnts": {}}, "agnts: unknown key (did you mean 'agents'?)"),
        ({"agent": {"x": {}}}, "agent: unknown key (did you mean 'agents'?)"),
        ({"mcpservers": {"x": {}}}, "mcpservers: unknown key (did you mean 'mcpServers'?)"),
        (
            {"agents": {"a": {"max_iteration": 3}}},
            "agents.a.max_iteration: unknown key (did you mean 'max_iterations'?)",
        ),
        (
            {"gateway": {"max_concurency": 3}},
            "gateway.max_concurency: unknown key (did you mean 'max_concurrency'?)",
        ),
        (
            {"mcpServers": {"x": {"command": "c", "conect_timeout": 3}}},
            "mcpServers.x.conect_timeout: unknown key (did you mean 'connect_timeout'?)",
        ),
        (
            {"agents": {"a": {"memory": {"turn": 3}}}},
            "agents.a.memory.turn: unknown key (did you mean 'turns'?)",
        ),
        ({"store": {"kep_days": 1}}, "store.kep_days: unknown key (did you mean 'keep_days'?)"),
        ({"colour": "blue"}, "colour: unknown key"),  # near nothing: nothing suggested
    ],
)
def test_an_unknown_key_of_our_file_suggests_the_known_one(data: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, source="cfg.toml", client_file=False)
    assert str(caught.value) == f"cfg.toml: {message}"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"agents": {"a": {"model": 5}}},
            'agents.a.model: must be a model spec ("openai:gpt-4.1-mini") or a list of them, not 5',
        ),
        (
            {"agents": {"a": {"model": ["openai:gpt-4.1", 5]}}},
            'agents.a.model: must be a model spec ("openai:gpt-4.1-mini") or a list of them, '
            "not ['openai:gpt-4.1', 5]",
        ),
        (
            {"agents": {"a": {"model": "${MODEL}"}}},
            "agents.a.model: '${MODEL}': ${VAR} is expanded only in the mcpServers' launch keys "
            "(command, args, env, cwd, url, headers); write the spec itself, or pass --model SPEC",
        ),
        (
            {"store": {"url": "postgresql://gw:${PW}@db/gw"}},
            "store.url: 'postgresql://gw:***@db/gw': ${VAR} is expanded only in the "
            "mcpServers' launch keys; write the URL itself, or pass --store URL",
        ),
        # Chat memory's URL was first checked when a run used it (exit 1, no key named).
        (
            {"gateway": {"memory": "${REDIS_URL}"}},
            "gateway.memory: '${REDIS_URL}': ${VAR} is expanded only in the mcpServers' "
            "launch keys; write the URL itself",
        ),
        (
            {"agents": {"a": {"memory": "foo://x"}}},
            "agents.a.memory: unknown memory URL scheme 'foo'; expected one of: memory://, "
            "sqlite:///FILE, postgresql://..., redis://...",
        ),
        (
            {"gateway": {"memory": {"url": "sqlite://rel.db", "turns": 3}}},
            "gateway.memory.url: a SQLite memory URL names a file: sqlite:///FILE, not "
            "'sqlite://rel.db'",
        ),
        (
            {"gateway": {"memory": 5}},
            'gateway.memory: a store URL ("sqlite:///memory.db") or a table (url, turns, ...), '
            "not 5",
        ),
    ],
)
def test_a_bad_model_or_a_variable_where_none_expands_is_one_clear_line(
    data: object, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, source="cfg.toml")
    assert str(caught.value) == f"cfg.toml: {message}"


def test_a_stray_space_around_a_model_spec_is_dropped() -> None:
    agents = parse_config(
        {"agents": {"a": {"model": "openai:gpt-4.1-mini "}, "b": {"model": [" openai:o3"]}}}
    ).agents
    assert (agents["a"].model, agents["b"].model) == ("openai:gpt-4.1-mini", ["openai:o3"])


def test_a_store_table_in_a_client_file_is_ours_not_the_clients() -> None:
    data = {"mcpServers": {}, "store": {"url": "sqlite:////tmp/runs.db"}, "globalShortcut": "x"}
    assert parse_config(data).store.url == "sqlite:////tmp/runs.db"


def test_unreadable_and_malformed_files_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[agents\n")
    with pytest.raises(ConfigError, match=r"broken\.toml: not valid TOML"):
        load_config(broken)


def test_no_file_means_the_built_in_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config() == DEFAULT_CONFIG
    (tmp_path / "agent-gateway.toml").write_text(TOML)
    assert load_config() != DEFAULT_CONFIG


async def test_a_python_function_becomes_a_tool_named_after_its_node() -> None:
    config = parse_config(
        {
            "tools": {"shout": {"python": "tests.sample_tools:shout", "description": "Loud."}},
            "agents": {"a": {"tools": ["shout"]}},
        }
    )
    async with open_gateway(config) as gateway:
        tools = await gateway.list_tools()
        assert tools["shout"].description == "Loud."
        assert tools["shout"].input_schema["required"] == ["text"]
        result = await gateway.call_tool("shout", {"text": "hi", "times": 2})
    assert result.structured_content == {"response": "HI HI"}


async def test_a_local_tool_keeps_its_name_against_a_servers_bare_one() -> None:
    # The server offers convert_units with prefix "never"; so does the local tool. A call of
    # the name goes where the listing says, whether the servers were waited for or not.
    config = parse_config(
        {
            "mcpServers": {"tb1": {**_toolbox(), "prefix": "never"}},
            "tools": {"convert_units": {"python": "tests.sample_tools:shout"}},
        }
    )
    async with open_gateway(config) as gateway:
        tools = await gateway.list_tools()
        assert tools["convert_units"].source_node == "convert_units"
        assert tools["tb1__convert_units"].source_node == "tb1"
        assert tools["text_stats"].source_node == "tb1"  # the others stay bare
        server = await gateway.call_tool(
            "tb1__convert_units", {"value": 1, "from_unit": "km", "to_unit": "m"}
        )
        assert server.structured_content == {"value": 1000.0, "unit": "m"}
    async with open_gateway(config, start_wait=0) as gateway:  # as `call` of a local tool
        local = await gateway.call_tool("convert_units", {"text": "hi"})
    assert local.structured_content == {"response": "HI"}


def _toolbox() -> dict[str, object]:
    return {"command": TOOLBOX_SERVER.command, "args": TOOLBOX_SERVER.args}


def test_a_stdio_server_of_our_file_starts_beside_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    folder = tmp_path / "cfg"
    folder.mkdir()
    file = folder / "agent-gateway.toml"
    file.write_text(
        '[mcpServers.plain]\ncommand = "python3"\nargs = ["srv/tb.py"]\n'
        '[mcpServers.script]\ncommand = "./run.sh"\ncwd = "srv"\n'
        '[mcpServers.placed]\ncommand = "bin/server"\ncwd = "/opt"\n'
        '[mcpServers.remote]\nurl = "http://127.0.0.1:3001/mcp"\n'
    )
    servers = load_config(file).mcp_servers
    # A bare command is looked up on PATH; its relative args resolve in its cwd: the folder.
    assert (servers["plain"].command, servers["plain"].cwd) == ("python3", str(folder))
    assert servers["plain"].args == ["srv/tb.py"]
    assert (servers["script"].command, servers["script"].cwd) == (
        str(folder / "run.sh"),
        str(folder / "srv"),
    )
    assert (servers["placed"].command, servers["placed"].cwd) == (
        str(folder / "bin" / "server"),
        "/opt",
    )
    assert servers["remote"].cwd is None


def test_an_mcp_clients_file_keeps_the_clients_meaning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    entry = {"command": "./run.sh", "args": ["srv/tb.py"], "cwd": "srv"}
    for name in (".mcp.json", "claude_desktop_config.json"):
        (tmp_path / name).write_text(json.dumps({"mcpServers": {"s": entry}}))
        server = load_config(tmp_path / name).mcp_servers["s"]
        assert (server.command, server.args, server.cwd) == ("./run.sh", ["srv/tb.py"], "srv")


async def test_a_server_with_relative_paths_starts_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The toolbox, run by a script given relative to the file, from another folder.
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "tb.py").write_text(
        f"import runpy\nrunpy.run_path({TOOLBOX_SERVER.args[-1]!r}, run_name='__main__')\n"
    )
    file = tmp_path / "agent-gateway.toml"
    file.write_text(f'[mcpServers.tb]\ncommand = {sys.executable!r}\nargs = ["-P", "srv/tb.py"]\n')
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    async with open_gateway(load_config(file)) as gateway:
        result = await gateway.call_tool("tb__text_stats", {"text": "two words"})
    assert result.structured_content is not None
    assert result.structured_content["words"] == 2


async def test_an_unimportable_python_tool_is_a_config_error() -> None:
    config = parse_config({"tools": {"t": {"python": "tests.sample_tools:missing"}}})
    with pytest.raises(ConfigError, match=r"tools\.t\.python: cannot import"):
        async with open_gateway(config):
            pass


def test_a_client_file_keeps_its_own_keys_beside_our_tables(tmp_path: Path) -> None:
    desktop = {
        "globalShortcut": "Ctrl+Space",
        "preferences": {"menuBarEnabled": True},
        "mcpServers": {"memory": {"command": "npx", "args": ["-y", "server-memory"]}},
        "agents": {"helper": {"tools": ["memory"]}},
    }
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(desktop))
    config = load_config(path)
    assert list(config.agents) == ["helper"]
    assert list(config.mcp_servers) == ["memory"]
    with pytest.raises(ConfigError, match=r"agnts: unknown key \(did you mean 'agents'\?\)"):
        parse_config({**desktop, "agnts": {}}, source="c.json")


def test_variables_in_server_launch_keys_expand_as_in_mcp_clients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("API_TOKEN", "s3cret")
    monkeypatch.setenv("DATA_DIR", "/data")
    monkeypatch.setenv("EMPTY", "")
    monkeypatch.delenv("UNSET_ONE", raising=False)
    monkeypatch.setenv("PWD", str(tmp_path))
    servers = {
        "files": {
            "command": "${DATA_DIR}/bin/server",
            "args": ["--root", "${PWD}", "--mode=${UNSET_ONE:-fast}", "${EMPTY:-fallback}"],
            "env": {"TOKEN": "${env:API_TOKEN}", "HOME_DIR": "${userHome}", "E": "${EMPTY}"},
        },
        "web": {
            "url": "https://${UNSET_ONE:-example.com}/mcp",
            "headers": {"Authorization": "Bearer ${API_TOKEN}", "X-Note": "$API_TOKEN"},
        },
    }
    config = parse_config({"mcpServers": servers})
    files, web = config.mcp_servers["files"], config.mcp_servers["web"]
    assert files.command == "/data/bin/server"
    assert files.args == ["--root", str(tmp_path), "--mode=fast", "fallback"]
    assert files.env == {"TOKEN": "s3cret", "HOME_DIR": str(Path.home()), "E": ""}
    assert web.url == "https://example.com/mcp"
    assert web.headers == {"Authorization": "Bearer s3cret", "X-Note": "$API_TOKEN"}


def test_a_header_that_takes_a_variable_is_marked_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_KEY", "k3y")
    web = {
        "url": "https://example.com/mcp",
        "headers": {
            "X-Api-Key": "${API_KEY}",
            "X-Tenant": "t-${env:API_KEY:-none}",
            "X-Where": "${PWD}",
            "X-Team": "blue",
            "X-Pin": "1234",
        },
        "secret_headers": ["X-Pin"],
    }
    config = parse_config({"mcpServers": {"web": web}})
    assert config.mcp_servers["web"].secret_headers == ["X-Pin", "X-Api-Key", "X-Tenant"]
    unknown = r"c: mcpServers\.web: `secret_headers` names 'X-Nope', not in `headers`"
    with pytest.raises(ConfigError, match=unknown):
        parse_config({"mcpServers": {"web": {**web, "secret_headers": ["X-Nope"]}}}, source="c")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("${UNSET_ONE}", r"c\.json: mcpServers\.s\.args: \$\{UNSET_ONE\} is not set"),
        ("${not a name}", r"mcpServers\.s\.args: cannot expand \$\{not a name\}"),
    ],
)
def test_a_variable_that_cannot_expand_is_a_clear_error(
    value: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("UNSET_ONE", raising=False)
    with pytest.raises(ConfigError, match=message):
        parse_config({"mcpServers": {"s": {"command": "x", "args": [value]}}}, source="c.json")


def test_a_client_mcp_json_is_picked_up_when_there_is_no_config_of_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"m": {"command": "srv"}}}))
    assert list(load_config().mcp_servers) == ["m"]
    (tmp_path / "agent-gateway.toml").write_text(TOML)
    assert list(load_config().mcp_servers) == ["time"]


def test_a_config_of_servers_only_gets_an_assistant_on_every_node() -> None:
    config = with_default_agent(
        parse_config(
            {"mcpServers": {"a": {"command": "x"}}, "tools": {"c": {"builtin": "calculator"}}}
        )
    )
    assert list(config.agents) == ["assistant"]
    assert config.agents["assistant"].tools == ["a", "c"]
    configured = parse_config({"tools": {"c": {"builtin": "calculator"}}, "agents": {"x": {}}})
    assert with_default_agent(configured) == configured
    # A server named `assistant` left such a file with no agent: "defines no agents, nor any
    # MCP server or tool for a default one".
    servers = {"assistant": {"command": "x"}, "assistant_2": {"command": "y"}}
    taken = with_default_agent(parse_config({"mcpServers": servers}))
    assert list(taken.agents) == ["assistant_3"]
    assert taken.agents["assistant_3"].tools == ["assistant", "assistant_2"]


def test_a_clients_server_keys_become_node_names(tmp_path: Path) -> None:
    servers = {
        "acme.tools": {"command": "acme"},
        "Google Drive": {"url": "https://example.com/mcp"},
        "plain": {"command": "p"},
    }
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    config = with_default_agent(load_config(path))
    assert list(config.mcp_servers) == ["acme_tools", "Google_Drive", "plain"]
    assert config.agents["assistant"].tools == ["acme_tools", "Google_Drive", "plain"]
    # The file's agents may name a server by its key as written.
    named = parse_config({"mcpServers": servers, "agents": {"a": {"tools": ["Google Drive"]}}})
    assert named.agents["a"].tools == ["Google_Drive"]


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        (
            {"a.b": {"command": "x"}, "a_b": {"command": "y"}},
            "x.json: mcpServers.a_b and mcpServers.\"a.b\" would both be node 'a_b'",
        ),
        (
            {"acme.tools": {"command": "x", "timout": 1}},
            "x.json: mcpServers.\"acme.tools\".timout: unknown key (did you mean 'timeout'?)",
        ),
        ({"": {"command": "x"}}, 'x.json: mcpServers."": a server\'s name may have 1-64'),
    ],
)
def test_a_clients_server_key_at_fault_is_named_as_written(
    servers: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"mcpServers": servers}, source="x.json")
    assert str(caught.value).startswith(message)


def test_a_server_name_of_our_file_must_be_a_node_name(tmp_path: Path) -> None:
    path = tmp_path / "agent-gateway.toml"
    path.write_text('[mcpServers."acme.tools"]\ncommand = "srv"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}: mcpServers.\"acme.tools\": names may use letters, digits, '_' and '-' (1-64): "
        "name it 'acme_tools' (a tool prefix a model takes); a client's .json file may keep its "
        "own key, its other characters become '_'"
    )


def test_in_a_toml_file_every_key_counts(tmp_path: Path) -> None:
    path = tmp_path / "agent-gateway.toml"
    path.write_text('[mcpServers.m]\ncommand = "srv"\n[preferences]\nx = 1\n')
    with pytest.raises(ConfigError, match="preferences: unknown key"):
        load_config(path)


def test_an_agent_reaches_the_agents_it_calls_and_their_nodes() -> None:
    config = parse_config(
        {
            "mcpServers": {name: {"command": "x"} for name in ("s1", "s2", "s3", "s4")},
            "agents": {
                "other": {"tools": ["s4"]},
                "lead": {"tools": ["middle", "s1"]},
                "middle": {"tools": ["leaf", "s2", "lead"]},  # a cycle ends where it began
                "leaf": {"tools": ["s3"]},
            },
        }
    )
    assert list(config.reached_from(["lead"])) == ["lead", "middle", "leaf"]
    assert config.nodes_of("lead") == {"s1", "s2", "s3"}
    assert config.nodes_of("leaf") == {"s3"}
    assert config.nodes_of("nobody") == set()


def test_a_config_found_in_the_folder_says_what_it_starts_before_it_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder's `.mcp.json` started its servers and imported its python tools at `tools`,
    `run`, `demo` with no word: now one line on stderr names the file and what it runs."""
    server = Path(__file__).parent / "servers" / "logged_stdio.py"
    found = {
        "mcpServers": {"logged": {"command": sys.executable, "args": [str(server)]}},
        "tools": {"helper": {"python": "helper_tool:echo"}},
    }
    (tmp_path / ".mcp.json").write_text(json.dumps(found))
    (tmp_path / "helper_tool.py").write_text(
        'def echo(text: str) -> str:\n    """Say it back."""\n    return text\n'
    )
    monkeypatch.chdir(tmp_path)
    assert main(["tools", "--json"]) == 0
    out, err = capsys.readouterr()
    assert {tool["name"] for tool in json.loads(out)["tools"]} >= {"helper", "logged__logged"}
    assert err.splitlines()[0] == (
        "note: using .mcp.json, found in this folder: starting its servers logged and "
        "importing its python tools helper (--config FILE names another)"
    )
    assert main(["tools", "--json", "--config", ".mcp.json"]) == 0  # named: known to the user
    assert "note:" not in capsys.readouterr().err
    assert main(["sessions", "list"]) == 0  # starts nothing
    assert "note:" not in capsys.readouterr().err
    (tmp_path / "agent-gateway.toml").write_text('[tools.c]\nbuiltin = "calculator"\n')
    assert main(["tools"]) == 0  # found, but it runs nothing of its own
    assert "note:" not in capsys.readouterr().err


def test_a_store_shared_by_agents_keeps_sessions_as_long_as_the_longest_asks() -> None:
    shared = MemoryConfig(url="sqlite:////m.db", keep_days=30)
    longer = MemoryConfig(url="sqlite:////m.db", keep_days=90)
    forever = MemoryConfig(url="sqlite:////m.db")
    elsewhere = MemoryConfig(url="sqlite:////other.db", keep_days=7)
    assert stores_keep_days(shared, {"a": None, "b": longer}) == {"sqlite:////m.db": 90}
    assert stores_keep_days(shared, {"a": None, "b": forever, "c": elsewhere}) == {
        "sqlite:////m.db": 0,  # for ever: still told, for servers that say they are one
        "sqlite:////other.db": 7,
    }
    assert stores_keep_days(None, {"a": None}) == {default_memory_url(): 0}


def test_one_store_spelled_two_ways_is_one_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agent `b` named agent `a`'s database as `localhost` (or by its Unix socket) where `a`
    said `127.0.0.1`: `a`'s keep_days deleted `b`'s sessions, kept for ever; on a SQLite file
    spelled with `//`, turns on one session did not take turns."""
    pg = "postgresql://gw:secret@127.0.0.1:5432/gw"
    short = MemoryConfig(url=pg, keep_days=1)
    forever = MemoryConfig(url="postgres://gw@localhost/gw")
    assert stores_keep_days(None, {"a": short, "b": forever}) == {pg: 0}
    other_user = MemoryConfig(url="postgresql://reader@localhost/gw", keep_days=2)
    assert stores_keep_days(None, {"a": short, "b": other_user}) == {pg: 2}
    other_database = MemoryConfig(url=f"{pg}x")
    assert stores_keep_days(None, {"a": short, "c": other_database}) == {pg: 1, f"{pg}x": 0}
    # Its Unix socket is the same local server (libpq's default socket, with no host, too).
    monkeypatch.delenv("PGHOST", raising=False)
    for socket in (
        "postgresql://gw@%2Frun%2Fpostgresql:5432/gw",
        "postgresql:///gw?host=/run/postgresql&user=gw",
        "postgresql:///gw?user=gw",
    ):
        assert stores_keep_days(None, {"a": short, "b": MemoryConfig(url=socket)}) == {pg: 0}
    on_other_port = MemoryConfig(url="postgresql://gw@%2Frun%2Fpostgresql:5433/gw")
    assert stores_keep_days(None, {"a": short, "b": on_other_port}) == {
        pg: 1,
        on_other_port.url: 0,
    }
    redis = MemoryConfig(url="redis://127.0.0.1:6379/0", keep_days=1)
    kept = stores_keep_days(None, {"a": redis, "b": MemoryConfig(url="redis://localhost")})
    assert kept == {"redis://127.0.0.1:6379/0": 0}

    file = tmp_path / "sub" / "m.db"
    spelled = [f"sqlite:///{file}", f"sqlite:///{tmp_path}//sub/../sub/m.db"]
    memories, stores = open_memories(
        None, {"a": MemoryConfig(url=spelled[0]), "b": MemoryConfig(url=spelled[1])}
    )
    assert memories["a"].store is memories["b"].store
    assert set(stores) == set(spelled)

    async def take_turns() -> list[str]:
        waited: list[str] = []
        holding, told = anyio.Event(), anyio.Event()

        async def on_wait(session_id: str) -> None:
            waited.append(session_id)
            told.set()

        async def first() -> None:
            async with memories["a"].hold(["s"]):
                holding.set()
                await told.wait()  # b waits for a's turn on the session

        async def second() -> None:
            await holding.wait()
            async with memories["b"].hold(["s"], on_wait):
                pass

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                tg.start_soon(second)
        return waited

    assert anyio.run(take_turns) == ["s"]
