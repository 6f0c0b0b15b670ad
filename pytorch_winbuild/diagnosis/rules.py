"""Diagnosis rules: what a known failure looks like in a log, and what to do about it.

The rules are data (build_config/diagnosis.toml); this module loads and validates them, each problem a
ConfigurationError naming file, rule id and key. The shipped file's patterns run on Python's `re`; any other rules file
is compiled with RE2 (linear time), and a pattern RE2 cannot run is refused at load time.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import functools
import re
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.json_file import JsonObject
from pytorch_winbuild.knowledge.config_files import config_dir, load_toml, optional, require, string_list

RULES_FILE = "diagnosis.toml"

# When in a user's journey the problem shows up; the build report groups matches by it.
PHASES = ("install", "build", "import", "runtime")

DEFAULT_WITHIN_LINES = 30
# The widest `preceded_by` window a rule may ask for. The shipped rules use 20 to 40 lines (a
# traceback, a solver's conflict report); 10,000 is five times the longest error block triage
# follows (blocks.MAX_BLOCK_SCAN, 2,000 lines: a runaway template error), and the lines of the
# window are kept in memory while the log is read, so a wider one (10**18 kept the whole log) is
# refused at load time.
MAX_WITHIN_LINES = 10_000

_RULE_KEYS = {
    "id",
    "title",
    "patterns",
    "explanation",
    "fix",
    "fix_posix",
    "source",
    "phase",
    "preceded_by",
    "within_lines",
    "names_gpus",
}
_ID_SHAPE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# RE2's size of a compiled pattern; the largest shipped pattern is about 1,650. Past this a
# pattern such as `[aeiou].{300}x` still runs in linear time, but at microseconds per character.
MAX_PROGRAM_SIZE = 5000
# RE2 is searched over windows of whole lines this long, so a costly pattern is checked against
# its time budget (log_scan.py) at least this often.
WINDOW_BYTES = 256 * 1024


class PatternTooSlow(Exception):
    """A LinearPattern ran past the deadline it was given."""


# What the rules use of google-re2 (its module `re2`, which has no type information).
class _Re2Match(Protocol):
    def start(self) -> int: ...


class _Re2Regexp(Protocol):
    @property
    def programsize(self) -> int: ...

    def search(self, text: bytes, pos: int | None = None, endpos: int | None = None) -> _Re2Match | None: ...


class _Re2Options(Protocol):
    log_errors: bool


class _Re2(Protocol):
    error: type[Exception]
    Options: Callable[[], _Re2Options]

    def compile(self, pattern: bytes, options: _Re2Options) -> _Re2Regexp: ...


class LinearPattern:
    """A pattern of a rules file other than the shipped one, run by RE2 in linear time.

    Like re.Pattern it has `pattern` (the text as written) and `search(text, pos, endpos)`, but
    search only says whether the pattern matches inside text[pos:endpos]: the scanner asks it
    about one line at a time. Patterns are compiled in multi-line mode, as the shipped ones are.
    Text is searched as UTF-8 (lone surrogates pass through as bytes that match nothing).
    """

    __slots__ = ("_regexp", "pattern")

    def __init__(self, pattern: str, regexp: _Re2Regexp) -> None:
        self.pattern = pattern
        self._regexp = regexp

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinearPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(("re2", self.pattern))

    def __repr__(self) -> str:
        return f"LinearPattern({self.pattern!r})"

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> bool:
        return self._regexp.search(_utf8(text[pos:endpos])) is not None

    def line_starts(self, chunk: str, deadline: float) -> Iterator[int]:
        """Offsets in `chunk` of the lines on which the pattern matches, in order.

        Raises PatternTooSlow once time.perf_counter() passes `deadline` (checked between
        windows of WINDOW_BYTES and after each matching line).
        """
        data = _utf8(chunk)
        same_offsets = len(data) == len(chunk)  # ASCII: a byte offset is a character offset
        last = len(data) - 1 if data.endswith(b"\n") else len(data)  # past a final newline there is no line
        byte_mark = char_mark = 0
        position = 0
        while position <= last:
            if time.perf_counter() > deadline:
                raise PatternTooSlow
            # Windows start after a newline and stop at one, so ^, $ and \b see what they
            # would see in the whole chunk.
            stop = data.find(b"\n", min(position + WINDOW_BYTES, len(data)))
            stop = len(data) if stop < 0 else stop
            found = self._regexp.search(data, position, stop)
            if found is None:
                position = stop + 1
                continue
            if found.start() > last:
                return
            start = data.rfind(b"\n", 0, found.start()) + 1
            end = data.find(b"\n", found.start())
            end = len(data) if end < 0 else end
            if self._regexp.search(data, start, end) is not None:  # the same match, held to one line
                if not same_offsets:
                    char_mark += len(data[byte_mark:start].decode("utf-8", "surrogatepass"))
                    byte_mark = start
                yield start if same_offsets else char_mark
            position = end + 1


Pattern = re.Pattern[str] | LinearPattern


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Rule:
    """One known problem: the log lines that reveal it and the advice for it.

    `patterns` are matched against single log lines. A rule with `preceded_by` fires only when
    one of those patterns matched on the same line or up to `within_lines` lines earlier, which
    is how a rule says "a broken pipe *inside a DataLoader traceback*".
    """

    id: str
    title: str
    explanation: str
    fix: str
    source: str
    phase: str | None
    patterns: tuple[Pattern, ...]
    preceded_by: tuple[Pattern, ...] = ()
    within_lines: int = DEFAULT_WITHIN_LINES
    fix_posix: str | None = None  # the fix on Linux and macOS, where it differs from Windows' `fix`
    names_gpus: bool = False  # the fix depends on the GPUs: `invoke diagnose` names this machine's and its --arch-list

    def fix_on(self, posix: bool | None) -> str:
        """The fix for a machine: Linux/macOS (`posix`), Windows, or None when the log's machine is unknown
        (then Windows', the tool's main platform)."""
        return self.fix_posix if posix and self.fix_posix else self.fix

    def to_dict(self, posix: bool | None = None) -> JsonObject:
        """The advice part, as the build report stores it (patterns stay in the rules file): the fix for the
        log's machine, or when that is unknown Windows' `fix` and, where it differs, `fix_posix`."""
        data: JsonObject = {
            "id": self.id,
            "title": self.title,
            "phase": self.phase,
            "explanation": self.explanation,
            "fix": self.fix_on(posix),
            "source": self.source,
        }
        if posix is None and self.fix_posix:
            data["fix_posix"] = self.fix_posix
        return data


def _one_paragraph(text: str) -> str:
    """TOML multi-line strings wrap for the editor; output re-wraps for the terminal."""
    return " ".join(text.split())


_RE2_LIMITS = (
    "rules files other than the shipped one are matched with RE2, which never backtracks and so cannot hang on a log "
    "line: it has no lookahead or lookbehind ((?=, (?!, (?<=, (?<!), no backreferences (\\1, (?P=name)) and no "
    "possessive quantifiers, and it spells the end of the text \\z (not \\Z); rewrite the pattern without them, or "
    "put it in a second pattern or rule"
)


def _compile(pattern: str, where: str, linear: bool) -> Pattern:
    if linear and pattern not in _shipped_patterns():
        return _compile_linear(pattern, where)
    # MULTILINE because the scanner matches inside a chunk bounded to one line (pos/endpos):
    # '^' must then hold right after a newline, exactly as it does at the start of a lone line.
    try:
        return re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        raise _invalid(pattern, where, exc) from None


def _invalid(pattern: str, where: str, exc: re.error) -> ConfigurationError:
    return ConfigurationError(
        f"{where}: invalid regular expression {pattern!r} ({exc}).",
        fix="correct the pattern; remember TOML literal strings ('...') keep backslashes as written.",
    )


def _compile_linear(pattern: str, where: str) -> LinearPattern:
    re2 = _re2()
    options = re2.Options()
    options.log_errors = False  # RE2 would print its own copy of the error on stderr
    try:
        regexp = re2.compile(_utf8("(?m)" + pattern), options)
    except re2.error as exc:
        # Python's message says where a broken pattern breaks; RE2's names what it lacks.
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                re.compile(pattern)
        except re.error as python_exc:
            raise _invalid(pattern, where, python_exc) from None
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ConfigurationError(
            f"{where}: unsupported regular expression {pattern!r} (RE2: {reason}).", fix=f"{_RE2_LIMITS}."
        ) from None
    if regexp.programsize > MAX_PROGRAM_SIZE:
        raise ConfigurationError(
            f"{where}: regular expression {pattern!r} is too complex (RE2 program size {regexp.programsize}, "
            f"at most {MAX_PROGRAM_SIZE}).",
            fix="shorten counted repetitions such as .{300} or long alternations, or split the pattern into "
            "several patterns.",
        )
    return LinearPattern(pattern, regexp)


def _re2() -> _Re2:
    try:
        import re2
    except ImportError:
        raise ConfigurationError(
            "rules files other than the shipped one need the google-re2 package (RE2, a regular-expression "
            "engine that cannot hang on a log line), which is not installed.",
            fix="pip install google-re2, or reinstall pytorch-winbuild (pip install -e .), which requires it.",
        ) from None
    return re2


def _compile_list(table: dict[str, object], key: str, where: str, linear: bool) -> tuple[Pattern, ...]:
    patterns = string_list(table, key, where)
    if not patterns:
        raise ConfigurationError(f"{where}.{key}: expected at least one pattern.")
    return tuple(_compile(pattern, f"{where}.{key}[{index}]", linear) for index, pattern in enumerate(patterns))


def _text(table: dict[str, object], key: str, where: str) -> str:
    value = _one_paragraph(require(table, key, str, where))
    if not value:
        raise ConfigurationError(f"{where}.{key}: must not be empty.")
    return value


def _parse_rule(table: object, index: int, path: Path, linear: bool) -> Rule:
    if not isinstance(table, dict):
        raise ConfigurationError(f"{path}: rule[{index}]: expected a table, got {type(table).__name__}.")
    rule_id = table.get("id")
    # {!r}: the id is not validated yet, and the message goes to a terminal (an id is 'x-y').
    where = f"{path}: rule {rule_id!r}" if isinstance(rule_id, str) and rule_id else f"{path}: rule[{index}]"
    rule_id = require(table, "id", str, where)
    if not _ID_SHAPE.fullmatch(rule_id):
        raise ConfigurationError(f"{where}.id: expected lowercase words joined by '-', got {rule_id!r}.")
    unknown = sorted(set(table) - _RULE_KEYS)
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown key '{unknown[0]}'.", fix=f"use only {', '.join(sorted(_RULE_KEYS))}."
        )
    title = require(table, "title", str, where)
    if "\n" in title.strip() or not title.strip():
        raise ConfigurationError(f"{where}.title: expected one non-empty line.")
    phase = optional(table, "phase", str, where, None)
    if phase is not None and phase not in PHASES:
        raise ConfigurationError(f"{where}.phase: expected one of {', '.join(PHASES)}, got {phase!r}.")
    preceded_by: tuple[Pattern, ...] = ()
    if "preceded_by" in table:
        preceded_by = _compile_list(table, "preceded_by", where, linear)
    within_lines = optional(table, "within_lines", int, where, DEFAULT_WITHIN_LINES)
    if "within_lines" in table and not preceded_by:
        raise ConfigurationError(f"{where}.within_lines: only meaningful together with 'preceded_by'.")
    if not 0 <= within_lines <= MAX_WITHIN_LINES:
        raise ConfigurationError(
            f"{where}.within_lines: expected a number of lines from 0 to {MAX_WITHIN_LINES}, got {within_lines}.",
            fix="a preceded_by pattern is looked for on the same line (0) or up to within_lines lines before it; "
            f"the shipped rules use 20 to 40, and {MAX_WITHIN_LINES} is the most the scanner keeps.",
        )
    return Rule(
        id=rule_id,
        title=title.strip(),
        explanation=_text(table, "explanation", where),
        fix=_text(table, "fix", where),
        source=_text(table, "source", where),
        phase=phase,
        patterns=_compile_list(table, "patterns", where, linear),
        preceded_by=preceded_by,
        within_lines=within_lines,
        fix_posix=_text(table, "fix_posix", where) if "fix_posix" in table else None,
        names_gpus=optional(table, "names_gpus", bool, where, False),
    )


def _is_shipped(path: Path) -> bool:
    try:
        return path.resolve() == (config_dir() / RULES_FILE).resolve()
    except OSError:
        return False


def load_rules(path: Path | str = RULES_FILE, *, linear: bool | None = None) -> tuple[Rule, ...]:
    """Read and validate a rules file; a relative name is looked up in build_config/.

    linear: compile the patterns with RE2 (LinearPattern) rather than Python's `re`; by
    default, for every file but the shipped one. Patterns identical to a shipped pattern keep
    `re` (they are reviewed with the code, and some need lookahead), so a copy of the shipped
    file with rules added still loads.
    """
    resolved = Path(path)
    if not resolved.is_absolute() and not resolved.exists():
        if not (config_dir() / resolved).exists():
            raise ConfigurationError(
                f"rules file {str(path)!r} not found: neither in the current folder ({Path.cwd()}) nor among "
                f"pytorch-winbuild's own files ({config_dir()}).",
                fix="pass the path of your rules file, e.g. a copy of build_config/diagnosis.toml with your rules "
                "added (--rules ./my-rules.toml).",
            )
        resolved = config_dir() / resolved
    if linear is None:
        linear = not _is_shipped(resolved)
    data = load_toml(resolved)
    unknown = sorted(set(data) - {"rule"})
    if unknown:
        raise ConfigurationError(f"{resolved}: unknown top-level key '{unknown[0]}'.", fix="rules are [[rule]] tables.")
    tables = data.get("rule")
    if not isinstance(tables, list) or not tables:
        raise ConfigurationError(f"{resolved}: expected one or more [[rule]] tables.")
    rules = tuple(_parse_rule(table, index, resolved, linear) for index, table in enumerate(tables))
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise ConfigurationError(f"{resolved}: rule '{rule.id}' is defined twice.")
        seen.add(rule.id)
    return rules


@functools.lru_cache(maxsize=1)
def default_rules() -> tuple[Rule, ...]:
    """The shipped rules, loaded and compiled once per process."""
    return load_rules(RULES_FILE, linear=False)


@functools.lru_cache(maxsize=1)
def _shipped_patterns() -> frozenset[str]:
    return frozenset(pattern.pattern for rule in default_rules() for pattern in (*rule.patterns, *rule.preceded_by))
