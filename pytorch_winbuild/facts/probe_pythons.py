"""Every installed Python a build could run under: find the interpreters, then ask each one once.

The finders (running interpreter, pyenv or PEP 514 registry, py launcher, conda, PATH) only propose candidates: a shim
or a Store alias may start another interpreter, or none. So each is started once with QUERY_SCRIPT (2.7 and 3.x), in
parallel, and its own answer decides; one that does not answer is left out with a note, never an error.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol

from packaging.version import InvalidVersion, Version

from pytorch_winbuild.facts.model import PythonInfo
from pytorch_winbuild.facts.probe_common import Commands, clean_env_path, is_file, python_info
from pytorch_winbuild.json_file import JsonValue, parse_json

# A cold interpreter on a slow disk imports venv and pip from source and writes their bytecode first.
QUERY_TIMEOUT = 10.0
# conda starts a Python of its own and reads every environment's metadata.
LISTER_TIMEOUT = 20.0

# What an interpreter says about itself, in syntax that Python 2.7 and 3.x both run: one JSON line.
# venv needs ensurepip too (Debian's python3 without python3-venv has venv but no ensurepip: its venvs
# get no pip); `paths` are the folders of sys.path, where installing pip or ensurepip leaves a trace.
QUERY_SCRIPT = """\
import json, os, platform, struct, sys
def importable(name):
    try:
        __import__(name)
        return True
    except Exception:
        return False
print(json.dumps({
    'version': platform.python_version(),
    'bits': struct.calcsize('P') * 8,
    'executable': sys.executable,
    'prefix': sys.prefix,
    'implementation': platform.python_implementation(),
    'venv': importable('venv') and importable('ensurepip'),
    'pip': importable('pip'),
    'paths': [p for p in sys.path if p and os.path.isdir(p)],
}))
"""
# -E: the tool's PYTHONHOME/PYTHONPATH must not reach another interpreter (a 3.11 PYTHONHOME breaks 2.7).
# -s: no user site-packages, which a venv made from the interpreter does not see either.
PYTHON_QUERY = ("-E", "-s", "-c", QUERY_SCRIPT)

# Finders by rank: the first to find an interpreter names it; equal versions are listed in this order.
FINDER_RANK = {"running": 0, "pyenv": 1, "registry": 1, "py launcher": 2, "conda": 3, "PATH": 4}

_PYTHON_VERSION = re.compile(r"[0-9]{1,2}\.[0-9]{1,3}(\.[0-9]{1,3})?([abc]|rc)?[0-9]{0,3}\+?")  # ASCII only
_VERSIONED_NAME = re.compile(r"python[23]\.\d+")  # python3.9, not python3.9-config or python3.6m


@dataclass(frozen=True)
class Candidate:
    """A file that may start a Python, and the finder that named it."""

    executable: str
    found_by: str


@dataclass(frozen=True)
class Answer:
    """What a Python said about itself (QUERY_SCRIPT)."""

    info: PythonInfo
    prefix: str
    paths: tuple[str, ...]


def finder_rank(found_by: str) -> int:
    """The finder's place in FINDER_RANK ("registry PythonCore\\3.6" is "registry"); an unknown finder last."""
    return FINDER_RANK.get(found_by.split(" ")[0] if found_by.startswith("registry ") else found_by, len(FINDER_RANK))


def parse_answer(stdout: str, found_by: str) -> Answer | None:
    """QUERY_SCRIPT's JSON line (the last line: a sitecustomize may print before it); None when it is not one."""
    lines = stdout.strip().splitlines()
    try:
        data: JsonValue = parse_json(lines[-1]) if lines else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    version, bits, executable = data.get("version"), data.get("bits"), data.get("executable")
    prefix, implementation, paths = data.get("prefix"), data.get("implementation"), data.get("paths")
    venv, pip = data.get("venv"), data.get("pip")
    folders = tuple(path for path in paths if isinstance(path, str)) if isinstance(paths, list) else None
    if not (
        isinstance(version, str)
        and _PYTHON_VERSION.fullmatch(version)
        and isinstance(bits, int | float)
        and bits in (32, 64)
        and isinstance(executable, str)
        and executable.strip()
        and isinstance(prefix, str)
        and isinstance(implementation, str)
        and isinstance(venv, bool)
        and isinstance(pip, bool)
        and isinstance(paths, list)
        and folders is not None
        and len(folders) == len(paths)
    ):
        return None
    info = PythonInfo(
        version=version,
        bits=int(bits),
        executable=executable,
        implementation=implementation,
        found_by=found_by,
        venv=venv,
        pip=pip,
    )
    return Answer(info, prefix, folders)


