"""What pytorch-winbuild writes, against the seeds' own words (tests/fixtures/seeds, copied unchanged).

The expected values here are read out of the seed documents at test time, not typed from the code's
output: seed 002's build recipe (the x86_x64 Cross Tools prompt's vcvars script and every `set`
line), seed 001's MKL/MAGMA download and the `set` lines after it, and the error lines the seeds
quote, which the hand-written log excerpts of tests/diagnosis/diagnosis_logs.py cite.

The machine is the seeds' classic one, build_config/hosts/vs2015-vs2017-cuda80-cuda90.json (VS 2015
and VS 2017, CUDA 8.0 and 9.0, clcache), planned for PyTorch 0.4.1. Where pytorch-winbuild departs
from the seeds on purpose, the test says so and names the later source it follows.
"""

from __future__ import annotations

import ntpath
import re
import subprocess
import sys
from functools import cache
from pathlib import Path, PureWindowsPath

import pytest
from support import HOSTS_DIR, plan_options

from pytorch_winbuild.deps.cache import deps_dir
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.faces.render import render_bat
from pytorch_winbuild.facts.model import Facts, load_facts
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.request import PlanRequest

SEEDS = Path(__file__).resolve().parent / "fixtures" / "seeds"
FAQ = "001_991c4ba4573d1a88"  # the official Windows FAQ: MKL/MAGMA, Ninja
RECIPE = "002_86d5edfe22461635"  # building master on Windows: vcvars, every `set` line
MACHINE = HOSTS_DIR / "vs2015-vs2017-cuda80-cuda90.json"
KNOWLEDGE = load_knowledge()


@cache
def seed(name: str) -> str:
    return (SEEDS / f"{name}.txt").read_text(encoding="utf-8")


@cache
def seed_sets(name: str) -> tuple[tuple[str, str, str], ...]:
    """Every `set NAME=VALUE` (or `set "NAME=VALUE"`) line of a seed as (comment above it, NAME, VALUE).

    The value as the seed prints it, less a trailing `# ...` remark and blanks; the markdown's `\\\\` is `\\`.
    """
    found = []
    comment = ""
    for line in seed(name).splitlines():
        text = line.strip()
        if text.startswith("#"):
            comment = text
            continue
        match = re.match(r'set\s+"?([A-Za-z_][A-Za-z0-9_]*)=(.*?)"?\s*(?:#.*)?$', text)
        if match:
            found.append((comment, match.group(1), match.group(2).strip().replace("\\\\", "\\")))
    return tuple(found)


def seed_value(name: str, variable: str, comment: str = "") -> str:
    """The one value seed `name` gives `variable` (under a comment holding `comment`, when given)."""
    values = [value for above, key, value in seed_sets(name) if key == variable and comment in above]
    assert len(values) == 1, (variable, comment, values)
    return values[0]


def seed_archive(prefix: str) -> str:
    """The archive file name seed 001 downloads from PyTorch's bucket, with its own CUDA_PREFIX filled in."""
    (url,) = re.findall(rf"https://s3\.amazonaws\.com/ossci-windows/({prefix}[^ ]*?\.7z)", seed(FAQ))
    return url.replace("%CUDA_PREFIX%", seed_value(FAQ, "CUDA_PREFIX"))


def machine() -> Facts:
    return load_facts(MACHINE)


def written_bat(cuda: str, generator: str = "auto") -> tuple[str, dict[str, str]]:
    """The .bat `invoke env --host MACHINE --format bat` writes: its vcvars call line and its `set` values.
    With Ninja, the seed's clcache; the Visual Studio generator takes cl.exe from the toolset, never from CC."""
    facts = machine()
    plan = make_plan(
        PlanRequest(
            plan_options(
                cuda=cuda,
                pytorch_version="0.4.1",
                generator=generator,
                compiler_cache="none" if generator == "vs" else "clcache",
            ),
            locate_archive=lambda archive: (str(deps_dir(PureWindowsPath(facts.cache_dir), archive)), False),
        ),
        facts,
        KNOWLEDGE,
    )
    text = render_bat(plan)
    (call,) = [line[: line.index(" >")] for line in text.splitlines() if line.startswith("call ")]
    values = {}
    for line in text.splitlines():
        match = re.fullmatch(r'set "([^=]+)=(.*)"', line)
        if match:
            values[match.group(1)] = match.group(2).replace("%%", "%")
    return call, values


