"""Every installed Python in the facts (facts/probe_pythons.py), found on this machine for real.

pyenv's real CPythons (2.7 and 3.6-3.13 under /root/.pyenv/versions, here and on CI) are the
interpreters every test asks; what each one is comes from outside the code under test: its own
`--version` banner, the ELF header of its binary, the stdlib and site-packages folders on disk.
Windows' registry and py launcher and conda cannot run here; their doubles (each marked where it is
defined) hand out paths that lead to those same real interpreters.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from packaging.version import Version

from pytorch_winbuild.facts.model import PythonInfo, facts_from_dict
from pytorch_winbuild.facts.probe import probe
from pytorch_winbuild.facts.probe_common import CommandResult, Commands, Runner, run_command
from pytorch_winbuild.facts.probe_pythons import (
    PYTHON_QUERY,
    parse_conda_envs,
    parse_py_launcher_list,
    search_linux,
)
from pytorch_winbuild.facts.probe_windows import probe_windows
from pytorch_winbuild.facts.version_cache import VersionCache

PYENV_ROOT = Path("/root/.pyenv")
PYENV_VERSIONS = ("2.7.18", "3.6.15", "3.7.16", "3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0")


def real_python(version: str) -> Path:
    return PYENV_ROOT / "versions" / version / "bin" / "python"


def banner_version(python: Path) -> str:
    """The interpreter's own `--version` banner ("Python 2.7.18" goes to stderr, 3.x to stdout)."""
    done = subprocess.run([str(python), "--version"], capture_output=True, text=True, timeout=30, check=True)
    match = re.fullmatch(r"Python (\S+)", (done.stdout or done.stderr).strip())
    assert match, (python, done.stdout, done.stderr)
    return match.group(1)


def elf_bits(python: Path) -> int:
    """EI_CLASS of the ELF header: 1 is a 32-bit binary, 2 a 64-bit one."""
    with python.resolve().open("rb") as binary:
        header = binary.read(5)
    assert header[:4] == b"\x7fELF"
    return {1: 32, 2: 64}[header[4]]


def expected_flags(version: str) -> tuple[bool, bool]:
    """(venv, pip) from the install's folders: lib/pythonX.Y/{venv,ensurepip} and site-packages/pip."""
    lib = PYENV_ROOT / "versions" / version / "lib" / f"python{'.'.join(version.split('.')[:2])}"
    venv = (lib / "venv" / "__init__.py").is_file() and (lib / "ensurepip" / "__init__.py").is_file()
    return venv, (lib / "site-packages" / "pip" / "__init__.py").is_file()


def executable(path: Path, body: str) -> Path:
    """A shell script the search really runs (the input under test, or a double where marked)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def link(path: Path, target: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return path


def search(environ: dict[str, str], run: Runner = run_command) -> tuple[tuple[PythonInfo, ...], list[str]]:
    """The Linux search on `environ` alone: (every Python found, the notes)."""
    notes: list[str] = []
    with Commands(run) as commands:
        pythons = search_linux(environ, commands).result(notes)
    return pythons, notes


@pytest.fixture(scope="module")
def truth() -> dict[str, tuple[str, int, bool, bool]]:
    """pyenv folder name → (version from the banner, bits from the ELF header, venv, pip)."""
    assert sorted(p.name for p in (PYENV_ROOT / "versions").iterdir()) == sorted(PYENV_VERSIONS)
    return {
        name: (banner_version(real_python(name)), elf_bits(real_python(name)), *expected_flags(name))
        for name in PYENV_VERSIONS
    }


# ---------------------------------------------------------------- Linux: pyenv and PATH


def test_pyenv_pythons_are_found_as_they_describe_themselves(
    tmp_path: Path, truth: dict[str, tuple[str, int, bool, bool]]
) -> None:
    """Every pyenv version with its real version, bits and flags; a pythonX.Y symlink on PATH is the same
    interpreter as pyenv's (listed once, found by pyenv); a broken shim is left out with a note."""
    bin_dir = tmp_path / "bin"
    link(bin_dir / "python3.9", real_python("3.9.18").resolve())
    broken = executable(bin_dir / "python3", 'echo "pyenv: python3: command not found" >&2\nexit 1\n')
    executable(bin_dir / "python3.9-config", "exit 0\n")  # not an interpreter: never asked
    started = time.monotonic()
    pythons, notes = search({"PYENV_ROOT": str(PYENV_ROOT), "PATH": str(bin_dir)})
    elapsed = time.monotonic() - started

    in_pyenv = {Path(p.executable).parent.parent.name: p for p in pythons if p.executable.startswith(f"{PYENV_ROOT}/")}
    assert {name: (p.version, p.bits, p.venv, p.pip) for name, p in in_pyenv.items()} == truth
    assert all(p.implementation == "CPython" for p in in_pyenv.values())
    assert truth["2.7.18"][2] is False  # 2.7 has no venv module, and is listed all the same
    # each found by pyenv, but the one running this test, which is listed as "running"
    assert {p.found_by for p in in_pyenv.values() if p.executable != sys.executable} == {"pyenv"}
    assert in_pyenv["3.9.18"].executable == str(real_python("3.9.18"))
    assert not any(p.executable.startswith(str(bin_dir)) for p in pythons)
    assert any(p.found_by == "running" and p.executable == sys.executable for p in pythons)
    assert [note for note in notes if str(broken) in note] == [
        f"{broken} (PATH) did not answer as a Python (exit status 1: pyenv: python3: command not found); left out."
    ]
    assert len(notes) == 1, notes
    versions = [Version(p.version) for p in pythons]
    assert versions == sorted(versions, reverse=True)  # newest first
    assert elapsed < 8.0, f"asking {len(pythons)} Pythons took {elapsed:.2f} s (they are asked in parallel)"


