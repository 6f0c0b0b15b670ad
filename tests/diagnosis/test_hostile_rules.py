"""Hostile input to `invoke diagnose`: rules that backtrack forever, logs that drive the terminal.

A rules file other than the shipped one runs on RE2 (linear time); a pattern RE2 cannot run is
refused at load time with exit 2; a costly RE2 pattern is skipped with a warning once past its
time budget. Escape sequences and control characters from a log never reach the terminal raw.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from diagnosis_logs import CASES
from support import REPO_ROOT, run_invoke

from pytorch_winbuild.diagnosis import chunks, log_scan
from pytorch_winbuild.diagnosis import rules as diagnosis
from pytorch_winbuild.diagnosis.rules import LinearPattern, default_rules, load_rules
from pytorch_winbuild.diagnosis.triage import diagnose_text, triage_log
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.text.terminal_text import terminal_json, terminal_safe

OUT_OF_HEAP = next(case for case in CASES if case.name == "C1060 under Ninja")

# What may reach the terminal: printable text, LF and TAB. No other C0, no DEL, no C1.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def rule_table(rule_id: str, patterns: list[str], **extra: str) -> str:
    """A [[rule]] table; patterns are written as TOML literal strings (backslashes as written)."""
    listed = ", ".join(f"'{pattern}'" for pattern in patterns)
    lines = [
        f"id = '{rule_id}'",
        f"title = 'Rule {rule_id}'",
        f"patterns = [{listed}]",
        "explanation = 'Why.'",
        "fix = 'What to do.'",
        "source = 'a test'",
    ]
    lines += [f"{key} = {value}" for key, value in extra.items()]
    return "[[rule]]\n" + "\n".join(lines) + "\n\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# Catastrophic backtracking
# --------------------------------------------------------------------------------------------

PATHOLOGICAL_LOG = (
    "[1/3] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/Kernel.cpp.obj\n"
    + "a" * 40
    + "!\n"  # Python's re needs about 2**40 steps here: more than a day
    + ("a" * 60 + "!\n") * 200
    + "a" * 100_000
    + "!\n"
    + "aaaaaaaaaa\n"  # the one line (a+)+$ does match
    + "FAILED: caffe2/CMakeFiles/torch_cpu.dir/Kernel.cpp.obj\n"
    + "cl /nologo /c C:\\pytorch\\Kernel.cpp\n"
    + "C:\\pytorch\\Kernel.cpp(7): fatal error C1060: compiler is out of heap space\n"
)
MATCHING_LINE = PATHOLOGICAL_LOG.split("\n").index("aaaaaaaaaa") + 1


def test_nested_quantifier_rule_on_a_pathological_log_finishes_with_the_right_match(tmp_path: Path) -> None:
    """Before RE2 this run did not finish (killed after 20 s; Python's re needs ~28 h for the 40 a's alone)."""
    log = write(tmp_path / "build.log", PATHOLOGICAL_LOG)
    rules = write(tmp_path / "rules.toml", rule_table("nested", ["(a+)+$"]))
    started = time.perf_counter()
    done = run_invoke("diagnose", str(log), "--rules", str(rules), "--json", timeout=60)
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < 5, f"diagnose took {elapsed:.1f} s"
    data = json.loads(done.stdout)
    assert [(match["id"], match["line"]["number"], match["count"]) for match in data["matches"]] == [
        ("nested", MATCHING_LINE, 1)
    ]
    assert data["first_error"]["summary"]["text"].endswith("fatal error C1060: compiler is out of heap space")
    assert "warnings" not in data


def test_user_patterns_run_on_re2_and_shipped_ones_on_re(tmp_path: Path) -> None:
    rules = load_rules(write(tmp_path / "rules.toml", rule_table("nested", ["(a+)+$"], preceded_by="['Building']")))
    assert isinstance(rules[0].patterns[0], LinearPattern) and isinstance(rules[0].preceded_by[0], LinearPattern)
    assert all(
        isinstance(pattern, re.Pattern) for rule in default_rules() for pattern in (*rule.patterns, *rule.preceded_by)
    )
    assert load_rules(REPO_ROOT / "build_config" / "diagnosis.toml") == default_rules()  # the shipped file, by path
    # Explicit choice either way.
    assert isinstance(load_rules(tmp_path / "rules.toml", linear=False)[0].patterns[0], re.Pattern)


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("No module named (?!torch)", "invalid perl operator: (?!"),
        ("(?<=DLL )load failed", "invalid perl operator: (?<"),
        (r"(\w+) \1 again", "invalid escape sequence: \\1"),
        (r"out of heap space\Z", "invalid escape sequence: \\Z"),
        ("a++b", "bad repetition operator: ++"),
    ],
    ids=["lookahead", "lookbehind", "backreference", "end-of-text-Z", "possessive"],
)
def test_a_pattern_re2_cannot_run_exits_2_naming_file_rule_and_pattern(
    tmp_path: Path, pattern: str, reason: str
) -> None:
    log = write(tmp_path / "build.log", OUT_OF_HEAP.text)
    rules = write(
        tmp_path / "rules.toml", rule_table("fine", ["out of heap"]) + rule_table("needs-backtracking", ["ok", pattern])
    )
    done = run_invoke("diagnose", str(log), "--rules", str(rules))
    assert done.returncode == 2, done.stdout + done.stderr
    message = done.stderr
    assert (
        f"configuration error: {rules}: rule 'needs-backtracking'.patterns[1]: unsupported regular expression "
        f"{pattern!r}" in message
    )
    assert f"(RE2: {reason}" in message
    assert "Fix: rules files other than the shipped one are matched with RE2" in message
    assert "re2.cc" not in message  # RE2's own logging stays off


def test_an_invalid_pattern_keeps_pythons_message(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as raised:
        load_rules(write(tmp_path / "rules.toml", rule_table("broken", ["cache (offline"])))
    assert raised.value.exit_code == 2
    assert (
        "rule 'broken'.patterns[0]: invalid regular expression 'cache (offline' (missing ), unterminated subpattern"
        in raised.value.message
    )


def test_a_pattern_too_large_for_a_quick_scan_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as raised:
        load_rules(write(tmp_path / "rules.toml", rule_table("huge", ["[aeiou].{1000}[0-9]x"])))
    assert raised.value.exit_code == 2
    assert (
        "rule 'huge'.patterns[0]: regular expression '[aeiou].{1000}[0-9]x' is too complex (RE2 program size"
        in raised.value.message
    )


def test_a_copy_of_the_shipped_file_with_a_rule_added_still_loads(tmp_path: Path) -> None:
    """Shipped patterns (some use lookahead) are trusted verbatim; the added rule runs on RE2."""
    copy = tmp_path / "my-rules.toml"
    shutil.copy(REPO_ROOT / "build_config" / "diagnosis.toml", copy)
    with copy.open("a", encoding="utf-8") as out:
        out.write("\n" + rule_table("cache-offline", ["cache server offline"]))
    log = write(tmp_path / "build.log", "WARNING: cache server offline\n" + OUT_OF_HEAP.text)
    done = run_invoke("diagnose", str(log), "--rules", str(copy), "--json")
    assert done.returncode == 0, done.stderr
    assert [match["id"] for match in json.loads(done.stdout)["matches"]] == ["cache-offline", "compiler-out-of-heap"]
    rules = load_rules(copy)
    assert isinstance(rules[-1].patterns[0], LinearPattern)
    assert rules[:-1] == default_rules()


def test_without_re2_a_user_file_is_refused_but_shipped_patterns_still_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kept double: google-re2 is a dependency, installed here and on CI; a Python without it is simulated.
    monkeypatch.setitem(sys.modules, "re2", None)  # import re2 now raises ImportError
    with pytest.raises(ConfigurationError, match="need the google-re2 package") as raised:
        load_rules(write(tmp_path / "rules.toml", rule_table("mine", ["cache server offline"])))
    assert raised.value.exit_code == 2
    copy = tmp_path / "copy.toml"
    shutil.copy(REPO_ROOT / "build_config" / "diagnosis.toml", copy)
    assert load_rules(copy) == default_rules()


# --------------------------------------------------------------------------------------------
# RE2 finds what re finds
# --------------------------------------------------------------------------------------------

SAME_PATTERNS = [
    r"fatal error C10(?:60|02|76):",  # gated on a literal
    r"(?i)OUT OF HEAP",  # no literal: the whole chunk is searched
    r"^\s*FAILED: ",
    r"\.obj$",
    # non-ASCII: RE2 offsets are bytes, the scanner's are characters (RE2's \b, \w, \d, \s are ASCII-only)
    r"\bcafé au",
    r"\d+/\d+\]",
    r"^$",  # empty lines
    r"x{0}Ünïcödé",
]
SAME_LOG = (
    "Ünïcödé prelude — café au lait\n\n"
    + "".join(f"[{n}/4567] Building CXX object caffe2/café/Kernel{n}.cpp.obj\n" for n in range(1, 300))
    + "\ncafé crème\n"
    + "éééé" * 3000
    + " fatal error C1076: compiler limit\n"
    + OUT_OF_HEAP.text
    + "Ünïcödé at the end without a newline"
)


@pytest.mark.parametrize("window", [diagnosis.WINDOW_BYTES, 100, 1])
def test_re2_and_re_report_the_same_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int) -> None:
    """Small windows make every RE2 window boundary fall between lines, and often inside a multi-byte
    character's line."""
    monkeypatch.setattr(diagnosis, "WINDOW_BYTES", window)
    path = write(
        tmp_path / "rules.toml",
        "".join(rule_table(f"rule-{index}", [pattern]) for index, pattern in enumerate(SAME_PATTERNS)),
    )
    linear, backtracking = load_rules(path, linear=True), load_rules(path, linear=False)
    assert all(
        isinstance(pattern, LinearPattern) for rule in linear for pattern in rule.patterns
    )  # none is a shipped pattern

    def found(rules: tuple[diagnosis.Rule, ...]) -> list[tuple[str, int, int, str]]:
        return [
            (match.rule.id, match.line.number, match.count, match.line.text)
            for match in diagnose_text(SAME_LOG, rules=rules).matches
        ]

    expected = found(backtracking)
    assert {rule_id for rule_id, *_ in expected} == {f"rule-{index}" for index in range(len(SAME_PATTERNS))}
    assert found(linear) == expected
    # The same through the chunked file reader, with chunks much smaller than the log.
    log = write(tmp_path / "build.log", SAME_LOG)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1000)
    assert (
        triage_log(log, rules=linear).to_dict()["matches"] == triage_log(log, rules=backtracking).to_dict()["matches"]
    )


