"""Triage reads a log as bytes: one Hyperscan pass finds the candidate lines, only they are decoded.

Edge cases of that pipeline: a read that ends inside a literal, inside a "\\r\\n" or inside a
multi-byte character, a line longer than a chunk, no newline at the end, bytes that are not
UTF-8 next to a match, and literals that differ only in case. Each log is written line by line
here, and the expected line numbers and texts are read off those lines.
"""

from __future__ import annotations

import atexit
import codecs
import io
import os
import re
import shutil
import tempfile
import threading
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from pytorch_winbuild.diagnosis import chunks
from pytorch_winbuild.diagnosis.report import TriageResult
from pytorch_winbuild.diagnosis.rules import load_rules
from pytorch_winbuild.diagnosis.triage import diagnose_text, triage_log

if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):  # not .hypothesis/ in the repo, as test_property_inputs.py
    _HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="pwb-hypothesis-")
    set_hypothesis_home_dir(_HYPOTHESIS_HOME)
    atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, True)

HEAP = r"C:\pytorch\aten\src\ATen\native\cuda\Loss.cu(42): fatal error C1060: compiler is out of heap space"
FAILED = "FAILED: caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/Loss.cu.obj"
PROGRESS = [
    f"[{step}/4567] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/Kernel{step}.cpp.obj" for step in range(1, 9)
]
LINES = [*PROGRESS, FAILED, "cl /nologo /c Loss.cu", HEAP, "ninja: build stopped: subcommand failed."]
FAILED_LINE = LINES.index(FAILED) + 1
HEAP_LINE = LINES.index(HEAP) + 1


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "build.log"
    path.write_bytes(data)
    return path


def summary(result: TriageResult) -> tuple[int, str, int, str, int, list[tuple[str, int, str]]]:
    error = result.first_error
    assert error is not None
    matches = [(match.rule.id, match.line.number, match.line.text) for match in result.matches]
    return result.line_count, error.kind, error.line_number, error.summary.text, error.summary.number, matches


EXPECTED = (len(LINES), "ninja", FAILED_LINE, HEAP, HEAP_LINE, [("compiler-out-of-heap", HEAP_LINE, HEAP)])


@pytest.mark.parametrize("inside", [1, 5, 14, 16])
def test_a_read_that_ends_inside_the_literal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inside: int) -> None:
    """The read stops `inside` bytes into "fatal error C10" (the rule's literal); the chunk goes on to the line end."""
    text = "\n".join(LINES) + "\n"
    literal_at = text.index("fatal error C10")
    monkeypatch.setattr(chunks, "CHUNK_BYTES", literal_at + inside)
    assert summary(triage_log(write(tmp_path, text.encode()))) == EXPECTED


@pytest.mark.parametrize("chunk_bytes", [1, 7, 64, 4096])
def test_a_match_on_the_last_line_without_a_newline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_bytes: int
) -> None:
    monkeypatch.setattr(chunks, "CHUNK_BYTES", chunk_bytes)
    result = triage_log(write(tmp_path, "\n".join(LINES[:HEAP_LINE]).encode()))
    assert summary(result) == (HEAP_LINE, "ninja", FAILED_LINE, HEAP, HEAP_LINE, EXPECTED[-1])
    assert result.first_error is not None and result.first_error.context_after == ()


@pytest.mark.parametrize("chunk_bytes", [1, 2, 3, 50, 4096])
def test_crlf_and_lone_cr_line_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_bytes: int) -> None:
    """ "\\r\\n" ends one line, a lone "\\r" (a progress bar) ends one too, as in text mode; small
    reads cut between "\\r" and "\\n"."""
    lines = ["Downloading 10%", "Downloading 100%", *LINES]
    data = "Downloading 10%\rDownloading 100%\r\n" + "\r\n".join(LINES) + "\r\n"
    monkeypatch.setattr(chunks, "CHUNK_BYTES", chunk_bytes)
    result = triage_log(write(tmp_path, data.encode()))
    heap_line = lines.index(HEAP) + 1
    assert summary(result) == (
        len(lines),
        "ninja",
        lines.index(FAILED) + 1,
        HEAP,
        heap_line,
        [("compiler-out-of-heap", heap_line, HEAP)],
    )
    assert result.first_error is not None
    failed_index = lines.index(FAILED)
    assert [line.text for line in result.first_error.context_before] == lines[failed_index - 3 : failed_index]
    assert all("\r" not in line.text for line in result.first_error.lines)


