"""Lines of a POSIX shell script (sh, bash, dash) that give variables exactly the values planned.

A value is single-quoted: nothing inside is special except the closing quote, so a `'` in the
value ends the quotes, adds an escaped quote and opens them again ('it'\\''s'). The script is
bytes to the shell, so UTF-8 text passes as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytorch_winbuild.text.quoting import refuse_control_characters, variable_name

NEWLINE = "\n"


def quote(value: str, what: str) -> str:
    return "'" + refuse_control_characters(value, what).replace("'", "'\\''") + "'"


def set_line(name: str, value: str) -> str:
    return f"export {variable_name(name)}={quote(value, name)}"


def prepend_line(name: str, value: str, separator: str = ":") -> str:
    """`value` in front, with `separator` only when the variable already holds something: `:` for the
    lists a POSIX program reads, `;` for a Windows toolchain's (MSVC's LIB). Either is literal inside
    the double quotes around `${NAME:+...}`."""
    if separator not in (":", ";"):
        raise ValueError(f"separator {separator!r}: expected ':' or ';'")
    return f'export {variable_name(name)}={quote(value, name)}"${{{name}:+{separator}${name}}}"'


def unset_line(name: str) -> str:
    return f"unset {variable_name(name)}"


def comment(text: str, what: str) -> str:
    return "# " + refuse_control_characters(text, what)


def script(lines: Sequence[str]) -> str:
    return NEWLINE.join(lines) + NEWLINE


def checked(command: str, message: str) -> str:
    """`command`, and when it fails: `message` on stderr, then the script stops without ending the shell that
    sources it (`return`; `exit` only where the script runs on its own, where `return` fails)."""
    return f"{command} || {{ echo {quote(message, 'the message')} >&2; return 1 2>/dev/null || exit 1; }}"
