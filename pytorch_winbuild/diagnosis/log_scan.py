"""One log's triage, chunk by chunk: the first error block, the rules that fire, their time budgets.

LogScan carries what one chunk leaves to the next (the lines before it, a block still open, the
count of each rule's lines). One Hyperscan pass finds the lines that hold a literal; only those are
decoded and searched (a pattern no literal gates is searched through the decoded chunk). Apart
from reading the log (chunks.py), from the error grammar (blocks.py) and from the rule set made
ready once for every log (scanner.py).
"""

from __future__ import annotations

import time

import hyperscan

from pytorch_winbuild.diagnosis import chunks
from pytorch_winbuild.diagnosis.blocks import CONTEXT_LINES, ERROR_LITERALS, BlockCollector, classify, clean_line
from pytorch_winbuild.diagnosis.chunks import Chunk, hyperscan_scan
from pytorch_winbuild.diagnosis.model import FirstError, LogLine, RuleMatch
from pytorch_winbuild.diagnosis.report import TriageResult
from pytorch_winbuild.diagnosis.rules import PatternTooSlow, Rule
from pytorch_winbuild.diagnosis.scanner import scanner_for

# Lines kept from earlier chunks for preceded_by windows and context: at most a rule's within_lines
# (rules.MAX_WITHIN_LINES) and, past CONTEXT_LINES, at most this many characters (a window of
# 10,000 lines of 256 KiB would otherwise hold 2.5 GB).
WINDOW_CHARS = 4 * 1024 * 1024
MAX_CUT_LINES_LISTED = 5  # cut lines named in the warning
# Time a rule with RE2 patterns may take: a grace period, then a share per MB of log read so far.
# An ordinary pattern needs a few hundredths of a second per MB; one that costs more than
# USER_RULE_SECONDS_PER_MB (10 MB/s) is skipped once it is past the grace period.
USER_RULE_GRACE_SECONDS = 2.0
USER_RULE_SECONDS_PER_MB = 0.1


def _line_bounds(chunk: Chunk, position: int) -> tuple[int, int]:
    """Start and end offsets of the line holding `position` (end excludes the newline)."""
    start = chunk.rfind(b"\n", 0, position) + 1
    end = chunk.find(b"\n", position)
    return start, len(chunk) if end < 0 else end


_NEWLINE = ord("\n")
_SHORT_LINE_BYTES = 48  # below this average length chunk.count(b"\n") beats replace()
_SAMPLE_BYTES = 64 * 1024


def _lines_before(chunk: Chunk, start: int, count: int) -> list[Chunk]:
    """Up to `count` complete lines that end right before the line starting at `start`."""
    lines: list[Chunk] = []
    newline = start - 1
    while len(lines) < count and newline >= 0 and chunk[newline] == _NEWLINE:
        line_start = chunk.rfind(b"\n", 0, newline) + 1
        lines.append(chunk[line_start:newline])
        newline = line_start - 1
    return lines[::-1]


def _recent(lines: list[str], count: int) -> list[str]:
    """The last `count` of `lines`, less the oldest ones past WINDOW_CHARS characters (the last
    CONTEXT_LINES are always kept)."""
    lines = lines[-count:]
    if sum(map(len, lines)) <= WINDOW_CHARS:
        return lines
    total = 0
    for index in range(len(lines) - 1, -1, -1):
        total += len(lines[index])
        if total > WINDOW_CHARS and len(lines) - index > CONTEXT_LINES:
            return lines[index + 1 :]
    return lines


def _newlines(chunk: Chunk) -> int:
    """chunk.count(b"\\n"), but up to 4 times as fast on long lines (Ninja's command lines).

    count() tests every byte; replace() finds each newline with memchr, which is faster on lines
    longer than about 48 bytes and much slower on short ones (25 times on blank lines).
    The lines at the start of the chunk pick the method.
    """
    sample = chunk.count(b"\n", 0, _SAMPLE_BYTES)
    if sample * _SHORT_LINE_BYTES > _SAMPLE_BYTES:
        return sample + chunk.count(b"\n", _SAMPLE_BYTES)
    return len(chunk) - len(chunk.replace(b"\n", b""))


