"""PyTorch's architecture names per release and per reader (issue 28): --arch-list is expanded with
the table of the release the plan builds, CMake's for a build and torch.utils.cpp_extension's for
build-ext.

Expected values come from PyTorch's sources at the release tags, each test naming the tag, file and
lines it was read from (CMake: cmake/Modules_CUDA_fix/upstream/FindCUDA/select_compute_arch.cmake,
the `arch_name` branches of CUDA_SELECT_NVCC_ARCH_FLAGS: arch_bin are a name's cubins, arch_ptx the
PTX that NAME+PTX adds; cpp_extension: torch/utils/cpp_extension.py `named_arches`), not from
build_config/gpu.toml.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from invoke import Config, Context
from support import HOSTS_DIR, plan_options, run_invoke

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.faces.flags import WINBUILD_DEFAULTS, cache_choice
from pytorch_winbuild.faces.plan_request import plan_from_flags
from pytorch_winbuild.facts.model import load_facts
from pytorch_winbuild.knowledge.arch_list import Arch, NameTable, expand_arch_list, format_arch_list
from pytorch_winbuild.knowledge.choices import parse_arch_request
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.request import PlanRequest

KNOWLEDGE = load_knowledge()


def parse_arch_list(text: str, names: NameTable) -> tuple[Arch, ...]:
    """--arch-list as the edge reads it (names checked against every release's) and a plan expands it (`names`)."""
    return expand_arch_list(parse_arch_request(text, KNOWLEDGE.gpu.any_release()).entries, names)


HOST = HOSTS_DIR / "vs2019-vs2022-cuda12.json"  # CUDA 12.4 and 12.8, VS 2019 and 2022
CMAKE_FILE = "cmake/Modules_CUDA_fix/upstream/FindCUDA/select_compute_arch.cmake"


def expand(release: str, reader: str, text: str) -> str:
    return format_arch_list(parse_arch_list(text, KNOWLEDGE.gpu.names_for(release, reader)))


def arch_list(plan: Plan) -> str | None:
    return plan.final_env().get("TORCH_CUDA_ARCH_LIST")


def test_blackwell_for_a_2_6_0_build_with_cuda_12_8_is_10_0():
    """v2.6.0 select_compute_arch.cmake lines 233-235: Blackwell → arch_bin 10.0 (the issue's command exited 2,
    expanding it with v2.9.0's cpp_extension table to 10.0;10.3;12.0;12.1+PTX, which CUDA 12.8 cannot build)."""
    result = run_invoke(
        "env",
        "--host",
        str(HOST),
        "--cuda",
        "12.8",
        "--pytorch-version",
        "2.6.0",
        "--arch-list",
        "Blackwell",
        "--format",
        "json",
    )
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["env"]["TORCH_CUDA_ARCH_LIST"] == "10.0"
    assert any(
        "Blackwell → 10.0" in line and f"v2.6.0 {CMAKE_FILE} lines 201-235" in line for line in plan["decisions"]
    )


def test_build_ext_reads_names_as_cpp_extension_does(tmp_path: Path):
    """v2.6.0 torch/utils/cpp_extension.py line 2043: ('Blackwell', '10.0+PTX'); a build of the same release
    reads CMake's 10.0 (v2.6.0 select_compute_arch.cmake lines 233-235). The build-ext plan is made as
    faces/commands.py build_ext makes it: an extension's folder (source_is_pytorch=False), no venv."""
    context = Context(Config(defaults={"winbuild": WINBUILD_DEFAULTS}))
    extension = plan_from_flags(
        context,
        host=str(HOST),
        source=str(tmp_path),
        cache=cache_choice(context, "C:\\winbuild-cache"),
        source_is_pytorch=False,
        arguments={"cuda": "12.8", "pytorch_version": "2.6.0", "arch_list": "Blackwell"},
        build_venv=False,
    )
    build = make_plan(
        PlanRequest(plan_options(cuda="12.8", pytorch_version="2.6.0", arch_list="Blackwell")),
        load_facts(HOST),
        KNOWLEDGE,
    )
    assert (arch_list(extension), arch_list(build)) == ("10.0+PTX", "10.0")
    assert any("torch.utils.cpp_extension names (v2.6.0 torch/utils/cpp_extension.py" in d for d in extension.decisions)


def test_ampere_for_a_build_adds_no_ptx():
    """v2.6.0 select_compute_arch.cmake lines 224-226: Ampere → arch_bin 8.0 8.6; PTX only for "Ampere+PTX"
    (lines 192-195, 244-249). cpp_extension's own table says 8.0;8.6+PTX (v2.6.0 line 2040)."""
    plan = make_plan(
        PlanRequest(plan_options(cuda="12.8", pytorch_version="2.6.0", arch_list="Ampere")), load_facts(HOST), KNOWLEDGE
    )
    assert arch_list(plan) == "8.0;8.6"
    assert expand("2.6.0", "cpp_extension", "Ampere") == "8.0;8.6+PTX"


@pytest.mark.parametrize(
    ("release", "reader", "text", "expected"),
    [
        # v1.0.1 select_compute_arch.cmake lines 156-158: Kepler → arch_bin 3.0 3.5, arch_ptx 3.5.
        ("1.0.1", "cmake", "Kepler", "3.0;3.5"),
        ("1.0.1", "cmake", "Kepler+PTX", "3.0;3.5+PTX"),
        # v1.2.0 select_compute_arch.cmake lines 215-217: Turing → 7.5 and 7.5.
        ("1.2.0", "cmake", "Turing+PTX", "7.5+PTX"),
        # v1.7.1 select_compute_arch.cmake lines 236-238: Ampere → 8.0 only ...
        ("1.7.1", "cmake", "Ampere", "8.0"),
        # ... while v1.7.1 torch/utils/cpp_extension.py line 1409 says ('Ampere', '8.0;8.6+PTX'),
        ("1.7.1", "cpp_extension", "Ampere", "8.0;8.6+PTX"),
        # and v1.6.0 torch/utils/cpp_extension.py line 1385 ('Ampere', '8.0+PTX').
        ("1.6.0", "cpp_extension", "Ampere", "8.0+PTX"),
        # v2.0.0 select_compute_arch.cmake lines 209-214: Ada → 8.9, Hopper → 9.0.
        ("2.0.0", "cmake", "Ada;Hopper+PTX", "8.9;9.0+PTX"),
        # v2.1.2 select_compute_arch.cmake lines 210-212: Ampere → arch_bin 8.0 8.6, arch_ptx 8.0 8.6.
        ("2.1.2", "cmake", "Ampere+PTX", "8.0+PTX;8.6+PTX"),
        # v2.7.0 select_compute_arch.cmake lines 241-245: Blackwell+Tegra → 10.1; Blackwell → 10.0 12.0.
        ("2.7.0", "cmake", "Blackwell;Blackwell+Tegra", "10.0;12.0;10.1"),
        # v2.7.0 torch/utils/cpp_extension.py line 2340: ('Blackwell', '10.0;12.0+PTX').
        ("2.7.0", "cpp_extension", "Blackwell", "10.0;12.0+PTX"),
        # v2.8.0 torch/utils/cpp_extension.py lines 2407-2408: Blackwell+Tegra 10.1, Blackwell 10.0;10.3;12.0;12.1+PTX.
        ("2.8.0", "cpp_extension", "Blackwell+Tegra;Blackwell", "10.1;10.0;10.3;12.0;12.1+PTX"),
        # v2.9.0 torch/utils/cpp_extension.py line 2403: ('Blackwell+Tegra', '11.0') (CUDA 13 renamed sm_101),
        ("2.9.0", "cpp_extension", "Blackwell+Tegra", "11.0"),
        # while v2.9.0 select_compute_arch.cmake lines 241-242 still say 10.1.
        ("2.9.0", "cmake", "Blackwell+Tegra", "10.1"),
        # v2.14.1 select_compute_arch.cmake lines 251-253 and torch/utils/cpp_extension.py line 2693: Rubin.
        ("2.14.1", "cmake", "Rubin", "10.7"),
        ("2.14.1", "cpp_extension", "Rubin", "10.7+PTX"),
        # v2.6.0 torch/utils/cpp_extension.py lines 2084-2085 replace each name in the text, so a name whose value
        # has no +PTX takes one: ('Kepler+Tesla', '3.7') makes "Kepler+Tesla+PTX" 3.7+PTX.
        ("2.6.0", "cpp_extension", "Kepler+Tesla+PTX", "3.7+PTX"),
        # A source tree's version: main before the 2.7 branch cut reads like 2.7 (v2.7.0 lines 243-245).
        ("2.7.0a0+git1234", "cmake", "Blackwell", "10.0;12.0"),
    ],
)
def test_each_release_expands_names_with_its_own_table(release: str, reader: str, text: str, expected: str):
    assert expand(release, reader, text) == expected


@pytest.mark.parametrize(
    ("release", "reader", "name"),
    [
        ("2.5.1", "cmake", "Blackwell"),  # v2.5.1 select_compute_arch.cmake lines 194-225: no Blackwell branch
        ("1.3.0", "cmake", "Fermi"),  # v1.3.0 dropped Fermi and Kepler+Tegra (lines 195-213)
        ("1.13.1", "cmake", "Volta+Tegra"),  # added to CMake's table in v2.1.0 (lines 200-201)
        ("1.2.0", "cpp_extension", "Volta"),  # v1.2.0 torch/utils/cpp_extension.py reads no TORCH_CUDA_ARCH_LIST
        # v2.6.0 torch/utils/cpp_extension.py: "Ampere+PTX" becomes 8.0;8.6+PTX+PTX, refused at lines 2091-2092.
        ("2.6.0", "cpp_extension", "Ampere+PTX"),
    ],
)
def test_a_name_its_release_does_not_know_is_refused_naming_the_table(release: str, reader: str, name: str):
    table = KNOWLEDGE.gpu.names_for(release, reader)
    with pytest.raises(ConfigurationError) as error:
        parse_arch_list(name, table)
    message = error.value.paragraph()
    assert f"PyTorch {release}'s" in message and table.label in message
    assert ("none: it reads only numbers" if reader == "cpp_extension" and release == "1.2.0" else "Kepler") in message


def test_refused_name_in_a_plan_says_which_release_table_was_used():
    result = run_invoke(
        "env", "--host", str(HOST), "--cuda", "12.4", "--pytorch-version", "2.5.1", "--arch-list", "Blackwell"
    )
    assert result.returncode == 2
    assert "PyTorch 2.5.1's CMake names" in result.stderr and "Hopper" in result.stderr


def test_a_release_newer_than_every_table_uses_the_newest_and_says_so():
    """main and releases past the last table read (v2.14.x) take the newest table, with a note in the decisions."""
    newest = [table for table in KNOWLEDGE.gpu.arch_names if table.reader == "cmake"][-1]
    for release in ("main", newest.pytorch[1] + ".0"):
        table = KNOWLEDGE.gpu.names_for(release, "cmake")
        assert table.names == newest.names and f"PyTorch {release} is newer" in table.note
    plan = make_plan(
        PlanRequest(plan_options(cuda="12.8", pytorch_version="main", arch_list="Hopper")), load_facts(HOST), KNOWLEDGE
    )
    assert arch_list(plan) == "9.0"
    assert any("Hopper → 9.0" in line and "PyTorch main is newer" in line for line in plan.decisions)


def test_a_name_stands_for_the_same_numbers_whatever_the_cuda_and_nvcc_decides():
    """No `arch_name` branch tests CUDA_VERSION (v2.6.0 lines 201-235); only the "All" list does (lines 82-86).
    So 2.6.0's Blackwell is 10.0 with CUDA 12.4 too, which that nvcc cannot build: the plan refuses it."""
    result = run_invoke(
        "env", "--host", str(HOST), "--cuda", "12.4", "--pytorch-version", "2.6.0", "--arch-list", "Blackwell"
    )
    assert result.returncode == 2
    assert "Blackwell → 10.0" in result.stderr and "CUDA 12.4's nvcc does not compile for 10.0" in result.stderr


def test_every_era_has_a_table_per_reader():
    """Each reader's tables follow one another from the first era's first release on (the loader checks
    there is no gap), so no plan is left without its release's names."""
    for reader in ("cmake", "cpp_extension"):
        tables = [table for table in KNOWLEDGE.gpu.arch_names if table.reader == reader]
        assert tables[0].first <= KNOWLEDGE.eras[0].first
        assert all(table.source.startswith("v") for table in tables)


def test_a_nightly_entry_reads_names_as_the_release_its_ref_tags():
    """A ref v2.6.0 builds 2.6.0, whose CMake makes Blackwell 10.0 (v2.6.0 select_compute_arch.cmake lines
    233-235), which CUDA 12.8 builds; a branch reads them as the newest release read, whose Blackwell is
    10.0;12.0 (v2.14.0 lines 248-250), which CUDA 12.4 does not build."""
    import tomllib

    from pytorch_winbuild.nightly.matrix import parse_matrix

    data = tomllib.loads((HOSTS_DIR.parent / "nightly.toml").read_text(encoding="utf-8"))
    data["entry"][0].update(cuda="12.8", arch_list="Blackwell", ref="v2.6.0")
    assert dict(parse_matrix(data, "nightly.toml", KNOWLEDGE).entries[0].plan_options)["arch_list"] == "Blackwell"
    data["entry"][0].update(cuda="12.4", ref="main")
    with pytest.raises(ConfigurationError) as error:
        parse_matrix(data, "nightly.toml", KNOWLEDGE)
    assert "Blackwell → 10.0;12.0" in error.value.paragraph()