def expand(value: str, variables: dict[str, str]) -> str:
    """A seed's value with %NAME% replaced from `variables` (the ones not given stay as written)."""
    return re.sub(r"%([A-Za-z0-9_]+)%", lambda m: variables.get(m.group(1), m.group(0)), value)


def installer_variables(facts: Facts) -> dict[str, str]:
    """What the installers set on that machine: NVIDIA's CUDA_PATH_V<major>_<minor> for each CUDA, and
    VS 2015's VS140COMNTOOLS = <install>\\Common7\\Tools\\ (Microsoft's layout)."""
    variables = {cuda.env_var: cuda.path for cuda in facts.cuda if cuda.env_var}
    (vs2015,) = [vs for vs in facts.visual_studio if vs.product_line == "2015"]
    variables["VS140COMNTOOLS"] = vs2015.path + "\\Common7\\Tools\\"
    return variables


def target(vcvars_arch: str) -> str:
    """The target of a vcvarsall architecture argument (Microsoft's spellings: host_target, or one name for both)."""
    return {"amd64": "x64", "x64": "x64", "x86": "x86"}[vcvars_arch.rsplit("_", 1)[-1]]


def test_the_seed_recipe_is_read_whole():
    """The parser above finds every variable seeds 001 and 002 set (guards the expected values below)."""
    assert {key for _, key, _ in seed_sets(RECIPE)} == {
        "NO_CUDA",
        "CUDA_PATH",
        "CMAKE_GENERATOR",
        "PREBUILD_COMMAND",
        "PREBUILD_COMMAND_ARGS",
        "USE_CLCACHE",
        "CC",
        "CXX",
        "LIB",
        "PYTHON_VERSION",
        "DISTUTILS_USE_SDK",
    }
    assert {key for _, key, _ in seed_sets(FAQ)} == {
        "CUDA_PREFIX",
        "CMAKE_INCLUDE_PATH",
        "LIB",
        "MAGMA_HOME",
        "CMAKE_GENERATOR",
    }
    assert seed_archive("mkl_") == "mkl_2018.2.185.7z"
    assert seed_archive("magma_") == "magma_2.4.0_cuda80_release.7z"


