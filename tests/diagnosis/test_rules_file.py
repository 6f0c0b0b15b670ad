"""Loading diagnosis rules: a broken rules file is reported with the file, the rule and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytorch_winbuild.diagnosis import chunks
from pytorch_winbuild.diagnosis.literals import required_literals
from pytorch_winbuild.diagnosis.rules import default_rules, load_rules
from pytorch_winbuild.diagnosis.triage import diagnose_text, triage_log
from pytorch_winbuild.errors import ConfigurationError

GOOD_RULE = """
[[rule]]
id = "good"
title = "A good rule"
patterns = ['all is well']
explanation = "Nothing is wrong."
fix = "Nothing to do."
source = "a test"
"""


def write_rules(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(GOOD_RULE + text, encoding="utf-8")
    return path


def rule(**fields: str) -> str:
    """A [[rule]] table; a field given as None is left out."""
    base = {
        "id": '"broken"',
        "title": '"A broken rule"',
        "patterns": "['something failed']",
        "explanation": '"Why."',
        "fix": '"What to do."',
        "source": '"a test"',
    }
    base.update(fields)
    return "\n[[rule]]\n" + "".join(f"{key} = {value}\n" for key, value in base.items() if value is not None)


def load_error(tmp_path: Path, text: str) -> str:
    path = write_rules(tmp_path, text)
    with pytest.raises(ConfigurationError) as raised:
        load_rules(path)
    assert raised.value.exit_code == 2
    assert str(path) in raised.value.message
    return raised.value.message


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"patterns": "['ok', '(unclosed']"},
            ["rule 'broken'", "patterns[1]", "invalid regular expression", "(unclosed"],
        ),
        ({"preceded_by": "['[a-']"}, ["rule 'broken'", "preceded_by[0]", "invalid regular expression"]),
        ({"fix": None}, ["rule 'broken'", "missing required key 'fix'"]),
        ({"patterns": None}, ["rule 'broken'", "missing required key 'patterns'"]),
        ({"id": None}, ["rule[1]", "missing required key 'id'"]),
        ({"patterns": "[]"}, ["rule 'broken'.patterns", "at least one pattern"]),
        ({"patterns": "'not a list'"}, ["rule 'broken'.patterns", "expected list"]),
        ({"patterns": "[1, 2]"}, ["rule 'broken'.patterns", "list of strings"]),
        ({"patern": "['typo']"}, ["rule 'broken'", "unknown key 'patern'"]),
        ({"phase": '"compile"'}, ["rule 'broken'.phase", "install, build, import, runtime"]),
        ({"within_lines": "5"}, ["rule 'broken'.within_lines", "preceded_by"]),
        ({"preceded_by": "['x']", "within_lines": "-1"}, ["rule 'broken'.within_lines", "from 0 to 10000, got -1"]),
        (
            {"preceded_by": "['x']", "within_lines": "10001"},
            ["rule 'broken'.within_lines", "from 0 to 10000, got 10001"],
        ),
        (
            {"preceded_by": "['x']", "within_lines": str(10**18)},
            ["rule 'broken'.within_lines", f"from 0 to 10000, got {10**18}"],
        ),
        ({"preceded_by": "['x']", "within_lines": "true"}, ["rule 'broken'.within_lines", "boolean"]),
        ({"id": '"Not A Slug"'}, ["rule 'Not A Slug'.id", "lowercase words"]),
        ({"title": '"""two\nlines"""'}, ["rule 'broken'.title", "one non-empty line"]),
        ({"explanation": '"   "'}, ["rule 'broken'.explanation", "must not be empty"]),
        ({"fix_posix": '"   "'}, ["rule 'broken'.fix_posix", "must not be empty"]),
        ({"fix_posix": "3"}, ["rule 'broken'", "fix_posix"]),
        ({"id": '"good"'}, ["rule 'good' is defined twice"]),
    ],
)
def test_broken_rule_names_file_rule_and_key(
    tmp_path: Path, fields: dict[str, str | None], expected: list[str]
) -> None:
    message = load_error(tmp_path, rule(**fields))
    for part in expected:
        assert part in message


def test_not_toml(tmp_path: Path) -> None:
    assert "not valid TOML" in load_error(tmp_path, "[[rule]\nid =")


def test_no_rules_and_unknown_top_level_keys(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text("# nothing yet\n")
    with pytest.raises(ConfigurationError, match=r"expected one or more \[\[rule\]\] tables"):
        load_rules(path)
    assert "unknown top-level key 'rules'" in load_error(tmp_path, "[[rules]]\nid = 'x'\n")


def test_missing_rules_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="file not found"):
        load_rules(tmp_path / "nowhere.toml")


def test_shipped_rules_load_and_relative_names_resolve_in_build_config() -> None:
    assert load_rules("diagnosis.toml") == default_rules()
    assert len(default_rules()) >= 35


def test_texts_are_joined_into_one_paragraph(tmp_path: Path) -> None:
    path = write_rules(tmp_path, rule(explanation="'''\nfirst line\n  second line\n'''"))
    assert load_rules(path)[1].explanation == "first line second line"


def test_custom_rules_with_context_and_a_case_insensitive_pattern(tmp_path: Path) -> None:
    """A pattern with no plain literal (here: case-insensitive) still works, by the slower path."""
    path = write_rules(
        tmp_path,
        rule(
            id='"sccache-timeout"',
            patterns="['(?i)sccache: error: timed out']",
            preceded_by="['starting sccache']",
            within_lines="2",
        ),
    )
    rules = load_rules(path)
    assert required_literals(rules[1].patterns[0].pattern) is None
    log = "starting sccache server\nbuilding\nSCCACHE: ERROR: Timed out waiting for server startup\n"
    assert [(match.rule.id, match.line.number) for match in diagnose_text(log, rules=rules).matches] == [
        ("sccache-timeout", 3)
    ]
    far = "starting sccache server\n1\n2\n3\nsccache: error: Timed out waiting for server startup\n"
    assert diagnose_text(far, rules=rules).matches == ()


@pytest.mark.parametrize("within", [0, 1, 10_000])
def test_within_lines_at_its_bounds_looks_back_that_far(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, within: int
) -> None:
    """0 is the trigger's own line; 10,000 reaches back across many chunks of the file, and no further."""
    rules = load_rules(
        write_rules(
            tmp_path,
            rule(id='"wide"', patterns="['timed out']", preceded_by="['starting sccache']", within_lines=str(within)),
        )
    )
    assert rules[1].within_lines == within
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4096)
    log = tmp_path / "build.log"
    for gap, fires in ((within - 1, True), (within, False)):
        text = (
            "starting sccache\n" + "step\n" * gap + "sccache: timed out\n"
            if gap >= 0
            else "starting sccache: timed out\n"
        )
        log.write_text(text, encoding="utf-8")
        for result in (diagnose_text(text, rules=rules), triage_log(log, rules=rules)):
            assert [match.rule.id for match in result.matches] == (["wide"] if fires else []), (gap, fires)


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        (r"unsupported Microsoft Visual Studio version", ("unsupported Microsoft Visual Studio version",)),
        (r"fatal error C10(?:60|02|76)\b", ("fatal error C10",)),
        (r"nvcc fatal\s*: Host compiler targets unsupported OS", (": Host compiler targets unsupported OS",)),
        (r"\[WinError 126\] .*Error loading", ("[WinError 126] ",)),
        (r"Microsoft Visual C\+\+ 14\.0 (?:or greater )?is required", ("Microsoft Visual C++ 14.0 ",)),
        (r"colou?r scheme", ("r scheme",)),  # an optional character ends a run
        (r"x{0,3}yyyy", ("yyyy",)),
        (r"abcd{2}ef", ("abcd",)),  # a repeated character is kept once, then the run ends
        (r"abc\x41defg", ("defg",)),  # a character code is not its letters
        (r"first choice|second choice", ("first choice", "second choice")),
        (r"(?m)^start here", ("start here",)),
        (r"(?i)case blind", None),
        (r"ab|long enough", None),  # one branch without a literal: no gate
        (r"\d+\.\d+", None),
    ],
)
def test_required_literals(pattern: str, literals: tuple[str, ...] | None) -> None:
    assert required_literals(pattern) == literals