def test_re2_preceded_by_and_lone_surrogates(tmp_path: Path) -> None:
    path = write(
        tmp_path / "rules.toml",
        rule_table("timeout", ["(?i)sccache: error: timed out"], preceded_by="['starting sccache']", within_lines="2"),
    )
    rules = load_rules(path)
    log = "starting sccache server \udcff\nbuilding \ud800\nSCCACHE: ERROR: Timed out waiting for server startup\n"
    assert [(match.rule.id, match.line.number) for match in diagnose_text(log, rules=rules).matches] == [("timeout", 3)]
    assert diagnose_text("starting sccache\n1\n2\n3\nsccache: error: timed out\n", rules=rules).matches == ()


@pytest.mark.parametrize(
    ("pattern", "line"),
    [
        (r"\p{Greek}abcd", "αabcd here"),
        (r"[[:digit:]]abcd", "7abcd here"),
        (r"\Qa.b+c\Edefg", "a.b+cdefg here"),
        (r"\x{1F600}wxyz", "\U0001f600wxyz here"),
        (r"abcd(?i)efgh", "abcdEFGH here"),
    ],
    ids=["unicode-class", "posix-class", "quoted", "code-point", "late-flag"],
)
def test_re2_only_syntax_is_not_misread_as_a_literal(tmp_path: Path, pattern: str, line: str) -> None:
    """The literal gate reads Python's syntax; for RE2's own it must fall back to a full search."""
    rules = load_rules(write(tmp_path / "rules.toml", rule_table("re2-syntax", [pattern])))
    assert [match.line.number for match in diagnose_text(f"before\n{line}\nafter\n", rules=rules).matches] == [2]