@pytest.mark.parametrize("cuda", ["8.0", "9.0"])
def test_the_bat_sets_the_seed_recipe_for_cuda(cuda: str):
    """Seed 002's variables for a CUDA build with Ninja and clcache, seed 001's MKL/MAGMA ones, by value."""
    facts = machine()
    call, values = written_bat(cuda)
    installed = installer_variables(facts)
    major, minor = cuda.split(".")

    # "set CUDA_PATH=%CUDA_PATH_V8_0%" / "%CUDA_PATH_V9_0%": the folder NVIDIA's installer recorded for that release
    (chosen,) = [v for _, key, v in seed_sets(RECIPE) if key == "CUDA_PATH" and v == f"%CUDA_PATH_V{major}_{minor}%"]
    assert values["CUDA_PATH"] == expand(chosen, installed) != chosen
    # "你也可以使用 Ninja 来加速 CUDA 的编译 ... set CMAKE_GENERATOR=Ninja"
    assert values["CMAKE_GENERATOR"] == seed_value(RECIPE, "CMAKE_GENERATOR", "Ninja") == "Ninja"
    # "如果需要多次编译，可以使用 clcache ..." and "如果你同时安装了 VS 2015 和 2017"
    for variable in ("CC", "CXX", "DISTUTILS_USE_SDK"):
        assert values[variable] == seed_value(RECIPE, variable), variable
    # The seed's USE_CLCACHE=1 switches on clcache 4.2.0's distutils hook (its clcache.pth runs clcache/monkey.py,
    # which reads USE_CLCACHE) in the Python clcache is installed in; the build's venv holds no clcache, so the
    # plan leaves it out and routes the compiles through CC/CXX, as the seed's next two lines do.
    assert seed_value(RECIPE, "USE_CLCACHE") == "1" and "USE_CLCACHE" not in values
    assert "NO_CUDA" not in values or values["NO_CUDA"] == ""  # a CUDA build: seed 002's NO_CUDA=1 is for CPU only

    # Seed 001 extracts mkl_2018.2.185.7z into mkl\ and magma_2.4.0_<prefix>_release.7z into magma\ of %cd%;
    # pytorch-winbuild extracts each archive into a folder of its cache named after the archive.
    mkl = PureWindowsPath(values["CMAKE_INCLUDE_PATH"]).parent
    magma = PureWindowsPath(values["MAGMA_HOME"])
    assert mkl.name == seed_archive("mkl_").removesuffix(".7z")
    assert magma.name == seed_archive("magma_").removesuffix(".7z").replace("cuda80", f"cuda{major}{minor}")
    for variable in ("CMAKE_INCLUDE_PATH", "LIB", "MAGMA_HOME"):
        recipe = seed_value(FAQ, variable).replace("%cd%\\mkl", str(mkl)).replace("%cd%\\magma", str(magma))
        assert values[variable] == recipe, variable

    # "x86_x64 Cross Tools Command Prompt for VS 2017 ... C:\Program Files (x86)\Microsoft Visual
    # Studio\2017\Enterprise\VC\Auxiliary\Build\vcvarsx86_amd64.bat": the same folder of this machine's
    # VS 2017 (Community, not Enterprise). pytorch-winbuild calls vcvarsall.bat there with the 64-bit host
    # tools, as PyTorch v0.4.1's README does (`vcvarsall.bat x64 -vcvars_ver=14.11`); the target is x64 either way.
    (shown,) = re.findall(r"`(C:\\Program Files \(x86\)\\Microsoft Visual Studio\\2017\\[^`]*?\.bat)`", seed(RECIPE))
    (vs2017,) = [vs for vs in facts.visual_studio if vs.product_line == "2017"]
    folder = ntpath.dirname(shown).replace("\\2017\\Enterprise", "\\2017\\" + vs2017.product)
    script, *args = re.fullmatch(r'call "([^"]+)"((?: \S+)*)', call).groups()
    args = args[0].split()
    assert ntpath.dirname(script) == folder and ntpath.basename(script) == "vcvarsall.bat"
    assert target(args[0]) == target(ntpath.basename(shown).removeprefix("vcvars").removesuffix(".bat")) == "x64"
    if cuda == "9.0":
        # CUDA 9.0.176's host_config.h: `#if _MSC_VER < 1600 || _MSC_VER > 1911` (build_config/hosts/README.md);
        # toolset 14.N is _MSC_VER 1900 + N, so the newest installed toolset it accepts is 14.11.
        newest = max(
            (t for t in vs2017.toolsets if 1900 + int(t.split(".")[1]) <= 1911), key=lambda t: int(t.split(".")[1])
        )
        assert args[1:] == ["-vcvars_ver=" + ".".join(newest.split(".")[:2])] == ["-vcvars_ver=14.11"]


def test_cuda8_with_ninja_enters_vs2015_through_the_seeds_prebuild_command():
    """Seed 002: "如果使用 Ninja 为 CUDA 8 进行编译": PREBUILD_COMMAND=%VS140COMNTOOLS%\\..\\..\\VC\\vcvarsall.bat."""
    _, values = written_bat("8.0")
    installed = installer_variables(machine())
    assert values["PREBUILD_COMMAND"] == ntpath.normpath(expand(seed_value(RECIPE, "PREBUILD_COMMAND"), installed))
    # The seed passes x86_amd64 (32-bit host, 64-bit target); PyTorch v0.4.1's README passes x64: same target.
    assert target(values["PREBUILD_COMMAND_ARGS"]) == target(seed_value(RECIPE, "PREBUILD_COMMAND_ARGS")) == "x64"


