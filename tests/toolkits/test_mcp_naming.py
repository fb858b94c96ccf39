from __future__ import annotations

import re

import pytest

from toolkits.mcp import NodeTools, PrefixPolicy, is_offered, resolve_tool_names, sanitize_name
from toolkits.mcp.naming import reserved_clashes

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_sanitize_replaces_invalid_characters() -> None:
    assert sanitize_name("get-sum") == "get-sum"
    assert sanitize_name("files.read v2") == "files_read_v2"
    assert sanitize_name("") == "_"
    assert sanitize_name("日本") == "__"


def test_long_names_keep_their_head_and_gain_a_stable_hash() -> None:
    long = "a" * 100
    name = sanitize_name(long)
    assert VALID.match(name)
    assert len(name) == 64
    assert name.startswith("a" * 55 + "_")
    assert sanitize_name(long) == name
    assert sanitize_name("a" * 99 + "b") != name
    assert sanitize_name("t" * 64) == "t" * 64  # as long as a name may be: kept whole
    assert re.fullmatch(r"t{55}_[0-9a-f]{8}", sanitize_name("t" * 65))


def test_names_that_sanitise_alike_stay_distinct_within_a_node() -> None:
    names = resolve_tool_names([NodeTools("fs", "never", ["read.file", "read_file", "read file"])])[
        "fs"
    ]
    assert names["read_file"] == "read_file"  # the one that needed no change keeps the name
    assert len(set(names.values())) == 3
    assert all(VALID.match(name) for name in names.values())
    # Deterministic: the same listing in another order gives the same names.
    again = resolve_tool_names([NodeTools("fs", "never", ["read file", "read_file", "read.file"])])[
        "fs"
    ]
    assert again == names


@pytest.mark.timeout(10)  # a name made again and again from the same salt never ends
def test_a_tool_named_like_anothers_hashed_name_keeps_it_and_the_other_gets_another() -> None:
    hashed = resolve_tool_names([NodeTools("s", "never", ["x_y", "x.y"])])["s"]["x.y"]
    assert hashed.startswith("x_y_")
    names = resolve_tool_names([NodeTools("s", "never", ["x_y", "x.y", hashed])])["s"]
    assert (names["x_y"], names[hashed]) == ("x_y", hashed)
    assert names["x.y"] not in ("x_y", hashed)
    assert re.fullmatch(r"x_y_[0-9a-f]{8}", names["x.y"])


@pytest.mark.parametrize("prefix", ["never", "auto", "always"])
def test_an_empty_name_is_offered_valid_and_quietly(
    prefix: PrefixPolicy, caplog: pytest.LogCaptureFixture
) -> None:
    # A prompt may be named "" (tools so named are left out when listed): it is named as
    # `sanitize_name` names it, "_", which needed no hash and is warned of by no one.
    names = resolve_tool_names([NodeTools("sch", prefix, ["", "dup"])], what="prompt")["sch"]
    assert names[""] == ("sch___" if prefix == "always" else "_")
    assert all(VALID.match(name) for name in names.values())
    assert not caplog.records


def test_prefix_always_and_never() -> None:
    names = resolve_tool_names(
        [NodeTools("time", "always", ["get_current_time"]), NodeTools("calc", "never", ["add"])]
    )
    assert names == {"time": {"get_current_time": "time__get_current_time"}, "calc": {"add": "add"}}


def test_prefixed_names_are_valid_even_for_awkward_server_names() -> None:
    names = resolve_tool_names([NodeTools("my server.v2", "always", ["x" * 80])])["my server.v2"]
    (name,) = names.values()
    assert VALID.match(name)
    assert name.startswith("my_server_v2__xxx")


def test_auto_prefixes_only_tools_that_clash_across_nodes() -> None:
    names = resolve_tool_names(
        [
            NodeTools("a", "auto", ["search", "only_a"]),
            NodeTools("b", "auto", ["search", "only_b"]),
            NodeTools("c", "always", ["only_a"]),
        ]
    )
    assert names["a"] == {"search": "a__search", "only_a": "only_a"}
    assert names["b"] == {"search": "b__search", "only_b": "only_b"}
    assert names["c"] == {"only_a": "c__only_a"}


