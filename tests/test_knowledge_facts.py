"""Knowledge files, facts files and redaction: every bad input named precisely."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from packaging.version import Version

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import facts_from_dict, load_facts
from pytorch_winbuild.knowledge.config_files import config_dir
from pytorch_winbuild.knowledge.model import load_knowledge, version_tuple
from pytorch_winbuild.knowledge.msvc import toolset_msc_ver, toolset_short
from pytorch_winbuild.planning.era_obstacles import era_of
from pytorch_winbuild.text.redact import redact_env, redact_text

MINIMAL = {
    "schema": 1,
    "os": "windows",
    "python": {"version": "3.6.8", "bits": 64, "executable": "C:\\Python36\\python.exe"},
}


def test_toolset_versions_map_to_msc_ver():
    assert toolset_msc_ver("14.0") == 1900
    assert toolset_msc_ver("14.11.25503") == 1911
    assert toolset_msc_ver("14.44.35207") == 1944
    assert toolset_short("14.16.27023") == "14.16"


def test_version_tuple_reads_pytorch_style_versions():
    assert version_tuple("2.13.0a0+git1234") == (2, 13, 0)
    assert version_tuple("0.4.1") == (0, 4, 1)
    assert version_tuple("3.27.9") == (3, 27, 9)
    with pytest.raises(ConfigurationError, match="not a version number"):
        version_tuple("banana")


def test_knowledge_loads_and_is_consistent():
    knowledge = load_knowledge()
    assert knowledge.cuda["9.0"].msc_range == (1600, 1912)
    assert knowledge.cuda["9.0"].magma_prefix == "cuda90"
    assert knowledge.cuda["12.4"].magma_prefix == "cuda124"
    assert era_of(knowledge, Version("0.4.1"))[0].name == "0.3-0.4"
    assert era_of(knowledge, Version("1.10.2"))[0].name == "1.7-1.10"
    assert era_of(knowledge, Version("1.13.1"))[0].name == "1.11-1.13"
    assert era_of(knowledge, Version("2.13.0"))[0].name == "2.9+"
    assert era_of(knowledge, Version("2.6.0a0+git1234"))[0].name == "2.5-2.8", (
        "main's dev versions belong to their release"
    )
    for era in knowledge.eras:
        assert set(era.compiler_caches) <= set(knowledge.compiler_caches)


def test_unknown_cuda_names_the_known_ones():
    with pytest.raises(ConfigurationError) as error:
        load_knowledge().cuda_release("9.7")
    assert "CUDA 9.7 is not a CUDA release pytorch-winbuild knows" in error.value.paragraph()
    assert "8.0, 9.0, 9.1, 9.2, 10.0" in error.value.paragraph()


def test_too_old_pytorch_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match=r"PyTorch 0\.2\.0 is older than any era"):
        era_of(load_knowledge(), Version("0.2.0"))


@pytest.mark.parametrize(
    ("file_name", "old", "new", "message"),
    [
        (
            "cuda.toml",
            "msc_range = [1600, 1912]",
            "msc_range = [1912, 1600]",
            r'cuda.toml: cuda."9.0".msc_range: expected \[low, high\]',
        ),
        (
            "cuda.toml",
            'needs_nvtx = true\narch_list = "3.5;5.0;5.2;6.0;6.1"',
            'arch_list = "3.5;5.0;5.2;6.0;6.1"',
            r"cuda.toml: cuda.\"8.0\": missing required key 'needs_nvtx'",
        ),
        (
            "eras.toml",
            'cuda = ["8.0", "9.0", "9.1", "9.2"]',
            'cuda = ["8.0", "9.5"]',
            r"eras.toml: era\[0\].cuda: '9.5' is not in cuda.toml",
        ),
        (
            "visual_studio.toml",
            '[product."2017"]\nmajor = 15',
            '[product."2017"]\nmajor = "fifteen"',
            r'visual_studio.toml: product."2017".major: expected int',
        ),
        ("eras.toml", "[[era]]", "[[era]", r"eras.toml: not valid TOML"),
    ],
)
def test_broken_knowledge_file_names_file_and_key(tmp_path: Path, file_name: str, old: str, new: str, message: str):
    copy = tmp_path / "build_config"
    shutil.copytree(config_dir(), copy)
    target = copy / file_name
    text = target.read_text(encoding="utf-8")
    assert old in text
    target.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ConfigurationError, match=message):
        load_knowledge(copy)


def test_minimal_facts_load():
    facts = facts_from_dict(MINIMAL)
    assert facts.python.bits == 64 and facts.visual_studio == () and facts.cuda == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema": 5}, "schema: version 5 is not supported"),
        ({"os": "macos"}, "os: expected 'windows' or 'linux'"),
        ({"python": {"version": "3.6.8", "executable": "python"}}, "python.bits: missing"),
        ({"python": {"version": "3.6.8", "bits": 48, "executable": "python"}}, "python.bits: expected 32 or 64"),
        ({"pythons": {"version": "3.6.8"}}, "pythons: expected list"),
        ({"pythons": ["C:\\Python36\\python.exe"]}, r"pythons\[0\]: expected an object"),
        (
            {"pythons": [{"version": "three", "bits": 64, "executable": "python"}]},
            r"pythons\[0\].version: expected a Python version",
        ),
        ({"pythons": [{"version": "3.6.8", "bits": 64, "executable": " "}]}, r"pythons\[0\].executable"),
        ({"pythons": [{"version": "3.6.8", "bits": 64, "executable": "py", "venv": "yes"}]}, r"pythons\[0\].venv"),
        ({"cuda": [{"version": "nine", "path": "C:\\cuda"}]}, r"cuda\[0\].version: expected MAJOR.MINOR"),
        (
            {"cuda": [{"version": "9.0", "path": "C:\\cuda", "msc_range": [1912, 1600]}]},
            r"cuda\[0\].msc_range: expected \[low, high\)",
        ),
        (
            {
                "visual_studio": [
                    {
                        "product_line": "2017",
                        "version": "15.9",
                        "product": "BuildTools",
                        "path": "C:\\VS",
                        "toolsets": ["15.9"],
                    }
                ]
            },
            r"visual_studio\[0\].toolsets: '15.9' is not an MSVC toolset",
        ),
        (
            {"visual_studio": [{"product_line": "2017", "version": "15.9", "path": "C:\\VS"}]},
            r"visual_studio\[0\].product: missing",
        ),
        ({"tools": {"cmake": "C:\\cmake.exe"}}, "tools.cmake: expected an object"),
    ],
)
def test_malformed_facts_name_the_key(change: dict, message: str):
    with pytest.raises(ConfigurationError, match=message) as error:
        facts_from_dict({**MINIMAL, **change}, "host.json")
    assert "facts file host.json" in error.value.paragraph()
    assert "invoke doctor --json" in error.value.paragraph()


def test_facts_file_that_is_not_json_reports_line_and_column(tmp_path: Path):
    path = tmp_path / "host.json"
    path.write_text('{"schema": 1,\n  "os": windows}', encoding="utf-8")
    with pytest.raises(ConfigurationError, match="line 2 column 9: not valid JSON"):
        load_facts(path)


def test_missing_facts_file(tmp_path: Path):
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_facts(tmp_path / "nope.json")


def test_facts_json_round_trip_and_redaction():
    data = {
        **MINIMAL,
        "description": (
            "proxy https://alice:s3cret@proxy.example:8080 and token ghp_abcdefghijklmnopqrstuvwxyz0123456789"
        ),
        "cuda": [{"version": "9.0", "path": "C:\\cuda", "msc_range": [1600, 1912]}],
    }
    facts = facts_from_dict(data)
    text = facts.to_json()
    assert "s3cret" not in text and "ghp_abcdefghij" not in text
    assert "alice:***@proxy.example" in text
    again = facts_from_dict(json.loads(text))
    assert again.cuda == facts.cuda and again.python == facts.python


def test_redaction_of_text_and_environment():
    assert redact_text("redis://:hunter2@127.0.0.1:6379/0") == "redis://:***@127.0.0.1:6379/0"
    assert (
        redact_text("https://x.example/file.7z?sig=abc123&X-Amz-Signature=def")
        == "https://x.example/file.7z?sig=***&X-Amz-Signature=***"
    )
    assert redact_text("Authorization: Bearer abcdefghijklmnop") == "Authorization: Bearer ***"
    env = redact_env(
        {"GITHUB_TOKEN": "abc", "SCCACHE_REDIS_PASSWORD": "pw", "PATH": "C:\\x", "SCCACHE_REDIS": "redis://u:pw@h"}
    )
    assert env == {
        "GITHUB_TOKEN": "***",
        "SCCACHE_REDIS_PASSWORD": "***",
        "PATH": "C:\\x",
        "SCCACHE_REDIS": "redis://u:***@h",
    }


def test_a_boolean_is_no_number_even_where_int_or_float_is_accepted() -> None:
    """TOML `min_free_gb = true` is a mistake; Python's bool is an int, so the check has to say so."""
    from pytorch_winbuild.errors import ConfigurationError
    from pytorch_winbuild.knowledge.config_files import require

    for kind in (int, float, (int, float)):
        with pytest.raises(ConfigurationError, match="got a boolean"):
            require({"min_free_gb": True}, "min_free_gb", kind, "settings")
    assert require({"min_free_gb": 2}, "min_free_gb", (int, float), "settings") == 2