@pytest.mark.parametrize(("cuda", "comment"), [("8.0", "CUDA 8"), ("9.0", "CUDA 9 / CPU"), ("cpu", "CUDA 9 / CPU")])
def test_the_visual_studio_generator_is_the_seeds_name(cuda: str, comment: str):
    """Seed 002: "对于 CUDA 8 的编译" → Visual Studio 14 2015 Win64; "对于 CUDA 9 / CPU 的编译" → ... 15 2017 Win64."""
    _, values = written_bat(cuda, generator="vs")
    assert values["CMAKE_GENERATOR"] == seed_value(RECIPE, "CMAKE_GENERATOR", comment)


def test_a_cpu_build_sets_the_seeds_no_cuda():
    """Seed 002: "如果不需要 CUDA 支持: set NO_CUDA=1"; and no MAGMA (seed 001's MAGMA is per CUDA release)."""
    _, values = written_bat("cpu")
    assert values["NO_CUDA"] == seed_value(RECIPE, "NO_CUDA") == "1"
    assert "MAGMA_HOME" not in values


# ---------------------------------------------------------------- the log excerpts that cite a seed


def _quoted(line: str) -> str:
    """A line as a seed quotes it: blanks collapsed, curly apostrophes straightened."""
    return re.sub(r"\s+", " ", line.replace("’", "'")).strip()


def test_log_excerpts_that_cite_a_seed_quote_it():
    """Each excerpt of diagnosis_logs.py named "(seed NNN)" carries a line (its trigger, or another) that
    the seed quotes; the one whose seed gives only the cause (a blank after `set`) is checked for that."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "diagnosis"))
    from diagnosis_logs import CASES

    seeds = {path.name[:3]: _quoted(path.read_text(encoding="utf-8")) for path in SEEDS.glob("0*.txt")}
    cited = [(case, match.group(1)) for case in CASES if (match := re.search(r"\(seed (\d{3})\)", case.name))]
    assert len(cited) >= 15
    for case, number in cited:
        if case.rule == "cmake-generator-name-invalid":
            # "在set命令后请务必不要多打空格或Tab": no blank or tab after a set command
            assert "请务必不要多打空格或Tab" in seeds[number]
            assert "Could not create named generator Ninja " in case.text  # the blank the seed warns of
            continue
        lines = [case.trigger, *(line for line in case.text.splitlines() if len(line.strip()) > 15)]
        assert any(_quoted(line) in seeds[number] for line in lines), f"{case.name}: no line of it is in seed {number}"


@pytest.mark.build
@pytest.mark.parametrize("module", ["CMakeDetermineCCompiler.cmake", "CMakeDetermineCXXCompiler.cmake"])
def test_the_visual_studio_generator_reads_no_cc_so_the_seeds_clcache_needs_ninja(module: str):
    """The seed's `set CC=clcache` reaches CMake only where CMake reads CC: the installed CMake's own module
    shows the Visual Studio branch empty, ENV{CC}/ENV{CXX} read only in the branch of the other generators.
    So a Visual Studio plan of the seed's era leaves clcache out, and asking for it is refused."""
    root = subprocess.run(
        ["cmake", "-P", "/dev/stdin"], input='message("${CMAKE_ROOT}")', capture_output=True, text=True, check=True
    ).stderr.strip()
    text = (Path(root) / "Modules" / module).read_text(encoding="utf-8")
    visual_studio = re.search(
        r'^if\(\$\{CMAKE_GENERATOR\} MATCHES "Visual Studio"\)\n(.*?)^(?:elseif|else)\b', text, re.S | re.M
    )
    assert visual_studio is not None and visual_studio.group(1).strip() == ""
    assert text.index("$ENV{C") > visual_studio.end()
    facts = machine()
    plan = make_plan(PlanRequest(plan_options(cuda="9.0", pytorch_version="0.4.1", generator="vs")), facts, KNOWLEDGE)
    assert "clcache" in facts.tools and plan.compiler_cache == "none"
    assert not {"CC", "CXX", "USE_CLCACHE"} & set(plan.final_env())
    with pytest.raises(ConfigurationError, match=r"runs the toolset's cl\.exe whatever CC and CXX say"):
        make_plan(
            PlanRequest(plan_options(cuda="9.0", pytorch_version="0.4.1", generator="vs", compiler_cache="clcache")),
            facts,
            KNOWLEDGE,
        )