def test_a_never_node_keeps_its_name_against_an_auto_node() -> None:
    names = resolve_tool_names(
        [NodeTools("a", "auto", ["search"]), NodeTools("b", "never", ["search"])]
    )
    assert names == {"a": {"search": "a__search"}, "b": {"search": "search"}}


def test_two_never_nodes_cannot_share_a_name(caplog: pytest.LogCaptureFixture) -> None:
    names = resolve_tool_names(
        [NodeTools("a", "never", ["search"]), NodeTools("b", "never", ["search"])]
    )
    assert names == {"a": {"search": "search"}, "b": {"search": "b__search"}}
    assert [r.getMessage() for r in caplog.records] == [
        "server 'b': 1 tool clashes with server 'a', which also has prefix='never' and keeps "
        "the bare name: offering it as b__NAME (search)"
    ]


def test_a_clash_resolved_again_is_warned_of_once(caplog: pytest.LogCaptureFixture) -> None:
    nodes = [NodeTools("a", "never", ["search"]), NodeTools("b", "never", ["search"])]
    warned: set[tuple[str, ...]] = set()
    for _ in range(3):  # as a group resolves again when each node settles
        assert resolve_tool_names(nodes, warned=warned)["b"] == {"search": "b__search"}
    assert len(caplog.records) == 1


def test_never_clashes_are_one_line_per_pair_of_servers(caplog: pytest.LogCaptureFixture) -> None:
    """Not one line per tool (the tester saw 337): each pair names both servers, the count
    and a few of the tools."""
    shared = [f"tool_{i:02}" for i in range(75)]
    nodes = [
        NodeTools("s07_tickets", "never", [*shared, "own"]),
        NodeTools("s17_tickets", "never", shared),
        NodeTools("s27", "never", ["tool_01", "solo"]),
    ]
    names = resolve_tool_names(nodes)
    assert names["s17_tickets"]["tool_74"] == "s17_tickets__tool_74"
    assert names["s27"] == {"tool_01": "s27__tool_01", "solo": "solo"}
    assert [r.getMessage() for r in caplog.records] == [
        "server 's17_tickets': 75 tools clash with server 's07_tickets', which also has "
        "prefix='never' and keeps the bare names: offering them as s17_tickets__NAME "
        "(tool_00, tool_01, tool_02 and 72 more)",
        "server 's27': 1 tool clashes with server 's07_tickets', which also has "
        "prefix='never' and keeps the bare name: offering it as s27__NAME (tool_01)",
    ]


def test_a_name_given_a_hash_suffix_is_warned_of_once(caplog: pytest.LogCaptureFixture) -> None:
    """An agent named like a server's prefixed tool, a server name so long that the tool's
    name must be cut: each says the original and the name offered."""
    warned: set[tuple[str, ...]] = set()
    long_server = "google_workspace_admin_directory_service_prod_eu"
    nodes = [
        NodeTools("s00_crm", "always", ["echo", "search"]),
        NodeTools(long_server, "always", ["archive_account", "list"]),
        NodeTools("fs", "never", ["read.file", "read_file"]),
    ]
    names = resolve_tool_names(nodes, {"s00_crm__echo": "agent"}, warned=warned)
    assert resolve_tool_names(nodes, {"s00_crm__echo": "agent"}, warned=warned) == names
    assert names["s00_crm"] == {"echo": "s00_crm__echo_dc757739", "search": "s00_crm__search"}
    shortened = names[long_server]["archive_account"]
    assert shortened == f"{long_server}__archi_8b9f89f6"
    assert [r.getMessage() for r in caplog.records] == [
        "tool 'echo' of 's00_crm' would be 's00_crm__echo', the name of the agent "
        "'s00_crm__echo': offering it as 's00_crm__echo_dc757739'",
        f"server {long_server!r}: 1 tool name over 64 characters (with any prefix), "
        f"shortened with a hash: 'archive_account' as {shortened!r}",
        "server 'fs': 1 tool name alike to another of its own once made valid for a model "
        f"(A-Za-z0-9_-), told apart with a hash: 'read.file' as {names['fs']['read.file']!r}",
    ]


