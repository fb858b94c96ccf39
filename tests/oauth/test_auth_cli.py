"""`agent-gateway auth login|status|logout` as the installed console script, against a real
authorization server and a protected MCP server on 127.0.0.1; and what a run says when a
server needs authorisation."""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
from pathlib import Path
from urllib.parse import quote

import anyio
import pytest

from tests.servers.oauth import AuthorityOptions, OAuthWorld, oauth_world

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SCRIPT = Path(sys.executable).parent / "agent-gateway"
REPO = Path(__file__).resolve().parents[2]

# A stand-in browser: `webbrowser` runs $BROWSER with the URL; this one GETs it and follows the
# redirects, as a person approving at once would, so the code lands on the loopback callback.
FAKE_BROWSER = """
import sys, httpx2
httpx2.get(sys.argv[1], follow_redirects=True, timeout=10)
"""


def browser_command(script: Path) -> str:
    """$BROWSER running `script`: `webbrowser` splits it as a shell would."""
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} %s"


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AGENT_GATEWAY_OAUTH") and key != "BROWSER"
    }
    env |= {
        "AGENT_GATEWAY_OAUTH_STORE": "file",
        "AGENT_GATEWAY_OAUTH_DIR": str(tmp_path / "oauth"),
        "PYTHONPATH": str(REPO),
    }
    return env | extra


def write_config(tmp_path: Path, world: OAuthWorld) -> Path:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        f'[mcpServers.remote]\nurl = "{world.url}"\n[tools.calculator]\nbuiltin = "calculator"\n'
    )
    return config


