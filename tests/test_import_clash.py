"""Another distribution holding one of our import names (`toolkits` and `agent` are packages
on PyPI too): the command says which package shadows which, in one line, instead of an
ImportError's traceback. Each case is an installation laid out in a folder: our packages,
another's files over or before them, and its dist-info."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.integration

ENTRY = "import sys, agent_gateway; sys.exit(agent_gateway.main())"
"""What the `agent-gateway` console script runs."""


def site_of_ours(tmp_path: Path) -> Path:
    """A site-packages of agent-gateway's four packages (toolkits a copy, to be damaged)."""
    site = tmp_path / "site"
    site.mkdir()
    for name in ("agent", "gateway"):
        (site / name).symlink_to(REPO / name)
    for name in ("toolkits", "agent_gateway"):
        shutil.copytree(REPO / name, site / name, ignore=shutil.ignore_patterns("__pycache__"))
    return site


def other_distribution(site: Path, name: str, version: str, files: list[str]) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{file},,\n" for file in files))


def installed_from(site: Path, direct_url: dict[str, object]) -> None:
    """agent-gateway's own dist-info in `site`, saying where it was installed from."""
    info = site / "agent_gateway-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agent-gateway\nVersion: 0.1.0\n")
    (info / "direct_url.json").write_text(json.dumps(direct_url))


def command(
    *path: Path, args: tuple[str, ...] = ("--version",), start: tuple[str, ...] = ("-c", ENTRY)
) -> subprocess.CompletedProcess[str]:
    """The console script's entry point (or `start`: `-m gateway.cli`) on a Python path of
    `path`, then the third-party packages (`-S`: no .pth file adds this checkout, as the
    editable install's does)."""
    third_party = sysconfig.get_paths()["purelib"]
    return subprocess.run(
        [sys.executable, "-S", *start, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, path), third_party])},
        cwd=path[0].parent,
        timeout=60,
    )


def test_a_package_whose_files_replaced_ours_is_named(tmp_path: Path) -> None:
    """`pip install toolkits` (0.2.13 ships toolkits/__init__.py) overwrote ours: every
    command, --version too, ended in `ImportError: cannot import name ... from 'toolkits'`;
    `python -m gateway.cli` too, before its `__main__` ran."""
    site = site_of_ours(tmp_path)
    (site / "toolkits" / "__init__.py").write_text('"""Toolkits of another project."""\n')
    other_distribution(site, "toolkits", "0.2.13", ["toolkits/__init__.py"])
    assert command(site).stdout.startswith("agent-gateway ")  # it needs nothing of toolkits'
    done = command(site, args=("tools",))
    assert (done.returncode, done.stdout) == (1, "")
    assert command(site, args=("tools",), start=("-m", "gateway.cli")).stderr == done.stderr
    assert done.stderr == (
        "agent-gateway: the package toolkits 0.2.13 also has the import name 'toolkits', and "
        f"its files replaced agent-gateway's {site / 'toolkits'}: pip uninstall toolkits, then "
        "pip install --force-reinstall --no-deps agent-gateway (or keep agent-gateway in a venv "
        "of its own: pipx, uv tool install)\n"
    )


def test_a_wheel_install_is_told_to_install_that_wheel_again(tmp_path: Path) -> None:
    """The fix said `pip install --force-reinstall --no-deps agent-gateway`: PyPI has no such
    package ("No matching distribution"). The wheel the install came from is named."""
    site = site_of_ours(tmp_path)
    wheel = tmp_path / "my dist" / "agent_gateway-0.1.0-py3-none-any.whl"
    installed_from(site, {"url": wheel.as_uri(), "archive_info": {"hashes": {}}})
    (site / "toolkits" / "__init__.py").write_text('"""Toolkits of another project."""\n')
    other_distribution(site, "toolkits", "0.2.13", ["toolkits/__init__.py"])
    done = command(site, args=("tools",))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "agent-gateway: the package toolkits 0.2.13 also has the import name 'toolkits', and "
        f"its files replaced agent-gateway's {site / 'toolkits'}: pip uninstall toolkits, then "
        f"pip install --force-reinstall --no-deps '{wheel}' (or keep agent-gateway in a venv "
        "of its own: pipx, uv tool install)\n"
    )


def test_an_editable_install_is_told_to_install_its_checkout_again(tmp_path: Path) -> None:
    """An editable install's packages are its checkout's; its dist-info, elsewhere on the path,
    names the checkout. Another editable install of agent-gateway (this repository's, in the
    test's own site-packages) is not taken for it."""
    checkout = site_of_ours(tmp_path)
    (checkout / "toolkits" / "__init__.py").unlink()
    packages = tmp_path / "site-packages"
    packages.mkdir()
    installed_from(packages, {"url": checkout.as_uri(), "dir_info": {"editable": True}})
    done = command(checkout, packages, args=("tools",))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "agent-gateway: agent-gateway's package 'toolkits' has lost its toolkits/__init__.py "
        "(uninstalling another package named 'toolkits' deletes it): reinstall it, "
        f"pip install -e {checkout}\n"
    )


def test_our_package_left_without_its_init_is_said(tmp_path: Path) -> None:
    """Uninstalling that package then deleted our toolkits/__init__.py: `cannot import name
    'ToolkitError' from 'toolkits' (unknown location)`."""
    site = site_of_ours(tmp_path)
    (site / "toolkits" / "__init__.py").unlink()
    done = command(site, args=("tools",))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "agent-gateway: agent-gateway's package 'toolkits' has lost its toolkits/__init__.py "
        "(uninstalling another package named 'toolkits' deletes it): reinstall it, "
        "pip install --force-reinstall --no-deps agent-gateway\n"
    )


def test_a_package_of_the_same_name_earlier_on_the_path_is_named(tmp_path: Path) -> None:
    site = site_of_ours(tmp_path)
    before = tmp_path / "before"
    (before / "agent").mkdir(parents=True)
    (before / "agent" / "__init__.py").write_text('"""An agent of another project."""\n')
    other_distribution(before, "agent", "0.1.3", ["agent/__init__.py"])
    done = command(before, site, args=("tools", "--help"))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"agent-gateway: 'agent' is imported from {before / 'agent'} (the package agent 0.1.3), "
        f"not from agent-gateway's {site / 'agent'}: it comes first on the Python path "
        "(PYTHONPATH, or the working directory of `python -m`)\n"
    )


def test_an_import_error_of_another_cause_keeps_its_traceback(tmp_path: Path) -> None:
    site = site_of_ours(tmp_path)
    assert command(site).stdout.startswith("agent-gateway ")  # nothing shadows: no word of it
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "orjson.py").write_text("raise ImportError('not this one', name='orjson')\n")
    done = command(broken, site, args=("tools",))
    assert done.returncode == 1
    assert "Traceback" in done.stderr
    assert "ImportError: not this one" in done.stderr
    assert "agent-gateway:" not in done.stderr
