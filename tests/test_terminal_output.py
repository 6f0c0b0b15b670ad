"""Unicode's bidirectional controls (UAX #9) never reach a terminal raw: an override or isolate reorders
what follows it on screen (Trojan Source, CVE-2021-42574), so terminal_text shows each as an escape.
"""

from __future__ import annotations

import json
import unicodedata

import pytest

from pytorch_winbuild.text.terminal_text import terminal_json, terminal_safe

# Unicode's bidirectional formatting characters (UAX #9, table 1 and section 2), by their UCD names.
BIDI = {
    "\u061c": "ARABIC LETTER MARK",
    "\u200e": "LEFT-TO-RIGHT MARK",
    "\u200f": "RIGHT-TO-LEFT MARK",
    "\u202a": "LEFT-TO-RIGHT EMBEDDING",
    "\u202b": "RIGHT-TO-LEFT EMBEDDING",
    "\u202c": "POP DIRECTIONAL FORMATTING",
    "\u202d": "LEFT-TO-RIGHT OVERRIDE",
    "\u202e": "RIGHT-TO-LEFT OVERRIDE",
    "\u2066": "LEFT-TO-RIGHT ISOLATE",
    "\u2067": "RIGHT-TO-LEFT ISOLATE",
    "\u2068": "FIRST STRONG ISOLATE",
    "\u2069": "POP DIRECTIONAL ISOLATE",
}


@pytest.mark.parametrize("char", list(BIDI), ids=lambda char: f"U+{ord(char):04X}")
def test_bidi_controls_are_shown_as_escapes(char: str) -> None:
    assert unicodedata.name(char) == BIDI[char]  # the test's list is Unicode's
    shown = f"\\u{ord(char):04x}"
    assert terminal_safe(f"a{char}b") == f"a{shown}b"
    assert terminal_safe(f"a{char}b", keep="") == f"a{shown}b"
    assert terminal_safe(f"a{shown}b") == f"a{shown}b"  # idempotent
    assert json.loads(terminal_json({"k": f"a{char}b"})) == {"k": f"a{char}b"}
    assert char not in terminal_json({"k": f"a{char}b"})