def test_pyenv_shims_on_path_are_not_asked() -> None:
    """pyenv's real shims folder forwards only to pyenv's versions (listed directly): it is skipped, so an
    inactive version's shim cannot add a failure note."""
    shims = PYENV_ROOT / "shims"
    assert (shims / "python3.9").is_file()
    environ = {"PYENV_ROOT": str(PYENV_ROOT), "PATH": str(shims)}
    pythons, notes = search(environ)
    assert notes == []
    assert not any(p.executable.startswith(str(shims)) for p in pythons)


def test_pyenv_root_defaults_to_home(tmp_path: Path) -> None:
    """No PYENV_ROOT and no pyenv on PATH: ~/.pyenv, pyenv's own default, from the HOME given."""
    link(tmp_path / "home" / ".pyenv" / "versions" / "3.8.18", PYENV_ROOT / "versions" / "3.8.18")
    pythons, notes = search({"HOME": str(tmp_path / "home"), "PATH": ""})
    assert notes == []
    assert [(p.version, p.found_by) for p in pythons if p.found_by != "running"] == [("3.8.18", "pyenv")]


# ---------------------------------------------------------------- conda


def test_conda_environment_list() -> None:
    # `conda env list --json` as conda prints it: stdout_json({"envs": list_all_known_prefixes()}) in
    # conda_env/cli/main_list.py (conda/cli/main_env_list.py since conda 24.9), JSON indented by 2.
    text = '{\n  "envs": [\n    "/opt/conda",\n    "/opt/conda/envs/py36",\n    "/home/me/.conda/envs/old"\n  ]\n}\n'
    assert parse_conda_envs(text) == ["/opt/conda", "/opt/conda/envs/py36", "/home/me/.conda/envs/old"]
    for broken in ("", "[]", '{"envs": "/opt/conda"}', '{"envs": [1]}'):
        with pytest.raises(ValueError):
            parse_conda_envs(broken)


def test_conda_environments_are_asked(tmp_path: Path) -> None:
    """Each environment's bin/python, from CONDA_EXE's list; an environment without a Python (an R one) is
    skipped, and a conda that fails is a note."""
    base, env = tmp_path / "conda", tmp_path / "conda" / "envs" / "py38"
    link(base / "bin" / "python", real_python("3.10.13").resolve())
    link(env / "bin" / "python", real_python("3.8.18").resolve())
    (tmp_path / "conda" / "envs" / "r-only").mkdir()
    listing = json.dumps({"envs": [str(base), str(env), str(tmp_path / "conda" / "envs" / "r-only")]}, indent=2)
    # Kept double: conda is not installed here; this prints what `conda env list --json` prints.
    conda = executable(
        tmp_path / "conda" / "bin" / "conda", f'[ "$*" = "env list --json" ] || exit 2\ncat <<"EOF"\n{listing}\nEOF\n'
    )
    pythons, notes = search({"CONDA_EXE": str(conda), "PATH": ""})
    assert notes == []
    assert [(p.version, p.found_by, p.executable) for p in pythons if p.found_by != "running"] == [
        (banner_version(real_python("3.10.13")), "conda", str(base / "bin" / "python")),
        (banner_version(real_python("3.8.18")), "conda", str(env / "bin" / "python")),
    ]
    failing = executable(tmp_path / "bin" / "conda", "echo 'CondaError: broken' >&2\nexit 1\n")
    pythons, notes = search({"PATH": str(failing.parent)})  # conda on PATH when CONDA_EXE is unset
    assert notes == [
        f"{failing} did not list its Pythons (exit status 1: CondaError: broken); they are looked for elsewhere only."
    ]


