"""Every shipped diagnosis rule against logs printed the way the real tools print them.

Each rule must fire on its own excerpts (reporting the right line), no other rule may fire on
them, and no rule may fire on a clean, successful log. Some excerpts are produced for real here
by running Python: the import and multiprocessing errors are the interpreter's own output.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from diagnosis_logs import CASES, CLEAN_LOGS, Case

from pytorch_winbuild.diagnosis.literals import MIN_LITERAL_CHARS, required_literals
from pytorch_winbuild.diagnosis.rules import PHASES, default_rules
from pytorch_winbuild.diagnosis.triage import diagnose_text

RULES = {rule.id: rule for rule in default_rules()}


def fired(text: str) -> dict[str, int]:
    """Rule id → the line number it reports."""
    return {match.rule.id: match.line.number for match in diagnose_text(text).matches}


def test_every_rule_has_a_realistic_case() -> None:
    assert set(RULES) == {case.rule for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=[f"{case.rule}: {case.name}" for case in CASES])
def test_rule_fires_on_its_log_and_no_other_rule_does(case: Case) -> None:
    result = diagnose_text(case.text)
    assert [match.rule.id for match in result.matches] == [case.rule]
    match = result.matches[0]
    assert case.trigger in match.line.text
    assert case.text.split("\n")[match.line.number - 1].rstrip() == match.line.text


@pytest.mark.parametrize("name", sorted(CLEAN_LOGS))
def test_no_rule_fires_on_a_clean_log(name: str) -> None:
    result = diagnose_text(CLEAN_LOGS[name])
    assert result.matches == ()
    assert result.first_error is None


def test_the_faq_problems_of_the_seeds_are_all_covered() -> None:
    """The issue's list, by the words users see, each explained by some rule."""
    faq_lines = {
        "PackagesNotFoundError on win-32 channels": "  - https://conda.anaconda.org/pytorch/win-32",
        "DLL load failed": "ImportError: DLL load failed: The specified module could not be found.",
        "cannot run %1": "ImportError: DLL load failed: The operating system cannot run %1.",
        "torch._C": "ModuleNotFoundError: No module named 'torch._C'",
        "torch": "ModuleNotFoundError: No module named 'torch'",
        "compressed file": "CondaError: EOFError('Compressed file ended before the end-of-stream marker was reached',)",
        "freeze_support": "        An attempt has been made to start a new process before the",
        "shared file mapping 1455": "Couldn't open shared file mapping: <torch_1_2>, error code: <1455>",
        "CUDA IPC 63": "THCudaCheck FAIL file=x line=1 error=63 : OS call failed or operation not supported on this OS",
        "no kernel image": "RuntimeError: CUDA error: no kernel image is available for execution on the device",
        "CFFI state": (
            "my_lib.obj : error LNK2019: unresolved external symbol state referenced in function "
            "my_lib_add_forward_cuda"
        ),
        "MAGMA": "RuntimeError: MAGMA getrf : Argument -3 : illegal value",
        "NCCL": "RuntimeError: Distributed package doesn't have NCCL built in",
        "numpy": "ImportError: numpy.core.multiarray failed to import",
        "unsupported VS": (
            "host_config.h(153): fatal error C1189: #error:  -- unsupported Microsoft Visual Studio version! "
            "Only the versions between 2017 and 2022 (inclusive) are supported!"
        ),
        "toolset not found": "[ERROR:vcvars.bat] Toolset directory for version '14.11' was not found.",
        "heap": "c1xx : fatal error C1060: compiler is out of heap space",
        "toolset mismatch": "Does not match the toolset used previously: v140",
    }
    for what, line in faq_lines.items():
        assert fired(line), f"no rule explains {what}: {line}"


@pytest.mark.parametrize(
    "line",
    [
        # a plain C1083 (a header that does not exist) is not a path-length problem
        r"C:\pytorch\torch\csrc\cuda\Module.cpp(3): fatal error C1083: Cannot open include file: 'cudnn.h': No such "
        r"file or directory",
        # other unresolved symbols are not the CFFI `state`
        "module.obj : error LNK2001: unresolved external symbol state_dict_hook",
        # other missing modules are not torch
        "ModuleNotFoundError: No module named 'torchvision'",
        # FindCUDA's status line on a CPU build is not an error
        "-- Could NOT find CUDA (missing: CUDA_TOOLKIT_ROOT_DIR CUDA_NVCC_EXECUTABLE)",
        # a broken pipe outside multiprocessing (output piped into `more`)
        'Traceback (most recent call last):\n  File "tools/print_flags.py", line 12, in <module>\n    '
        "print(line)\nBrokenPipeError: [Errno 32] Broken pipe",
        # a decoding error in the user's own data loading, nowhere near a build
        'Traceback (most recent call last):\n  File "prepare.py", line 3, in <module>\n    text = '
        "open('labels.csv').read()\nUnicodeDecodeError: 'utf-8' codec can't decode byte 0xb0 in position 7: invalid "
        "start byte",
        # a conda conflict that has nothing to do with vc
        "UnsatisfiableError: The following specifications were found to be in conflict:\n"
        "  - python=3.6\n"
        "  - pytorch-nightly",
    ],
)
def test_near_misses_do_not_fire(line: str) -> None:
    assert fired(line) == {}


