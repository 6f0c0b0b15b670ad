"""`invoke clean` deletes only in a pytorch-winbuild cache (issue 29 point 1: a mistyped --cache-dir, or a wrong
INVOKE_WINBUILD_CACHE_DIR, removed the downloads/ and deps/ folders of any directory). A cache is a folder
whose CACHEDIR.TAG pytorch-winbuild wrote (the Cache Directory Tagging Specification, bford.info/cachedir:
its signature line), or, for a cache from before the tag, one with an archive folder holding the marker only
pytorch-winbuild writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_invoke

SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"  # bford.info/cachedir


def _user_folder(root: Path) -> Path:
    """A user's folder that happens to hold downloads/ and deps/ with their own files."""
    for name in ("downloads", "deps"):
        (root / name).mkdir(parents=True)
        (root / name / "thesis.pdf").write_bytes(b"%PDF-1.7 years of work\n")
    return root


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_clean_refuses_a_folder_that_is_not_a_cache(tmp_path: Path, how: str):
    folder = _user_folder(tmp_path / "x")
    flag = ["--cache-dir", str(folder)] if how == "flag" else []
    env = {"INVOKE_WINBUILD_CACHE_DIR": str(folder)} if how == "environment" else {}
    result = run_invoke("clean", "--downloads", "--deps", *flag, env=env)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    label = "--cache-dir" if how == "flag" else "winbuild.cache_dir"
    assert f"configuration error: {label} {folder} is not a pytorch-winbuild cache" in result.stderr
    assert "Traceback" not in result.stderr
    assert (folder / "downloads" / "thesis.pdf").is_file() and (folder / "deps" / "thesis.pdf").is_file()


def test_a_tagged_cache_is_cleaned(tmp_path: Path):
    cache = tmp_path / "cache"
    (cache / "downloads").mkdir(parents=True)
    (cache / "downloads" / "mkl_2020.2.254.7z").write_bytes(b"7z")
    dry = run_invoke("fetch-deps", "--dry-run", "--cache-dir", str(cache))
    assert dry.returncode == 0, dry.stderr
    ran = run_invoke("fetch-deps", "--cache-dir", str(cache), "--mirror", "http://127.0.0.1:9/", "--cuda", "cpu")
    assert (cache / "CACHEDIR.TAG").read_text().startswith(SIGNATURE + "\n"), ran.stderr  # the lock tagged it
    result = run_invoke("clean", "--downloads", "--cache-dir", str(cache))
    assert result.returncode == 0 and not (cache / "downloads").exists(), result.stderr


def test_a_cache_from_before_the_tag_is_known_by_its_archive_markers(tmp_path: Path):
    cache = tmp_path / "old-cache"
    extracted = cache / "deps" / "mkl_2020.2.254"
    extracted.mkdir(parents=True)
    marker = {"schema": 1, "file": "mkl_2020.2.254.7z", "sha256": "0" * 64, "size": 2, "extractor": "7zz"}
    (extracted / ".pytorch-winbuild-archive.json").write_text(json.dumps(marker), encoding="utf-8")
    result = run_invoke("clean", "--deps", "--cache-dir", str(cache))
    assert result.returncode == 0 and not (cache / "deps").exists(), result.stderr
    assert (cache / "CACHEDIR.TAG").read_text().startswith(SIGNATURE)