# ---------------------------------------------------------------- Windows: py launcher and registry

# `py -0p` on stdout (docs.python.org/3/using/windows.html, "Python Launcher for Windows": "The --list
# command lists all available runtimes using the -V: format"). The launcher of Python 3.7-3.10
# (CPython PC/launcher.c, show_python_list) writes "\n %-15ls%ls" of "-X.Y-BITS" and the path; its
# header and default marker go to stderr. A Store Python is shown by file name only.
OLD_LAUNCHER_OUTPUT = (
    "\n -3.10-64       C:\\Users\\builder\\AppData\\Local\\Programs\\Python\\Python310\\python.exe"
    "\n -3.6-64        C:\\Program Files\\Python36\\python.exe"
    "\n -3.6-32        C:\\Program Files (x86)\\Python36-32\\python.exe"
    "\n -3.9-64        python3.9.exe"
    "\n -2.7-64        C:\\Python27\\python.exe"
)
# The launcher of 3.11 and later (PC/launcher2.c, _printEnvironment) writes " %-16s %s\n" of "-V:TAG"
# (PythonCore) or "-V:COMPANY/TAG", " *" after the default, then the path and any ExecutableArguments;
# a registration with neither executable nor install folder is the tag alone.
NEW_LAUNCHER_OUTPUT = (
    " -V:3.12 *        C:\\Users\\builder\\AppData\\Local\\Programs\\Python\\Python312\\python.exe\n"
    " -V:3.11          C:\\Program Files\\Python311\\python.exe\n"
    " -V:3.9-32        C:\\Program Files (x86)\\Python39-32\\python.exe\n"
    " -V:ContinuumAnalytics/Anaconda39-64 C:\\ProgramData\\Anaconda3\\python.exe\n"
    " -V:ExampleCorp/examplepy C:\\ExampleDistro30\\ex_python.exe --arg1\n"
    " -V:ExampleCorp/6C465E66\n"
)


def test_py_launcher_lists_of_both_launchers() -> None:
    assert parse_py_launcher_list(OLD_LAUNCHER_OUTPUT) == [
        ("3.10-64", "C:\\Users\\builder\\AppData\\Local\\Programs\\Python\\Python310\\python.exe"),
        ("3.6-64", "C:\\Program Files\\Python36\\python.exe"),
        ("3.6-32", "C:\\Program Files (x86)\\Python36-32\\python.exe"),
        ("2.7-64", "C:\\Python27\\python.exe"),
    ]
    assert parse_py_launcher_list(NEW_LAUNCHER_OUTPUT) == [
        ("3.12", "C:\\Users\\builder\\AppData\\Local\\Programs\\Python\\Python312\\python.exe"),
        ("3.11", "C:\\Program Files\\Python311\\python.exe"),
        ("3.9-32", "C:\\Program Files (x86)\\Python39-32\\python.exe"),
        ("ContinuumAnalytics/Anaconda39-64", "C:\\ProgramData\\Anaconda3\\python.exe"),
        ("ExampleCorp/examplepy", "C:\\ExampleDistro30\\ex_python.exe"),
    ]
    assert parse_py_launcher_list("No installed Pythons found!\n") == []


class MemoryRegistry:
    """HKCU and HKLM as a dictionary, with the 32-bit view of HKLM\\Software being HKLM\\Software\\Wow6432Node.

    Kept double: the Windows registry (winreg) does not exist on Linux. The keys and values are the shapes
    PEP 514 (https://peps.python.org/pep-0514/) specifies: Software\\Python\\<Company>\\<Tag>\\InstallPath
    with its default value (sys.prefix) and an optional ExecutablePath; the PyLauncher company reserved.
    Key names are case-insensitive and keep the case they were written in, as in the registry.
    """

    def __init__(self, values: dict[tuple[str, str], dict[str, str]]) -> None:
        self.values = values  # (hive, key as written) → {value name ("" the default): value}

    def _stored(self, hive: str, key: str, view: int) -> str:
        key = key.lower()
        if hive == "HKLM" and view == 32 and key.startswith("software\\"):
            return "software\\wow6432node\\" + key.removeprefix("software\\")
        return key

    def subkeys(self, hive: str, key: str, view: int) -> list[str]:
        prefix = self._stored(hive, key, view) + "\\"
        names: dict[str, str] = {}
        for stored_hive, written in self.values:
            if stored_hive == hive and written.lower().startswith(prefix):
                name = written[len(prefix) :].split("\\")[0]
                names.setdefault(name.lower(), name)
        if hive == "HKLM" and view == 64 and key.lower() == "software":
            names.pop("wow6432node", None)  # the 32-bit view's own tree, not a company
        return sorted(names.values())

    def value(self, hive: str, key: str, name: str, view: int) -> object | None:
        stored = self._stored(hive, key, view)
        for (stored_hive, written), named in self.values.items():
            if stored_hive == hive and written.lower() == stored:
                return named.get(name)
        return None