def test_a_log_whose_lines_end_in_cr_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 40)
    result = triage_log(write(tmp_path, "\r".join(LINES).encode()))
    assert summary(result) == EXPECTED


@pytest.mark.parametrize("chunk_bytes", [1, 13, 4096])
def test_bytes_that_are_not_utf8_next_to_a_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_bytes: int
) -> None:
    """Each stray byte is shown as U+FFFD in the reported lines; the literal beside it still matches."""
    stray = b"\xff\xc0"
    data = (
        "\n".join(LINES[: HEAP_LINE - 2]).encode()
        + b"\ncl /nologo /c Loss.cu "
        + stray
        + b"\n"
        + HEAP.encode().replace(b"fatal", stray + b"fatal")
        + stray
        + b"\nninja: build stopped: subcommand failed.\n"
    )
    monkeypatch.setattr(chunks, "CHUNK_BYTES", chunk_bytes)
    result = triage_log(write(tmp_path, data))
    shown = HEAP.replace("fatal", "\ufffd\ufffdfatal") + "\ufffd\ufffd"
    assert summary(result) == (
        len(LINES),
        "ninja",
        FAILED_LINE,
        shown,
        HEAP_LINE,
        [("compiler-out-of-heap", HEAP_LINE, shown)],
    )
    assert result.first_error is not None
    assert result.first_error.lines[1].text == "cl /nologo /c Loss.cu \ufffd\ufffd"


def test_a_multi_byte_character_cut_by_a_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read may stop inside "é" (2 bytes) or "日" (3 bytes); lines are decoded whole."""
    lines = ["configuring café 日本語", *LINES, "構築が停止しました"]
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 16)  # the first read ends inside "é"
    result = triage_log(write(tmp_path, ("\n".join(lines) + "\n").encode()))
    heap_line = lines.index(HEAP) + 1
    assert summary(result)[2:5] == (lines.index(FAILED) + 1, HEAP, heap_line)
    assert result.first_error is not None
    assert [line.text for line in result.first_error.context_after] == [LINES[-1], "構築が停止しました"]


def test_a_line_longer_than_a_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ninja command line of 20 kB in 1 kB chunks: it is read whole, and the lines after it keep their numbers."""
    command = "cl.exe /nologo " + " ".join(f"-IC:/deps/include{index}" for index in range(1000))
    lines = [*PROGRESS, FAILED, command, HEAP, "ninja: build stopped: subcommand failed."]
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1024)
    result = triage_log(write(tmp_path, ("\n".join(lines) + "\n").encode()))
    heap_line = lines.index(HEAP) + 1
    assert summary(result) == (
        len(lines),
        "ninja",
        FAILED_LINE,
        HEAP,
        heap_line,
        [("compiler-out-of-heap", heap_line, HEAP)],
    )
    assert result.first_error is not None
    assert result.first_error.lines[1].text.startswith("cl.exe /nologo -IC:/deps/include0 ")


def test_a_utf8_bom_is_not_part_of_the_first_line(tmp_path: Path) -> None:
    result = triage_log(write(tmp_path, b"\xef\xbb\xbfERROR: No matching distribution found for torch\n"))
    assert result.first_error is not None
    assert (result.first_error.kind, result.first_error.line_number) == ("tool", 1)
    assert result.first_error.summary.text == "ERROR: No matching distribution found for torch"


# --------------------------------------------------------------------------------------------
# Case, and literals that are not ASCII
# --------------------------------------------------------------------------------------------


def rules_file(tmp_path: Path, *tables: tuple[str, str]) -> Path:
    text = "".join(
        f"[[rule]]\nid = '{rule_id}'\ntitle = 'Rule {rule_id}'\npatterns = ['{pattern}']\n"
        "explanation = 'Why.'\nfix = 'What to do.'\nsource = 'a test'\n\n"
        for rule_id, pattern in tables
    )
    path = tmp_path / "rules.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("linear", [True, False], ids=["re2", "re"])
