"""Each package exports exactly what it means to, and the layers stay apart."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import toolkits
import toolkits.errors
import toolkits.mcp

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "agent": {"gateway", "toolkits", "mcp", "mcp_types"},
    "toolkits": {"gateway", "agent"},
}


@pytest.mark.parametrize("package", ["agent", "toolkits", "gateway"])
def test_all_is_sorted_and_every_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    exported: list[str] = module.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n))
    assert len(set(exported)) == len(exported)
    for name in exported:
        assert getattr(module, name, None) is not None, f"{package}.{name} is missing"


@pytest.mark.parametrize("package", ["agent", "toolkits", "gateway"])
def test_each_exported_name_is_imported_lazily_from_where_type_checkers_see_it(
    package: str,
) -> None:
    """The package imports a name at its first use (`__getattr__`, from `_WHERE`), and pyright
    sees it in the `if TYPE_CHECKING:` imports: both must say the same module."""
    module = importlib.import_module(package)
    tree = ast.parse((ROOT / package / "__init__.py").read_text(encoding="utf-8"))
    [checking] = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    seen = {
        alias.name: f".{node.module}"
        for node in checking.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == module._WHERE  # pyright: ignore[reportAttributeAccessIssue]
    assert sorted(seen) == sorted(module.__all__)
    assert not hasattr(module, "no_such_name")
    assert sorted(module.__all__) == [name for name in dir(module) if name in module.__all__]


def test_a_package_alone_loads_no_module_of_its_own_and_finds_submodules_as_before() -> None:
    """`import gateway; gateway.config.parse_config(...)` worked when the package imported
    everything; it still does, now that it imports nothing."""
    program = (
        "import sys, agent, toolkits, gateway\n"
        "print(sorted(m for m in sys.modules if m.startswith(('agent.', 'toolkits.', 'gateway.'))))\n"
        "print(gateway.config.parse_config.__name__, toolkits.mcp.McpToolkit.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines() == ["[]", "parse_config McpToolkit"]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layers_do_not_import_upwards(package: str) -> None:
    offenders: list[str] = []
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [
                f"{path.relative_to(ROOT)}: {n}"
                for n in names
                if n.split(".")[0] in FORBIDDEN[package]
            ]
    assert offenders == []


def test_toolkits_exports_its_errors_and_the_types_its_nodes_take() -> None:
    errors = {n for n in toolkits.errors.__all__ if isinstance(getattr(toolkits.errors, n), type)}
    assert errors <= set(toolkits.__all__)
    assert toolkits.ServerConfigError is toolkits.errors.ServerConfigError
    assert toolkits.Backoff is toolkits.mcp.Backoff  # McpToolkit(backoff=...)


def test_the_agent_package_exports_every_error_and_what_the_readme_names() -> None:
    import agent
    import agent.errors

    errors = {
        name
        for name in agent.errors.__all__
        if isinstance(getattr(agent.errors, name), type)  # the classes, not the helper
    }
    assert errors - set(agent.__all__) == set()
    # The type of ToolsAgent.on_warning, and the stores the README names beside InProcessStore.
    assert {"WarningCallback", "SQLiteStore", "store_from_url"} <= set(agent.__all__)


def test_the_gateway_package_exports_every_error_and_what_an_approver_takes() -> None:
    import gateway.errors

    errors = {
        name
        for name in gateway.errors.__all__
        if isinstance(getattr(gateway.errors, name), type)  # the classes, not the helpers
    }
    assert errors - set(gateway.__all__) == set()
    # `Approver.decide(request: ApprovalRequest) -> Decision`: implementable from the package.
    assert {"ApprovalRequest", "Approver", "Decision"} <= set(gateway.__all__)


def test_a_name_a_submodule_shares_stays_the_function_once_that_submodule_is_imported() -> None:
    """Importing `toolkits.json_bytes` (as our own modules do) sets the package's attribute to
    the module; `from toolkits import json_bytes` must still give the function."""
    program = (
        "import toolkits, toolkits.json_bytes, toolkits.printable, toolkits.calculator\n"
        "from toolkits import calculator, json_bytes, printable\n"
        "print(callable(json_bytes), callable(printable), type(calculator).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["True", "True", "FunctionTool"]
