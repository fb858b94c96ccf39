"""The sdist and the wheel as built from this tree (hatchling's PEP 517 hooks, as `pip` and
`python -m build` call them): the licence ships in both, the metadata says who and what, and
the sdist leaves out what the benchmarks wrote."""

from __future__ import annotations

import email.parser
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

BUILD = """
import sys
import hatchling.build

print(hatchling.build.build_sdist(sys.argv[1]))
print(hatchling.build.build_wheel(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel) of this tree."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"hatchling is a test dependency (.[test]): {done.stderr}"
    sdist, wheel = done.stdout.split()
    return out / sdist, out / wheel


def test_the_wheel_carries_the_licence_and_metadata_naming_it(built: tuple[Path, Path]) -> None:
    with zipfile.ZipFile(built[1]) as wheel:
        names = wheel.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        licence = wheel.read(f"{info}/licenses/LICENSE").decode()
        metadata = email.parser.Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
    assert licence.startswith("MIT License\n\nCopyright (c) 2026 the agent-gateway developers\n")
    assert licence == (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert metadata["Author"] == "the agent-gateway developers"
    classifiers = metadata.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert {name.split("/")[0] for name in names} == {
        "agent",
        "toolkits",
        "gateway",
        "agent_gateway",
        info,
    }


def test_the_sdist_carries_the_licence_and_no_benchmark_output(built: tuple[Path, Path]) -> None:
    with tarfile.open(built[0]) as sdist:
        members = {m.name.split("/", 1)[1]: m.size for m in sdist.getmembers() if "/" in m.name}
    assert "LICENSE" in members
    assert "bench/RESULTS.md" in members  # the numbers stay; the plots and JSON of each run not
    assert "bench/hot_path.py" in members
    assert "tests/test_packaging.py" in members  # an sdist builds and tests the project
    assert [name for name in members if name.startswith("bench/results/")] == []
    assert [name for name in members if name.endswith(".png")] == []
    assert built[0].stat().st_size < 3_000_000  # 9.7 MB with the plots