def _byte_offsets(chunk: Chunk, text: str, starts: list[int]) -> dict[int, int]:
    """Where the lines that start at `starts` in `text` (the decoded chunk) start in `chunk`.

    Multi-byte and undecodable bytes make the offsets differ, never the lines: count those.
    """
    offsets: dict[int, int] = {}
    char_mark = byte_mark = 0
    for start in starts:
        for _ in range(text.count("\n", char_mark, start)):
            byte_mark = chunk.index(b"\n", byte_mark) + 1
        char_mark = start
        offsets[start] = byte_mark
    return offsets


class LogScan:
    """State carried from chunk to chunk while one log is triaged.

    Chunks are bytes, whole lines ending in "\\n". Only the lines that are examined or reported
    are decoded, with `errors`: "replace" for a file (its stray bytes become U+FFFD, as text mode
    made them), "surrogatepass" for text given as str (diagnose_text encodes it so).
    """

    def __init__(self, rules: tuple[Rule, ...], errors: str) -> None:
        self.scanner = scanner_for(rules)
        self.scratch = hyperscan.Scratch(self.scanner.finder)  # per log: two threads may triage at once
        self.errors = errors
        self.lines_before_chunk = 0
        self.carry: list[str] = []  # the last lines of the previous chunk, for context windows
        self.collector: BlockCollector | None = None
        self.first_error: FirstError | None = None
        count = len(rules)
        self.first_hit: list[LogLine | None] = [None] * count
        self.hit_count = [0] * count
        self.ends_with_newline = True
        self.bytes_seen = 0
        self.spent: dict[int, float] = {}  # seconds taken by each guarded rule
        self.skipped: dict[int, str] = {}  # guarded rule index -> the warning saying why
        self.chunk_cut = 0  # the length in bytes of this chunk's first line, where it was cut
        self.cut_count = 0
        self.cut_listed: list[tuple[int, int]] = []  # (line number, bytes) of the first cut lines
        # Cut lines the first error block may show (its lines and the context before them), by number.
        self.cut_lines: dict[int, int] = {}

    def _decode(self, data: Chunk) -> str:
        return data.decode("utf-8", self.errors)

    def _text_before(self, chunk: Chunk, start: int, count: int) -> list[str]:
        return [self._decode(line) for line in _lines_before(chunk, start, count)]

    def _text_line(self, chunk: Chunk, start: int) -> str:
        return self._decode(chunk[start : _line_bounds(chunk, start)[1]])

    # -- per chunk --------------------------------------------------------------------------

    def _candidates(self, chunk: Chunk) -> list[int]:
        """End offsets in `chunk` of the literals found there, in order."""
        ends: list[int] = []

        def record(_id: int, _start: int, end: int, _flags: int, _context: object) -> None:
            ends.append(end)

        hyperscan_scan(self.scanner.finder, chunk, record, self.scratch)
        ends.sort()
        return ends

    def feed(self, chunk: Chunk, cut: int = 0) -> None:
        """Scan the next chunk; `cut`: the length in bytes of its first line where it was cut (chunks.log_chunks)."""
        if not chunk:
            return
        self.chunk_cut = cut
        if cut:
            self._note_cut(self.lines_before_chunk + 1, cut)
        self.bytes_seen += len(chunk)
        if self.collector is not None:
            self._continue_block(chunk, 0)
        hits: dict[int, set[int]] = {}  # rule index -> start offsets of its trigger lines
        line_end = -1
        for end in self._candidates(chunk):
            if end <= line_end:
                continue  # another literal on a line already looked at
            start, line_end = _line_bounds(chunk, end - 1)
            line = self._decode(chunk[start:line_end])
            if (
                self.collector is None
                and self.first_error is None
                and any(literal in line for literal in ERROR_LITERALS)
            ):
                kind = classify(line)
                if kind:
                    self._start_block(chunk, start, kind)
            self._gated_hits(line, start, hits)
        self._match_rules(chunk, hits)
        window = self.scanner.window
        self.carry = _recent(self.carry + self._text_before(chunk, len(chunk), window), window)
        self.lines_before_chunk += _newlines(chunk)
        self.ends_with_newline = chunk.endswith(b"\n")

    def line_count(self) -> int:
        return self.lines_before_chunk + (0 if self.ends_with_newline else 1)

    def _note_cut(self, number: int, size: int) -> None:
        self.cut_count += 1
        if len(self.cut_listed) < MAX_CUT_LINES_LISTED:
            self.cut_listed.append((number, size))
        if self.first_error is None:  # the block may show it; before a block, only as context
            if self.collector is None:
                self.cut_lines = {line: cut for line, cut in self.cut_lines.items() if line >= number - CONTEXT_LINES}
            self.cut_lines[number] = size

    def _cut_warning(self) -> str:
        limit = chunks.MAX_LINE_BYTES
        listed = ", ".join(f"line {number} ({size} bytes)" for number, size in self.cut_listed)
        if self.cut_count > len(self.cut_listed):
            listed += f" and {self.cut_count - len(self.cut_listed)} more"
        if self.cut_count == 1:
            return f"1 line longer than {limit} bytes was cut: only its first {limit} were searched: {listed}."
        return (
            f"{self.cut_count} lines longer than {limit} bytes were cut: "
            f"only their first {limit} were searched: {listed}."
        )

    # -- first error ------------------------------------------------------------------------

    def _start_block(self, chunk: Chunk, start: int, kind: str) -> None:
        number = self.lines_before_chunk + chunk.count(b"\n", 0, start) + 1
        before_text = (self.carry + self._text_before(chunk, start, CONTEXT_LINES))[-CONTEXT_LINES:]
        before = [LogLine(number - len(before_text) + offset, text) for offset, text in enumerate(before_text)]
        start_end = _line_bounds(chunk, start)[1]
        self.collector = BlockCollector(kind, LogLine(number, self._decode(chunk[start:start_end])), before)
        self._continue_block(chunk, start_end + 1, number + 1)

    def _continue_block(self, chunk: Chunk, position: int, number: int | None = None) -> None:
        collector = self.collector
        assert collector is not None
        number = self.lines_before_chunk + 1 if number is None else number
        while position < len(chunk):
            end = chunk.find(b"\n", position)
            end = len(chunk) if end < 0 else end
            if not collector.feed(number, self._decode(chunk[position:end])):
                self._finish_block()
                return
            position, number = end + 1, number + 1

    def _finish_block(self) -> None:
        if self.collector is not None:
            self.first_error = self.collector.result(self.cut_lines)
            self.collector = None
            self.cut_lines = {}

    # -- diagnosis rules --------------------------------------------------------------------

    def _gated_hits(self, line: str, start: int, hits: dict[int, set[int]]) -> None:
        """Run the patterns whose literal this line holds; record the line for those that match."""
        guarded, skipped = self.scanner.guarded, self.skipped
        for literal, probes in self.scanner.gated.items():
            if literal not in line:
                continue
            for rule_index, pattern in probes:
                if rule_index in guarded:
                    if rule_index in skipped:
                        continue
                    started = time.perf_counter()
                    matched = pattern.search(line)
                    if self._charge(rule_index, time.perf_counter() - started):
                        continue
                else:
                    matched = pattern.search(line)
                if matched:
                    hits.setdefault(rule_index, set()).add(start)

    def _ungated_hits(self, chunk: Chunk, hits: dict[int, set[int]]) -> None:
        """Search the patterns no literal gates through the chunk's decoded text."""
        text = self._decode(chunk)
        found: dict[int, set[int]] = {}  # rule index -> start offsets of its lines in `text`
        # Past a final newline there is no line: a pattern that matches the empty string there
        # ('^$') would count a line too many, and be found there again and again.
        last = len(text) - 1 if text.endswith("\n") else len(text)
        for rule_index, pattern in self.scanner.ungated:
            position = 0
            while position <= last:
                match = pattern.search(text, position)
                if match is None or match.start() > last:
                    break
                start = text.rfind("\n", 0, match.start()) + 1
                end = text.find("\n", match.start())
                end = len(text) if end < 0 else end
                if pattern.search(text, start, end):  # the same match, held to one line
                    found.setdefault(rule_index, set()).add(start)
                position = end + 1
        for rule_index, linear in self.scanner.ungated_linear:
            if rule_index in self.skipped:
                continue
            started = time.perf_counter()
            try:
                for start in linear.line_starts(text, deadline=started + self._allowance(rule_index)):
                    found.setdefault(rule_index, set()).add(start)
            except PatternTooSlow:
                pass
            self._charge(rule_index, time.perf_counter() - started)
        if found:
            offsets = _byte_offsets(chunk, text, sorted(set().union(*found.values())))
            for rule_index, starts in found.items():
                hits.setdefault(rule_index, set()).update(offsets[start] for start in starts)

    def _match_rules(self, chunk: Chunk, hits: dict[int, set[int]]) -> None:
        """Add the patterns no literal gates, then count each rule's lines."""
        guarded, skipped = self.scanner.guarded, self.skipped
        if self.scanner.ungated or self.scanner.ungated_linear:
            self._ungated_hits(chunk, hits)
        for rule_index in skipped:
            hits.pop(rule_index, None)
        if not hits:
            return
        numbers = self._line_numbers(chunk, sorted(set().union(*hits.values())))
        for rule_index, offsets in hits.items():
            rule = self.scanner.rules[rule_index]
            is_guarded = rule_index in guarded
            started = time.perf_counter()
            for offset in sorted(offsets):
                if is_guarded and time.perf_counter() - started > self._allowance(rule_index):
                    break
                if rule.preceded_by and not self._preceded(rule, chunk, offset):
                    continue
                if self.first_hit[rule_index] is None:
                    cut = self.chunk_cut if offset == 0 else 0  # only a chunk's first line may have been cut
                    text = clean_line(self._text_line(chunk, offset), cut)
                    self.first_hit[rule_index] = LogLine(numbers[offset], text)
                self.hit_count[rule_index] += 1
            if is_guarded:
                self._charge(rule_index, time.perf_counter() - started)

    def _allowance(self, rule_index: int) -> float:
        """Seconds a guarded rule may still take."""
        allowed = USER_RULE_GRACE_SECONDS + USER_RULE_SECONDS_PER_MB * self.bytes_seen / 1e6
        return allowed - self.spent.get(rule_index, 0.0)

    def _charge(self, rule_index: int, seconds: float) -> bool:
        """Count a guarded rule's time; past its allowance the rule is skipped (True)."""
        over = self._allowance(rule_index) < seconds
        self.spent[rule_index] = self.spent.get(rule_index, 0.0) + seconds
        if over and rule_index not in self.skipped:
            rule = self.scanner.rules[rule_index]
            megabytes = self.bytes_seen / 1e6
            self.skipped[rule_index] = (
                f"rule '{rule.id}' skipped: its patterns took {self.spent[rule_index]:.1f} s on the first "
                f"{megabytes:.1f} MB of the log (allowed: {USER_RULE_GRACE_SECONDS:g} s + "
                f"{USER_RULE_SECONDS_PER_MB:g} s per MB). RE2 runs in linear time, but counted repetitions such as "
                ".{300} make every character costly: simplify the pattern."
            )
        return over

    def _preceded(self, rule: Rule, chunk: Chunk, start: int) -> bool:
        """Does a `preceded_by` pattern match the line at `start` or one of the rule's window before it?"""
        window = self._text_before(chunk, start, rule.within_lines)
        if len(window) < rule.within_lines:  # the window reaches back into the previous chunk
            window = (self.carry + window)[-rule.within_lines :]
        window.append(self._text_line(chunk, start))
        return any(pattern.search(line) for line in window for pattern in rule.preceded_by)

    def _line_numbers(self, chunk: Chunk, offsets: list[int]) -> dict[int, int]:
        numbers: dict[int, int] = {}
        number, previous = self.lines_before_chunk + 1, 0
        for offset in offsets:
            number += chunk.count(b"\n", previous, offset)
            numbers[offset] = number
            previous = offset
        return numbers

    # -- end --------------------------------------------------------------------------------

    def result(self, source: str) -> TriageResult:
        self._finish_block()
        matches = [
            RuleMatch(rule, first, self.hit_count[index])
            for index, (rule, first) in enumerate(zip(self.scanner.rules, self.first_hit, strict=True))
            if first is not None and index not in self.skipped
        ]
        matches.sort(key=lambda match: match.line.number)
        warnings = tuple(self.skipped[index] for index in sorted(self.skipped))
        if self.cut_count:
            warnings = (self._cut_warning(), *warnings)
        return TriageResult(
            source=source,
            line_count=self.line_count(),
            first_error=self.first_error,
            matches=tuple(matches),
            warnings=warnings,
        )
