"""Writing values into the scripts the tool emits: quoting_bat, quoting_ps1 and quoting_sh, one per format.

Every format shares two rules, kept here: a value with a control character is refused, because a
line break starts a new command in every one of these interpreters (and NUL, ESC, DEL and the
rest never belong in a path or a setting), and so is one with a Unicode bidirectional control,
because it makes an editor show the script in another order than the interpreter reads it
(Trojan Source, CVE-2021-42574); and only plain names are written as variable names, because a
name is spliced into the script unquoted.
"""

from __future__ import annotations

import re
import unicodedata

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.text.terminal_text import BIDI_CONTROLS

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")
_REMOVE_IT = "remove it where the value comes from (the flag, the facts file, the config or matrix file)."


def refuse_control_characters(text: str, what: str) -> str:
    """`text` unchanged, or ConfigurationError (exit 2) naming `what` and the control or bidirectional character.

    The message shows where the character is, never the text: the text may be a credential.
    """
    for position, char in enumerate(text):
        if unicodedata.category(char) == "Cc":
            raise ConfigurationError(
                f"{what} holds the control character U+{ord(char):04X} at position {position + 1}, which no "
                "script or command line carries unchanged (a line break would start a command of its own).",
                fix=_REMOVE_IT,
            )
    bidi = _BIDI.search(text)
    if bidi:
        raise ConfigurationError(
            f"{what} holds the bidirectional control character U+{ord(bidi.group()):04X} at position "
            f"{bidi.start() + 1}, which makes an editor show a script in another order than it runs "
            "(Trojan Source, CVE-2021-42574).",
            fix=_REMOVE_IT,
        )
    return text


def variable_name(name: str) -> str:
    """`name` unchanged when it is a plain environment variable name, else ConfigurationError."""
    if not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"{name!a} is not a variable name a script can set (letters, digits and _, not starting with a digit).",
            fix="rename the variable.",
        )
    return name
