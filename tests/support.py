"""Helpers shared by the test modules (tests/ is on sys.path through pytest's rootdir conftest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytorch_winbuild.planning.options import Options

REPO_ROOT = Path(__file__).resolve().parent.parent
HOSTS_DIR = REPO_ROOT / "build_config" / "hosts"

# Unicode's bidirectional formatting characters (UAX #9, table 1 and section 2), by their UCD names.
BIDI = {
    "\u061c": "ARABIC LETTER MARK",
    "\u200e": "LEFT-TO-RIGHT MARK",
    "\u200f": "RIGHT-TO-LEFT MARK",
    "\u202a": "LEFT-TO-RIGHT EMBEDDING",
    "\u202b": "RIGHT-TO-LEFT EMBEDDING",
    "\u202c": "POP DIRECTIONAL FORMATTING",
    "\u202d": "LEFT-TO-RIGHT OVERRIDE",
    "\u202e": "RIGHT-TO-LEFT OVERRIDE",
    "\u2066": "LEFT-TO-RIGHT ISOLATE",
    "\u2067": "RIGHT-TO-LEFT ISOLATE",
    "\u2068": "FIRST STRONG ISOLATE",
    "\u2069": "POP DIRECTIONAL ISOLATE",
}


def run_invoke(
    *args: str, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `python -m invoke ARGS` from the repo root, as a user would, with real exit codes."""
    full_env = {**os.environ, **(env or {})}
    full_env.setdefault("PYTHONIOENCODING", "utf-8")
    return subprocess.run(
        [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT), *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


def plan_options(**raw: Any) -> Options:
    """Options as a command line gives them: text values read by the edge's parser (planning/options.py), paths as
    paths, the rest (switches, numbers, a PythonRequest) as they are."""
    from pathlib import PurePath

    from pytorch_winbuild.knowledge.model import load_knowledge
    from pytorch_winbuild.planning.options import parse_options

    text = ("cuda", "vs", "toolset", "generator", "compiler_cache", "arch_list", "pytorch_version", "mode", "cmake")
    typed = {name: value for name, value in raw.items() if name not in text}
    for name in ("cache_dir", "source_dir"):
        if isinstance(typed.get(name), str):
            typed[name] = PurePath(typed[name])
    return parse_options(load_knowledge(), {name: raw[name] for name in text if name in raw}, **typed)


class CmakeWheels:
    """Real CMake releases from PyPI (the Linux wheels of the releases a plan pins for Windows): one venv per
    release, made on first use, holding that wheel; `cmake(version)` is its cmake."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.made: dict[str, Path] = {}

    def cmake(self, version: str) -> Path:
        if version not in self.made:
            venv = self.folder / f"cmake-{version}"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run(
                [
                    str(venv / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--only-binary=:all:",
                    f"cmake=={version}",
                ],
                check=True,
                timeout=600,
            )
            self.made[version] = venv / "bin" / "cmake"
        return self.made[version]


def common_architectures(select_compute_arch: Path, cuda: str, scratch: Path) -> str:
    """CUDA_COMMON_GPU_ARCHITECTURES as a release's select_compute_arch.cmake sets it for `cuda` (what "Auto" falls
    back to without a GPU), evaluated by the real cmake in script mode."""
    script = scratch / f"common-{cuda}.cmake"
    script.write_text(
        f'set(CUDA_VERSION "{cuda}")\ninclude("{select_compute_arch.as_posix()}")\n'
        'message("COMMON=${CUDA_COMMON_GPU_ARCHITECTURES}")\n',
        encoding="utf-8",
    )
    done = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True, check=True, timeout=60)
    return next(line for line in done.stderr.splitlines() if line.startswith("COMMON=")).removeprefix("COMMON=")
