"""Linux: the host compiler nvcc gets is one its CUDA release accepts.

Expected values come from NVIDIA's own words and the real tools: the limits from the `#error` text
of the real CUDA 13.0 header (not the `#if` the parser reads), compiler versions from
`gcc -dumpfullversion`, and the end-to-end case from the real nvcc and CMake's real CUDA language.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import plan_options, run_invoke
from test_probe import HOST_CONFIG_CUDA12, HOST_CONFIG_CUDA80, HOST_CONFIG_CUDA90, REAL_CUDA

from pytorch_winbuild.diagnosis.triage import triage_log
from pytorch_winbuild.errors import ToolchainError
from pytorch_winbuild.facts.model import Facts, facts_from_dict
from pytorch_winbuild.facts.probe import probe_linux
from pytorch_winbuild.facts.probe_common import parse_compiler_version, parse_host_config_host_limits
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.fixes import FixableError
from pytorch_winbuild.planning.installs import installed_after
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.request import PlanRequest

KNOWLEDGE = load_knowledge()
REAL_HEADER = REAL_CUDA / "include" / "crt" / "host_config.h"
KERNEL = "__global__ void k() {}\n"


def nvidia_stated_limits() -> dict[str, int]:
    """The limits as the real header's error messages state them, in NVIDIA's words."""
    text = REAL_HEADER.read_text(encoding="utf-8")
    gcc = re.search(r"gcc versions later than (\d+) are not supported", text)
    clang = re.search(r"unsupported clang version! clang version must be less than (\d+)", text)
    assert gcc and clang, "CUDA 13.0's host_config.h states its GCC and clang limits"
    return {"gcc": int(gcc.group(1)), "clang": int(clang.group(1)) - 1}


def real_gcc_version(name: str = "gcc") -> str:
    return subprocess.run([name, "-dumpfullversion"], capture_output=True, text=True, check=True).stdout.strip()


# ---------------------------------------------------------------- parsers


def test_the_real_cuda_header_gives_the_limits_its_error_messages_state() -> None:
    assert parse_host_config_host_limits(REAL_HEADER.read_text(encoding="utf-8")) == nvidia_stated_limits()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HOST_CONFIG_CUDA80, {"gcc": 5}),  # "gcc versions later than 5 are not supported!"
        (HOST_CONFIG_CUDA12, {"gcc": 13}),  # "gcc versions later than 13 are not supported!"
        (HOST_CONFIG_CUDA90, {}),  # the excerpt holds only the MSVC guard: nothing is guessed
        ("/* #if __GNUC__ > 4\n#error -- unsupported GNU version! */\n", {}),  # a commented-out guard
    ],
    ids=["cuda-8.0", "cuda-12.x", "msvc-only", "commented-out"],
)
def test_header_shapes(text: str, expected: dict[str, int]) -> None:
    assert parse_host_config_host_limits(text) == expected


@pytest.mark.parametrize("name", ["gcc", "g++", "cc"])
def test_real_compiler_banners_give_the_version_gcc_reports_itself(name: str) -> None:
    banner = subprocess.run([name, "--version"], capture_output=True, text=True, check=True).stdout
    assert parse_compiler_version(banner) == ("gcc", real_gcc_version(name))


@pytest.mark.parametrize(
    ("banner", "expected"),
    [
        # GCC's format, `PROGRAM (PKGVERSION) VERSION`, where a distribution may append a date and more.
        (
            "gcc (GCC) 13.2.1 20231011 (Red Hat 13.2.1-4)\nCopyright (C) 2023 Free Software Foundation, Inc.\n",
            ("gcc", "13.2.1"),
        ),
        ("Ubuntu clang version 18.1.3 (1ubuntu1)\nTarget: x86_64-pc-linux-gnu\n", ("clang", "18.1.3")),
        ("ccache version 4.7.5\nFeatures: file-storage http-storage\n", None),  # a wrapper, not a compiler
    ],
    ids=["red-hat-gcc", "ubuntu-clang", "not-a-compiler"],
)
def test_compiler_banner_formats(banner: str, expected: tuple[str, str] | None) -> None:
    assert parse_compiler_version(banner) == expected


def test_the_linux_probe_records_this_machines_compilers_and_cuda_limits() -> None:
    facts = probe_linux(os.environ, gpus=False).facts
    gcc = facts.host_compiler("gcc")
    assert gcc is not None and gcc.path == shutil.which("gcc") and gcc.version == real_gcc_version()
    cuda = facts.cuda_by_version("13.0")
    assert cuda is not None
    assert {"gcc": cuda.gcc_max, "clang": cuda.clang_max} == nvidia_stated_limits()


# ---------------------------------------------------------------- the real nvcc and CMake


@pytest.fixture
def gcc_16(tmp_path: Path) -> dict[str, str]:
    """PATH with a `gcc` first that identifies as GCC 16, in its banner and in `__GNUC__`.

    A stand-in because no GCC newer than CUDA 13.0 accepts can be installed here (Debian 12 ships
    GCC 12). nvcc checks only the `__GNUC__` its host compiler defines, so the real nvcc and CMake
    meet it as they would meet a real GCC 16; it compiles with the real gcc underneath."""
    folder = tmp_path / "gcc16"
    folder.mkdir()
    real_gcc = shutil.which("gcc")
    assert real_gcc, "gcc is installed"
    script = folder / "gcc"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = --version ] && { echo "gcc (Test 16.1.0-1) 16.1.0"; '
        'echo "Copyright (C) 2026 Free Software Foundation, Inc."; exit 0; }; done\n'
        f'exec {real_gcc} -D__GNUC__=16 -Wno-builtin-macro-redefined "$@"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{REAL_CUDA / 'bin'}{os.pathsep}{os.environ['PATH']}"}


def test_a_gcc_that_cuda_refuses_is_replaced_through_cudahostcxx_and_cmake_builds(
    gcc_16: dict[str, str], tmp_path: Path
) -> None:
    kernel = tmp_path / "k.cu"
    kernel.write_text(KERNEL, encoding="utf-8")
    env = {**os.environ, **gcc_16}
    refused = subprocess.run(
        ["nvcc", "-c", str(kernel), "-o", str(tmp_path / "k.o")], env=env, capture_output=True, text=True
    )
    assert refused.returncode != 0 and "unsupported GNU version" in refused.stderr, "nvcc meets GCC 16"

    run = run_invoke("env", "--cuda", "13.0", "--format", "json", env=gcc_16)
    assert run.returncode == 0, run.stderr
    plan = json.loads(run.stdout)
    chosen = plan["env"]["CUDAHOSTCXX"]
    assert plan["cuda_host_compiler"]["set_by_plan"] is True
    assert plan["cuda_host_compiler"]["version"] == real_gcc_version(chosen)

    project = tmp_path / "project"
    project.mkdir()
    (project / "k.cu").write_text(KERNEL, encoding="utf-8")
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(k LANGUAGES CXX CUDA)\nadd_library(k OBJECT k.cu)\n",
        encoding="utf-8",
    )

    def configure(folder: str, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
        command = ["cmake", "-S", str(project), "-B", str(tmp_path / folder), "-G", "Ninja"]
        return subprocess.run(command, env={**env, **extra}, capture_output=True, text=True, timeout=120)

    without = configure("without", {})
    assert without.returncode != 0 and "unsupported GNU version" in without.stdout + without.stderr
    log = tmp_path / "configure.log"
    log.write_text(without.stdout + without.stderr, encoding="utf-8")
    assert [match.rule.id for match in triage_log(log).matches] == ["cuda-unsupported-host-compiler"]
    with_plan = configure("with", {"CUDAHOSTCXX": chosen})
    assert with_plan.returncode == 0, with_plan.stdout + with_plan.stderr
    build = subprocess.run(
        ["cmake", "--build", str(tmp_path / "with")], env=env, capture_output=True, text=True, timeout=120
    )
    assert build.returncode == 0, build.stdout + build.stderr


def test_a_cudahostcxx_the_user_set_to_a_refused_gcc_stops_the_plan(gcc_16: dict[str, str]) -> None:
    run = run_invoke(
        "build",
        "--dry-run",
        "--cuda",
        "13.0",
        env={**gcc_16, "CUDAHOSTCXX": str(Path(gcc_16["PATH"].split(os.pathsep)[0], "gcc"))},
    )
    assert run.returncode == ToolchainError.exit_code == 3
    assert "Traceback" not in run.stderr
    assert "CUDAHOSTCXX names gcc 16.1.0" in run.stderr and "point CUDAHOSTCXX at an accepted compiler" in run.stderr


# ---------------------------------------------------------------- plans from Linux facts

CUDA_LIMITS = {"11.3": 10, "12.4": 13, "13.0": 15}  # host_config.h: `__GNUC__ > 10`, `> 13`, `> 15`


def linux_facts(compilers: list[tuple[str, str]], cuda: tuple[str, ...] = ("13.0",), python: str = "3.11.7") -> Facts:
    """A Linux machine with these (found_as, GCC version) compilers; a "clang++-N" name is clang."""
    data: dict[str, Any] = {
        "schema": 3,
        "os": "linux",
        "python": {"version": python, "bits": 64, "executable": "/usr/bin/python3"},
        "cuda": [
            {"version": v, "path": f"/usr/local/cuda-{v}", "gcc_max": CUDA_LIMITS[v], "clang_max": 17} for v in cuda
        ],
        "tools": {"cmake": {"path": "/usr/bin/cmake", "version": "3.31.6"}, "ninja": {"path": "/usr/bin/ninja"}},
        "host_compilers": [
            {
                "found_as": name,
                "path": f"/usr/bin/{name}" if name not in ("CC", "CUDAHOSTCXX") else f"/opt/{name.lower()}/gcc",
                "family": "clang" if name.startswith("clang") else "gcc",
                "version": version,
            }
            for name, version in compilers
        ],
        "cpu_count": 8,
    }
    return facts_from_dict(data)


def plan_for(facts: Facts, cuda: str = "13.0", version: str | None = None) -> Plan:
    return make_plan(
        PlanRequest(plan_options(cuda=cuda, pytorch_version=version, cache_dir="/tmp/pwb")), facts, KNOWLEDGE
    )


def cudahostcxx(plan: Plan) -> str | None:
    return next((c.value for c in plan.changes if c.name == "CUDAHOSTCXX"), None)


def test_an_accepted_default_gcc_is_kept_and_named() -> None:
    plan = plan_for(linux_facts([("gcc", "14.2.0"), ("g++-12", "12.4.0")]))
    assert cudahostcxx(plan) is None
    assert plan.nvcc_host is not None and plan.nvcc_host.compiler.found_as == "gcc"
    assert any("gcc 14.2.0 (/usr/bin/gcc), gcc on PATH (nvcc's own default), accepted" in d for d in plan.decisions)


def test_a_refused_default_gcc_is_replaced_by_the_newest_accepted_gcc() -> None:
    facts = linux_facts(
        [("gcc", "14.2.0"), ("g++-12", "12.4.0"), ("g++-13", "13.3.0"), ("clang++-17", "17.0.6")], cuda=("12.4",)
    )
    plan = plan_for(facts, cuda="12.4")
    assert cudahostcxx(plan) == "/usr/bin/g++-13"  # GCC ≤ 13: g++-13 before g++-12 and before clang


def test_nothing_accepted_names_the_gcc_to_install_and_the_cuda_that_would_take_this_one() -> None:
    with pytest.raises(ToolchainError) as raised:
        plan_for(linux_facts([("gcc", "14.2.0")], cuda=("12.4", "13.0")), cuda="12.4")
    assert "apt-get install g++-13" in (raised.value.fix or "")
    assert "--cuda 13.0" in (raised.value.fix or "")  # CUDA 13.0 accepts GCC 14


def test_the_gcc_to_install_is_planned_with_it_installed_and_becomes_cudahostcxx() -> None:
    """The install way is a promise: planned on the machine with g++-13 beside gcc 14 (as Debian installs it), it
    plans, and the plan hands nvcc that compiler; make_plan shows it only because it does."""
    facts = linux_facts([("gcc", "14.2.0")], cuda=("12.4", "13.0"))
    with pytest.raises(FixableError) as raised:
        plan_for(facts, cuda="12.4")
    install = next(way for way in raised.value.fix_ways.ways() if way.installs)
    assert install.text.startswith("install GCC 13 or older") and "apt-get install g++-13" in install.text
    plan = plan_for(installed_after(install.installs, facts), cuda="12.4")
    assert cudahostcxx(plan) == "/usr/bin/g++-13"


def test_cuda_auto_skips_a_cuda_whose_host_compiler_is_refused() -> None:
    plan = plan_for(linux_facts([("gcc", "16.1.0")], cuda=("12.4", "13.0")), cuda="auto")
    assert plan.cuda is None
    assert any(d.startswith("CUDA auto: skipped 13.0: nvcc would use gcc 16.1.0") for d in plan.decisions)


def test_the_findcuda_era_hands_nvcc_cc_and_the_cuda_language_era_gcc() -> None:
    """1.7-1.10: FindCUDA's CUDA_HOST_COMPILER defaults to CMAKE_C_COMPILER (CC); 1.11+: nvcc's gcc."""
    facts = linux_facts([("CC", "10.5.0"), ("gcc", "12.2.0")], cuda=("11.3",), python="3.8.18")
    old = plan_for(facts, cuda="11.3", version="1.10")
    assert cudahostcxx(old) is None and old.nvcc_host is not None and old.nvcc_host.compiler.found_as == "CC"
    new = plan_for(facts, cuda="11.3", version="1.12")
    assert cudahostcxx(new) == "/opt/cc/gcc"


def test_facts_without_compilers_are_not_checked() -> None:
    facts = facts_from_dict(
        {
            "schema": 3,
            "os": "linux",
            "python": {"version": "3.11.7", "bits": 64, "executable": "/usr/bin/python3"},
            "cuda": [{"version": "13.0", "path": "/usr/local/cuda", "gcc_max": 15}],
            "tools": {"cmake": {"path": "/usr/bin/cmake", "version": "3.31.6"}, "ninja": {"path": "/usr/bin/ninja"}},
        }
    )
    plan = plan_for(facts)
    assert plan.nvcc_host is None and cudahostcxx(plan) is None
    assert any(d.startswith("CUDA host compiler: not checked") for d in plan.decisions)


def test_doctor_warns_about_a_refused_gcc_and_names_the_accepted_one(gcc_16: dict[str, str]) -> None:
    run = run_invoke("doctor", env=gcc_16)
    assert run.returncode == 0, run.stderr  # a warning: plans still work, through CUDAHOSTCXX
    assert "nvcc would refuse gcc 16.1.0" in run.stdout
    assert f"a plan sets CUDAHOSTCXX to {shutil.which('g++')}" in run.stdout


def test_a_cudahostcxx_that_names_no_executable_is_said_by_the_probe() -> None:
    report = probe_linux({**os.environ, "CUDAHOSTCXX": "/nonexistent/g++"}, gpus=False)
    assert report.facts.host_compiler("CUDAHOSTCXX") is None
    assert any(
        note.startswith("CUDAHOSTCXX is set to '/nonexistent/g++', which is not an executable") for note in report.notes
    )