def test_preceded_by_looks_only_within_its_window() -> None:
    rule = RULES["dataloader-broken-pipe"]
    pipe = "BrokenPipeError: [Errno 32] Broken pipe"
    near = "\n".join(
        [
            '  File "C:\\Anaconda3\\lib\\multiprocessing\\reduction.py", line 60, in dump',
            *["x"] * (rule.within_lines - 1),
            pipe,
        ]
    )
    far = "\n".join(
        [
            '  File "C:\\Anaconda3\\lib\\multiprocessing\\reduction.py", line 60, in dump',
            *["x"] * rule.within_lines,
            pipe,
        ]
    )
    assert fired(near) == {"dataloader-broken-pipe": rule.within_lines + 1}
    assert fired(far) == {}


def test_match_counts_every_matching_line() -> None:
    case = next(case for case in CASES if case.rule == "download-truncated")
    (match,) = diagnose_text(case.text).matches
    assert (match.line.number, match.count) == (3, 2)


def test_every_pattern_has_a_fast_literal() -> None:
    """The scanner's speed rests on it: a pattern without one is searched as a regex over the whole log."""
    for rule in RULES.values():
        for pattern in rule.patterns + rule.preceded_by:
            literals = required_literals(pattern.pattern)
            assert literals is not None, (
                f"rule '{rule.id}': pattern {pattern.pattern!r} has no plain run of {MIN_LITERAL_CHARS}+ characters"
            )


def test_rules_carry_advice_and_sources() -> None:
    for rule in RULES.values():
        assert rule.phase in PHASES
        assert len(rule.title) <= 110 and "\n" not in rule.title
        assert len(rule.explanation) > 60 and len(rule.fix) > 30
        assert (
            "seed" in rule.source
            or "#" in rule.source
            or "Microsoft Learn" in rule.source
            or "NVIDIA" in rule.source
            or " tag " in rule.source
            or "documentation" in rule.source
            or "PyTorch" in rule.source
        )


# -- excerpts produced for real by the interpreter ---------------------------------------------


def run_python(code: str, cwd: Path, *flags: str) -> str:
    """stderr of a fresh interpreter, as a user's console shows it."""
    done = subprocess.run([sys.executable, *flags, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    return done.stderr


def test_real_no_module_named_torch(tmp_path: Path) -> None:
    # -I -S: no site-packages, so whatever is installed here, `torch` is not importable.
    assert set(fired(run_python("import torch", tmp_path, "-I", "-S"))) == {"no-module-torch"}


def test_real_torch_py_shadowing(tmp_path: Path) -> None:
    (tmp_path / "torch.py").write_text("print('my first script')\n")
    assert set(fired(run_python("import torch._C", tmp_path))) == {"torch-py-shadowing"}
    (tmp_path / "torch.py").write_text("import torch\nx = torch.Tensor\n")
    assert set(fired(run_python("import torch", tmp_path))) == {"torch-py-shadowing"}


def test_real_source_tree_without_compiled_extension(tmp_path: Path) -> None:
    """Python started in a source checkout imports its torch/ folder, whose _C is not built."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("from torch._C import *\n")
    assert set(fired(run_python("import torch", tmp_path))) == {"torch-c-source-tree"}


def test_real_spawn_without_main_guard(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            import multiprocessing as mp
            mp.set_start_method("spawn", force=True)  # what Windows always does

            def work():
                pass

            worker = mp.Process(target=work)
            worker.start()
            worker.join()
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    result = diagnose_text(done.stdout + done.stderr)
    assert "multiprocessing-freeze-support" in {match.rule.id for match in result.matches}
    assert result.first_error is not None and result.first_error.kind == "traceback"
    assert result.first_error.summary.text.startswith("RuntimeError: An attempt has been made to start a new process")


# -- the fix for the machine the log comes from ---------------------------------------------------

COMMAND_V = re.compile(r"`(command -v \w+)`")


def test_linux_fixes_name_no_windows_command_or_installer_component() -> None:
    """`where` is cmd's; 'Visual Studio Integration' is a component of CUDA's Windows installer only."""
    posix = [rule for rule in RULES.values() if rule.fix_posix]
    assert {"no-module-torch", "cuda-not-found", "nvtx-missing"} <= {rule.id for rule in posix}
    for rule in posix:
        assert "`where " not in rule.fix_posix and "Visual Studio" not in rule.fix_posix, rule.id
        assert rule.fix_posix != rule.fix


def test_the_posix_fix_for_no_module_torch_runs_in_sh_and_names_the_python_that_runs(tmp_path: Path) -> None:
    """Each command the Linux fix quotes, run by the real sh with a folder of programs first on PATH, prints the
    program of that folder: what the fix tells the user to compare."""
    commands = COMMAND_V.findall(RULES["no-module-torch"].fix_posix or "")
    assert [command.split()[-1] for command in commands] == ["python", "pip", "conda"]
    for name in ("python", "pip", "conda"):
        program = tmp_path / name
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    for command in commands:
        done = subprocess.run(
            ["sh", "-c", command], env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, capture_output=True, text=True
        )
        assert (done.returncode, done.stdout) == (0, f"{tmp_path / command.split()[-1]}\n")


@pytest.mark.parametrize(("posix", "command"), [(True, "command -v python"), (False, "where python"), (None, None)])
def test_a_match_carries_the_fix_of_the_machine_it_comes_from(posix: bool | None, command: str | None) -> None:
    result = diagnose_text("ModuleNotFoundError: No module named 'torch'\n", posix=posix)
    [match] = result.to_dict()["matches"]
    text = result.to_text()
    if command is not None:
        assert f"`{command}`" in match["fix"] and "fix_posix" not in match
        assert f"`{command}`" in text and "Fix on" not in text
    else:  # `invoke diagnose` of a log from any machine: both, each named
        assert "`where python`" in match["fix"] and "`command -v python`" in match["fix_posix"]
        assert "Fix on Windows: Run `where python`" in text and "Fix on Linux: Run `command -v python`" in text
