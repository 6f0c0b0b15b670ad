"""Python per PyTorch release (build_config/python_releases.toml) against what PyPI records, and plans held to it.

tests/fixtures/pypi/torch-windows-wheels.json is PyPI's index of torch (PEP 691 JSON, read 2026-11-28): for each
release from 1.7.0 the cpXY tags of its Windows x64 wheels and their Requires-Python. Each release's range must
start at Requires-Python (a patch minimum kept) or, where no Windows wheel was built for that Python, at the
oldest wheel, and end after the newest wheel. Then, per era, the newest release refuses the first Python past
its range (exit 2, naming the release, its range and where it was read) and plans with the last one inside.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import HOSTS_DIR, plan_options

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import facts_from_dict
from pytorch_winbuild.knowledge.model import load_knowledge, version_tuple
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.python_choice import PythonRequest
from pytorch_winbuild.planning.request import PlanRequest

KNOWLEDGE = load_knowledge()
PYPI = json.loads((Path(__file__).parent / "fixtures" / "pypi" / "torch-windows-wheels.json").read_text())
CACHE = "C:\\Users\\builder\\AppData\\Local\\pytorch-winbuild"


def _minor(tag: str) -> tuple[int, int]:
    return 3, int(tag.removeprefix("cp3"))


@pytest.mark.parametrize("release", sorted(PYPI["releases"], key=version_tuple))
def test_each_release_range_is_what_pypi_shipped(release: str) -> None:
    wheels = PYPI["releases"][release]
    found = KNOWLEDGE.python_releases.of(version_tuple(release))
    tags = sorted(_minor(tag) for tag in wheels["win_amd64"])
    low, end = version_tuple(found.python[0]), version_tuple(found.python[1])
    assert end == (tags[-1][0], tags[-1][1] + 1), (release, found.python, tags)
    assert low[:2] == tags[0], (release, found.python, tags)
    required = version_tuple(wheels["requires_python"].removeprefix(">="))
    if required[:2] == tags[0]:  # then the minimum is the Requires-Python's, patch and all (3.6.1, 3.6.2)
        assert _trimmed(low) == _trimmed(required), (release, found.python, wheels["requires_python"])


def _trimmed(version: tuple[int, ...]) -> tuple[int, ...]:
    """(3, 7, 0) and (3, 7) are the same minimum."""
    return version[:2] + tuple(version[2:]) if version[2:] not in ((0,), ()) else version[:2]


def _windows_with_every_python() -> dict:
    """A Windows machine with VS 2017, 2019 and 2022, and 64-bit CPython 3.5 to 3.15 installed."""
    data = json.loads((HOSTS_DIR / "vs2019-vs2022-cuda12.json").read_text(encoding="utf-8"))
    vs2017 = json.loads((HOSTS_DIR / "vs2017-cuda90-cuda100.json").read_text(encoding="utf-8"))["visual_studio"][0]
    data["visual_studio"] = [vs2017, *data["visual_studio"]]
    data["cuda"] = []
    base = data["python"]
    data["pythons"] = [
        {**base, "version": f"3.{minor}.4", "executable": f"C:\\Python3{minor}\\python.exe", "found_by": "PATH"}
        for minor in range(5, 16)
    ]
    return data


@pytest.mark.parametrize("era", KNOWLEDGE.eras, ids=lambda e: e.name)
def test_the_newest_release_of_each_era_refuses_a_python_past_its_own_range(era) -> None:
    newest = KNOWLEDGE.python_releases.within(*era.pytorch)[0]
    facts = facts_from_dict(_windows_with_every_python())
    past = ".".join(map(str, version_tuple(newest.python[1])[:2]))
    inside = newest.minors[0]

    def plan(python: str):
        options = plan_options(
            cuda="cpu", pytorch_version=newest.newest, python=PythonRequest.parse(python), cache_dir=CACHE
        )
        return make_plan(PlanRequest(options), facts, KNOWLEDGE)

    with pytest.raises(ConfigurationError) as error:
        plan(past)
    text = error.value.paragraph()
    assert error.value.exit_code == 2
    assert (
        f"PyTorch {newest.newest} builds with Python {newest.python[0]} up to, not including, {newest.python[1]}"
        in text
    )
    assert newest.sources[0] in text and f"not {past} (--python)" in text
    done = plan(inside)
    assert done.build_python.minor == inside and done.pytorch_version == newest.newest


def test_a_patch_minimum_refuses_the_patch_below_it() -> None:
    """PyTorch 1.6.0 and 1.7.0 need Python >= 3.6.1 (setup.py python_requires, Requires-Python): an installed 3.6.0
    is refused by name; 3.6.1 builds."""
    data = _windows_with_every_python()
    data["pythons"] = [p for p in data["pythons"] if not p["version"].startswith("3.6.")]
    data["pythons"].append({**data["python"], "version": "3.6.0", "executable": "C:\\Python360\\python.exe"})
    options = plan_options(
        cuda="cpu", pytorch_version="1.6.0", cache_dir=CACHE, python=PythonRequest.parse("C:\\Python360\\python.exe")
    )
    with pytest.raises(ConfigurationError, match=r"PyTorch 1\.6\.0 builds with Python 3\.6\.1 up to"):
        make_plan(PlanRequest(options), facts_from_dict(data), KNOWLEDGE)
    data["pythons"][-1]["version"] = "3.6.1"
    assert make_plan(PlanRequest(options), facts_from_dict(data), KNOWLEDGE).build_python.version == "3.6.1"


def test_an_unpinned_plan_builds_the_newest_release_its_python_builds() -> None:
    """With only Python 3.10, the newest era (2.9+) plans 2.14.1, not main: 2.15.0 ships cp311 and newer only."""
    data = _windows_with_every_python()
    data["pythons"] = [p for p in data["pythons"] if p["version"].startswith("3.10.")]
    plan = make_plan(PlanRequest(plan_options(cuda="cpu", cache_dir=CACHE)), facts_from_dict(data), KNOWLEDGE)
    assert (plan.era.name, plan.pytorch_version, plan.build_python.minor) == ("2.9+", "2.14.1", "3.10")
    assert "its newest release that builds with Python 3.10" in plan.decisions[0]
    with pytest.raises(ConfigurationError, match=r"PyTorch 2\.15\.0 builds with Python 3\.11 up to"):
        make_plan(
            PlanRequest(
                plan_options(cuda="cpu", cache_dir=CACHE, pytorch_version="2.15.0", python=PythonRequest.parse("3.10"))
            ),
            facts_from_dict(data),
            KNOWLEDGE,
        )
