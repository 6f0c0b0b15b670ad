"""Triage must stay fast and small on the logs a full PyTorch build writes (hundreds of MB)."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from diagnosis_logs import CASES

from pytorch_winbuild.diagnosis.rules import default_rules
from pytorch_winbuild.diagnosis.triage import triage_log

TARGET_BYTES = 50_000_000
SECONDS_BOUND = 20.0  # measured about 0.1 s on a 2-core CI machine (0.4 s before Hyperscan); generous on purpose

FAILURE = next(case for case in CASES if case.name == "C1060 under Ninja").text


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 50 MB of a Windows Ninja build (CRLF): progress, MSVC/nvcc warnings, one real failure at the end."""
    path = tmp_path_factory.mktemp("speed") / "build.log"
    folders = (
        "aten/src/ATen/native/cpu",
        "torch/csrc/autograd",
        "c10/util",
        "caffe2/operators",
        "aten/src/ATen/native/cuda",
    )
    total = 4567
    with path.open("w", encoding="utf-8", newline="\r\n") as out:
        written, step = 0, 0
        while written < TARGET_BYTES:
            step += 1
            folder = folders[step % len(folders)]
            lines = [
                f"[{step % total}/{total}] Building CXX object "
                f"caffe2/CMakeFiles/torch_cpu.dir/__/{folder}/Kernel{step}.cpp.obj"
            ]
            if step % 7 == 0:
                lines.append(
                    f"C:\\pytorch\\{folder.replace('/', chr(92))}\\Kernel{step}.cpp(123): warning C4244: 'argument': "
                    "conversion from 'int64_t' to 'int', possible loss of data"
                )
            if step % 50 == 0:
                lines.append("cl : Command line warning D9025 : overriding '/DNDEBUG' with '/UNDEBUG'")
            if step % 301 == 0:
                lines.append(
                    "nvcc warning : The 'compute_35', 'compute_37', 'sm_35', and 'sm_37' architectures are deprecated"
                )
            block = "\n".join(lines) + "\n"
            out.write(block)
            written += len(block) + len(lines)
        out.write(FAILURE)
    return path


def test_a_50_mb_log_is_triaged_in_seconds(big_log: Path) -> None:
    default_rules()  # loading and compiling the rules is not what is measured
    started = time.perf_counter()
    result = triage_log(big_log)
    elapsed = time.perf_counter() - started
    assert big_log.stat().st_size >= TARGET_BYTES
    assert result.first_error is not None and result.first_error.summary.text.endswith(
        "fatal error C1060: compiler is out of heap space"
    )
    assert result.first_error.line_number > 400_000
    assert [match.rule.id for match in result.matches] == ["compiler-out-of-heap"]
    assert elapsed < SECONDS_BOUND, f"triage took {elapsed:.1f} s"


def test_memory_does_not_grow_with_the_log(big_log: Path) -> None:
    """The log is read in chunks: the peak stays well below the file's own size."""
    default_rules()
    tracemalloc.start()
    try:
        triage_log(big_log)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.8 * big_log.stat().st_size, f"peak {peak / 1e6:.0f} MB"
