"""First-error selection and the mechanics of triage: blocks, context, chunks, encodings, reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from diagnosis_logs import CASES, CLEAN_LOGS, PYTORCH_NINJA_PREFIX

from pytorch_winbuild.diagnosis import chunks
from pytorch_winbuild.diagnosis.blocks import MAX_BLOCK_LINES, MAX_BLOCK_SCAN, MAX_LINE_CHARS, classify
from pytorch_winbuild.diagnosis.model import LogLine
from pytorch_winbuild.diagnosis.triage import diagnose_text, triage_log
from pytorch_winbuild.errors import ConfigurationError

TWO_FAILURES = (
    PYTORCH_NINJA_PREFIX
    + r"""[2806/4567] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/Activation.cpp.obj
[2807/4567] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/BatchLinearAlgebra.cpp.obj
FAILED: caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/BatchLinearAlgebra.cpp.obj
C:\PROGRA~2\MICROS~1\2017\COMMUN~1\VC\Tools\MSVC\1411~1.255\bin\HostX64\x64\cl.exe  /nologo /TP -DAT_PARALLEL_OPENMP=1 /showIncludes /Focaffe2\CMakeFiles\torch_cpu.dir\__\aten\src\ATen\native\BatchLinearAlgebra.cpp.obj /FdTARGET_COMPILE_PDB /FS -c C:\pytorch\aten\src\ATen\native\BatchLinearAlgebra.cpp
BatchLinearAlgebra.cpp
C:\pytorch\aten\src\ATen\native\BatchLinearAlgebra.cpp(812): error C2065: 'magma_queue': undeclared identifier
C:\pytorch\aten\src\ATen\native\BatchLinearAlgebra.cpp(813): error C3861: 'magmaLu': identifier not found
[2808/4567] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/Blas.cpp.obj
FAILED: caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/Blas.cpp.obj
C:\PROGRA~2\MICROS~1\2017\COMMUN~1\VC\Tools\MSVC\1411~1.255\bin\HostX64\x64\cl.exe  /nologo /TP /Focaffe2\CMakeFiles\torch_cpu.dir\__\aten\src\ATen\native\Blas.cpp.obj -c C:\pytorch\aten\src\ATen\native\Blas.cpp
Blas.cpp
C:\pytorch\aten\src\ATen\native\Blas.cpp(40): error C2039: 'gemm_stub': is not a member of 'at::native'
ninja: build stopped: subcommand failed.
Traceback (most recent call last):
  File "setup.py", line 719, in <module>
    build_deps()
  File "C:\pytorch\tools\build_pytorch_libs.py", line 62, in build_caffe2
    cmake.build(my_env)