async def gateway(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [str(SCRIPT), *args], env=env, cwd=REPO, check=False, stdin=None
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_login_status_use_and_logout(tmp_path: Path) -> None:
    async with oauth_world() as world:
        config = str(write_config(tmp_path, world))
        fetching = environment(tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch")
        plain = environment(tmp_path)

        code, out, _ = await gateway(plain, "auth", "status", "--config", config)
        assert code == 0
        assert "remote: not authorised (agent-gateway auth login remote)" in out

        code, out, err = await gateway(fetching, "auth", "login", "remote", "--config", config)
        assert (code, err) == (0, "")
        assert out.startswith("remote: authorised, token expires ")
        assert out.endswith(", scopes: read; 2 tools\n")

        code, out, _ = await gateway(plain, "auth", "status", "--config", config)
        assert "remote: authorised, token expires" in out
        assert "tokens in: file store" in out

        # Any later process uses the stored tokens, with no person and no fetching.
        code, out, err = await gateway(plain, "tools", "--config", config)
        assert code == 0, out + err
        assert "remote__echo" in out

        [refresh] = world.authority.refresh
        [access] = world.authority.access
        code, out, _ = await gateway(plain, "auth", "logout", "remote", "--config", config)
        assert (code, out) == (
            0,
            "remote: tokens revoked at the authorization server, forgotten here\n",
        )
        assert world.authority.revoked == [refresh, access]  # RFC 7009, refresh token first
        assert not world.authority.access
        assert not world.authority.refresh

        code, out, _ = await gateway(plain, "auth", "status", "--config", config)
        assert "remote: not authorised" in out
    assert world.authority.grants == ["authorization_code"]


async def test_a_login_that_fails_leaves_the_previous_authorisation(tmp_path: Path) -> None:
    async with oauth_world() as world:
        config = str(write_config(tmp_path, world))
        fetching = environment(tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch")
        plain = environment(tmp_path)
        code, _, err = await gateway(fetching, "auth", "login", "remote", "--config", config)
        assert (code, err) == (0, "")
        world.authority.token_failure = (500, "server_error")
        code, _, err = await gateway(fetching, "auth", "login", "remote", "--config", config)
        assert code == 1
        assert err.startswith("error: could not authorise at 'remote': Token exchange failed (500)")
        world.authority.token_failure = None
        code, out, _ = await gateway(plain, "auth", "status", "--config", config)
        assert "remote: authorised, token expires" in out
        code, out, err = await gateway(plain, "tools", "--config", config)
        assert code == 0, out + err
        assert "remote__echo" in out
    assert world.authority.grants == ["authorization_code"]


async def test_a_login_interrupted_at_the_browser_leaves_the_previous_authorisation(
    tmp_path: Path,
) -> None:
    browser = tmp_path / "browser.py"
    browser.write_text("")  # a browser nobody approves in
    async with oauth_world() as world:
        config = str(write_config(tmp_path, world))
        fetching = environment(tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch")
        code, _, err = await gateway(fetching, "auth", "login", "remote", "--config", config)
        assert (code, err) == (0, "")
        env = environment(tmp_path, BROWSER=browser_command(browser))
        login = [str(SCRIPT), "auth", "login", "remote", "--config", config]
        async with await anyio.open_process(login, env=env, cwd=REPO) as process:
            assert process.stderr is not None
            said = b""
            with anyio.fail_after(30):
                async for chunk in process.stderr:
                    said += chunk
                    if b"in your browser" in said:
                        break
            process.send_signal(signal.SIGINT)  # Ctrl-C while the page is open
            with anyio.fail_after(30):
                code = await process.wait()
        assert code != 0
        code, out, _ = await gateway(environment(tmp_path), "auth", "status", "--config", config)
        assert "remote: authorised, token expires" in out
    assert world.authority.grants == ["authorization_code"]  # the interrupted login got none


async def test_a_step_up_nobody_could_authorise_is_asked_for_at_the_next_login(
    tmp_path: Path,
) -> None:
    """A call needing more scopes than the login got says to log in; that login asks for them
    (with the scopes held), and a later login keeps them."""
    async with oauth_world() as world:
        config = str(write_config(tmp_path, world))
        fetching = environment(tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch")
        plain = environment(tmp_path)
        code, out, err = await gateway(fetching, "auth", "login", "remote", "--config", config)
        assert out.endswith(", scopes: read; 2 tools\n"), err
        write = ["call", "remote__write", "--args", '{"text": "x"}', "--config", config]
        code, out, err = await gateway(plain, *write)
        assert (code, err) == (
            1,
            "error: MCP server 'remote' needs authorisation for more scopes (read write): "
            "run `agent-gateway auth login remote`\n",
        )  # and no word of a connection lost: it was not
        for _ in range(2):
            code, out, err = await gateway(fetching, "auth", "login", "remote", "--config", config)
            assert out.endswith(", scopes: read write; 2 tools\n"), err
            code, out, err = await gateway(plain, *write)
            assert (code, out) == (0, "wrote:x\n"), err
    assert [a.scopes for a in world.authority.authorizations] == [
        ["read"],
        ["read", "write"],
        ["read", "write"],
    ]


async def test_login_verbose_logs_the_requests_but_not_the_code_or_the_state(
    tmp_path: Path,
) -> None:
    """`-v` logs httpx2's request lines: the callback's URL held the authorization code and
    the flow's state (and the authorization page's the state)."""
    async with oauth_world() as world:
        config = str(write_config(tmp_path, world))
        fetching = environment(tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch")
        code, _, err = await gateway(fetching, "auth", "login", "-v", "remote", "--config", config)
        [authorization] = world.authority.authorizations
    assert code == 0, err
    [callback] = [line for line in err.splitlines() if "/callback?" in line]
    assert callback.startswith("INFO httpx2: HTTP Request: GET http://127.0.0.1:")
    assert "/callback?code=[redacted]&state=[redacted]&iss=" in callback
    assert f"{world.authority.issuer}/authorize?" in err  # the page's line, redacted too
    assert authorization.state is not None
    assert authorization.state not in err
    assert not re.search(r"[?&](code|state)=(?!\[redacted\])", err)


async def test_login_very_verbose_logs_no_code_or_state_either(tmp_path: Path) -> None:
    """`-vv` adds httpcore2's lines, one of which shows the headers of the authorization
    server's redirect: its `Location` is the callback's URL, code and state in it."""
    async with oauth_world() as world:
        config = str(write_config(tmp_path, world))
        fetching = environment(tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch")
        code, _, err = await gateway(fetching, "auth", "login", "-vv", "remote", "--config", config)
        [authorization] = world.authority.authorizations
    assert code == 0, err
    [location] = [line for line in err.splitlines() if "(b'location'" in line.lower()]
    assert location.startswith("DEBUG httpcore2.http11: receive_response_headers.complete")
    assert "/callback?code=[redacted]&state=[redacted]&iss=" in location
    assert authorization.state is not None
    assert authorization.state not in err
    assert not re.search(r"[?&](code|state)=(?!\[redacted\])", err)


PATH_KEY = "pathkey-said-back-only-letters"
"""A key in the server's URL's path, from a `${VAR}` (no digit: only the variable marks it)."""


def write_keyed_config(tmp_path: Path, world: OAuthWorld) -> Path:
    config = tmp_path / "agent-gateway.toml"
    url = world.url.replace(PATH_KEY, "${MCP_PATH_KEY}")
    config.write_text(f'[mcpServers.remote]\nurl = "{url}"\n')
    return config


async def test_login_verbose_says_no_key_of_the_servers_url_path(tmp_path: Path) -> None:
    """The flow's requests carry the server's path: the resource metadata URL built from it,
    the `resource` parameter (the page's, the token request's); each line has the key as ***."""
    async with oauth_world(path=f"/s/{PATH_KEY}/mcp") as world:
        config = str(write_keyed_config(tmp_path, world))
        fetching = environment(
            tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch", MCP_PATH_KEY=PATH_KEY
        )
        code, _, err = await gateway(fetching, "auth", "login", "-vv", "remote", "--config", config)
        [authorization] = world.authority.authorizations
    assert code == 0, err
    assert authorization.resource == world.url
    assert "/.well-known/oauth-protected-resource/s/***/mcp " in err
    [page] = [line for line in err.splitlines() if "/authorize?" in line]
    assert f"&resource={quote(world.url, safe='').replace(PATH_KEY, '***')}&" in page
    assert "Connecting to StreamableHTTP endpoint: http://127.0.0.1:" in err  # -vv: the SDK's
    assert PATH_KEY not in err


async def test_a_failed_login_says_no_key_of_the_servers_url_path(tmp_path: Path) -> None:
    """The SDK's error for metadata naming another resource quotes the server's URL."""
    async with oauth_world(path=f"/s/{PATH_KEY}/mcp") as world:
        world.protected.resource = world.url.replace(PATH_KEY, "another")
        config = str(write_keyed_config(tmp_path, world))
        fetching = environment(
            tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch", MCP_PATH_KEY=PATH_KEY
        )
        code, out, err = await gateway(fetching, "auth", "login", "remote", "--config", config)
    base = world.url.removesuffix(f"/s/{PATH_KEY}/mcp")
    assert (code, out) == (1, "")
    assert err == (
        f"error: could not authorise at 'remote': Protected resource {base}/s/another/mcp does "
        f"not match expected {base}/s/***/mcp\n"
    )


async def test_a_failed_revocation_is_reported_and_the_tokens_are_still_forgotten(
    tmp_path: Path,
) -> None:
    async with oauth_world(AuthorityOptions(revocation="broken")) as world:
        config = str(write_config(tmp_path, world))
        fetching = environment(tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch")
        code, _, err = await gateway(fetching, "auth", "login", "remote", "--config", config)
        assert (code, err) == (0, "")
        plain = environment(tmp_path)
        code, out, err = await gateway(plain, "auth", "logout", "remote", "--config", config)
        assert (code, out) == (1, "remote: forgotten here\n")
        assert err == (
            "error: could not revoke the tokens of 'remote' at its authorization server: "
            f"{world.authority.issuer}/revoke answered HTTP 503 (temporarily_unavailable); "
            "they stay valid there until they expire\n"
        )
        code, out, _ = await gateway(plain, "auth", "status", "--config", config)
        assert "remote: not authorised" in out
        assert world.authority.access  # still valid at the server, as the message says


async def test_a_login_whose_old_refresh_token_cannot_be_revoked_warns_and_succeeds(
    tmp_path: Path,
) -> None:
    async with oauth_world(AuthorityOptions(revocation="broken")) as world:
        config = str(write_config(tmp_path, world))
        fetching = environment(tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch")
        code, _, err = await gateway(fetching, "auth", "login", "remote", "--config", config)
        assert (code, err) == (0, "")
        code, out, err = await gateway(fetching, "auth", "login", "remote", "--config", config)
        assert (code, out.endswith("; 2 tools\n")) == (0, True), err
        assert err == (
            "WARNING toolkits.mcp.authorization: remote: could not revoke the refresh token "
            f"this login replaced: {world.authority.issuer}/revoke answered HTTP 503 "
            "(temporarily_unavailable); it stays valid at the authorization server until it "
            "expires\n"
        )


async def test_login_opens_the_browser_and_takes_the_code_on_the_loopback_callback(
    tmp_path: Path,
) -> None:
    browser = tmp_path / "browser.py"
    browser.write_text(FAKE_BROWSER)
    async with oauth_world() as world:
        config = str(write_config(tmp_path, world))
        env = environment(tmp_path, BROWSER=browser_command(browser))
        code, out, err = await gateway(env, "auth", "login", "remote", "--config", config)
        assert code == 0, err
        assert "Authorise agent-gateway at MCP server 'remote' in your browser." in err
        assert f"{world.authority.issuer}/authorize?" in err
        assert out.endswith("2 tools\n")


async def test_a_server_needing_authorisation_is_one_line_and_the_others_work(
    tmp_path: Path,
) -> None:
    async with oauth_world() as world:
        config = str(write_config(tmp_path, world))
        code, out, err = await gateway(environment(tmp_path), "tools", "--config", config)
    assert code == 1
    assert "calculator" in out  # the other node serves
    needs = "MCP server 'remote' needs authorisation: run `agent-gateway auth login remote`"
    assert [line for line in err.splitlines() if line] == [
        f"WARNING toolkits.mcp.remote: could not connect (attempt 1): {needs}"
    ]
    assert needs in out  # the node's health line


async def test_login_to_a_server_without_oauth_is_a_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text('[mcpServers.local]\ncommand = "true"\n')
    env = environment(tmp_path)
    code, _, err = await gateway(env, "auth", "login", "local", "--config", str(config))
    assert (code, err) == (
        2,
        "error: MCP server 'local' does not use OAuth: it is a stdio server\n",
    )
    code, _, err = await gateway(env, "auth", "login", "nope", "--config", str(config))
    assert code == 2
    assert "no MCP server named 'nope'" in err


async def test_login_registers_afresh_when_the_server_forgot_the_client(tmp_path: Path) -> None:
    browser = tmp_path / "browser.py"
    browser.write_text(FAKE_BROWSER)
    async with oauth_world() as world:
        config = str(write_config(tmp_path, world))
        fetching = environment(tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch")
        code, _, err = await gateway(fetching, "auth", "login", "remote", "--config", config)
        assert (code, err) == (0, "")
        for env in (fetching, environment(tmp_path, BROWSER=browser_command(browser))):
            world.authority.clients.clear()  # it restarted, and forgot every registration
            registered = world.authority.registrations
            code, out, err = await gateway(env, "auth", "login", "remote", "--config", config)
            assert code == 0, err
            assert "Traceback" not in err
            assert "ERROR" not in err
            assert out.endswith("2 tools\n")
            assert world.authority.registrations == registered + 1
        # One browser visit: the page the server refused was never opened.
        assert err.count("in your browser") == 1


async def test_a_refused_authorization_request_shows_the_servers_own_words(
    tmp_path: Path,
) -> None:
    async with oauth_world() as world:
        config = tmp_path / "agent-gateway.toml"
        config.write_text(
            f'[mcpServers.remote]\nurl = "{world.url}"\noauth_client_id = "not-registered"\n'
        )
        fetching = environment(tmp_path, AGENT_GATEWAY_OAUTH_REDIRECT="fetch")
        code, _, err = await gateway(fetching, "auth", "login", "remote", "--config", str(config))
    assert code == 1
    assert err == (
        "error: could not authorise at 'remote': the authorization server refused the "
        "authorization request (HTTP 400, invalid_request: Client ID 'not-registered' not "
        "found): is mcpServers.remote.oauth_client_id registered there?\n"
    )
    assert world.authority.registrations == 0
