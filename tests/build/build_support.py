"""Helpers for the build tier: real builds through `python -m invoke`, from the repo root.

Builds of mini torch install a package named `torch`, so they run with the Python of a virtual
environment made for the test session (it sees this Python's packages, invoke included, and
its own site-packages win): the real torch of this Python stays untouched.

The tier's folder is tests/build, which pytest's default `norecursedirs` skips (it lists `build`);
pyproject.toml's [tool.pytest.ini_options] restates that list without `build`, so a plain
`python -m pytest` collects these tests.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path
from typing import Any

TESTS_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = TESTS_DIR.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
BUILD_TIMEOUT = 900  # a cold extension build takes minutes on 2 busy cores


def make_venv(folder: Path) -> Path:
    """A virtual environment that sees this Python's packages behind its own; its python.

    `venv --system-site-packages` is not enough: it shows the *base* interpreter's site-packages,
    so when this Python is itself a virtual environment (where `pip install -e ".[test]"` put
    invoke, pytest and pytorch-winbuild) the new one failed with "No module named invoke". A .pth
    file instead adds this Python's own site folders (their .pth files included, so the editable
    install works) after the new environment's site-packages: what a build installs there (mini
    torch's `torch`) wins over this Python's real torch.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    lines = [f"import site; site.addsitedir({path!r})" for path in ours]
    (Path(own) / "_pytorch_winbuild_tests_parent.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return python


# Commits need an identity, and a CI machine may have no global git configuration.
GIT_IDENTITY = ("-c", "user.name=build tier", "-c", "user.email=build-tier@example.invalid")


def git(folder: Path, *args: str) -> str:
    """Run git in `folder`; its output, stripped."""
    return subprocess.run(
        ["git", "-C", str(folder), *GIT_IDENTITY, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def copy_fixture(name: str, destination: Path) -> Path:
    shutil.copytree(FIXTURES / name, destination)
    return destination


def invoke_command(python: Path | str, *args: str) -> list[str]:
    return [str(python), "-m", "invoke", "--search-root", str(REPO_ROOT), *args]


def run_invoke(
    python: Path | str,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = BUILD_TIMEOUT,
    cwd: Path = REPO_ROOT,
) -> subprocess.CompletedProcess[str]:
    """Run an invoke task as a user would (from the repo root, or `cwd`; no terminal), with its real exit code."""
    full_env = {**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})}
    full_env.pop("CI", None)  # the console output must not depend on where the tests run
    return subprocess.run(
        invoke_command(python, *args),
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


def reports(log_dir: Path) -> list[dict[str, Any]]:
    """Every report in a log folder, oldest first."""
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(log_dir.glob("*.json"))]


def last_report(log_dir: Path) -> dict[str, Any]:
    found = reports(log_dir)
    assert found, f"no report in {log_dir}"
    return found[-1]


def slow_source(constants: int) -> str:
    """A C++ file whose compile takes about two seconds per constant (constexpr loops)."""
    lines = [
        "// Keeps the compiler busy: each constant is a million constexpr loop steps.",
        "constexpr unsigned long long spin(unsigned seed) {",
        "  unsigned long long x = seed;",
        "  for (unsigned i = 0; i < 1000; ++i)",
        "    for (unsigned j = 0; j < 1000; ++j) x = x * 6364136223846793005ULL + j;",
        "  return x;",
        "}",
    ]
    lines += [f"constexpr unsigned long long k{i} = spin({i});" for i in range(constants)]
    lines.append("unsigned long long spun() { return " + " ^ ".join(f"k{i}" for i in range(constants)) + "; }")
    return "\n".join(lines) + "\n"


# The guard of CUDA's include/crt/host_config.h, with the #error it stops every compile with when
# the host compiler is outside the range it accepts.
HOST_CONFIG_GUARD = (
    "#if !defined(MINI_TORCH_ACCEPTED_HOST_COMPILER)\n"
    "#error -- unsupported Microsoft Visual Studio version! Only the versions between 2017 and 2022 (inclusive) are "
    "supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check; however, "
    "using an unsupported host compiler may cause compilation failure or incorrect run time execution. Use at your "
    "own risk.\n"
    "#endif\n"
    "int host_config_checked() { return 1; }\n"
)