def test_literals_that_differ_only_in_case(tmp_path: Path, linear: bool) -> None:
    """The literal gate is case-sensitive: a case-sensitive pattern skips "OUT OF HEAP SPACE", one
    with (?i) (searched without a gate) finds both spellings, on the lines the log has them."""
    rules = load_rules(
        rules_file(tmp_path, ("exact", "out of heap space"), ("any-case", "(?i)out of heap space")), linear=linear
    )
    lines = [
        "building",
        "C1060: COMPILER IS OUT OF HEAP SPACE",
        "é \udcff",
        "C1060: compiler is Out Of Heap Space",
        "done",
    ]
    for result in (
        diagnose_text("\n".join(lines) + "\n", rules=rules),
        triage_log(write(tmp_path, ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")), rules=rules),
    ):
        assert [(match.rule.id, match.line.number, match.count) for match in result.matches] == [("any-case", 2, 2)]


def test_the_error_grammar_finds_upper_and_mixed_case_errors(tmp_path: Path) -> None:
    """ "ERROR:" (pip) and "Error" (CMake) reach the grammar through different literals."""
    for lines, kind in (
        (["Collecting torch", "ERROR: Could not find a version that satisfies the requirement torch"], "tool"),
        (["-- Configuring", "CMake Error at CMakeLists.txt:5 (message):", "  boom"], "cmake"),
    ):
        result = triage_log(write(tmp_path, ("\n".join(lines) + "\n").encode()))
        assert result.first_error is not None
        assert (result.first_error.kind, result.first_error.line_number) == (kind, 2)


@pytest.mark.parametrize("chunk_bytes", [5, 4096])
@pytest.mark.parametrize("linear", [True, False], ids=["re2", "re"])
def test_non_ascii_literal_and_ungated_pattern_after_stray_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linear: bool, chunk_bytes: int
) -> None:
    """A literal with "é" is searched as UTF-8 bytes; an ungated pattern's line is placed by its
    line number, though stray bytes and multi-byte characters make byte and character offsets differ."""
    rules = load_rules(rules_file(tmp_path, ("cafe", "café au lait"), ("empty", "^$")), linear=linear)
    data = "日本語 prelude\n".encode() + b"\xff\xfe stray\n\n" + "x café au lait é\n".encode() + b"\xc3 end\n"
    monkeypatch.setattr(chunks, "CHUNK_BYTES", chunk_bytes)
    result = triage_log(write(tmp_path, data), rules=rules)
    assert [(match.rule.id, match.line.number, match.line.text) for match in result.matches] == [
        ("empty", 3, ""),
        ("cafe", 4, "x café au lait é"),
    ]
    assert result.line_count == 5


@pytest.mark.parametrize(("text", "lines"), [("", 0), ("\n", 1), ("a", 1), ("a\r\nb\r", 2), ("\r\r", 2)])
def test_line_count_of_short_texts(tmp_path: Path, text: str, lines: int) -> None:
    assert diagnose_text(text).line_count == lines
    assert triage_log(write(tmp_path, text.encode())).line_count == lines


@pytest.mark.parametrize("line", ["", "x" * 10, "x" * 47, "x" * 48, "x" * 300])
def test_line_numbers_in_big_chunks_of_short_and_long_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    """Lines are counted one way in chunks of short lines and another in chunks of long ones."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 256 * 1024)
    lines = [line] * (600_000 // (len(line) + 1)) + [FAILED, "cl /nologo /c Loss.cu", HEAP, *[line] * 1000]
    result = triage_log(write(tmp_path, ("\n".join(lines) + "\n").encode()))
    heap_line = len(lines) - 1000
    assert summary(result) == (
        len(lines),
        "ninja",
        heap_line - 2,
        HEAP,
        heap_line,
        [("compiler-out-of-heap", heap_line, HEAP)],
    )


# Never skipped where the suite runs (Linux, here and on CI); only Windows has no os.mkfifo.
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX: Windows has no os.mkfifo")
def test_a_log_read_from_a_pipe(tmp_path: Path) -> None:
    """`invoke diagnose /dev/stdin`: a pipe cannot seek back over the bytes that told the encoding."""
    pipe = tmp_path / "log.fifo"
    os.mkfifo(pipe)
    data = ("\n".join(LINES) + "\n").encode()
    writer = threading.Thread(target=pipe.write_bytes, args=(data,), daemon=True)
    writer.start()
    try:
        assert summary(triage_log(pipe)) == EXPECTED
    finally:
        writer.join(timeout=10)


# --------------------------------------------------------------------------------------------
# Lines longer than MAX_LINE_BYTES: cut, in bounded memory
# --------------------------------------------------------------------------------------------

_TEXT_MODE_LINE_END = re.compile(rb"\r\n|\r|\n")


def _text_mode_lines(data: bytes) -> list[bytes]:
    """The lines of `data` as text mode reads them (universal newlines), without their line ends."""
    lines = _TEXT_MODE_LINE_END.split(data)
    return lines[:-1] if lines[-1] == b"" else lines


def _reader_lines(data: bytes) -> list[tuple[bytes, int]]:
    """The lines _line_chunks makes of `data`, each with the length it says a cut line had (0: not cut)."""
    lines: list[tuple[bytes, int]] = []
    for chunk, cut in chunks._line_chunks(io.BufferedReader(io.BytesIO(data))):
        assert chunk, "an empty chunk"
        pieces = bytes(chunk).split(b"\n")
        if pieces[-1] == b"":
            pieces.pop()
        lines += [(piece, cut if index == 0 else 0) for index, piece in enumerate(pieces)]
    return lines


_PIECES = [b"a", b"b", b"\xc3\xa9", "日".encode(), "😀".encode(), b"\xff", b"\x00", b"\r", b"\n", b"\r\n"]


@settings(max_examples=400, deadline=None, database=None, derandomize=True)
@given(
    pieces=st.lists(st.sampled_from(_PIECES), max_size=120),
    chunk_bytes=st.integers(1, 40),
    max_line=st.integers(1, 24),
)
def test_the_reader_cuts_long_lines_and_keeps_every_other_line(
    pieces: list[bytes], chunk_bytes: int, max_line: int
) -> None:
    """Against text mode: the same lines, in the same order; each one longer than MAX_LINE_BYTES is cut to
    its start (never inside a UTF-8 character), starts its chunk and reports its length."""
    data = b"".join(pieces)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunks, "CHUNK_BYTES", chunk_bytes)
        patch.setattr(chunks, "MAX_LINE_BYTES", max_line)
        got = _reader_lines(data)
    expected = _text_mode_lines(data)
    assert len(got) == len(expected)
    for (line, cut), whole in zip(got, expected, strict=True):
        if len(whole) <= max_line:
            assert (line, cut) == (whole, 0)
            continue
        assert cut == len(whole)
        assert whole.startswith(line) and max_line - 3 <= len(line) <= max_line
        assert len(line) == max_line or whole[len(line)] & 0xC0 != 0x80  # not inside a character


def _cut_log(tmp_path: Path, long_line: str, *, line_end: str = "\n", encoding: str = "utf-8") -> Path:
    lines = [*PROGRESS[:2], long_line, *LINES[len(PROGRESS) :]]
    data = line_end.join(lines) + line_end
    return write(tmp_path, codecs.BOM_UTF16_LE + data.encode("utf-16-le") if encoding == "utf-16" else data.encode())


@pytest.mark.parametrize("chunk_bytes", [7, 100, 4096])
@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_a_line_longer_than_max_line_bytes_is_cut_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_bytes: int, line_end: str, encoding: str
) -> None:
    """Its start is matched and shown with its length; what lies past MAX_LINE_BYTES is not searched;
    the lines after it keep their numbers."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(chunks, "MAX_LINE_BYTES", 300)
    long_line = "cl.exe /nologo " + "-IC:/deps/include " * 100 + "fatal error C1060: compiler is out of heap space"
    result = triage_log(_cut_log(tmp_path, long_line, line_end=line_end, encoding=encoding))
    size = len(long_line.encode())
    failed_line = FAILED_LINE - len(PROGRESS) + 3
    assert summary(result) == (
        len(LINES) - len(PROGRESS) + 3,
        "ninja",
        failed_line,
        HEAP,
        failed_line + 2,
        [("compiler-out-of-heap", failed_line + 2, HEAP)],  # the rule's literal lies past the cut
    )
    assert result.warnings == (
        f"1 line longer than 300 bytes was cut: only its first 300 were searched: line 3 ({size} bytes).",
    )
    assert result.first_error is not None
    shown = result.first_error.context_before[-1]
    assert shown.number == 3
    assert shown.text == f"{long_line[:300]} ... [line cut: {size} bytes long, only its first 300 searched]"
    assert "Warning: 1 line longer than 300 bytes was cut" in result.to_text()


def test_a_rule_that_fires_on_a_cut_line_shows_it_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunks, "MAX_LINE_BYTES", 200)
    long_line = HEAP + " " + "x" * 5000
    result = triage_log(_cut_log(tmp_path, long_line))
    (match,) = result.matches
    assert (match.rule.id, match.line.number) == ("compiler-out-of-heap", 3)
    assert (
        match.line.text == f"{long_line[:200]} ... [line cut: {len(long_line)} bytes long, only its first 200 searched]"
    )


