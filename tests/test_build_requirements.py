"""The build venv's pins (build_config/build_requirements.toml, knowledge/build_requirements.py).

Expected values come from outside the code: NumPy's release notes (the release that dropped each
Python), the torch wheels' METADATA on PyPI (Requires-Dist of each era's newest release), v1.13.1's
pyproject.toml and Windows CI scripts, and (the pypi tier) PyPI itself through a real pip.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.build_requirements import BuildRequirements, Requirement, load_build_requirements
from pytorch_winbuild.knowledge.config_files import config_dir
from pytorch_winbuild.knowledge.model import load_knowledge

SHIPPED = config_dir() / "build_requirements.toml"
PYENV_PIP = "/root/.pyenv/versions/3.9.18/bin/python"  # pip 23: --platform/--python-version for other Pythons


def era_pythons() -> dict[str, tuple[str, str]]:
    return {era.name: era.python for era in load_knowledge().eras}


@pytest.fixture(scope="module")
def shipped() -> BuildRequirements:
    return load_build_requirements(SHIPPED, era_pythons())


def pins(shipped: BuildRequirements, era: str, python: str) -> dict[str, str]:
    return {requirement.name: requirement.version for requirement in shipped.requirements_for(era, python)}


def test_every_era_and_python_of_eras_toml_has_pins(shipped: BuildRequirements) -> None:
    """eras.toml's python = [min, end) per era: 3+3+3+4+4+4+4+5+6+5 Pythons, each with pip first."""
    assert len(shipped.pins) == 41
    for (era, python), requirements in shipped.pins.items():
        assert requirements[0].name == "pip", (era, python)
        assert all(requirement.source.startswith("PyPI ") for requirement in requirements)


@pytest.mark.parametrize(
    ("python", "numpy"),
    # NumPy's release notes: 1.19.0 drops 3.5, 1.20.0 drops 3.6, 1.22.0 drops 3.7, 1.25.0 drops 3.8 (so
    # the last 1.18.x, 1.19.x, 1.21.x, 1.24.x), 2.1.0 drops 3.9.
    [("3.5", "1.18.5"), ("3.6", "1.19.5"), ("3.7", "1.21.6"), ("3.8", "1.24.4")],
)
def test_numpy_is_the_newest_for_each_old_python(shipped: BuildRequirements, python: str, numpy: str) -> None:
    era = "1.2-1.6"  # builds with 3.5-3.8, numpy<2 binds none of them
    assert pins(shipped, era, python)["numpy"] == numpy


def test_numpy_2_only_where_the_era_builds_against_it(shipped: BuildRequirements) -> None:
    assert pins(shipped, "2.5-2.8", "3.9")["numpy"] == "2.0.2"  # the newest numpy for 3.9 (2.1.0 dropped it)
    assert pins(shipped, "2.1-2.4", "3.9")["numpy"] == "1.26.4"  # numpy<2: the last 1.x
    assert pins(shipped, "2.1-2.4", "3.12")["numpy"] == "1.26.4"
    assert pins(shipped, "1.7-1.10", "3.9")["numpy"] == "1.26.4"


def test_the_eras_caps_decide_and_are_named(shipped: BuildRequirements) -> None:
    """v1.13.1's Windows CI: numpy"<1.23"; pytorch/builder#1995: setuptools 72.1.0; setuptools 60's distutils."""
    by_name = {r.name: r for r in shipped.requirements_for("1.11-1.13", "3.10")}
    assert by_name["numpy"].version == "1.22.4"
    assert "numpy<1.23" in by_name["numpy"].source and "activate_miniconda3.bat" in by_name["numpy"].source
    assert by_name["setuptools"].version == "72.1.0"
    assert pins(shipped, "1.11-1.13", "3.7")["setuptools"] == "68.0.0"  # the newest for 3.7: under the cap
    assert (
        "setuptools<=72.1.0"
        not in {r.name: r for r in shipped.requirements_for("1.11-1.13", "3.7")}["setuptools"].source
    )
    assert pins(shipped, "1.7-1.10", "3.9")["setuptools"] == "59.8.0"  # the last before 60.0.0
    assert pins(shipped, "1.7-1.10", "3.6")["setuptools"] == "59.6.0"  # the newest for 3.6 (59.7 needs 3.7)
    assert pins(shipped, "2.9+", "3.12")["setuptools"] == "81.0.0"  # main's pyproject: >=77.0.0,<82


