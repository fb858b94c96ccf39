"""A `python = "module:function"` tool's module beside its config file: found there, and
refused, naming both files, when the module imported by its name is another (a second
config's, Python's own, ours)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gateway.assembly import open_gateway
from gateway.config import load_config
from gateway.errors import ConfigError

pytestmark = pytest.mark.anyio


async def test_a_python_tool_is_found_beside_its_config_file(tmp_path: Path) -> None:
    module = f"beside_{tmp_path.name.replace('-', '_')}"  # not imported by an earlier test
    (tmp_path / f"{module}.py").write_text(
        'def twice(text: str) -> str:\n    """Say it twice."""\n    return text * 2\n'
    )
    file = tmp_path / "agent-gateway.toml"
    file.write_text(f'[tools.twice]\npython = "{module}:twice"\n')
    async with open_gateway(load_config(file)) as gateway:
        result = await gateway.call_tool("twice", {"text": "ab"})
    assert result.structured_content == {"response": "abab"}


async def test_a_second_configs_tool_module_named_as_one_imported_already_is_refused(
    tmp_path: Path,
) -> None:
    """A module is the process's: a caller opening a gateway from a second config, with a
    module of the same name beside it, got the first config's module and called its function,
    without a word."""
    module = f"says_{tmp_path.name.replace('-', '_')}"
    for folder, said in (("first", "one"), ("second", "two")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{module}.py").write_text(
            f'def say() -> str:\n    """Say it."""\n    return "{said}"\n'
        )
        (tmp_path / folder / "agent-gateway.toml").write_text(
            f'[tools.say]\npython = "{module}:say"\n'
        )
    kept_path = list(sys.path)
    try:
        async with open_gateway(load_config(tmp_path / "first" / "agent-gateway.toml")) as first:
            result = await first.call_tool("say", {})
        with pytest.raises(ConfigError) as caught:
            async with open_gateway(load_config(tmp_path / "second" / "agent-gateway.toml")):
                pass
    finally:
        sys.path[:] = kept_path
        sys.modules.pop(module, None)
    assert result.structured_content == {"response": "one"}
    assert str(caught.value) == (
        f"{tmp_path / 'second' / 'agent-gateway.toml'}: "
        f"tools.say.python: the module {module!r} beside the file "
        f"({tmp_path / 'second' / module}.py) is not the one imported by that name "
        f"({tmp_path / 'first' / module}.py): rename it"
    )


@pytest.mark.parametrize("module", ["agent", "json"])
async def test_a_tool_module_named_as_an_imported_one_is_refused_naming_both(
    tmp_path: Path, module: str
) -> None:
    """`agent.py` (ours) or `json.py` (Python's) beside the config, without the function in
    the imported module: the error was "module 'agent' has no attribute 'f'", about a file
    the user never wrote, not the refusal naming both."""
    (tmp_path / f"{module}.py").write_text('def f() -> str:\n    """F."""\n    return "f"\n')
    file = tmp_path / "agent-gateway.toml"
    file.write_text(f'[tools.f]\npython = "{module}:f"\n')
    assert await _refusal(file) == (
        f"{file}: tools.f.python: the module {module!r} beside the file "
        f"({tmp_path / module}.py) is not the one imported by that name "
        f"({sys.modules[module].__file__}): rename it"
    )


async def test_a_tool_module_beside_that_fails_its_own_import_says_why(tmp_path: Path) -> None:
    module = f"needs_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text("import no_such_module_anywhere\n")
    file = tmp_path / "agent-gateway.toml"
    file.write_text(f'[tools.f]\npython = "{module}:f"\n')
    assert await _refusal(file) == (
        f"{file}: tools.f.python: cannot import '{module}:f': "
        "No module named 'no_such_module_anywhere'"
    )


async def _refusal(file: Path) -> str:
    """What opening a gateway on `file` refuses it with (`ConfigError`), sys.path kept as
    it was (the gateway puts the config's folder on it)."""
    kept_path = list(sys.path)
    try:
        with pytest.raises(ConfigError) as caught:
            async with open_gateway(load_config(file)):
                pass
    finally:
        sys.path[:] = kept_path
    return str(caught.value)
