"""What a PyTorch source tree says about itself: whether it is one, its version, its build backend, and the
plan's "Source" line (SourceTree, read once for both edges).

PyTorch built through setup.py (setuptools) up to mid-2026; then `main` moved to scikit-build-core
and removed setup.py (pytorch/pytorch#180247 and #180248, tracked in #189758), leaving a
pyproject.toml whose [project] name is torch. Both shapes are source trees.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.kept_build import read_build_folder
from pytorch_winbuild.knowledge.versions import RELEASE_TAG

# Old setup.py files (0.3–1.x) carry the version in a line such as `version = '0.4.0'`.
_SETUP_VERSION = re.compile(r"""^version\s*=\s*['"]([0-9][^'"]*)['"]""", re.MULTILINE)


# PEP 517: a pyproject.toml without [build-system] build-backend is built by setuptools' legacy backend.
_DEFAULT_BACKEND = "setuptools.build_meta:__legacy__"


@dataclass(frozen=True)
class BuildBackend:
    """The PEP 517 backend a `pip install .` of the tree imports, and the [build-system] requires."""

    name: str  # "scikit_build_core.build", "setuptools.build_meta"
    requires: tuple[str, ...]
    declared_in: str  # "pyproject.toml [build-system]" or why the default applies

    @property
    def module(self) -> str:
        """The importable module (PEP 517: `module.path:object.path`)."""
        return self.name.split(":", 1)[0]


def _pyproject(folder: Path) -> dict[str, object] | None:
    """The tree's pyproject.toml, or None when it has none or it is not valid TOML."""
    try:
        with (folder / "pyproject.toml").open("rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None


def build_backend(folder: Path) -> BuildBackend | None:
    """The backend pip runs for the tree (PEP 517/518), or None when the tree has no pyproject.toml."""
    data = _pyproject(folder)
    if data is None:
        return None
    system = data.get("build-system")
    if not isinstance(system, dict):
        return BuildBackend(_DEFAULT_BACKEND, ("setuptools>=40.8.0",), "PEP 517's default (no [build-system])")
    requires = system.get("requires")
    names = tuple(item for item in requires if isinstance(item, str)) if isinstance(requires, list) else ()
    backend = system.get("build-backend")
    if not isinstance(backend, str) or not backend:
        return BuildBackend(_DEFAULT_BACKEND, names, "PEP 517's default (no build-backend)")
    return BuildBackend(backend, names, "pyproject.toml [build-system]")


def backend_without_setup_py(folder: Path) -> str | None:
    """The tree's PEP 517 backend when the tree has no setup.py (PyTorch main after pytorch/pytorch#180247), whose
    build then reads only CMake's own environment variables; None for a tree with setup.py, which runs
    tools/setup_helpers whatever backend its pyproject.toml names (ROCm/TheRock#6523: the move was to be
    reverted, so the tree decides, never its version)."""
    if (folder / "setup.py").is_file():
        return None
    backend = build_backend(folder)
    return backend.name if backend else None


def _names_torch(folder: Path) -> bool:
    """pyproject.toml's [project] name is torch (PEP 621), as on PyTorch `main` since setup.py was removed."""
    data = _pyproject(folder)
    project = data.get("project") if data else None
    return isinstance(project, dict) and project.get("name") == "torch"


def is_pytorch_source(folder: Path) -> bool:
    """A folder with PyTorch's setup.py (it names the torch package), or a pyproject.toml naming the
    torch project, is a source tree."""
    setup = folder / "setup.py"
    if not setup.is_file():
        return _names_torch(folder) and (folder / "torch").is_dir()
    try:
        text = setup.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "torch" in text and (
        (folder / "torch").is_dir() or (folder / "version.txt").is_file() or "pytorch" in text.lower()
    )


def default_source(cwd: Path) -> Path | None:
    """The current folder, when it is a PyTorch source tree."""
    return cwd if is_pytorch_source(cwd) else None


def read_source_version(folder: Path) -> tuple[str, str] | None:
    """(version, where it was read) from version.txt, or the `version = '...'` line of setup.py."""
    version_file = folder / "version.txt"
    if version_file.is_file():
        version = version_file.read_text(encoding="utf-8", errors="replace").strip()
        if not version:
            raise ConfigurationError(f"{version_file} is empty.", fix="restore it from git, or pass --pytorch-version.")
        return version, str(version_file)
    setup = folder / "setup.py"
    if setup.is_file():
        match = _SETUP_VERSION.search(setup.read_text(encoding="utf-8", errors="replace"))
        if match:
            return match.group(1), f"{setup} (version = ...)"
    return None


def ref_release(ref: str | None) -> tuple[str, str] | None:
    """A --ref that names a release tag pins that release (before the clone shows its version.txt)."""
    found = RELEASE_TAG.fullmatch(ref or "")
    return (found.group(1), f"--ref {ref}, a release tag") if found else None


def describe_source(
    source_dir: Path | None,
    version: tuple[str, str] | None,
    is_pytorch: bool,
    not_cloned: tuple[str, str | None] | None,
    pinned: str | None = None,
) -> tuple[str, str | None]:
    """The plan's "Source" line, and a warning when the plan is not for a tree that exists. `pinned`: the release
    --pytorch-version names, which such a plan is for (else the newest era that fits)."""
    planned_for = f"PyTorch {pinned}, which --pytorch-version names" if pinned else "the newest era that fits"
    if not_cloned is not None:
        repo, ref = not_cloned
        where = f"{repo} at {ref}" if ref else f"{repo} (its default branch)"
        if ref_release(ref):
            return f"{where}, not checked out yet: planned for the release its tag names", None
        return (
            f"{where}, not checked out yet",
            f"{where} is not checked out yet and {ref or 'its default branch'} is not a release tag (vX.Y.Z), so "
            f"this plan is for {planned_for}; the build decides the era from the checkout's version.",
        )
    if source_dir is None:
        return (
            "none: not in a PyTorch checkout, and no --source or --repo (see the warning below)",
            f"No PyTorch source: {Path.cwd()} is not a PyTorch checkout and neither --source nor --repo was given, "
            f"so this plan is for {planned_for}, and `invoke build` without --dry-run would stop. "
            "Pass --source DIR (a checkout) or --repo URL [--ref TAG].",
        )
    if not is_pytorch:
        return str(source_dir), None
    return str(source_dir) + (f" (PyTorch {version[0]}, from {version[1]})" if version else ""), None


@dataclass(frozen=True, slots=True)
class SourceTree:
    """What the plan reads from the source tree, once: its version (and where it was read), its build front end,
    and the plan's "Source" line with a warning when no tree exists yet. The defaults: no tree read."""

    version: tuple[str, str] | None = None
    requires: tuple[str, ...] = ()  # its pyproject.toml [build-system] requires
    backend: str | None = None  # its PEP 517 backend when it has no setup.py
    text: str = ""
    warnings: tuple[str, ...] = ()


def read_tree(
    source_dir: Path | None,
    source_is_pytorch: bool,
    not_cloned: tuple[str, str | None] | None = None,
    pinned: str | None = None,
) -> SourceTree:
    """The source tree's facts for the plan; for --repo before the clone, the release its --ref tags.
    `source_is_pytorch` is False for build-ext, whose folder is an extension; `pinned`: --pytorch-version."""
    pytorch = source_dir is not None and source_is_pytorch and is_pytorch_source(source_dir)
    version = read_source_version(source_dir) if pytorch and source_dir else None
    backend = build_backend(source_dir) if pytorch and source_dir else None
    text, warning = describe_source(source_dir, version, source_is_pytorch, not_cloned, pinned)
    kept = read_build_folder(source_dir) if pytorch and source_dir else None
    if kept is not None:  # what `invoke build` says before it starts (builder/resume.py), and `--clean` removes
        text += f"; a build continues in {kept.folder} (kept: {kept.kept(None)}) unless --clean"
    if not_cloned is not None and version is None:
        version = ref_release(not_cloned[1])
    return SourceTree(
        version,
        backend.requires if backend else (),
        backend_without_setup_py(source_dir) if pytorch and source_dir else None,
        text,
        (warning,) if warning else (),
    )
