"""The build's venv: the era's pinned build requirements in a venv of the build's Python, under the cache.

One venv per (era, Python, key hashing the interpreter and the pins). Made in place, never renamed (a venv's scripts
hold its absolute path); a marker written last says it is complete, and one without it, or whose python no longer
runs, is made again. Every command is an argument list, never a shell. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pytorch_winbuild import atomic_file, child_processes
from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.json_file import read_json
from pytorch_winbuild.planning.venv_plan import PIP_INSTALL, venv_python

# In <cache>/venvs/: the venv python of the cache's last `invoke build`, for `invoke verify` and `build-ext`; written
# as soon as that build made or reused the venv, so it holds after a failed build or verification too.
LAST_VENV = "last.json"
MARKER = "winbuild-venv.json"  # written last: its presence with the right key means the venv is complete
PIP_LOG = "winbuild-pip.log"  # pip's whole output of the last install, kept beside the venv for a failure
PROBE_SECONDS = 60
PIP_SECONDS = 3600  # a slow mirror and numpy's wheels, with room to spare; a hung pip still ends
# Python 2.7 reads this too (the base may be any Python): its version first, then the modules a venv needs.
_PROBE = "import sys; sys.stdout.write('%d.%d\\n' % sys.version_info[:2]); import venv, ensurepip"
_PIP_SPEC = re.compile(r"pip\s*(?:[=<>!~;\[]|$)", re.IGNORECASE)  # pip itself, not pip-tools or pipx
_FAILED_REQUIREMENT = re.compile(
    r"(?:No matching distribution found for|satisfies the requirement|Failed building wheel for|"
    r"Failed to build|Could not install packages due to an? \w+Error:?)\s+(\S+)"
)


def _run(argv: Sequence[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """The base Python, the venv module and pip run what the machine and PyPI give them: in the tool's tree, stdin
    closed, output as one text bounded in memory (its start and end kept), the tree stopped on timeout."""
    return child_processes.run_bounded(list(argv), cwd=cwd, timeout=timeout, merge_stderr=True)


def _runs(python: Path, cwd: Path) -> bool:
    """The venv's python starts (its base Python still there) and reads its own site-packages."""
    if not python.is_file():
        return False
    try:
        return _run([str(python), "-E", "-c", "import sys"], cwd, PROBE_SECONDS).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _marker(folder: Path) -> dict[str, object] | None:
    try:
        data = read_json(folder / MARKER)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _missing_venv_fix(base_python: str, minor: str) -> str:
    """How to get a Python that can make venvs, for where this one most likely came from."""
    if minor.startswith("2."):
        return "Python 2 has no venv module (it came with Python 3.3): pick a Python 3 of the era's range."
    if sys.platform == "win32":
        return (
            f"repair or reinstall Python {minor} from python.org with the 'pip' feature ticked (the installer's "
            "Modify/Repair), or pick another Python of the era's range."
        )
    if "/.pyenv/" in base_python.replace("\\", "/"):
        return (
            f"reinstall Python {minor} with `pyenv install --force` (a pyenv build has venv and ensurepip), or pick "
            "another Python."
        )
    return f"install Debian's/Ubuntu's venv package: `apt-get install python{minor}-venv`, or pick another Python."