def test_registry_py_launcher_and_path_on_a_windows_probe(tmp_path: Path) -> None:
    """PEP 514's three places (HKCU, HKLM, HKLM's 32-bit view), py.exe's list and PATH, in probe_windows;
    every path leads to one of pyenv's real interpreters, under the folder names Windows installs use."""
    user = link(tmp_path / "Users" / "me" / "Python39" / "python.exe", real_python("3.9.18").resolve()).parent
    machine = link(tmp_path / "Program Files" / "Python312" / "python.exe", real_python("3.12.1").resolve())
    x86 = link(tmp_path / "Program Files (x86)" / "Python36-32" / "python.exe", real_python("3.6.15").resolve())
    anaconda = link(tmp_path / "ProgramData" / "Anaconda3" / "python.exe", real_python("3.7.16").resolve())
    launcher_only = link(tmp_path / "Python310" / "python.exe", real_python("3.10.13").resolve())
    on_path = link(tmp_path / "Python38" / "python.exe", real_python("3.8.18").resolve())
    registry = MemoryRegistry(
        {
            ("HKCU", r"Software\Python\PythonCore\3.9\InstallPath"): {"": str(user)},
            ("HKLM", r"Software\Python\PythonCore\3.12\InstallPath"): {
                "": str(machine.parent),
                "ExecutablePath": str(machine),
            },
            ("HKLM", r"SOFTWARE\Wow6432Node\Python\PythonCore\3.6-32\InstallPath"): {"": str(x86.parent)},
            ("HKLM", r"Software\Python\ContinuumAnalytics\Anaconda37-64\InstallPath"): {
                "": str(anaconda.parent),
                "ExecutablePath": str(anaconda),
            },
            ("HKLM", r"Software\Python\ContinuumAnalytics\Broken\InstallPath"): {"": str(tmp_path / "nowhere")},
            ("HKCU", r"Software\Python\PyLauncher\InstallPath"): {"": str(tmp_path / "launcher")},
        }
    )
    # Kept double: py.exe is a Windows program; this prints the new launcher's `py -0p` lines for real paths.
    py = executable(
        tmp_path / "Windows" / "py.exe",
        f'[ "$*" = "-0p" ] || exit 2\nprintf " %-16s %s\\n" "-V:3.12 *" "{machine}" "-V:3.10" "{launcher_only}"\n',
    )
    environ = {"PATH": f"{on_path.parent};{tmp_path / 'empty'}", "SystemRoot": str(py.parent)}
    report = probe_windows(environ, python_registry=registry, gpus=False)
    listed = {p.executable: (p.version, p.found_by) for p in report.facts.pythons if p.found_by != "running"}
    assert listed == {
        str(machine): (banner_version(real_python("3.12.1")), "registry PythonCore\\3.12"),
        str(launcher_only): (banner_version(real_python("3.10.13")), "py launcher"),
        str(user / "python.exe"): (banner_version(real_python("3.9.18")), "registry PythonCore\\3.9"),
        str(on_path): (banner_version(real_python("3.8.18")), "PATH"),
        str(anaconda): (banner_version(real_python("3.7.16")), "registry ContinuumAnalytics\\Anaconda37-64"),
        str(x86): (banner_version(real_python("3.6.15")), "registry PythonCore\\3.6-32"),
    }
    assert report.facts.python.found_by == "running" and report.facts.python in report.facts.pythons
    python_notes = [note for note in report.notes if "Python" in note and "vswhere" not in note]
    assert python_notes == [
        "The registry's HKLM\\Software\\Python\\ContinuumAnalytics\\Broken\\InstallPath (64-bit view) names no "
        "ExecutablePath, so that Python is not runnable (PEP 514); it is left out."
    ]


