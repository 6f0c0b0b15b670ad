"""A matrix entry's ref or repo that git would read as an option fails when the matrix loads, naming the entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nightly_support import run_nightly, write_matrix

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.nightly.matrix import parse_matrix

KNOWLEDGE = load_knowledge()
SETTINGS = {"output_dir": "dist/nightly", "keep_days": 7, "min_free_gb": 30}
ENTRY = {"name": "cpu", "repo": "https://github.com/pytorch/pytorch.git", "ref": "main", "cuda": "cpu"}


def _parse(**entry: Any) -> Any:
    return parse_matrix({"settings": SETTINGS, "entry": [{**ENTRY, **entry}]}, "matrix.toml", KNOWLEDGE)


@pytest.mark.parametrize(
    "ref", ["--upload-pack=touch /tmp/x;", "-x", "a..b", "ref with space", "v2.6.0\x1b[2J", "main\n"]
)
def test_a_ref_git_would_misread_fails_at_load(ref: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        _parse(ref=ref)
    assert raised.value.exit_code == 2
    assert raised.value.message.startswith(f"matrix.toml: entry 'cpu'.ref: {ref!r} ")
    assert (
        raised.value.fix
        == "pass a branch (e.g. main or release/2.6), a tag (e.g. v2.6.0) or a full 40-character commit SHA."
    )


@pytest.mark.parametrize("repo", ["--upload-pack=touch /tmp/x;", "-u", "https://github.com/pytorch/pytorch.git\x1b[2J"])
def test_a_repo_git_would_misread_fails_at_load(repo: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        _parse(repo=repo)
    assert raised.value.exit_code == 2 and raised.value.message.startswith("matrix.toml: entry 'cpu'.repo: ")


@pytest.mark.parametrize("ref", ["main", "v2.6.0", "release/2.6", "0123456789abcdef0123456789abcdef01234567"])
def test_branches_tags_and_shas_load(ref: str) -> None:
    assert _parse(ref=ref).entries[0].ref == ref


def test_the_nightly_refuses_an_option_as_ref_before_any_entry_runs(mini_repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "x"
    matrix = write_matrix(
        tmp_path / "matrix.toml",
        [{"name": "hostile", "repo": str(mini_repo), "ref": f"--upload-pack=touch {marker};", "cuda": "cpu"}],
        output_dir=tmp_path / "out",
    )
    done = run_nightly("--matrix", str(matrix), "--cache-dir", str(tmp_path / "cache"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        f"configuration error: {matrix}: entry 'hostile'.ref: '--upload-pack=touch {marker};' starts with '-', so "
        "git would read it as an option"
    )
    assert not marker.exists() and not (tmp_path / "cache").exists() and not (tmp_path / "out").exists()