def test_dataclasses_backport_only_on_python_3_6(shipped: BuildRequirements) -> None:
    """torch-1.10.2 METADATA: dataclasses; python_version < "3.7" (3.7 has it in the standard library)."""
    assert pins(shipped, "1.7-1.10", "3.6")["dataclasses"] == "0.8"
    assert "dataclasses" not in pins(shipped, "1.7-1.10", "3.7")


# Requires-Dist of each era's newest release, read from its wheel's METADATA on PyPI (markers for Linux
# CUDA packages and extras left out): `setup.py install` would fetch these itself.
INSTALL_REQUIRES = {
    "1.1": {"future", "numpy"},
    "1.2-1.6": {"future", "numpy"},
    "1.7-1.10": {"typing-extensions"},
    "1.11-1.13": {"typing-extensions"},
    "2.0": {"filelock", "typing-extensions", "sympy", "networkx", "jinja2"},
    "2.1-2.4": {"filelock", "typing-extensions", "sympy", "networkx", "jinja2", "fsspec"},
    "2.5-2.8": {"filelock", "typing-extensions", "sympy", "networkx", "jinja2", "fsspec"},
    "2.9+": {"filelock", "typing-extensions", "sympy", "networkx", "jinja2", "fsspec"},
}
# v1.13.1 pyproject.toml [build-system] requires, less cmake (the machine's, checked by the plan) and
# dataclasses (the era starts at 3.7).
BUILD_SYSTEM_1_13 = {"setuptools", "wheel", "astunparse", "numpy", "ninja", "pyyaml", "cffi"}
BUILD_SYSTEM_1_13 |= {"typing-extensions", "future", "six", "requests"}


@pytest.mark.parametrize("era", sorted(INSTALL_REQUIRES))
def test_each_era_holds_what_its_newest_release_requires(shipped: BuildRequirements, era: str) -> None:
    low = era_pythons()[era][0]
    assert INSTALL_REQUIRES[era] <= set(pins(shipped, era, low))


def test_1_13_holds_its_build_system_requirements(shipped: BuildRequirements) -> None:
    assert set(pins(shipped, "1.11-1.13", "3.7")) == BUILD_SYSTEM_1_13 | {"pip"}


def test_requirement_spec_is_what_pip_installs() -> None:
    assert Requirement("numpy", "1.21.6", "PyPI …").spec == "numpy==1.21.6"


def test_a_python_outside_the_era_is_a_configuration_error(shipped: BuildRequirements) -> None:
    with pytest.raises(ConfigurationError) as raised:
        shipped.requirements_for("1.11-1.13", "3.11")
    assert raised.value.exit_code == 2
    assert "era 1.11-1.13 builds with Python 3.7 up to, not including, 3.11" in raised.value.message
    with pytest.raises(ConfigurationError, match=r"no era '9\.9'"):
        shipped.requirements_for("9.9", "3.9")


