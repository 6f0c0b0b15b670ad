"""`invoke diagnose LOGFILE` run as a user runs it: `python -m invoke` from the repo root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from diagnosis_logs import CASES, CLEAN_LOGS
from support import run_invoke

OUT_OF_HEAP = next(case for case in CASES if case.name == "C1060 under Ninja")
DRIVER_TOO_OLD = next(case for case in CASES if case.rule == "cuda-driver-too-old" and "traceback" in case.name)


def write_log(tmp_path: Path, text: str, name: str = "build.log") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_prints_first_error_block_then_each_rules_advice(tmp_path: Path) -> None:
    log = write_log(tmp_path, OUT_OF_HEAP.text)
    done = run_invoke("diagnose", str(log))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    failed_line = next(n for n, line in enumerate(OUT_OF_HEAP.text.split("\n"), 1) if line.startswith("FAILED: "))
    assert out.startswith(f"{log}: ")
    assert f"First error (line {failed_line}, ninja):" in out
    assert "vec256_base.h(650): fatal error C1060: compiler is out of heap space" in out
    assert out.index("First error") < out.index("[compiler-out-of-heap] cl.exe ran out of heap space")
    assert "  Why: " in out and "  Fix: " in out and "invoke build --jobs N" in out.replace("\n    ", " ")


def test_json_output_is_the_report_shape(tmp_path: Path) -> None:
    log = write_log(tmp_path, OUT_OF_HEAP.text)
    done = run_invoke("diagnose", str(log), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["source"] == str(log)
    assert data["first_error"]["kind"] == "ninja"
    assert data["first_error"]["summary"]["text"].endswith("fatal error C1060: compiler is out of heap space")
    assert [match["id"] for match in data["matches"]] == ["compiler-out-of-heap"]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (DRIVER_TOO_OLD.text, "traceback"),
        (DRIVER_TOO_OLD.text.rstrip("\n"), "traceback"),
        (DRIVER_TOO_OLD.text.rstrip("\n").split("\n")[-1] + "\n", "exception"),
        (DRIVER_TOO_OLD.text.rstrip("\n").split("\n")[-1], "exception"),
    ],
    ids=["traceback-ending-the-log", "traceback-without-final-newline", "one-line", "one-line-without-newline"],
)
def test_an_error_block_that_ends_the_log_is_reported(tmp_path: Path, text: str, kind: str) -> None:
    """Regression: with no line after the block, the text report crashed (exit 70, internal error)."""
    done = run_invoke("diagnose", str(write_log(tmp_path, text)))
    assert done.returncode == 0, done.stderr
    last = text.rstrip("\n").count("\n") + 1
    assert f": {last} lines" in done.stdout.splitlines()[0]
    assert f"First error (line 1, {kind}):" in done.stdout
    assert (
        f" > {last} | RuntimeError: The NVIDIA driver on your system is too old (found version 11040)." in done.stdout
    )
    assert f"  Summary (line {last}): RuntimeError: The NVIDIA driver" in done.stdout
    assert "[cuda-driver-too-old]" in done.stdout
    assert "11040 is CUDA 11.4" in " ".join(done.stdout.split())


def test_clean_log_exits_zero_and_says_so(tmp_path: Path) -> None:
    done = run_invoke("diagnose", str(write_log(tmp_path, CLEAN_LOGS["windows-cuda-build"])))
    assert done.returncode == 0, done.stderr
    assert "No error block found." in done.stdout and "No diagnosis rule matched." in done.stdout


def test_unreadable_log_exits_2_with_one_paragraph(tmp_path: Path) -> None:
    missing = tmp_path / "no-such.log"
    done = run_invoke("diagnose", str(missing))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"configuration error: {missing}: cannot read the log" in done.stderr


def test_custom_rules_file_and_its_errors(tmp_path: Path) -> None:
    log = write_log(tmp_path, "step 1\nWARNING: cache server offline\n")
    rules = tmp_path / "rules.toml"
    rules.write_text(
        "[[rule]]\n"
        "id = 'cache-offline'\n"
        "phase = 'build'\n"
        "title = 'Cache server offline'\n"
        "patterns = ['cache server offline']\n"
        "explanation = 'The shared compiler cache did not answer.'\n"
        "fix = 'Start it again.'\n"
        "source = 'local runbook'\n",
        encoding="utf-8",
    )
    done = run_invoke("diagnose", str(log), "--rules", str(rules))
    assert done.returncode == 0, done.stderr
    assert "[cache-offline] Cache server offline" in done.stdout and "line 2:" in done.stdout

    rules.write_text(rules.read_text().replace("'cache server offline'", "'cache server (offline'"), encoding="utf-8")
    done = run_invoke("diagnose", str(log), "--rules", str(rules))
    assert done.returncode == 2
    assert "rule 'cache-offline'.patterns[0]: invalid regular expression" in done.stderr


def test_help_describes_every_flag() -> None:
    done = run_invoke("--help", "diagnose")
    assert done.returncode == 0, done.stderr
    for flag in ("--json", "--logfile", "--rules"):
        line = next(line for line in done.stdout.splitlines() if flag in line)
        assert len(line.split(flag, 1)[1].strip()) > 10, f"{flag} has no help text"