def _real(path: str) -> str:
    """The file a path names, links resolved, compared the way the running OS does."""
    return os.path.normcase(os.path.realpath(path))


def _path_key(path: str) -> str:
    """A path as given (a link and its target are two candidates, one answer decides they are the same)."""
    return os.path.normcase(os.path.abspath(path))


def answer_folders(executable: str, stdout: str) -> tuple[str, ...] | None:
    """The folders a query's answer depends on, for the version cache to watch; None when the answer is not
    a property of `executable` itself (a shim or wrapper script that started some other interpreter)."""
    answer = parse_answer(stdout, "")
    if answer is None or _real(answer.info.executable) != _real(executable):
        return None
    return answer.paths


def running_python() -> tuple[PythonInfo, str]:
    """The interpreter running pytorch-winbuild, asked in-process (no import runs), and its sys.prefix.

    Looked up on sys.path only (PathFinder), past sys.meta_path: setuptools' _distutils_hack finder answers a
    lookup of "pip" by switching itself off for the process, after which `import setuptools` fails."""
    found = importlib.machinery.PathFinder.find_spec
    venv = found("venv") is not None and found("ensurepip") is not None
    return replace(python_info(), venv=venv, pip=found("pip") is not None), sys.prefix


def python_sort_key(python: PythonInfo) -> Version:
    try:
        return Version(python.version.rstrip("+"))
    except InvalidVersion:  # cannot happen for a validated version; sorts last rather than crash
        return Version("0")


# ---------------------------------------------------------------- pure parsers

# `py -0p` (`--list-paths`), documented at https://docs.python.org/3/using/windows.html#python-launcher-for-windows
# ("The --list command lists all available runtimes using the -V: format"). The launcher of Python
# 3.7-3.10 (PC/launcher.c, show_python_list) prints " %-15ls%ls" of "-X.Y-BITS" and the path, its
# default marker " *" on stderr: " -3.6-64        C:\Python36\python.exe". The launcher of 3.11 and later
# (PC/launcher2.c, _printEnvironment) prints " %-16s %s" of "-V:TAG" (PythonCore) or "-V:COMPANY/TAG",
# " *" after the default, then the path and any ExecutableArguments: " -V:3.12 *        C:\...\python.exe".
_OLD_LAUNCHER = re.compile(r"\s*-(?P<tag>\d+\.\d+-(?:32|64))\s+(?P<rest>.+)")
_NEW_LAUNCHER = re.compile(r"\s*-V:(?P<tag>\S+)(?:\s+\*)?\s+(?P<rest>.+)")
_EXE = re.compile(r".+?\.exe(?=\s|$)", re.IGNORECASE)


def parse_py_launcher_list(text: str) -> list[tuple[str, str]]:
    """(tag, python.exe path) of each interpreter in `py -0p`'s output, old and new launcher alike.

    Entries without a path to an .exe are left out: the Store's Pythons, which the old launcher shows
    by file name only, and PEP 514 registrations without an ExecutablePath (not executable)."""
    found = []
    for line in text.splitlines():
        match = _OLD_LAUNCHER.fullmatch(line) or _NEW_LAUNCHER.fullmatch(line)
        exe = _EXE.match(match.group("rest").strip()) if match else None
        if match and exe and ("\\" in exe.group(0) or "/" in exe.group(0)):
            found.append((match.group("tag"), exe.group(0)))
    return found


