"""The script formats' quoting, checked as text (the .bat also runs for real under Wine: tests/cmd).

Provenance of the expected lines: the vcvars call is PyTorch v0.4.1's README (Windows),
`call "%VS150COMNTOOLS%\\vcvarsall.bat" x64 -vcvars_ver=14.11`, at the VS 2017 Build Tools folder of
build_config/hosts/vs2017-cuda90-cuda100.json (14.11: the newest toolset CUDA 9.0.176's host_config.h
accepts); the CUDA folder is NVIDIA's default install folder; the quoting is each shell's own rule
(cmd: `set "NAME=value"` with %% for %; PowerShell: '' inside '...'; sh: '\\'' inside '...').
tests/test_seed_recipes.py checks the whole .bat of the seeds' machine against the seeds' recipe.
"""

from __future__ import annotations

import json

import pytest
from support import HOSTS_DIR, plan_options

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.faces.render import render, render_bat, render_json, render_ps1, render_sh
from pytorch_winbuild.facts.model import facts_from_dict, load_facts
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.request import PlanRequest

KNOWLEDGE = load_knowledge()
AWKWARD = "C:\\R&D 100% (x86)\\it's cache"


def _windows_plan(cache_dir: str = AWKWARD, **options):
    facts = load_facts(HOSTS_DIR / "vs2017-cuda90-cuda100.json")
    return make_plan(
        PlanRequest(
            plan_options(cuda="9.0", pytorch_version="1.0.1", cache_dir=cache_dir, compiler_cache="clcache", **options)
        ),
        facts,
        KNOWLEDGE,
    )


def _linux_plan(cache_dir: str):
    data = json.loads((HOSTS_DIR / "cpu-only.json").read_text(encoding="utf-8"))
    data.update(os="linux", visual_studio=[])
    return make_plan(
        PlanRequest(plan_options(cuda="cpu", cache_dir=cache_dir, compiler_cache="ccache")),
        facts_from_dict({**data, "tools": {**data["tools"], "ccache": {"path": "/usr/bin/ccache"}}}),
        KNOWLEDGE,
    )


def test_bat_doubles_percent_and_quotes_the_whole_assignment():
    text = render_bat(_windows_plan())
    assert '\r\nset "CLCACHE_DIR=C:\\R&D 100%% (x86)\\it\'s cache\\clcache"\r\n' in text
    assert '\r\nset "PATH=C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v9.0\\bin;%PATH%"\r\n' in text
    assert (
        '\r\ncall "C:\\Program Files (x86)\\Microsoft Visual '
        'Studio\\2017\\BuildTools\\VC\\Auxiliary\\Build\\vcvarsall.bat" x64 -vcvars_ver=14.11 '
        '>"%__WINBUILD_VCVARS_LOG%" 2>&1\r\nif errorlevel 1 (\r\n' in text
    )


def test_ps1_single_quotes_and_doubles_embedded_quotes():
    text = render_ps1(_windows_plan())
    assert "$env:CLCACHE_DIR = 'C:\\R&D 100% (x86)\\it''s cache\\clcache'" in text
    assert "$env:PATH = 'C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v9.0\\bin;' + $env:PATH" in text
    assert (
        "cmd.exe /c 'call \"C:\\Program Files (x86)\\Microsoft Visual "
        "Studio\\2017\\BuildTools\\VC\\Auxiliary\\Build\\vcvarsall.bat\" x64 -vcvars_ver=14.11 && set'" in text
    )


def test_sh_quotes_single_quotes_and_keeps_an_empty_path_clean():
    text = render_sh(_linux_plan("/tmp/it's cache"))
    assert "export CCACHE_DIR='/tmp/it'\\''s cache/ccache'" in text
    assert "export USE_CUDA='0'" in text