subprocess.CalledProcessError: Command '['cmake', '--build', '.', '--target', 'install', '--config', 'Release', '--', '-j', '8']' returned non-zero exit status 1.
"""  # noqa: E501 - the lines as cl.exe and setup.py print them
)


def line_of(text: str, needle: str) -> int:
    return next(number for number, line in enumerate(text.split("\n"), 1) if needle in line)


def test_the_first_failed_block_wins_with_the_compiler_error_beneath_it() -> None:
    error = diagnose_text(TWO_FAILURES).first_error
    assert error is not None
    first_failed = line_of(
        TWO_FAILURES, "FAILED: caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/BatchLinearAlgebra"
    )
    assert (error.kind, error.line_number, error.end_line_number) == ("ninja", first_failed, first_failed + 4)
    assert error.summary.text.endswith("error C2065: 'magma_queue': undeclared identifier")
    assert error.summary.number == first_failed + 3
    assert [line.text for line in error.lines][2] == "BatchLinearAlgebra.cpp"
    assert [line.number for line in error.context_before] == [first_failed - 3, first_failed - 2, first_failed - 1]
    assert error.context_after[0].text.startswith("[2808/4567] Building CXX object")
    assert "Blas.cpp(40)" not in "".join(line.text for line in error.lines)


def test_an_early_warning_with_error_in_its_file_name_does_not_win() -> None:
    log = (
        "-- Looking for strerror_r - found\n"
        "[1/9] Building CXX object c10/CMakeFiles/c10.dir/util/error_handler.cpp.obj\n"
        r"C:\pytorch\c10\util\error_handler.cpp(10): warning C4244: 'argument': conversion from 'double' to "
        r"'float', possible loss of data"
        "\n"
        "/src/pytorch/c10/util/error.cpp:3:5: warning: unused variable 'errors' [-Wunused-variable]\n"
        r"C:\pytorch\c10/util/Exception.h(29): warning C4251: 'c10::Error::msg_stack_': class needs to have "
        r"dll-interface"
        "\n"
        "[2/9] Linking CXX shared library bin\\c10.dll\n"
        "LINK : fatal error LNK1104: cannot open file 'bin\\c10.dll'\n"
    )
    error = diagnose_text(log).first_error
    assert error is not None
    assert (error.kind, error.line_number) == ("link", 7)


def test_cmake_error_block_keeps_its_message_and_call_stack() -> None:
    case = next(case for case in CASES if case.name == "FindCUDA fails")
    error = diagnose_text(case.text).first_error
    assert error is not None and error.kind == "cmake"
    assert [line.number for line in error.lines] == list(range(2, 9))
    assert error.lines[-1].text == "  CMakeLists.txt:12 (find_package)"
    assert error.summary.text.endswith(
        "(message): Could NOT find CUDA (missing: CUDA_TOOLKIT_ROOT_DIR CUDA_NVCC_EXECUTABLE"
    )
    assert error.context_after[-1].text == "-- Configuring incomplete, errors occurred!"


def test_cmake_error_without_indented_message_is_one_line() -> None:
    case = next(case for case in CASES if case.name == "generator changed (pytorch/pytorch#30910)")
    error = diagnose_text(case.text).first_error
    assert error is not None
    assert [line.text for line in error.lines] == ["CMake Error: Error: generator : Ninja"]
    assert error.context_after[0].text.startswith("Does not match the generator used previously")


def test_python_traceback_whole_block_and_final_exception() -> None:
    log = (
        "Microsoft Windows [Version 10.0.17134.48]\n"
        ">>> import torch\n"
        "Traceback (most recent call last):\n"
        '  File "<stdin>", line 1, in <module>\n'
        '  File "C:\\Anaconda3\\lib\\site-packages\\torch\\__init__.py", line 78, in <module>\n'
        "    from torch._C import *\n"
        "ImportError: DLL load failed: The specified module could not be found.\n"
        ">>> exit()\n"
    )
    error = diagnose_text(log).first_error
    assert error is not None
    assert (error.kind, error.line_number, error.end_line_number) == ("traceback", 3, 7)
    assert error.lines[3].text == "    from torch._C import *"
    assert error.summary == LogLine(7, "ImportError: DLL load failed: The specified module could not be found.")
    assert [line.text for line in error.context_after] == [">>> exit()"]


def test_chained_tracebacks_report_the_first_one() -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "C:\\Python311\\Lib\\site-packages\\torch\\utils\\cpp_extension.py", line 2104, in _run_ninja_build\n'
        "    subprocess.run(\n"
        "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.\n"
        "\n"
        "The above exception was the direct cause of the following exception:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "setup.py", line 12, in <module>\n'
        "RuntimeError: Error compiling objects for extension\n"
    )
    error = diagnose_text(log).first_error
    assert error is not None
    assert error.end_line_number == 4
    assert error.summary.text.startswith("subprocess.CalledProcessError: Command '['ninja', '-v']'")


def test_pip_indented_output_keeps_block_structure() -> None:
    """pip indents a failed build's output by six spaces; blocks are measured from their header."""
    log = (
        "  × python setup.py develop did not run successfully.\n"
        "  │ exit code: 1\n"
        "  ╰─> [6 lines of output]\n"
        "      Traceback (most recent call last):\n"
        '        File "<string>", line 2, in <module>\n'
        '        File "C:\\src\\ext\\setup.py", line 4, in <module>\n'
        "          from torch.utils.cpp_extension import BuildExtension\n"
        "      ModuleNotFoundError: No module named 'torch'\n"
        "      [end of output]\n"
    )
    result = diagnose_text(log)
    assert result.first_error is not None
    assert (result.first_error.kind, result.first_error.end_line_number) == ("traceback", 8)
    assert result.first_error.summary.text == "      ModuleNotFoundError: No module named 'torch'"
    assert [match.rule.id for match in result.matches] == ["no-module-torch"]