def test_the_registry_double_keeps_the_views_apart() -> None:
    """The 32-bit registration is seen in the 32-bit view only, as on 64-bit Windows."""
    registry = MemoryRegistry({("HKLM", r"SOFTWARE\Wow6432Node\Python\PythonCore\3.6-32\InstallPath"): {"": "C:\\"}})
    assert registry.subkeys("HKLM", r"Software\Python\PythonCore", 32) == ["3.6-32"]
    assert registry.subkeys("HKLM", r"Software\Python\PythonCore", 64) == []
    assert registry.subkeys("HKLM", "Software", 64) == []
    assert registry.subkeys("HKCU", r"Software\Python\PythonCore", 32) == []


# ---------------------------------------------------------------- the version cache


class Counting:
    """The real runner, counting the Python queries it starts."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, args: Sequence[str], timeout: float) -> CommandResult:
        if tuple(args[1:]) == PYTHON_QUERY:
            self.asked.append(args[0])
        return run_command(args, timeout)


def test_answers_are_kept_until_the_interpreter_or_its_packages_change(tmp_path: Path) -> None:
    """A second probe starts no interpreter; a venv is apart from its base interpreter (same file); pip
    installed into the venv is seen at once; a shim's answer (another interpreter's) is never kept."""
    subprocess.run(
        [str(real_python("3.12.1")), "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=60
    )
    base = link(tmp_path / "base" / "python3.12", real_python("3.12.1").resolve())
    shim = executable(tmp_path / "shims" / "python3", f'exec {real_python("3.9.18")} "$@"\n')
    environ = {"PATH": os.pathsep.join(str(folder) for folder in (tmp_path / "venv" / "bin", base.parent, shim.parent))}
    store = tmp_path / "cache" / "versions.json"

    def probe_once() -> tuple[tuple[PythonInfo, ...], list[str]]:
        counting = Counting()
        cache = VersionCache(store, counting)
        pythons, notes = search(environ, cache)
        cache.save()
        assert notes == []
        return tuple(p for p in pythons if p.found_by != "running"), counting.asked

    venv_python = str(tmp_path / "venv" / "bin" / "python3")
    shim_target = real_python("3.9.18")
    first, asked = probe_once()
    assert [(p.executable, p.venv, p.pip) for p in first] == [
        (venv_python, True, False),  # made --without-pip
        (str(base), True, True),
        (str(shim_target), True, True),  # what the shim started
    ]
    assert len(asked) == 5  # venv/bin's python, python3 and python3.12, the base, the shim
    again, asked = probe_once()
    assert again == first and asked == [str(shim)]

    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    (site / "pip").mkdir()
    (site / "pip" / "__init__.py").write_text("__version__ = '24.0'\n", encoding="utf-8")
    after, asked = probe_once()
    assert [(p.executable, p.pip) for p in after] == [(venv_python, True), (str(base), True), (str(shim_target), True)]
    assert sorted(asked) == sorted(
        [*(str(tmp_path / "venv" / "bin" / n) for n in ("python3", "python", "python3.12")), str(shim)]
    )


# ---------------------------------------------------------------- this machine


def test_probe_lists_this_machines_pythons_and_round_trips(truth: dict[str, tuple[str, int, bool, bool]]) -> None:
    if os.environ.get("PYENV_ROOT", str(PYENV_ROOT)) != str(PYENV_ROOT):
        pytest.fail(f"this machine's pyenv lives at {PYENV_ROOT} (PYENV_ROOT is {os.environ['PYENV_ROOT']})")
    facts = probe(gpus=False)
    listed = {(p.version, Path(p.executable).resolve()) for p in facts.pythons}
    for name, (version, *_) in truth.items():
        assert (version, real_python(name).resolve()) in listed, (name, facts.pythons)
    assert facts.python in facts.pythons and facts.python.executable == sys.executable
    assert facts_from_dict(json.loads(facts.to_json())) == facts


def test_asking_the_running_python_leaves_setuptools_importable() -> None:
    """`importlib.util.find_spec("pip")` makes setuptools' _distutils_hack switch itself off for the process, and a
    later `import setuptools` then fails its own check (seen in CI: a probe, then an in-process extension build).
    The running interpreter's pip and venv are looked up on sys.path only."""
    code = (
        "from pytorch_winbuild.facts.probe_pythons import running_python\n"
        "info, _ = running_python()\n"
        "import setuptools\n"
        "print(info.pip, info.venv)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"]