# --------------------------------------------------------------------------------------------
# Time budget of an RE2 rule
# --------------------------------------------------------------------------------------------


def test_a_costly_re2_rule_is_skipped_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no budget at all every RE2 rule is skipped; the shipped rules are never timed."""
    monkeypatch.setattr(log_scan, "USER_RULE_GRACE_SECONDS", 0.0)
    monkeypatch.setattr(log_scan, "USER_RULE_SECONDS_PER_MB", 0.0)
    copy = tmp_path / "rules.toml"
    shutil.copy(REPO_ROOT / "build_config" / "diagnosis.toml", copy)
    with copy.open("a", encoding="utf-8") as out:
        out.write("\n" + rule_table("costly", ["[aeiou].{300}[0-9]x"]) + rule_table("gated", ["out of heap space"]))
    result = diagnose_text(OUT_OF_HEAP.text, rules=load_rules(copy))
    assert [match.rule.id for match in result.matches] == ["compiler-out-of-heap"]
    assert len(result.warnings) == 2
    assert result.warnings[0].startswith("rule 'costly' skipped: its patterns took ")
    assert "simplify the pattern" in result.warnings[0]
    assert result.to_dict()["warnings"] == list(result.warnings)
    assert "\nWarning: rule 'costly' skipped: " in result.to_text()


def test_ordinary_re2_rules_stay_well_within_their_budget(tmp_path: Path) -> None:
    rules = load_rules(
        write(
            tmp_path / "rules.toml",
            rule_table("gated", ["out of heap space"]) + rule_table("ungated", ["(?i)Out Of Heap"]),
        )
    )
    result = diagnose_text(OUT_OF_HEAP.text * 200, rules=rules)
    assert [match.rule.id for match in result.matches] == ["gated", "ungated"] and result.warnings == ()


# --------------------------------------------------------------------------------------------
# Terminal escape sequences in logs
# --------------------------------------------------------------------------------------------

ESCAPING_LOG = (
    "configuring\n"
    "[2/4567] \x1b[1m\x1b[32mBuilding\x1b[0m CXX object x.obj\x1b[1A\x1b[2K\n"
    "\x1b[2J\x1b[Hscreen cleared\n"
    "\x1b]52;c;cm0gLXJmIH4vKg==\x07clipboard written\n"
    "\x1b]0;pwned title\x1b\\window title\n"
    "FAILED: \x1b]8;;https://example.invalid/\x07caffe2/x.obj\x1b]8;;\x07\n"
    "cl /c x.cpp\n"
    "x.cpp(1): \x1b[31mfatal error C1060\x1b[0m: compiler is out of heap space\x07\x07\n"
    "hidden\x08\x08\x08\x08\x08\x08shown\x00\x7f\x9b31m\x90dcs\x9c\x1b[12\n"
    "progress 10%\rprogress 100%\n"
    "ninja: build stopped: subcommand failed.\n"
)


def test_text_output_has_no_escape_sequences_or_controls(tmp_path: Path) -> None:
    log = write(tmp_path / "build.log", ESCAPING_LOG)
    done = run_invoke("diagnose", str(log))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert not RAW_CONTROL.search(out), repr(RAW_CONTROL.search(out))
    assert "[compiler-out-of-heap]" in out  # the rule matched through the colour codes
    assert "screen cleared" in out and "clipboard written" in out and "window title" in out
    assert "cm0gLXJmIH4vKg" not in out and "pwned title" not in out and "example.invalid" not in out
    assert "FAILED: caffe2/x.obj" in out  # a hyperlink keeps its text
    assert "x.cpp(1): fatal error C1060: compiler is out of heap space\\x07\\x07" in out
    assert "hidden\\x08\\x08\\x08\\x08\\x08\\x08shown\\x00\\x7f" in out
    assert "\\x1b[12" in out  # an unfinished sequence keeps a visible ESC


def test_json_output_escapes_every_control_and_keeps_the_text(tmp_path: Path) -> None:
    log = write(tmp_path / "build.log", ESCAPING_LOG)
    done = run_invoke("diagnose", str(log), "--json")
    assert done.returncode == 0, done.stderr
    assert not RAW_CONTROL.search(done.stdout.replace("\n", ""))
    lines = {line["number"]: line["text"] for line in json.loads(done.stdout)["first_error"]["lines"]}
    assert any("\x9b31m" in text for text in lines.values())  # JSON keeps the log's text as it was
    assert "\\u009b" in done.stdout and "\\u001b" in done.stdout


def test_hostile_rule_texts_are_neutralised_too(tmp_path: Path) -> None:
    rules = load_rules(
        write(
            tmp_path / "rules.toml",
            rule_table("heap", ["out of heap"]).replace(
                "title = 'Rule heap'", 'title = "Rule \\u001b]52;c;eA==\\u0007heap"'
            ),
        )
    )
    text = diagnose_text(OUT_OF_HEAP.text, rules=rules).to_text()
    assert "[heap] Rule heap" in text and not RAW_CONTROL.search(text)
    with pytest.raises(ConfigurationError) as raised:
        load_rules(write(tmp_path / "bad.toml", rule_table("x", ["y"]).replace("id = 'x'", 'id = "\\u001b[2Jx"')))
    assert "\x1b" not in raised.value.message and "rule '\\x1b[2Jx'" in raised.value.message


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("plain text\twith a tab\n", "plain text\twith a tab\n"),
        ("\x1b[2J\x1b[1;1Hcleared", "cleared"),
        ("\x1b]52;c;ZWNobyBwd25lZA==\x07", ""),
        ("\x1b]8;;http://x/\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x1bP1$r0m\x1b\\\x1b_apc\x9c\x1b^pm\x07\x1bXsos\x1b\\", ""),
        ("\x9b31mred\x9b0m \x9d0;t\x07", "red "),
        ("\x1b(B\x1b7\x1b8\x1bc\x1bM", ""),
        ("bell\x07 bs\x08 nul\x00 del\x7f c1\x85", "bell\\x07 bs\\x08 nul\\x00 del\\x7f c1\\x85"),
        ("\x1b[12", "\\x1b[12"),
        ("\x1b]0;unterminated title", "\\x1b]0;unterminated title"),
        ("\x1b\x1b[2J", "\\x1b"),
        ("crlf\r\nlone\rcr", "crlf\nlone\\x0dcr"),
    ],
)
def test_terminal_safe(raw: str, safe: str) -> None:
    assert terminal_safe(raw) == safe
    assert terminal_safe(safe) == safe  # idempotent
    assert not RAW_CONTROL.search(terminal_safe(raw))


def test_terminal_safe_options() -> None:
    assert terminal_safe("a\nb\tc") == "a\nb\tc"
    assert terminal_safe("a\nb\tc", keep="") == "a\\x0ab\\x09c"
    assert terminal_safe("10%\r20%\n", keep="\t\n\r") == "10%\r20%\n"
    assert terminal_safe("\x1b[31mred\x1b[0m\x07", show_sequences=True) == "\\x1b[31mred\\x1b[0m\\x07"


def test_terminal_safe_is_linear_on_adversarial_text() -> None:
    for text in ("\x1b]" * 200_000, "\x1b[" + "1;" * 200_000, "\x1bP" + "x" * 400_000):
        started = time.perf_counter()
        assert not RAW_CONTROL.search(terminal_safe(text))
        assert time.perf_counter() - started < 5  # quadratic would take minutes


def test_terminal_json_round_trips() -> None:
    data = {"text": "a\x1b[2J\x9b2J\x7f\x07b", "n": 1}
    text = terminal_json(data, indent=2)
    assert not RAW_CONTROL.search(text.replace("\n", ""))
    assert json.loads(text) == data