def test_msbuild_errors_from_the_visual_studio_generator() -> None:
    log = (
        "  Generating Code...\n"
        r"  C:\pytorch\aten\src\ATen\native\Foo.cpp(12): error C2065: 'x': undeclared identifier "
        r"[C:\pytorch\build\caffe2\torch_cpu.vcxproj]"
        "\n"
        r"  C:\pytorch\aten\src\ATen\native\Foo.cpp(13): error C2065: 'y': undeclared identifier "
        r"[C:\pytorch\build\caffe2\torch_cpu.vcxproj]"
        "\n"
        "    12 Error(s)\n"
    )
    error = diagnose_text(log).first_error
    assert error is not None
    assert (error.kind, error.line_number) == ("msvc", 2)
    assert error.summary.text.endswith("[C:\\pytorch\\build\\caffe2\\torch_cpu.vcxproj]")


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("FAILED: [code=1] CMakeFiles/demo.dir/bad.cpp.o ", "ninja"),
        ("CMake Error at CMakeLists.txt:5 (message):", "cmake"),
        ("Traceback (most recent call last):", "traceback"),
        ("[ERROR:vcvars.bat] Toolset directory for version '14.11' was not found.", "vcvars"),
        (r"C:\x\Foo.cpp(12): error C2065: 'x': undeclared identifier", "msvc"),
        (r"C:\x\Foo.cpp(12,5): fatal error C1083: Cannot open include file: 'x.h': No such file or directory", "msvc"),
        ("cl : Command line error D8021 : invalid numeric argument '/Wextra'", "msvc"),
        ("NMAKE : fatal error U1077: 'cl.exe' : return code '0x2'", "msvc"),
        ("LINK : fatal error LNK1181: cannot open input file 'x64.obj'", "link"),
        ("foo.cpp:(.text+0x5): undefined reference to `bar()'", "link"),
        ("/usr/bin/ld: cannot find -lnvToolsExt: No such file or directory", "link"),
        ("nvcc fatal   : Unsupported gpu architecture 'compute_20'", "nvcc"),
        (r"C:/pytorch/aten/src/ATen/native/cuda/Loss.cu(12): error: identifier \"x\" is undefined", "compiler"),
        ("/src/demo/bad.cpp:3:10: error: 'undeclared_thing' was not declared in this scope", "compiler"),
        ("collect2: error: ld returned 1 exit status", "tool"),
        ("error: command 'C:\\\\Program Files\\\\nvcc.exe' failed with exit code 2", "tool"),
        ("ERROR: Could not find a version that satisfies the requirement torch==0.4.0", "tool"),
        ("ninja: fatal: CreateProcess: The filename or extension is too long.", "tool"),
        ("'ninja' is not recognized as an internal or external command,", "shell"),
        ("bash: ninja: command not found", "shell"),
        ("make[2]: *** [CMakeFiles/demo.dir/build.make:76: demo.o] Error 1", "make"),
        ("THCudaCheck FAIL file=torch/csrc/cuda/Module.cpp line=32 error=30 : unknown error", "cuda"),
        (
            "subprocess.CalledProcessError: Command '['cmake', '--build', '.']' returned non-zero exit status 1.",
            "exception",
        ),
        ("RuntimeError:", "exception"),
        # ordinary lines
        (
            r"C:\pytorch\c10\util\error_handler.cpp(10): warning C4244: 'argument': "
            r"conversion from 'double' to 'float'",
            None,
        ),
        ("cl : Command line warning D9025 : overriding '/DNDEBUG' with '/UNDEBUG'", None),
        ("nvcc warning : The 'compute_20' architecture is deprecated", None),
        ("LINK : warning LNK4098: defaultlib 'LIBCMT' conflicts with use of other libs", None),
        ("-- Performing Test COMPILER_SUPPORTS_WERROR_FORMAT - Failed", None),
        (
            "C:\\Python311\\Lib\\site-packages\\torch\\utils\\cpp_extension.py:358: UserWarning: Error checking "
            "compiler version for cl",
            None,
        ),
        ("    raise ValueError(f'bad value {x}')", None),
        ("[12/345] Building CXX object torch/csrc/jit/error_report.cpp.obj", None),
    ],
)
def test_classify_recognises_each_tools_error_format(line: str, kind: str | None) -> None:
    assert classify(line) == kind