@pytest.mark.parametrize("policy", ["never", "auto"])
@pytest.mark.parametrize("fs_listing", [["write_file"], []], ids=["fs-listing", "fs-not-yet"])
@pytest.mark.parametrize("fs_first", [False, True])
def test_a_server_name_form_is_that_servers_alone_whatever_the_order(
    caplog: pytest.LogCaptureFixture, policy: PrefixPolicy, fs_listing: list[str], fs_first: bool
) -> None:
    """Another server's bare `fs__write_file` never takes (nor waits to take) the name of
    `fs`'s `write_file`: it gets its own prefix, whether `fs` comes first, lists its tools yet."""
    evil = NodeTools("evil", policy, ["fs__write_file", "fs_ok", "fs.v2__x"])
    fs = NodeTools("fs", "always", fs_listing)
    warned: set[tuple[str, ...]] = set()
    for _ in range(2):  # resolved again as each node settles: said once
        names = resolve_tool_names([fs, evil] if fs_first else [evil, fs], warned=warned)
        assert names["evil"] == {
            "fs__write_file": "evil__fs__write_file",
            "fs_ok": "fs_ok",
            "fs.v2__x": "fs_v2__x",  # no server is named fs.v2 (or fs_v2)
        }
        assert names["fs"] == dict.fromkeys(fs_listing, "fs__write_file")
    assert [r.getMessage() for r in caplog.records] == [
        "server 'evil': 1 tool named fs__NAME, the form of server 'fs''s tools: offering it "
        "as evil__NAME (fs__write_file)"
    ]


def test_a_server_keeps_names_of_its_own_form() -> None:
    names = resolve_tool_names(
        [NodeTools("fs", "never", ["fs__stat", "read"]), NodeTools("fs__meta", "never", ["fs__x"])]
    )
    assert names["fs"] == {"fs__stat": "fs__stat", "read": "read"}
    assert names["fs__meta"] == {"fs__x": "fs__meta__fs__x"}  # fs's form, not its own


@pytest.mark.parametrize("a_listing", [True, False], ids=["a", "a-not-yet"])
@pytest.mark.parametrize("a_first", [True, False])
def test_a_deeper_servers_name_form_is_its_own_under_prefix_always(
    caplog: pytest.LogCaptureFixture, a_listing: bool, a_first: bool
) -> None:
    """Servers `a` and `a__b`: `a__b__echo_c` is `a__b`'s `echo_c`, whether `a` (whose
    `b__echo_c` would be `a__b__echo_c` too) comes first or lists its tools yet. `a`'s tool
    gets a name in no other server's form, the same whatever the order."""
    a = NodeTools("a", "always", ["b__echo_c", "b_echo_c", "ping"] if a_listing else [])
    a_b = NodeTools("a__b", "always", ["echo_c"])
    warned: set[tuple[str, ...]] = set()
    for _ in range(2):  # resolved again as each node settles: said once
        names = resolve_tool_names([a, a_b] if a_first else [a_b, a], warned=warned)
        assert names["a__b"] == {"echo_c": "a__b__echo_c"}
        assert names["a"] == (
            {"b__echo_c": "a__b_echo_c_a4465464", "b_echo_c": "a__b_echo_c", "ping": "a__ping"}
            if a_listing
            else {}
        )
    said = [r.getMessage() for r in caplog.records]
    assert said == (
        [
            "server 'a': 1 tool whose prefixed name would have the form of server 'a__b''s "
            "tools (a__b__NAME): offering 'b__echo_c' as 'a__b_echo_c_a4465464'"
        ]
        if a_listing
        else []
    )


@pytest.mark.parametrize("prefix", ["always", "never", "auto"])
def test_no_name_is_given_in_another_servers_form(prefix: PrefixPolicy) -> None:
    """`a`'s `_x` under its prefix is `a___x`, the form of server `a_`'s `x`; a tool of `a`
    that must take its prefix is never offered in a deeper server's form, however its name
    is made (separators at its ends, runs of them, a server name too long to keep whole)."""
    long = "s__" + "l" * 60
    nodes = [
        NodeTools("a", prefix, ["_x", "a_", "__", "b___y_"]),
        NodeTools("a_", "always", ["x"]),
        NodeTools("a__b", "always", ["y"]),
        NodeTools("s", "always", []),
        NodeTools(long, "always", ["t"]),
    ]
    reserved = {"_x", "a_", "__", "b___y_"}  # so `a` takes its prefix, whatever its policy
    names = resolve_tool_names(nodes, reserved)
    spaces = {f"{node.node}__": node.node for node in nodes}
    for node, offered in names.items():
        for name in offered.values():
            assert VALID.match(name)
            held = [space for space in spaces if name.startswith(space)]
            assert max(held, key=len, default=f"{node}__") == f"{node}__", (node, name)
    assert names["a_"] == {"x": "a___x"}
    assert names["a__b"] == {"y": "a__b__y"}
    assert len({name for offered in names.values() for name in offered.values()}) == 7
    assert resolve_tool_names(nodes[::-1], reserved) == names