def _check_base(base_python: str, cwd: Path) -> str:
    """The base Python's "X.Y", after checking it has venv and ensurepip (Debian's python3 without
    python3-venv has neither ensurepip nor a working `-m venv`; Python 2 has no venv)."""
    try:
        probe = _run([base_python, "-E", "-c", _PROBE], cwd, PROBE_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(
            f"the build's Python {base_python} cannot be run ({exc}).",
            fix="check the path, or pick another installed Python of the era's range.",
        ) from None
    lines = probe.stdout.splitlines()
    minor = lines[0].strip() if lines and re.fullmatch(r"\d+\.\d+", lines[0].strip()) else "3"
    if probe.returncode != 0:
        named = re.search(r"No module named '?(\w+)", probe.stdout)
        missing = named.group(1) if named else "venv or ensurepip"
        raise ToolchainError(
            f"the build's Python {base_python} (Python {minor}) cannot make a venv: it has no {missing} module "
            f"({(lines[-1] if lines else 'no output').strip()}).",
            fix=_missing_venv_fix(base_python, minor),
        )
    return minor


def _pip_failure(specs: Sequence[str], output: str, log_file: Path) -> ToolchainError:
    """Which requirement failed, pip's last lines, and what to do (offline machines: a wheel folder)."""
    failed = _FAILED_REQUIREMENT.findall(output)
    what = ", ".join(dict.fromkeys(failed)) if failed else " ".join(specs)
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    tail = " | ".join(lines[-8:])
    return ToolchainError(
        f"pip could not install the build's requirement {what}. pip said: {tail} (the whole output: {log_file}).",
        fix=(
            "on a machine without internet, download the wheels where there is (`pip download --only-binary=:all: "
            "--platform win_amd64 --python-version X.Y -d wheels " + " ".join(specs) + "`) and pass that folder as "
            "--find-links; behind a proxy or mirror, set pip's index (PIP_INDEX_URL) or --index-url."
        ),
    )


def _pip_install(python: Path, folder: Path, specs: Sequence[str], options: Sequence[str]) -> None:
    argv = [str(python), "-E", *PIP_INSTALL, *options, *specs]  # -E: the tool's PYTHON* variables stay out
    log_file = folder / PIP_LOG
    try:
        result = _run(argv, folder, PIP_SECONDS)
    except subprocess.TimeoutExpired:
        raise ToolchainError(
            f"pip did not finish installing {' '.join(specs)} within {PIP_SECONDS} s.",
            fix="check the network or the index, or pass a folder of the wheels as --find-links.",
        ) from None
    with log_file.open("a", encoding="utf-8") as handle:
        handle.write(f"$ {' '.join(argv)}\n{result.stdout}\n")
    if result.returncode != 0:
        raise _pip_failure(specs, result.stdout, log_file)


def _index_options(find_links: str | None, index_url: str | None) -> list[str]:
    """A wheel folder alone means an offline machine: pip looks nowhere else (--no-index)."""
    options = []
    if index_url is not None:
        options += ["--index-url", index_url]
    if find_links is not None:
        options += ["--find-links", find_links]
        if index_url is None:
            options.append("--no-index")
    return options


def ensure_build_venv(
    base_python: str,
    folder: Path,
    requirements: tuple[str, ...],
    key: str,
    *,
    find_links: str | None = None,
    index_url: str | None = None,
    log: Callable[[str], None],
) -> Path:
    """The venv's python, reused when its marker holds `key` and it runs, else made anew.

    pip's own pin (pip==X in `requirements`) is installed first, by itself: the pip a venv starts with
    is the one bundled with its Python (3.6.15's ensurepip has pip 18.1, which knows neither
    manylinux2010 nor manylinux2014 wheels and resolves without backtracking), and the newest pip that
    Python runs installs the rest.
    """
    windows = sys.platform == "win32"
    python = Path(venv_python(folder, windows))
    marker = _marker(folder)
    if marker is not None and marker.get("key") == key:
        if _runs(python, folder):
            log(f"build venv: reusing {folder} (key {key}, made {marker.get('made', '?')})")
            return python
        log(f"build venv: {folder} is damaged (its python is missing or does not run): making it again")
    elif folder.exists():
        reason = "another interpreter or other pins" if marker is not None else "it was never finished"
        log(f"build venv: {folder} cannot be reused ({reason}): making it again")

    started = time.monotonic()
    folder.parent.mkdir(parents=True, exist_ok=True)
    minor = _check_base(base_python, folder.parent)
    try:
        if folder.exists():
            shutil.rmtree(folder)
    except OSError as exc:
        raise ToolchainError(
            f"the old build venv {folder} cannot be removed ({exc.strerror or exc}).",
            fix="end the programs still running from it (a build, a shell that activated it), then run again.",
        ) from None
    log(f"build venv: making {folder} with {base_python} (Python {minor})")
    made = _run([base_python, "-E", "-m", "venv", str(folder)], folder.parent, PIP_SECONDS)
    if made.returncode != 0 or not python.is_file():
        lines = [line.strip() for line in made.stdout.splitlines() if line.strip()]
        raise ToolchainError(
            f"`{base_python} -m venv` could not make {folder}: {' | '.join(lines[-5:]) or 'no output'}.",
            fix=_missing_venv_fix(base_python, minor),
        )
    options = _index_options(find_links, index_url)
    pips = [spec for spec in requirements if _PIP_SPEC.match(spec)]
    rest = [spec for spec in requirements if spec not in pips]
    if pips:
        log(f"build venv: {' '.join(pips)} first (the venv starts with the pip bundled with Python {minor})")
        _pip_install(python, folder, pips, options)
    if rest:
        log(f"build venv: installing {len(rest)} requirements: {' '.join(rest)}")
        _pip_install(python, folder, rest, options)
    record = {
        "key": key,
        "base_python": base_python,
        "requirements": list(requirements),
        "made": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    atomic_file.write_text(folder / MARKER, json.dumps(record, indent=1) + "\n")
    log(f"build venv: ready in {time.monotonic() - started:.1f} s: {python}")
    return python


def remember_last_venv(cache_dir: Path, python: str) -> None:
    """Record the venv python of this cache's last build, so `verify` without --python checks its torch and
    `build-ext` without --python builds against it when the tool's own Python has none."""
    folder = cache_dir / "venvs"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_file.write_text(folder / LAST_VENV, json.dumps({"python": python}) + "\n")


def last_venv(cache_dir: Path) -> str | None:
    """The venv python of this cache's last build while it is still there; None: no build recorded one."""
    try:
        data = read_json(cache_dir / "venvs" / LAST_VENV)
    except (OSError, ValueError):
        return None
    python = data.get("python") if isinstance(data, dict) else None
    return python if isinstance(python, str) and Path(python).is_file() else None