def composite_log() -> str:
    """Every case and every clean log one after the other: many blocks, rules and windows."""
    parts = [CLEAN_LOGS["windows-cuda-build"], *(case.text for case in CASES), *CLEAN_LOGS.values()]
    return "".join(part if part.endswith("\n") else part + "\n" for part in parts)


@pytest.mark.parametrize("chunk_bytes", [23, 256, 4096])
def test_reading_in_chunks_gives_the_same_result_as_whole_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_bytes: int
) -> None:
    """Blocks, context lines and preceded_by windows that straddle chunk boundaries."""
    text = composite_log()
    log = tmp_path / "build.log"
    log.write_text(text, encoding="utf-8")
    expected = diagnose_text(text, source=str(log)).to_dict()
    monkeypatch.setattr(chunks, "CHUNK_BYTES", chunk_bytes)
    assert triage_log(log).to_dict() == expected
    assert {match["id"] for match in expected["matches"]} == {case.rule for case in CASES}


def test_block_at_a_chunk_boundary_keeps_its_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "build.log"
    log.write_text(TWO_FAILURES, encoding="utf-8")
    start = TWO_FAILURES.index("FAILED: ")
    monkeypatch.setattr(chunks, "CHUNK_BYTES", start)  # the first chunk ends right before FAILED
    assert triage_log(log).first_error == diagnose_text(TWO_FAILURES).first_error


def test_long_lines_are_cut_and_credentials_redacted() -> None:
    command = "cl.exe /nologo " + " ".join(f"-IC:/deps/include{i}" for i in range(400))
    log = (
        "FAILED: caffe2/CMakeFiles/x.obj\n"
        f"{command}\n"
        "x.cpp\n"
        "x.cpp(1): fatal error C1083: Cannot open include file: 'y.h': No such file or directory (from https://builder:s3cr3tpass@mirror.example/pkgs)\n"
        "ninja: build stopped: subcommand failed.\n"
    )
    error = diagnose_text(log).first_error
    assert error is not None
    cut = error.lines[1].text
    assert len(cut) < MAX_LINE_CHARS + 60 and cut.endswith(f"[{len(command) - MAX_LINE_CHARS} more characters]")
    assert "s3cr3tpass" not in error.summary.text and "builder:***@mirror.example" in error.summary.text


def test_huge_blocks_are_capped() -> None:
    frames = "".join(f'  File "C:\\x\\mod{i}.py", line {i}, in f{i}\n    f{i + 1}()\n' for i in range(1500))
    log = f"Traceback (most recent call last):\n{frames}RecursionError: maximum recursion depth exceeded\nafter\n"
    error = diagnose_text(log).first_error
    assert error is not None
    assert len(error.lines) == MAX_BLOCK_LINES
    assert error.omitted_lines == MAX_BLOCK_SCAN - MAX_BLOCK_LINES
    assert error.end_line_number == MAX_BLOCK_SCAN


def test_error_on_a_last_line_without_newline() -> None:
    result = diagnose_text("configuring\nnvcc fatal   : Host compiler targets unsupported OS.")
    assert result.line_count == 2
    assert result.first_error is not None and result.first_error.line_number == 2
    assert result.first_error.context_after == ()
    assert [match.rule.id for match in result.matches] == ["cuda-unsupported-msvc"]
    assert " > 2 | nvcc fatal   : Host compiler targets unsupported OS." in result.to_text()  # nothing after the block