def parse_conda_envs(text: str) -> list[str]:
    """`conda env list --json` → the environments' folders: {"envs": ["/opt/conda", "/opt/conda/envs/py36"]}.
    ValueError when the output is not that shape."""
    data: JsonValue = parse_json(text)
    envs = data.get("envs") if isinstance(data, dict) else None
    if not isinstance(envs, list) or not all(isinstance(env, str) for env in envs):
        raise ValueError('no "envs" list of folders')
    return [env for env in envs if isinstance(env, str)]


# ---------------------------------------------------------------- Windows registry (PEP 514)


class PythonRegistry(Protocol):
    """Read-only HKEY_CURRENT_USER ("HKCU") and HKEY_LOCAL_MACHINE ("HKLM"), in the 64-bit or 32-bit view."""

    def subkeys(self, hive: str, key: str, view: Literal[32, 64]) -> list[str]:
        """The names of the key's subkeys; [] when the key is absent."""

    def value(self, hive: str, key: str, name: str, view: Literal[32, 64]) -> object | None:
        """A value ("" is the key's default value), or None when the key or value is absent."""


class WinregPythonRegistry:
    """The real registry, through winreg (Windows only)."""

    def subkeys(self, hive: str, key: str, view: Literal[32, 64]) -> list[str]:
        if sys.platform != "win32":  # what `import winreg` raises elsewhere; mypy then checks the rest for win32 only
            raise ModuleNotFoundError("No module named 'winreg'", name="winreg")
        import winreg

        root = winreg.HKEY_CURRENT_USER if hive == "HKCU" else winreg.HKEY_LOCAL_MACHINE
        flags = winreg.KEY_READ | (winreg.KEY_WOW64_32KEY if view == 32 else winreg.KEY_WOW64_64KEY)
        try:
            with winreg.OpenKey(root, key, 0, flags) as handle:
                return [winreg.EnumKey(handle, index) for index in range(winreg.QueryInfoKey(handle)[0])]
        except OSError:
            return []

    def value(self, hive: str, key: str, name: str, view: Literal[32, 64]) -> object | None:
        if sys.platform != "win32":
            raise ModuleNotFoundError("No module named 'winreg'", name="winreg")
        import winreg

        root = winreg.HKEY_CURRENT_USER if hive == "HKCU" else winreg.HKEY_LOCAL_MACHINE
        flags = winreg.KEY_READ | (winreg.KEY_WOW64_32KEY if view == 32 else winreg.KEY_WOW64_64KEY)
        try:
            with winreg.OpenKey(root, key, 0, flags) as handle:
                return winreg.QueryValueEx(handle, name)[0]
        except OSError:
            return None


# PEP 514's three places, the user's first ("HKEY_CURRENT_USER ... take[s] precedence"); the 32-bit view of
# HKLM\Software is HKLM\Software\Wow6432Node, where 32-bit installers register.
REGISTRY_VIEWS: tuple[tuple[str, Literal[32, 64]], ...] = (("HKCU", 64), ("HKLM", 64), ("HKLM", 32))


def _text(value: object) -> str | None:
    return value.strip().strip('"').strip() or None if isinstance(value, str) else None


def registry_candidates(registry: PythonRegistry, notes: list[str]) -> list[Candidate]:
    """Every Company\\Tag under Software\\Python (PEP 514): InstallPath's ExecutablePath, or for PythonCore
    (which registered none before 3.6) python.exe in InstallPath's default value. The PyLauncher company is
    reserved for py.exe's settings, and a registration without an executable is not runnable (PEP 514)."""
    found = []
    for hive, view in REGISTRY_VIEWS:
        for company in registry.subkeys(hive, r"Software\Python", view):
            if company.lower() == "pylauncher":
                continue
            for tag in registry.subkeys(hive, rf"Software\Python\{company}", view):
                install = rf"Software\Python\{company}\{tag}\InstallPath"
                executable = _text(registry.value(hive, install, "ExecutablePath", view))
                folder = _text(registry.value(hive, install, "", view))
                if executable is None and folder is not None and company.lower() == "pythoncore":
                    executable = str(Path(folder) / "python.exe")
                if executable is None:
                    notes.append(
                        f"The registry's {hive}\\{install} ({view}-bit view) names no ExecutablePath, so that "
                        "Python is not runnable (PEP 514); it is left out."
                    )
                    continue
                found.append(Candidate(executable, f"registry {company}\\{tag}"))
    return found


