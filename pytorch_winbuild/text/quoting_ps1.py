"""Lines of a PowerShell script (.ps1) that give variables exactly the values planned.

A value is a verbatim (single-quoted) string: nothing inside is expanded, and the only special
characters are the closing quotes. PowerShell closes a verbatim string at any of ' ‘ ’ ‚ ‛
(U+0027, U+2018-U+201B), so each of them is doubled, which PowerShell reads as that character.
Windows PowerShell 5.1 reads a script without a byte order mark in the ANSI code page, so a
script with non-ASCII text starts with the UTF-8 BOM (PowerShell 7 reads it either way).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.text.quoting import refuse_control_characters, variable_name

NEWLINE = "\r\n"
BOM = "\ufeff"
_SINGLE_QUOTES = "'\u2018\u2019\u201a\u201b"


def quote(value: str, what: str) -> str:
    """'value' with every kind of single quote doubled."""
    refuse_control_characters(value, what)
    return "'" + "".join(char * 2 if char in _SINGLE_QUOTES else char for char in value) + "'"


_PLAIN_ARGUMENT = re.compile(r"[A-Za-z0-9_.:/\\=+-]+")


def native_argument(value: str, what: str) -> str:
    """One argument of a program PowerShell runs (git): bare when plain, else verbatim. Windows PowerShell 5.1 hands a
    program an argument with a space in double quotes as it is, so a `"` inside it, or a final backslash (read as
    escaping the closing quote), would reach the program changed: such a value is refused. `--` is quoted, as
    PowerShell reads a bare one itself."""
    refuse_control_characters(value, what)
    if '"' in value or (value.endswith("\\") and any(char.isspace() for char in value)):
        raise ConfigurationError(
            f"{what} {value} holds a double quote or ends in a backslash after a space, which Windows PowerShell 5.1 "
            "does not pass to a program unchanged.",
            fix="use a value without it (for a folder, one without a double quote, named without a final backslash).",
        )
    return value if _PLAIN_ARGUMENT.fullmatch(value) and value != "--" else quote(value, what)


def set_line(name: str, value: str) -> str:
    return f"$env:{variable_name(name)} = {quote(value, name)}"


def prepend_line(name: str, value: str) -> str:
    return f"$env:{variable_name(name)} = {quote(value + ';', name)} + $env:{name}"


def unset_line(name: str) -> str:
    return f"Remove-Item -Path Env:{variable_name(name)} -ErrorAction SilentlyContinue"


def comment(text: str, what: str) -> str:
    """`# text`: a comment ends at the line break, the one thing refused in it."""
    return "# " + refuse_control_characters(text, what)


def script(lines: Sequence[str]) -> str:
    text = NEWLINE.join(lines) + NEWLINE
    return text if text.isascii() else BOM + text
