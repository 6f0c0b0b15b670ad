"""Every citation in the repository points at something a user can read: a file the repository holds,
or a public source (a tag and file, an issue, a documentation page). The project's private notes
(the Windows build facts, the GPU capture notes, the design notes, anything under ../shared) stay
out of what it ships; a fact taken from them is cited by the primary source they name.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THIS = Path(__file__).resolve()

# What the repository ships as text: (folder, glob) pairs, and single files.
SHIPPED = (
    ("build_config", "**/*"),
    ("pytorch_winbuild", "**/*.py"),
    ("tests", "**/*"),
    ("scripts", "**/*"),
    ("docs", "**/*"),
)
SHIPPED_FILES = ("README.md", "tasks.py", "pyproject.toml")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}

# Names of files the repository does not hold.
PRIVATE = re.compile(r"windows-build-facts|reference/gpu/|\.\./shared|\.\.\\shared|DESIGN\.md")

# Files (relative to the root) that still cite a private note and are not fixed yet: each entry
# is a known debt, and test_exclusions_are_still_needed fails once its file is clean.


def _text(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data:
        return None  # binary
    return data.decode("utf-8", errors="replace")


def _shipped() -> list[Path]:
    found = {ROOT / name for name in SHIPPED_FILES if (ROOT / name).is_file()}
    for folder, pattern in SHIPPED:
        for path in (ROOT / folder).glob(pattern):
            if path.is_file() and not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts):
                found.add(path)
    found.discard(THIS)
    return sorted(found)


def _mentions(path: Path) -> list[str]:
    text = _text(path)
    if text is None:
        return []
    rel = path.relative_to(ROOT).as_posix()
    return [
        f"{rel}:{number}: {match.group(0)!r} in {line.strip()[:160]!r}"
        for number, line in enumerate(text.splitlines(), 1)
        for match in PRIVATE.finditer(line)
    ]


def test_the_scan_covers_the_shipped_files() -> None:
    rels = {path.relative_to(ROOT).as_posix() for path in _shipped()}
    for expected in (
        "README.md",
        "build_config/diagnosis.toml",
        "build_config/visual_studio.toml",
        "pytorch_winbuild/diagnosis/rules.py",
        "tests/test_layout.py",
        "scripts/bench_fetch.py",
    ):
        assert expected in rels, expected
    assert THIS.relative_to(ROOT).as_posix() not in rels


def test_the_pattern_catches_each_private_name() -> None:
    for line in (
        'source = "reference/windows-build-facts.md > CUDA"',
        "# see docs/windows-build-facts in shared reference",
        "reference/gpu/README.md (compute_cap query)",
        "(../shared/reference/x.md: ...)",
        r"(..\shared\reference\x.md)",
        '# (DESIGN.md "Shape: plan, then act")',
    ):
        assert PRIVATE.search(line), line
    for line in ("build_config/gpu.toml", 'README "Architecture"', "shared_cache.toml", "tests/fixtures/gpu/"):
        assert not PRIVATE.search(line), line


def test_no_citation_of_files_the_repository_does_not_hold() -> None:
    offenders = [mention for path in _shipped() for mention in _mentions(path)]
    assert not offenders, (
        "these lines cite private notes users do not have; cite the primary source instead "
        "(a Microsoft Learn or NVIDIA page, a PyTorch tag and file, an issue):\n" + "\n".join(offenders)
    )
