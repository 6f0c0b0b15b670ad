"""The archive catalog (build_config/deps.toml), the choice of archives, the lock file and markers."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytorch_winbuild.deps.cache import MARKER_NAME, Marker, deps_dir, installed_path, write_marker
from pytorch_winbuild.deps.lockfile import LockEntry, LockFile
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.knowledge.catalog import archive_variables, load_catalog, parse_catalog, select_archives
from pytorch_winbuild.knowledge.config_files import config_dir
from pytorch_winbuild.knowledge.model import load_knowledge

CUDA = load_knowledge().cuda  # build_config/cuda.toml's releases, as the plan and fetch-deps hand them


def names(archives: list) -> list[str]:
    return [a.file_name for a in archives]


def test_catalog_lists_every_magma_build_of_the_facts_page() -> None:
    catalog = load_catalog()
    assert catalog.base_url == "https://s3.amazonaws.com/ossci-windows/"
    # The MKL archives each era's Windows CI downloaded (build_config/eras.toml `sources`).
    assert sorted(catalog.mkl) == ["2018.2.185", "2019.4.245", "2020.0.166", "2020.2.254"]
    expected = {
        "2.4.0": ["cuda80", "cuda90", "cuda92", "cuda100"],
        "2.5.0": ["cuda90", "cuda92", "cuda100", "cuda101"],
        "2.5.1": ["cuda92", "cuda100", "cuda101", "cuda102"],
        "2.5.2": ["cuda92", "cuda100", "cuda101", "cuda102"],
        "2.5.3": ["cuda101", "cuda102", "cuda110"],
        # CI builds 2.5.4 for every CUDA it supports, 12.8 and later included (issue 9).
        "2.5.4": [
            "cuda101",
            "cuda102",
            "cuda110",
            "cuda111",
            "cuda113",
            "cuda116",
            "cuda117",
            "cuda118",
            "cuda121",
            "cuda124",
            "cuda126",
            "cuda128",
            "cuda129",
            "cuda130",
        ],
    }
    release_only = len(expected["2.4.0"])
    for version, prefixes in expected.items():
        for prefix in prefixes:
            assert (version, prefix, "release") in catalog.magma
            assert ((version, prefix, "debug") in catalog.magma) == (version != "2.4.0")
    assert len(catalog.magma) == sum(len(p) for p in expected.values()) * 2 - release_only
    archive = catalog.magma[("2.4.0", "cuda90", "release")]
    assert archive.url == "https://s3.amazonaws.com/ossci-windows/magma_2.4.0_cuda90_release.7z"
    assert archive.folder_name == "magma_2.4.0_cuda90_release"
    assert catalog.mkl["2018.2.185"].url == "https://s3.amazonaws.com/ossci-windows/mkl_2018.2.185.7z"


@pytest.mark.parametrize(
    ("cuda", "preference", "debug", "expected"),
    [
        ("9.0", [], False, ["mkl_2020.2.254.7z", "magma_2.5.0_cuda90_release.7z"]),
        ("10.1", [], False, ["mkl_2020.2.254.7z", "magma_2.5.4_cuda101_release.7z"]),
        ("10.1", [], True, ["mkl_2020.2.254.7z", "magma_2.5.4_cuda101_debug.7z"]),
        ("10.0", [], False, ["mkl_2020.2.254.7z", "magma_2.5.2_cuda100_release.7z"]),
        ("10.1", ["2.5.2", "2.5.1"], False, ["mkl_2020.2.254.7z", "magma_2.5.2_cuda101_release.7z"]),
        ("9.0", ["2.5.4", "2.4.0"], False, ["mkl_2020.2.254.7z", "magma_2.4.0_cuda90_release.7z"]),
        ("12.4", [], False, ["mkl_2020.2.254.7z", "magma_2.5.4_cuda124_release.7z"]),
        (None, [], False, ["mkl_2020.2.254.7z"]),
    ],
)
def test_select_archives_takes_the_first_preferred_magma_built_for_the_cuda(cuda, preference, debug, expected) -> None:
    assert (
        names(
            select_archives(
                cuda=CUDA[cuda] if cuda else None,
                mkl_version="2020.2.254",
                magma_versions=preference,
                magma_debug=debug,
            )
        )
        == expected
    )


def test_no_magma_and_the_seed_era_mkl() -> None:
    assert names(select_archives(cuda=CUDA["9.0"], mkl_version="2018.2.185", magma_versions=[], no_magma=True)) == [
        "mkl_2018.2.185.7z"
    ]


def test_missing_magma_names_what_exists_and_no_magma() -> None:
    with pytest.raises(ConfigurationError) as caught:
        select_archives(cuda=CUDA["9.1"], mkl_version="2020.2.254", magma_versions=[])
    text = caught.value.paragraph()
    assert "CUDA 9.1 (cuda91)" in text and "--no-magma" in text
    with pytest.raises(ConfigurationError) as caught:
        select_archives(cuda=CUDA["10.0"], mkl_version="2020.2.254", magma_versions=["2.4.0"], magma_debug=True)
    text = caught.value.paragraph()
    assert "no MAGMA debug archive for CUDA 10.0" in text and "2.4.0 release" in text and "--no-magma" in text


def test_unknown_versions_and_bad_cuda_are_configuration_errors() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"unknown MKL version '2019\.0'.*2018\.2\.185, 2019\.4\.245, 2020\.0\.166, 2020\.2\.254",
    ):
        select_archives(cuda=None, mkl_version="2019.0", magma_versions=[])
    with pytest.raises(ConfigurationError, match=r"unknown MAGMA version 2\.6\.0"):
        select_archives(cuda=CUDA["10.1"], mkl_version="2020.2.254", magma_versions=["2.6.0"])
    assert CUDA["9.0"].magma_prefix == "cuda90" and CUDA["12.4"].magma_prefix == "cuda124"


def test_archive_variables_follow_the_catalog(tmp_path: Path) -> None:
    mkl, magma = select_archives(cuda=CUDA["9.0"], mkl_version="2020.2.254", magma_versions=[])
    found = {
        (v.name, v.value, v.prepend)
        for v in archive_variables(mkl, tmp_path / "mkl") + archive_variables(magma, tmp_path / "magma")
    }
    assert found == {
        ("CMAKE_INCLUDE_PATH", str(tmp_path / "mkl" / "include"), False),
        ("LIB", str(tmp_path / "mkl" / "lib"), True),
        ("MAGMA_HOME", str(tmp_path / "magma"), False),
    }


def _catalog_data() -> dict:
    return tomllib.loads((config_dir() / "deps.toml").read_text(encoding="utf-8"))


def test_broken_catalog_errors_name_file_and_key(tmp_path: Path) -> None:
    source = tmp_path / "deps.toml"
    data = _catalog_data()
    data["base_url"] = "http://insecure.example/"
    with pytest.raises(ConfigurationError, match=r"deps\.toml\.base_url: expected an https:// URL"):
        parse_catalog(data, source)
    data = _catalog_data()
    data["magma"]["versions"]["2.5.4"]["variants"] = ["release", "relwithdebinfo"]
    with pytest.raises(ConfigurationError, match=r"magma\.versions\.2\.5\.4\.variants"):
        parse_catalog(data, source)
    data = _catalog_data()
    data["known"] = {"mkl_2020.2.254.7z": {"sha256": "not-hex"}}
    with pytest.raises(ConfigurationError, match=r"known\.mkl_2020\.2\.254\.7z\.sha256"):
        parse_catalog(data, source)
    data = _catalog_data()
    del data["mkl"]["layout"]
    with pytest.raises(ConfigurationError, match=r"mkl: missing required key 'layout'"):
        parse_catalog(data, source)


def test_published_checksums_reach_the_archive() -> None:
    data = _catalog_data()
    data["known"] = {"mkl_2020.2.254.7z": {"sha256": "a" * 64, "size": 123}}
    catalog = parse_catalog(data, Path("deps.toml"))
    (mkl,) = select_archives(cuda=None, mkl_version="2020.2.254", magma_versions=[], catalog=catalog)
    assert (mkl.sha256, mkl.size) == ("a" * 64, 123)


def test_lock_file_round_trip_keeps_other_writers_entries(tmp_path: Path) -> None:
    path = tmp_path / "deps.lock"
    first = LockFile.load(path)
    assert first.entries == {}
    second = LockFile.load(path)
    first.record("mkl_2020.2.254.7z", LockEntry("1" * 64, 10))
    second.record("magma_2.4.0_cuda90_release.7z", LockEntry("2" * 64, 20))
    again = LockFile.load(path)
    assert again.get("mkl_2020.2.254.7z") == LockEntry("1" * 64, 10)
    assert again.get("magma_2.4.0_cuda90_release.7z") == LockEntry("2" * 64, 20)
    assert path.read_text(encoding="utf-8").startswith("# SHA-256 and size")
    assert [p.name for p in tmp_path.iterdir()] == ["deps.lock"]


def test_broken_lock_file_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "deps.lock"
    path.write_text('["mkl_2020.2.254.7z"]\nsha256 = "xyz"\nsize = 1\n', encoding="utf-8")
    with pytest.raises(ConfigurationError, match="64 lowercase hex"):
        LockFile.load(path)


def test_shipped_lock_file_is_valid() -> None:
    LockFile.load(config_dir() / "deps.lock")


def test_installed_path_needs_a_valid_marker_and_the_layout(tmp_path: Path) -> None:
    (mkl,) = select_archives(cuda=None, mkl_version="2020.2.254", magma_versions=[])
    folder = deps_dir(tmp_path, mkl)
    (folder / "include").mkdir(parents=True)
    (folder / "include" / "mkl.h").write_text("")
    (folder / "lib").mkdir()
    assert installed_path(tmp_path, mkl) is None  # no marker: a hand-made or half-extracted folder
    (folder / MARKER_NAME).write_text("{not json")
    assert installed_path(tmp_path, mkl) is None
    write_marker(folder, Marker(file_name="mkl_2018.2.185.7z", sha256="1" * 64, size=1, extractor="7z"))
    assert installed_path(tmp_path, mkl) is None  # a marker for another file
    write_marker(folder, Marker(file_name=mkl.file_name, sha256="1" * 64, size=1, extractor="7z"))
    assert installed_path(tmp_path, mkl) == folder
    assert installed_path(tmp_path, mkl, expected_sha256="2" * 64) is None  # the lock file says otherwise
    (folder / "include" / "mkl.h").unlink()
    assert installed_path(tmp_path, mkl) is None  # the layout is gone