def test_secret_values_never_reach_any_format():
    # A cache folder without a percent sign: the table prints the venv commands, which name it, and a % in them
    # cannot be pasted into cmd (refused for every format that prints commands: tests/test_printed_commands.py).
    plan = _windows_plan("C:\\R&D (x86)\\it's cache")
    leaked = "https://builder:hunter2@mirror.example/x"
    from dataclasses import replace

    from pytorch_winbuild.planning.plan_model import EnvChange

    plan = replace(
        plan,
        changes=(
            *plan.changes,
            EnvChange("SCCACHE_REDIS_PASSWORD", "hunter2", "set", "test"),
            EnvChange("MIRROR", leaked, "set", "test"),
        ),
    )
    for fmt in ("table", "json"):
        text = render(plan, fmt)
        assert "hunter2" not in text, fmt
        assert "builder:***@mirror.example" in text, fmt
    for fmt in ("bat", "ps1"):  # a script with *** in the URL would fetch from another address: refused
        with pytest.raises(ConfigurationError) as refused:
            render(plan, fmt)
        assert refused.value.message.startswith(f"--format {fmt}: the value of MIRROR contains a credential"), fmt
        assert "hunter2" not in refused.value.paragraph()
    secret_only = replace(plan, changes=plan.changes[:-1])  # the secret variable itself is written masked
    assert 'set "SCCACHE_REDIS_PASSWORD=***"' in render(secret_only, "bat")


def test_a_secret_in_a_script_line_that_is_no_value_is_refused(monkeypatch: pytest.MonkeyPatch):
    """The vcvars call (the VS 2017 Build Tools folder, "...\\Microsoft Visual Studio\\2017\\...") is no plan value."""
    monkeypatch.setenv("MY_TOKEN", "Visual Studio")
    with pytest.raises(ConfigurationError) as refused:
        render(_windows_plan(), "bat")
    assert refused.value.message.startswith("--format bat: line "), refused.value.message
    assert "contains the value of MY_TOKEN, a secret," in refused.value.message
    assert refused.value.fix.startswith("unset MY_TOKEN for this command")


def test_a_quote_in_a_value_is_kept_but_cannot_unbalance_a_prepended_list():
    """`set "X=a"b"` keeps the quote (tests/cmd/test_quoting_real.py runs it under cmd); an odd quote in
    a PATH entry would push the old %PATH% out of the quotes, so it is refused."""
    plan = _windows_plan()
    from dataclasses import replace

    from pytorch_winbuild.planning.plan_model import EnvChange
    from pytorch_winbuild.text.quoting_bat import prepend_line

    assert 'set "X=a"b"' in render_bat(replace(plan, changes=(EnvChange("X", 'a"b', "set", "test"),)))
    with pytest.raises(ConfigurationError):
        prepend_line("PATH", 'a"b')


def test_json_has_env_and_ordered_changes_with_reasons():
    data = json.loads(render_json(_windows_plan()))
    assert data["env"]["PATH"].endswith(";%PATH%")
    assert [c["name"] for c in data["changes"]][:3] == ["USE_CUDA", "NO_CUDA", "CUDA_PATH"]
    assert all(c["reason"] for c in data["changes"])
    # The venv's variables come last (as its activate script sets them), and setup.py runs under its interpreter:
    # made from the machine's 3.6.8, the one of its Pythons PyTorch 1.0 takes (3.5 up to 3.8).
    venv = f"{AWKWARD}\\venvs\\1.0-py3.6-{data['venv']['key']}"
    assert [(c["name"], c["value"], c["action"]) for c in data["changes"]][-2:] == [
        ("VIRTUAL_ENV", venv, "set"),
        ("PATH", venv + "\\Scripts", "prepend"),
    ]
    assert data["build_python"]["executable"] == "C:\\Program Files\\Python36\\python.exe"
    assert data["build_python"]["version"] == "3.6.8" and data["venv"]["folder"] == venv
    assert data["build_command"] == [venv + "\\Scripts\\python.exe", "setup.py", "install"]
