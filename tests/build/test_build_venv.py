"""The build venv (builder/build_venv.py), made for real: pyenv's CPythons as the build's Python, pip
installing from PyPI (or, offline, from a folder of wheels downloaded here), and the venv's own python
asked what it holds. Timing-free: reuse is seen in the marker file's inode and mtime and in the log.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytorch_winbuild.builder import build_venv
from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.knowledge.build_requirements import load_build_requirements
from pytorch_winbuild.knowledge.config_files import config_dir
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning import venv_plan

PYENV = Path("/root/.pyenv/versions")
PY37 = str(PYENV / "3.7.16" / "bin" / "python")
PY39 = str(PYENV / "3.9.18" / "bin" / "python")
PY27 = str(PYENV / "2.7.18" / "bin" / "python")
WINDOWS = sys.platform == "win32"
SMALL = ("pip==24.0", "six==1.17.0")  # pip's pin for 3.7 and one small pure-Python wheel
# The tests that share the era venv run on one pytest-xdist worker (--dist loadgroup), so it is made once.
ERA_VENV_WORKER = pytest.mark.xdist_group("build_venv")


def ask(python: Path, code: str) -> str:
    """What the venv's own python says (a fresh process: nothing of this one's sys.path)."""
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


class Log(list[str]):
    def __call__(self, line: str) -> None:
        self.append(line)


def make(cache: Path, requirements: tuple[str, ...], base: str = PY37, **options: str) -> tuple[Path, Log]:
    log = Log()
    key = venv_plan.venv_key(base, "3.7.16", requirements)
    folder = venv_plan.venv_folder(cache, "1.11-1.13", "3.7", key)
    return build_venv.ensure_build_venv(base, folder, requirements, key, log=log, **options), log


@pytest.fixture(scope="module")
def era_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[str, ...], Log]:
    """Era 1.11-1.13's whole pinned set for Python 3.7 (12 packages, numpy's wheel among them)."""
    eras = {era.name: era.python for era in load_knowledge().eras}
    pins = load_build_requirements(config_dir() / "build_requirements.toml", eras).requirements_for("1.11-1.13", "3.7")
    requirements = tuple(pin.spec for pin in pins)
    python, log = make(tmp_path_factory.mktemp("cache"), requirements)
    return python, requirements, log


@pytest.mark.pypi
@ERA_VENV_WORKER
def test_the_era_venv_holds_the_pins_on_the_build_python(era_venv: tuple[Path, tuple[str, ...], Log]) -> None:
    python, requirements, log = era_venv
    pinned = dict(spec.split("==") for spec in requirements)
    assert ask(python, "import sys; print(sys.version.split()[0])") == "3.7.16"
    assert ask(python, "import sys; print(sys.prefix)") == str(python.parent.parent)
    assert ask(python, "import numpy; print(numpy.__version__)") == pinned["numpy"] == "1.21.6"
    assert ask(python, "import yaml; print(yaml.__version__)") == pinned["pyyaml"]
    assert ask(python, "import pip; print(pip.__version__)") == pinned["pip"]  # upgraded from 3.7's bundled 22.0.4
    assert ask(python, "import setuptools; print(setuptools.__version__)") == pinned["setuptools"]
    marker = json.loads((python.parent.parent / build_venv.MARKER).read_text(encoding="utf-8"))
    assert marker["requirements"] == list(requirements)
    assert any(line.startswith("build venv: pip==24.0 first") for line in log)


@pytest.mark.pypi
@ERA_VENV_WORKER
def test_a_second_call_reuses_the_venv(era_venv: tuple[Path, tuple[str, ...], Log]) -> None:
    python, requirements, _ = era_venv
    folder = python.parent.parent
    before = (folder / build_venv.MARKER).stat()
    pip_log = (folder / build_venv.PIP_LOG).read_text(encoding="utf-8")
    again, log = make(folder.parent.parent, requirements)
    after = (folder / build_venv.MARKER).stat()
    assert again == python
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert (folder / build_venv.PIP_LOG).read_text(encoding="utf-8") == pip_log  # pip did not run
    assert len(log) == 1 and log[0].startswith(f"build venv: reusing {folder}")


@pytest.mark.pypi
def test_unfinished_changed_or_damaged_venvs_are_made_again(tmp_path: Path) -> None:
    """In one folder (a cache path with a space, '&', '$(…)' and quotes: arguments, never a shell)."""
    cache = tmp_path / "cache & $(touch x) 'q'"
    key = venv_plan.venv_key(PY37, "3.7.16", SMALL)
    folder = venv_plan.venv_folder(cache, "1.11-1.13", "3.7", key)
    (folder / "bin").mkdir(parents=True)  # what a run that died while pip worked leaves: no marker
    (folder / "bin" / "python").write_text("not a python", encoding="utf-8")
    log = Log()
    python = build_venv.ensure_build_venv(PY37, folder, SMALL, key, log=log)
    assert "cannot be reused (it was never finished)" in log[0]
    assert ask(python, "import six; print(six.__version__)") == "1.17.0"

    changed = ("pip==24.0", "six==1.16.0")
    key = venv_plan.venv_key(PY37, "3.7.16", changed)
    log = Log()
    assert build_venv.ensure_build_venv(PY37, folder, changed, key, log=log) == python
    assert "cannot be reused (another interpreter or other pins)" in log[0]
    assert ask(python, "import six; print(six.__version__)") == "1.16.0"
    assert json.loads((folder / build_venv.MARKER).read_text(encoding="utf-8"))["key"] == key

    python.unlink()  # a venv whose python is gone (or whose base Python was uninstalled)
    log = Log()
    build_venv.ensure_build_venv(PY37, folder, changed, key, log=log)
    assert "is damaged" in log[0]
    assert ask(python, "import six; print(six.__version__)") == "1.16.0"
    assert not (cache.parent / "x").exists() and not Path("x").exists()


def test_keys_folders_and_interpreters() -> None:
    key = venv_plan.venv_key(PY37, "3.7.16", SMALL)
    assert key == venv_plan.venv_key(PY37, "3.7.16", SMALL) and len(key) == 12
    assert key != venv_plan.venv_key(PY39, "3.9.18", SMALL)  # another interpreter
    assert key != venv_plan.venv_key(PY37, "3.7.17", SMALL)  # the same path upgraded in place
    assert key != venv_plan.venv_key(PY37, "3.7.16", (*SMALL, "numpy==1.21.6"))
    folder = venv_plan.venv_folder(Path("cache"), "2.9+", "3.12", key)
    assert folder == Path("cache", "venvs", f"2.9_-py3.12-{key}")
    assert venv_plan.venv_python(folder, windows=True) == folder / "Scripts" / "python.exe"
    assert venv_plan.venv_python(folder, windows=False) == folder / "bin" / "python"


@pytest.mark.pypi
def test_a_python_without_venv_is_a_toolchain_error(tmp_path: Path) -> None:
    log = Log()
    with pytest.raises(ToolchainError) as raised:
        build_venv.ensure_build_venv(PY27, tmp_path / "venv", SMALL, "k", log=log)
    assert raised.value.exit_code == 3
    assert "(Python 2.7) cannot make a venv: it has no venv module" in raised.value.message
    assert (
        raised.value.fix == "Python 2 has no venv module (it came with Python 3.3): pick a Python 3 of the era's range."
    )
    assert not (tmp_path / "venv").exists()


@pytest.mark.pypi
@ERA_VENV_WORKER
def test_offline_from_a_folder_of_wheels(tmp_path: Path, era_venv: tuple[Path, tuple[str, ...], Log]) -> None:
    """The wheels downloaded here (the era venv's pip, from PyPI), then the venv made with --no-index."""
    wheels = tmp_path / "wheels"
    fetched = subprocess.run(
        [str(era_venv[0]), "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(wheels), *SMALL],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    python, _ = make(tmp_path / "cache", SMALL, find_links=str(wheels))
    assert ask(python, "import six; print(six.__version__)") == "1.17.0"
    pip_log = (python.parent.parent / build_venv.PIP_LOG).read_text(encoding="utf-8")
    assert "--no-index --find-links" not in pip_log and f"--find-links {wheels} --no-index" in pip_log

    with pytest.raises(ToolchainError) as raised:  # a pin the folder does not hold
        make(tmp_path / "cache2", ("pip==24.0", "six==1.15.0"), find_links=str(wheels))
    assert "could not install the build's requirement six==1.15.0" in raised.value.message
    assert "No matching distribution found for six==1.15.0" in raised.value.message
    assert raised.value.fix is not None and "--find-links" in raised.value.fix
    assert build_venv.PIP_LOG in raised.value.message


def test_the_last_build_venv_is_remembered_for_verify(tmp_path: Path) -> None:
    assert build_venv.last_venv(tmp_path) is None
    python = tmp_path / "venvs" / "era-py3.7-key" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("", encoding="utf-8")
    build_venv.remember_last_venv(tmp_path, str(python))
    assert build_venv.last_venv(tmp_path) == str(python)
    python.unlink()  # the venv was removed since: verify falls back to its own Python
    assert build_venv.last_venv(tmp_path) is None
    (tmp_path / "venvs" / build_venv.LAST_VENV).write_text("{not json", encoding="utf-8")
    assert build_venv.last_venv(tmp_path) is None