@pytest.mark.parametrize(
    ("server", "other", "tool", "made"),
    [
        # `a`'s `b__...` would be `a__b__...`, of `a__b`'s form: made again as `a__b_...`.
        ("a", "a__b", "b__" + "x" * 70, r"a__b_x{50}_[0-9a-f]{8}"),
        # Prefixed and cut to fit, `s..__q..`'s names would begin `s..__`, server `s..`'s
        # form; its own is too long to keep whole, so the name has no `__` at all.
        ("s" * 40 + "__" + "q" * 14, "s" * 40, "weather", r"s{40}_q{14}_[0-9a-f]{8}"),
    ],
    ids=["in-its-own-form", "server-name-cut"],
)
def test_a_name_made_out_of_another_servers_form_keeps_as_much_as_fits(
    server: str, other: str, tool: str, made: str
) -> None:
    nodes = [NodeTools(server, "always", [tool]), NodeTools(other, "always", ["echo"])]
    name = resolve_tool_names(nodes)[server][tool]
    assert len(name) == 64, name  # what every provider takes, and no less
    assert re.fullmatch(made, name), name


def test_leftover_clashes_are_settled_by_a_hash() -> None:
    # Two server names alike once sanitised: their prefixed names meet.
    names = resolve_tool_names(
        [NodeTools("b.x", "always", ["echo"]), NodeTools("b_x", "always", ["echo"])]
    )
    assert names["b.x"] == {"echo": "b_x__echo"}
    assert names["b_x"]["echo"].startswith("b_x__echo_")
    assert VALID.match(names["b_x"]["echo"])


@pytest.mark.timeout(10)  # a name made again and again from the same salt never ends
def test_a_hash_suffixed_name_already_taken_is_made_again() -> None:
    nodes = [NodeTools("s_1", "always", ["t"]), NodeTools("s.1", "always", ["t"])]
    hashed = resolve_tool_names(nodes)["s.1"]["t"]
    assert re.fullmatch(r"s_1__t_[0-9a-f]{8}", hashed)
    # `s_1` also has a tool whose prefixed name is that one: `s.1`'s `t` needs another.
    taken = [NodeTools("s_1", "always", ["t", hashed.removeprefix("s_1__")]), nodes[1]]
    names = resolve_tool_names(taken)
    assert names["s_1"] == {"t": "s_1__t", hashed.removeprefix("s_1__"): hashed}
    assert names["s.1"]["t"] not in ("s_1__t", hashed)
    assert re.fullmatch(r"s_1__t_[0-9a-f]{8}", names["s.1"]["t"])


def test_a_reserved_name_is_never_offered_bare() -> None:
    # A local tool (or an agent) has no prefix to give: the server's tool takes one instead.
    nodes = [
        NodeTools("a", "never", ["convert", "other"]),
        NodeTools("b", "auto", ["convert"]),
        NodeTools("c", "always", ["convert"]),
    ]
    names = resolve_tool_names(nodes, reserved={"convert"})
    assert names == {
        "a": {"convert": "a__convert", "other": "other"},
        "b": {"convert": "b__convert"},
        "c": {"convert": "c__convert"},
    }
    assert reserved_clashes(nodes, {"convert"}) == [
        ("a", "convert", "convert"),
        ("b", "convert", "convert"),
    ]
    assert resolve_tool_names(nodes)["a"]["convert"] == "convert"  # none reserved: as before


@pytest.mark.parametrize(
    ("name", "include", "exclude", "offered"),
    [
        ("read_file", None, [], True),
        ("read_file", ["read_*"], [], True),
        ("write_file", ["read_*"], [], False),
        ("read_secret", ["read_*"], ["*secret*"], False),
        ("Read_file", ["read_*"], [], False),  # case-sensitive on every platform
    ],
)
def test_include_and_exclude_globs(
    name: str, include: list[str] | None, exclude: list[str], offered: bool
) -> None:
    assert is_offered(name, include, exclude) is offered