def test_many_cut_lines_are_counted_and_the_first_ones_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunks, "MAX_LINE_BYTES", 10)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 64)
    text = "".join(f"short {n}\n" if n % 2 else f"{'y' * (20 + n)}\n" for n in range(20))
    result = triage_log(write(tmp_path, text.encode()))
    assert result.line_count == 20
    named = ", ".join(f"line {n + 1} ({20 + n} bytes)" for n in range(0, 10, 2))
    assert result.warnings == (
        f"10 lines longer than 10 bytes were cut: only their first 10 were searched: {named} and 5 more.",
    )


def test_a_preceded_by_window_of_long_lines_is_bounded(tmp_path: Path) -> None:
    """A window of 10,000 lines over 64 lines of 512 KiB held them all (32 MB); it keeps at most
    WINDOW_CHARS characters of them (and CONTEXT_LINES lines)."""
    rules = load_rules(
        rules_file_with(
            tmp_path,
            "id = 'wide'\ntitle = 'Wide'\npatterns = ['timed out']\npreceded_by = ['starting']\n"
            "within_lines = 10000\nexplanation = 'Why.'\nfix = 'What to do.'\nsource = 'a test'\n",
        )
    )
    log = tmp_path / "build.log"
    with log.open("wb") as out:
        out.write(b"starting sccache\n")
        for _ in range(64):
            out.write(b"z" * (512 * 1024) + b"\n")
        out.write(b"sccache: timed out\n")
    triage_log(log, rules=rules)  # the scanner compiled once, outside what is measured
    tracemalloc.start()
    try:
        result = triage_log(log, rules=rules)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, f"peak {peak / 1e6:.0f} MB"
    assert result.line_count == 66
    assert result.matches == ()  # 32 MB back: past the window's characters, though within its lines


def test_a_block_followed_by_a_million_blank_lines_holds_few_of_them(tmp_path: Path) -> None:
    """Blank lines after a traceback's frames wait to see whether the block goes on; they count
    towards MAX_BLOCK_SCAN, where they used to pile up (a million LogLines)."""
    frames = 'Traceback (most recent call last):\n  File "setup.py", line 1, in <module>\n'
    log = write(tmp_path, (frames + "\n" * 1_000_000 + "    more()\nRuntimeError: boom\n").encode())
    tracemalloc.start()
    try:
        result = triage_log(log)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, f"peak {peak / 1e6:.0f} MB"
    error = result.first_error
    assert error is not None and (error.kind, error.line_number) == ("traceback", 1)
    assert error.end_line_number == 2 and [line.text for line in error.context_after] == ["", "", ""]


def rules_file_with(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(f"[[rule]]\n{table}", encoding="utf-8")
    return path