# ---------------------------------------------------------------- file system


def _executable_file(path: Path) -> bool:
    return is_file(path) and os.access(path, os.X_OK)


def pyenv_root(environ: Mapping[str, str], commands: Commands) -> Path | None:
    """$PYENV_ROOT, else what `pyenv root` says, else ~/.pyenv (pyenv's own default); None: no HOME to look in."""
    value = clean_env_path(environ.get("PYENV_ROOT"))
    if value:
        return Path(value)
    pyenv = shutil.which("pyenv", path=environ.get("PATH", os.defpath))
    if pyenv is not None:
        commands.start("pythons:pyenv-root", [pyenv, "root"])
        answer = commands.result("pythons:pyenv-root")
        if answer is not None and answer.ok and answer.stdout.strip():
            return Path(answer.stdout.strip())
    home = clean_env_path(environ.get("HOME"))
    return Path(home) / ".pyenv" if home else None


def pyenv_candidates(root: Path) -> list[Candidate]:
    """Every version pyenv installed: <root>/versions/*/bin/python."""
    try:
        versions = sorted((root / "versions").iterdir())
    except OSError:
        return []
    return [
        Candidate(str(folder / "bin" / "python"), "pyenv") for folder in versions if is_file(folder / "bin" / "python")
    ]


def _path_folders(environ: Mapping[str, str]) -> list[str]:
    """PATH's folders; an empty entry (the current folder) is not one the probe looks in."""
    return [folder for folder in environ.get("PATH", os.defpath).split(os.pathsep) if folder]


def posix_path_candidates(environ: Mapping[str, str], skip: Iterable[Path] = ()) -> list[Candidate]:
    """python3, python and every pythonX.Y in each PATH folder, except the folders in `skip`.

    pyenv's shims folder is skipped: its shims only forward to pyenv's versions, which are listed
    directly, and each shim of a version that is not active fails."""
    skipped = {os.path.realpath(folder) for folder in skip}
    found = []
    for folder in _path_folders(environ):
        if os.path.realpath(folder) in skipped:
            continue
        try:
            versioned = sorted(name for name in os.listdir(folder) if _VERSIONED_NAME.fullmatch(name))
        except OSError:
            continue
        for name in ("python3", "python", *versioned):
            if _executable_file(Path(folder) / name):
                found.append(Candidate(str(Path(folder) / name), "PATH"))
    return found


def windows_path_candidates(folders: Iterable[Path]) -> list[Candidate]:
    """python.exe and python3.exe in each PATH folder."""
    return [
        Candidate(str(folder / name), "PATH")
        for folder in folders
        for name in ("python.exe", "python3.exe")
        if is_file(folder / name)
    ]


# ---------------------------------------------------------------- the search