def test_powershell_utf16_log_with_crlf(tmp_path: Path) -> None:
    """`python setup.py install > build.log` in Windows PowerShell 5 writes UTF-16 LE with a BOM."""
    case = next(case for case in CASES if case.name == "C1060 under Ninja")
    log = tmp_path / "build.log"
    log.write_bytes(case.text.replace("\n", "\r\n").encode("utf-16"))
    result = triage_log(log)
    assert result.to_dict()["matches"] == diagnose_text(case.text).to_dict()["matches"]
    assert result.first_error is not None and result.first_error.summary.text.endswith("compiler is out of heap space")


def test_localized_msvc_output_in_the_console_code_page(tmp_path: Path) -> None:
    """Chinese MSVC writes GBK; the bytes that are not UTF-8 must not hide the error around them."""
    log = tmp_path / "build.log"
    text = (
        "[1/2] Building CXX object foo.cpp.obj\n"
        "C:\\src\\foo.cpp(12): error C2065: “x”: 未声明的标识符\n"
        "ninja: build stopped: subcommand failed.\n"
    )
    log.write_bytes(text.encode("gbk"))
    error = triage_log(log).first_error
    assert error is not None and (error.kind, error.line_number) == ("msvc", 2)
    assert "error C2065" in error.summary.text


def test_empty_log(tmp_path: Path) -> None:
    log = tmp_path / "empty.log"
    log.write_text("")
    result = triage_log(log)
    assert (result.line_count, result.first_error, result.matches) == (0, None, ())


@pytest.mark.parametrize("name", ["missing.log", "."])
def test_unreadable_log_is_a_configuration_error(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with pytest.raises(ConfigurationError) as raised:
        triage_log(path)
    assert raised.value.exit_code == 2
    assert str(path) in raised.value.message


def test_result_serializes_to_json_for_the_build_report() -> None:
    case = next(case for case in CASES if case.name == "C1060 under Ninja")
    data = json.loads(diagnose_text(case.text, source="build-1.log").to_json())
    assert set(data) == {"source", "line_count", "first_error", "matches"}
    assert data["source"] == "build-1.log"
    assert data["first_error"]["kind"] == "ninja"
    assert set(data["first_error"]) == {
        "kind",
        "line_number",
        "end_line_number",
        "summary",
        "lines",
        "omitted_lines",
        "context_before",
        "context_after",
    }
    (match,) = data["matches"]
    assert set(match) == {"id", "title", "phase", "explanation", "fix", "source", "line", "count"}
    assert match["id"] == "compiler-out-of-heap" and match["line"]["number"] == data["first_error"]["summary"]["number"]


def test_text_report_shows_the_block_then_the_advice() -> None:
    text = diagnose_text(TWO_FAILURES, source="build.log").to_text()
    first_failed = line_of(
        TWO_FAILURES, "FAILED: caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/BatchLinearAlgebra"
    )
    assert f"First error (line {first_failed}, ninja):" in text
    assert (
        f" > {first_failed} | FAILED: "
        "caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/BatchLinearAlgebra.cpp.obj" in text
    )
    assert "Summary (line" in text and "error C2065: 'magma_queue'" in text
    assert "No diagnosis rule matched." in text
    advice = diagnose_text(next(case for case in CASES if case.name == "C1060 under Ninja").text).to_text()
    assert "[compiler-out-of-heap]" in advice and "  Fix: " in advice and "  Why: " in advice and "  Source: " in advice


def test_pip_wrapper_lines_give_way_to_the_nested_error():
    log = """Processing /src/pytorch
  Installing build dependencies ... done
  error: subprocess-exited-with-error

  × Getting requirements to build wheel did not run successfully.
  │ exit code: 1
  ╰─> [6 lines of output]
      Traceback (most recent call last):
        File "<string>", line 3, in <module>
        File "/src/pytorch/tools/setup_helpers/cmake.py", line 12, in <module>
          import cmake
      ModuleNotFoundError: No module named 'cmake'
      [end of output]

  note: This error originates from a subprocess, and is likely not a problem with pip.
error: subprocess-exited-with-error
"""
    from pytorch_winbuild.diagnosis.triage import diagnose_text

    first = diagnose_text(log).first_error
    assert first is not None
    assert "No module named 'cmake'" in first.summary.text
