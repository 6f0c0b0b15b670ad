"""Make untrusted text (logs, git output, a tool's stdout) safe to print on a terminal.

A terminal obeys what it prints, so `terminal_safe` removes complete escape sequences and shows every other control
character (bidirectional controls too) as a visible ASCII escape; `terminal_lines` also shows LF, for text a face lays
out in lines. Every pattern is linear, so no input can make it slow. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable

__all__ = ["BIDI_CONTROLS", "DEFAULT_KEEP", "terminal_json", "terminal_line", "terminal_lines", "terminal_safe"]

DEFAULT_KEEP = "\t\n"

# Unicode's bidirectional formatting characters (UAX #9, section 2): ALM, LRM, RLM, the
# embeddings and overrides LRE RLE PDF LRO RLO, the isolates LRI RLI FSI PDI.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"

# Bodies of string sequences: anything up to their terminator, never across a line end.
_STRING_BODY = "[^\x07\x1b\x9c\n]*"
_STRING_END = "(?:\x07|\x1b\\\\|\x9c)"  # BEL, ST as ESC \, ST as the C1 character
_SEQUENCE = (
    # CSI: ESC [ or C1 CSI, parameter bytes, intermediate bytes, one final byte (ECMA-48 5.4).
    "(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]"
    # OSC (hyperlinks, clipboard, window title), DCS, SOS, PM, APC: strings up to BEL or ST.
    f"|(?:\x1b[\\]PX^_]|[\x9d\x90\x98\x9e\x9f]){_STRING_BODY}{_STRING_END}"
    # nF (ESC ( B: character sets), then two-character Fp/Fe/Fs (ESC 7, ESC c, ESC M, ESC \).
    # The introducers of the sequences above are left out, so an unfinished CSI or OSC keeps
    # its ESC, which is then shown visibly.
    "|\x1b[ -/]+[0-~]"
    "|\x1b[0-OQ-WYZ\\\\`a-~]"
)
_CONTROLS = "\x00-\x1f\x7f-\x9f" + BIDI_CONTROLS
_ANY_CONTROL = re.compile(f"[{_CONTROLS}]")


@functools.lru_cache(maxsize=16)
def _pattern(keep: str, show_sequences: bool) -> re.Pattern[str]:
    kept = "".join(re.escape(char) for char in sorted(set(keep)))
    control = f"[{_CONTROLS}]" if not kept else f"(?![{kept}])[{_CONTROLS}]"
    alternatives = [] if show_sequences else [f"(?P<sequence>{_SEQUENCE})"]
    if "\n" in keep and "\r" not in keep:
        alternatives.append("(?P<crlf>\r(?=\n))")
    alternatives.append(f"(?P<control>{control})")
    return re.compile("|".join(alternatives))


def _replace(match: re.Match[str]) -> str:
    control = match.group("control")
    if not control:
        return ""
    return f"\\x{ord(control):02x}" if ord(control) <= 0xFF else f"\\u{ord(control):04x}"


def terminal_safe(text: str, *, keep: str = DEFAULT_KEEP, show_sequences: bool = False) -> str:
    """`text` with nothing a terminal would act on.

    keep: the control characters to leave as they are; by default TAB and LF. Pass "" for a
    single-line field (a newline then shows as ``\\x0a`` and cannot fake an extra line), or add
    "\\r" for live build output whose progress bars redraw with CR (CR can then overwrite).
    show_sequences: show escape sequences visibly (``\\x1b[2J``) instead of removing them,
    for a debugging view of the raw text.

    The result holds no C0 control but those in `keep`, no DEL, no C1 control and no bidirectional
    control; applying the function again changes nothing.
    """
    if not _ANY_CONTROL.search(text):
        return text
    return _pattern(keep, show_sequences).sub(_replace, text)


def terminal_lines(lines: Iterable[str], *, show_sequences: bool = False) -> str:
    """`lines` joined with LF, each made safe as one line (TAB kept): a line break inside one shows as ``\\x0a``.

    show_sequences: as for terminal_safe; a face quoting paths and names passes True, since no path
    holds a colour code and the user should see the value as it is.
    """
    return "\n".join(terminal_safe(line, keep="\t", show_sequences=show_sequences) for line in lines)


def terminal_line(text: str) -> str:
    """One line that quotes paths or names (a face's "wrote FILE", a download's retry), safe to print."""
    return terminal_safe(text, keep="\t", show_sequences=True)


_JSON_UNESCAPED_CONTROLS = re.compile(f"[\x7f-\x9f{BIDI_CONTROLS}]")


def terminal_json(data: object, *, indent: int | str | None = None) -> str:
    """json.dumps(data, ensure_ascii=False, indent=indent) that is also safe on a terminal.

    json.dumps escapes the C0 controls (U+0000-U+001F) but writes DEL and the C1 controls
    (U+007F-U+009F, among them the 8-bit CSI U+009B) and the bidirectional controls as they are;
    here they become \\u escapes too. The JSON document is the same: json.loads gives back exactly `data`'s strings.
    """
    text = json.dumps(data, ensure_ascii=False, indent=indent)
    return _JSON_UNESCAPED_CONTROLS.sub(lambda match: f"\\u{ord(match.group(0)):04x}", text)


ECHO_LIMIT = 300  # characters of untrusted text (a child's output, a file's value) a message repeats


def echoed(text: str, limit: int = ECHO_LIMIT) -> str:
    """Untrusted text as a message repeats it: at most `limit` characters, saying how many more there were."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"