class PythonSearch:
    """Starts each candidate's query on the probe's `commands` as it is added; `result()` collects them.

    `running` describes the interpreter running the tool; None: this one, asked in-process."""

    def __init__(self, commands: Commands, *, windows: bool, running: PythonInfo | None = None) -> None:
        self._commands = commands
        self._windows = windows
        self._candidates: list[Candidate] = []
        self._listers: list[tuple[str, str]] = []
        self._started: set[str] = set()
        self._running_key: tuple[str, str] | None = None
        if running is None:
            self.running, prefix = running_python()
            self._running_key = (_real(self.running.executable), _real(prefix))
            self._started.add(_path_key(self.running.executable))  # already described: not asked again
        else:
            self.running = running  # a described interpreter: its prefix is unknown, nothing is merged into it

    def add(self, candidates: Iterable[Candidate]) -> None:
        for candidate in candidates:
            self._candidates.append(candidate)
            key = _path_key(candidate.executable)
            if key not in self._started:
                self._started.add(key)
                self._commands.start(f"python:{key}", [candidate.executable, *PYTHON_QUERY], QUERY_TIMEOUT)

    def list_from(self, lister: Path, kind: Literal["conda", "py launcher"]) -> None:
        """Start `conda env list --json` or `py -0p`; their interpreters are added when `result()` reads them."""
        args = [str(lister), "env", "list", "--json"] if kind == "conda" else [str(lister), "-0p"]
        self._commands.start(f"pythons:{kind}", args, LISTER_TIMEOUT)
        self._listers.append((kind, str(lister)))

    def _read_listers(self, notes: list[str]) -> None:
        for kind, lister in self._listers:
            answer = self._commands.result(f"pythons:{kind}")
            if answer is None or not answer.ok:
                problem = answer.problem() if answer is not None else "not started"
                notes.append(f"{lister} did not list its Pythons ({problem}); they are looked for elsewhere only.")
            elif kind == "py launcher":
                self.add(Candidate(path, "py launcher") for _, path in parse_py_launcher_list(answer.stdout))
            else:
                try:
                    envs = parse_conda_envs(answer.stdout)
                except ValueError as exc:
                    notes.append(f"`{lister} env list --json` gave no list of environments ({exc}).")
                    continue
                layout = ("python.exe",) if self._windows else ("bin", "python")
                pythons = [Path(env, *layout) for env in envs]  # an environment may hold no Python (an R one)
                self.add(Candidate(str(python), "conda") for python in pythons if is_file(python))

    def result(self, notes: list[str]) -> tuple[PythonInfo, ...]:
        """Every Python found, the running one included, newest version first (then by finder)."""
        self._read_listers(notes)
        seen = {self._running_key} if self._running_key else set()
        reported: set[str] = set()
        found = [self.running]
        ordered = sorted(enumerate(self._candidates), key=lambda pair: (finder_rank(pair[1].found_by), pair[0]))
        for _, candidate in ordered:
            key = _path_key(candidate.executable)
            result = self._commands.result(f"python:{key}")
            if result is None:  # the running interpreter's own path
                continue
            answer = parse_answer(result.stdout, candidate.found_by) if result.ok else None
            if answer is None:
                if key not in reported:  # one note for a file two finders named
                    reported.add(key)
                    why = result.problem() if not result.ok else "its answer is not the expected JSON line"
                    notes.append(
                        f"{candidate.executable} ({candidate.found_by}) did not answer as a Python ({why}); left out."
                    )
                continue
            identity = (_real(answer.info.executable), _real(answer.prefix))
            if identity not in seen:
                seen.add(identity)
                found.append(answer.info)
        found.sort(key=python_sort_key, reverse=True)  # stable: equal versions keep the finders' order
        return tuple(found)


def search_linux(environ: Mapping[str, str], commands: Commands, running: PythonInfo | None = None) -> PythonSearch:
    """Start asking pyenv's versions, conda's environments ($CONDA_EXE, else conda on PATH) and PATH's Pythons."""
    search = PythonSearch(commands, windows=False, running=running)
    root = pyenv_root(environ, commands)
    if root is not None:
        search.add(pyenv_candidates(root))
    conda = clean_env_path(environ.get("CONDA_EXE"))
    if conda is None or not _executable_file(Path(conda)):
        conda = shutil.which("conda", path=environ.get("PATH", os.defpath))
    if conda:
        search.list_from(Path(conda), "conda")
    search.add(posix_path_candidates(environ, skip=[root / "shims"] if root is not None else []))
    return search


def search_windows(
    commands: Commands,
    *,
    running: PythonInfo | None,
    registry: PythonRegistry | None,
    notes: list[str],
    py_launcher: Path | None,
    conda: Path | None,
    path_folders: Iterable[Path],
) -> PythonSearch:
    """Start asking the PEP 514 registrations, the py launcher's list, conda's environments and PATH's Pythons."""
    search = PythonSearch(commands, windows=True, running=running)
    if registry is not None:
        search.add(registry_candidates(registry, notes))
    if py_launcher is not None:
        search.list_from(py_launcher, "py launcher")
    if conda is not None:
        search.list_from(conda, "conda")
    search.add(windows_path_candidates(path_folders))
    return search