def broken(tmp_path: Path, old: str, new: str) -> Path:
    text = SHIPPED.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "build_requirements.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # the only release of numpy for 3.5 removed: era 0.3-0.4 on 3.5 has none left
        (
            '{ version = "1.18.5", python = ["3.5", "3.9"]',
            '{ version = "1.18.5", python = ["3.6", "3.9"]',
            "build_requirements.toml: era.0.3-0.4 (Python 3.5): no release of numpy installs on Python 3.5 within <2",
        ),
        ('spec = "<1.23"', 'spec = "below 1.23"', "era.1.11-1.13.packages[3].spec: 'below 1.23' is not a PEP 440"),
        ('{ name = "pyyaml" }', '{ name = "PyYAML" }', "era.0.3-0.4.packages[4].name: write 'PyYAML' as pip"),
        ('name = "2.9+"', 'name = "3.0"', "era.3.0: not an era of eras.toml"),
        ('{ version = "1.22.4"', '{ version = "1.22.04"', "package.numpy.releases[3].version: write '1.22.04'"),
        ('python = ["3.6", "3.7"], reason', 'python = ["3.6", "3.6"], reason', "packages[8].python: [3.6, 3.6)"),
        (
            'spec = "<60", reason = "setuptools 60.0.0 made its own distutils the default',
            'spec = "<60", reason = " ", ignored = "',
            "era.0.3-0.4.packages[1].reason: a spec or a python range says why.",
        ),
    ],
)
def test_a_broken_file_names_file_and_key(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        load_build_requirements(broken(tmp_path, old, new), era_pythons())
    assert message in raised.value.message
    assert raised.value.exit_code == 2


def pip_download(python: str, *specs: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """A real pip asks PyPI for Windows x64 wheels of CPython `python` (only PyPI: local mirrors ignored)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_") or key == "PIP_CERT"}
    env["PIP_CONFIG_FILE"] = os.devnull
    command = [PYENV_PIP, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps"]
    command += ["--only-binary=:all:", "--platform", "win_amd64", "--implementation", "cp"]
    command += ["--python-version", python, "--index-url", "https://pypi.org/simple", "-d", str(folder), *specs]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.mark.pypi
def test_pins_have_windows_wheels_on_pypi(shipped: BuildRequirements, tmp_path: Path) -> None:
    """Small pins of the oldest Pythons, where a wheel is least sure: each downloads for Windows x64."""
    checks = {
        "3.5": ["pyyaml", "cffi", "setuptools"],
        "3.6": ["pyyaml", "dataclasses", "typing-extensions", "ninja"],
    }
    for python, names in checks.items():
        era = "1.2-1.6" if python == "3.5" else "1.7-1.10"
        wanted = [r.spec for r in shipped.requirements_for(era, python) if r.name in names]
        done = pip_download(python, *wanted, folder=tmp_path / python)
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(list((tmp_path / python).glob("*.whl"))) == len(names)


@pytest.mark.pypi
def test_the_next_release_has_no_wheel_for_that_python(tmp_path: Path) -> None:
    """Why 5.3.1 and not 6.0.1 for 3.5: PyYAML 6 ships no Python 3.5 wheel (pip says so)."""
    done = pip_download("3.5", "pyyaml==6.0.1", folder=tmp_path)
    assert done.returncode != 0
    assert "No matching distribution found for pyyaml==6.0.1" in done.stdout + done.stderr


@pytest.mark.pypi
def test_cmake_pins_at_the_python_edges_have_windows_wheels(shipped: BuildRequirements, tmp_path: Path) -> None:
    """[package.cmake]'s python ranges are PyPI's: the newest cmake a plan can pin for Python 3.5 (3.28.4, the last
    without Requires-Python) and for 3.15 (4.4.5) download for Windows x64; the next one after each edge does not."""
    for python, expected in (("3.5", "3.28.4"), ("3.15", "4.4.5")):
        newest = shipped.newest("cmake", python, lambda version: True)
        assert newest is not None and newest.version == expected
        done = pip_download(python, newest.spec, folder=tmp_path / python)
        assert done.returncode == 0, done.stdout + done.stderr
    for python, refused in (("3.6", "cmake==3.29.6"), ("3.7", "cmake==4.1.3"), ("3.8", "cmake==3.13.3")):
        assert refused.split("==")[1] not in shipped.installable("cmake", python)
        done = pip_download(python, refused, folder=tmp_path / "refused")
        assert done.returncode != 0 and f"No matching distribution found for {refused}" in done.stdout + done.stderr
