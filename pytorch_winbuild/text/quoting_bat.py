r"""Lines of a cmd.exe script (.bat) that give variables exactly the values planned.

cmd expands `%NAME%` as it reads a line (`%%` is one `%`); outside double quotes `^` escapes and `& | < > ( )` are
operators; with delayed expansion `!` is special, inside quotes too. So `set "NAME=value"` doubles `%`, a value with
`!` uses `%__WINBUILD_BANG%`/`%__WINBUILD_CARET%` (set from what the running cmd does), and non-ASCII text runs under
code page 65001; probes check both, and a cmd that fails them stops. The rules in full: docs/architecture.md.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.text.quoting import refuse_control_characters, variable_name

NEWLINE = "\r\n"
BANG = "%__WINBUILD_BANG%"
CARET = "%__WINBUILD_CARET%"
_CODE_PAGE = "__WINBUILD_CODE_PAGE"
_PROBE = "__WINBUILD_PROBE"
_OPERATORS = "^&|<>()"
_BARE_ARGUMENT = re.compile(r"[A-Za-z0-9_.:=+/\\-]+")
_VCVARS_LOG = "__WINBUILD_VCVARS_LOG"


def _escaped(value: str) -> str:
    """`value` as written after `set "NAME=`; see the module docstring for the rules."""
    bang = "!" in value
    out = []
    inside = True  # inside the double quotes that `set "` opened
    for char in value:
        if char == '"':
            inside = not inside
            out.append(char)
        elif char == "%":
            out.append("%%")
        elif bang and char == "!":
            out.append(BANG if inside else CARET + BANG)
        elif bang and char == "^":
            out.append(CARET if inside else CARET + CARET)
        elif not inside and char in _OPERATORS:
            out.append("^" + char)
        else:
            out.append(char)
    return "".join(out)


def set_line(name: str, value: str) -> str:
    """`set "NAME=value"`, exact under /v:on and /v:off."""
    return f'set "{variable_name(name)}={_escaped(refuse_control_characters(value, name))}"'


def prepend_line(name: str, value: str) -> str:
    """`set "NAME=value;%NAME%"`: the old value is expanded by cmd, so it must stay inside the quotes."""
    refuse_control_characters(value, name)
    if value.count('"') % 2:
        raise ConfigurationError(
            f"the value put in front of {name} holds an odd number of double quotes, which would leave the "
            f"old value of {name} outside the quotes in a .bat file.",
            fix="balance the quotes or remove them.",
        )
    return f'set "{variable_name(name)}={_escaped(value)};%{name}%"'


def unset_line(name: str) -> str:
    return f'set "{variable_name(name)}="'


def comment(text: str, what: str) -> str:
    """`rem text`: `%` is still expanded in a remark (`%~` even ends the script), and a final `^`
    would continue the remark onto the next line."""
    text = refuse_control_characters(text, what).replace("%", "%%")
    return f"rem {text} " if text.endswith("^") else f"rem {text}"


# What no quoting keeps literal in a command pasted at a cmd prompt or into a .bat, under /v:off and /v:on.
_NOT_PASTABLE = {
    '"': "a double quote, which would end the quotes that keep the rest literal",
    "%": "a percent sign, which cmd expands (%NAME%) even inside quotes, and differently at a prompt and in a .bat",
    "!": "an exclamation mark, which cmd drops or expands (!NAME!) where delayed expansion is on",
}


def _refuse_for_prompt(text: str, what: str, fix: str) -> None:
    """ConfigurationError (exit 2) when `text` cannot stand in a printed command, as the .bat lines refuse."""
    refuse_control_characters(text, what)
    for char, why in _NOT_PASTABLE.items():
        if char in text:
            raise ConfigurationError(
                f"{what} {text} holds {why}, so no printed command naming it works when pasted at a cmd prompt "
                "or into a .bat.",
                fix=fix,
            )


def printed_set_line(name: str, value: str, *, prepend: bool = False) -> str:
    """`set "NAME=value"` to paste at a cmd prompt or into a .bat, /v:off or /v:on: inside the quotes
    `& | < > ^ ( )` and spaces are literal. To prepend, `value;` goes in front of the old value only
    when there is one: an undefined `%NAME%` is empty in a .bat but stays as it is at a prompt. A value
    with a control character, `"`, `%` or `!` is refused (ConfigurationError naming the variable): no
    quoting keeps it literal in both places."""
    _refuse_for_prompt(
        value, f"the value of {name}", "move the folder to a path without it, or use a script `invoke env` writes."
    )
    line = f'set "{variable_name(name)}={value}"'
    return f'if defined {name} (set "{name}={value};%{name}%") else ({line})' if prepend else line


def command_argument(text: str, what: str, fix: str) -> str:
    """One argument of a command the plan prints for cmd (a prompt or a .bat, /v:off or /v:on): bare
    when plain, else in double quotes, inside which spaces and & | < > ^ ( ) are literal. Trailing
    backslashes are doubled, because a program's argument parser reads `\\"` as a quote."""
    _refuse_for_prompt(text, what, fix)
    if _BARE_ARGUMENT.fullmatch(text):
        return text
    body = text.rstrip("\\")
    return '"' + body + "\\" * (2 * (len(text) - len(body))) + '"'


def _call(script: str, args: Sequence[str], escape: Callable[[str], str]) -> str:
    """`call "script" args`. CALL expands `%` a second time and doubles every `^`, even inside
    quotes, so neither can reach the called script unchanged; nor can a `"` inside the quotes."""
    words = []
    for position, (text, what) in enumerate(
        [(script, "the vcvars script path"), *((arg, "the vcvars argument") for arg in args)]
    ):
        refuse_control_characters(text, what)
        for char in '"%^':
            if char in text:
                raise ConfigurationError(
                    f"{what} {text!r} holds {char!r}, which cmd's CALL cannot pass on unchanged.",
                    fix='install to (or copy the script into) a folder whose name has none of " % ^.',
                )
        # vcvarsall.bat compares some arguments textually (-vcvars_ver=14.11): no quotes unless needed
        words.append(text if position and _BARE_ARGUMENT.fullmatch(text) else f'"{escape(text)}"')
    return "call " + " ".join(words)


def printed_call(script: str, args: Sequence[str]) -> str:
    """The vcvars call as a plan prints it, to paste at a cmd prompt or into a .bat run with /v:off
    or /v:on: CALL's rules, and no `!`, which delayed expansion would drop."""
    for text, what in [(script, "the vcvars script path"), *((arg, "the vcvars argument") for arg in args)]:
        _refuse_for_prompt(text, what, 'install to (or copy the script into) a folder whose name has none of " % ^ !.')
    return _call(script, args, str)


def call_line(script: str, args: Sequence[str]) -> str:
    """The vcvars call in a .bat, whose `!` goes through the helpers like a value's."""
    return _call(script, args, _escaped)


def command_call(script: str, args: Sequence[str]) -> str:
    """The vcvars call for `cmd /c` (from PowerShell), where delayed expansion is off unless the
    registry turns it on: `!` is written as it is."""
    return _call(script, args, str)


# ---------------------------------------------------------------------------------------------
# The script around the lines


@dataclass(frozen=True)
class _Needs:
    bang: bool  # a line uses the helper variables
    utf8: bool  # a command (not a remark) holds non-ASCII text

    @classmethod
    def of(cls, lines: Sequence[str]) -> _Needs:
        return cls(
            bang=any(BANG in line or CARET in line for line in lines),
            utf8=any(not line.isascii() and not line.startswith("rem ") for line in lines),
        )

    def __bool__(self) -> bool:
        return self.bang or self.utf8


_TYPOGRAPHY = str.maketrans({"→": "->", "–": "-", "—": "-", "…": "...", "‘": "'", "’": "'", "“": '"', "”": '"'})


def _ascii_remark(line: str) -> str:
    """A remark that cmd reads before (or without) the switch to UTF-8, in ASCII: in a double-byte
    code page (932, 936...) the last byte of a UTF-8 character can take the line break with it,
    and the next line would be lost. Accents are dropped (ü → u), other characters become `?`."""
    if line.isascii() or not line.startswith("rem "):
        return line
    plain = unicodedata.normalize("NFKD", line.translate(_TYPOGRAPHY))
    return "".join(char for char in plain if not unicodedata.combining(char)).encode("ascii", "replace").decode("ascii")


def _exit_block(cleanup: list[str], message: str | None = None) -> list[str]:
    """The inside of an `if ... (` block that undoes what the script changed so far and exits 1."""
    said = [f"  echo {message} 1>&2"] if message else []
    return [*(f"  {line}" for line in cleanup), *said, "  exit /b 1", ")"]


def _prologue(needs: _Needs) -> tuple[list[str], list[str]]:
    """The lines that prepare the helpers and the code page, and the lines that undo them."""
    lines: list[str] = []
    cleanup: list[str] = []
    if needs.bang:
        cleanup += ['set "__WINBUILD_BANG="', 'set "__WINBUILD_CARET="']
        lines += [
            "",
            'rem Some values hold "!": write it as this cmd needs, and stop where it cannot be kept.',
            'set "__WINBUILD_BANG=!"',
            'set "__WINBUILD_CARET=^"',
            'if not defined __WINBUILD_BANG set "__WINBUILD_CARET=^^"',
            'if not defined __WINBUILD_BANG set "__WINBUILD_BANG=^^^!"',
            f'set "{_PROBE}=a{CARET}{BANG}b"',
            f'if not "%{_PROBE}:!=-%"=="a^-b" (',
            f'  set "{_PROBE}="',
            *_exit_block(
                cleanup,
                "pytorch-winbuild: with delayed expansion on, this cmd drops the exclamation marks some "
                "values hold. Run the script from a cmd started with /v:off.",
            ),
            f'set "{_PROBE}="',
        ]
    if needs.utf8:
        cleanup = [f"chcp %{_CODE_PAGE}% >nul", f'set "{_CODE_PAGE}="', *cleanup]
        lines += [
            "",
            "rem Some values hold non-ASCII text: read the rest of this UTF-8 script with code page 65001, "
            "and switch back at the end.",
            f'for /f "tokens=2 delims=:." %%c in (\'chcp\') do set "{_CODE_PAGE}=%%c"',
            "chcp 65001 >nul",
            f'set "{_PROBE}=€"',
            f'if not "%{_PROBE}:~1%"=="" (',
            f'  set "{_PROBE}="',
            *_exit_block(
                cleanup,
                "pytorch-winbuild: this cmd does not read the script as UTF-8, so the values with non-ASCII "
                "characters would change. Run it in a console window where chcp 65001 works.",
            ),
            f'set "{_PROBE}="',
        ]
    return lines, cleanup


def _checked_call(call: Sequence[str], cleanup: list[str]) -> list[str]:
    """The vcvars lines (the `call` last), its output kept in a log and shown, then the checks: the
    script stops when the call fails, or when it printed an `[ERROR:` line, which VS 2017+ vcvars does
    for a missing toolset while still exiting 0. FIND sets errorlevel 0 when it finds the text (Microsoft's
    `find` documentation). The messages avoid ( ) & | < > ^ % !, which would end or split their block."""
    log = f'"%{_VCVARS_LOG}%"'
    cleanup = [f"del {log} 2>nul", f'set "{_VCVARS_LOG}="', *cleanup]
    return [
        *call[:-1],
        f'set "{_VCVARS_LOG}=%TEMP%\\pytorch-winbuild-vcvars-%RANDOM%.log"',
        f"{call[-1]} >{log} 2>&1",
        "if errorlevel 1 (",
        f"  type {log}",
        *_exit_block(
            cleanup,
            "pytorch-winbuild: the Visual Studio environment script failed, see its output above. "
            "Check that this Visual Studio is still installed: invoke doctor, then plan again.",
        ),
        f"type {log}",
        f'find "[ERROR:" {log} >nul',
        "if not errorlevel 1 (",
        *_exit_block(
            cleanup,
            "pytorch-winbuild: vcvars reported the [ERROR:...] lines above and did not set up the compiler. "
            "Install what they name in the Visual Studio Installer, such as that MSVC toolset, then run this again.",
        ),
        f"del {log}",
        f'set "{_VCVARS_LOG}="',
    ]


Steps = Sequence[tuple[str, str | None]]  # (line, the message when it fails; None: a remark or a blank line)


def _steps(steps: Steps, cleanup: list[str]) -> list[str]:
    """Each command line, and after it a check that stops the script when it failed (errorlevel 1 or more): what
    the script changed so far is undone, and the message says why. Messages avoid ( ) & | < > ^ % ! too."""
    lines = []
    for line, message in steps:
        lines.append(line)
        if message is not None:
            lines += ["if errorlevel 1 (", *_exit_block(cleanup, message)]
    return lines


def script(
    header: Sequence[str], call: Sequence[str], body: Sequence[str], *, first: Steps = (), last: Steps = ()
) -> str:
    """The whole .bat: `header` remarks, then `first` (commands checked one by one), then `call` (the vcvars lines,
    the `call` last; the script stops when it fails or reports an error), then `body`, then `last` (checked
    commands). The helpers and the code page switch come just before the first line that needs them."""
    first_lines, last_lines = [line for line, _ in first], [line for line, _ in last]
    needs = _Needs.of([*first_lines, *call, *body, *last_lines])
    prologue, cleanup = _prologue(needs)
    called = _checked_call(call, cleanup) if call else []
    if first and _Needs.of(first_lines):
        before, after = ["@echo off", *header], [*prologue, *_steps(first, cleanup), *called, *body]
    elif call and _Needs.of(call):
        before, after = ["@echo off", *header, *_steps(first, [])], [*prologue, *called, *body]
    else:
        before = ["@echo off", *header, *_steps(first, []), *(_checked_call(call, []) if call else [])]
        after = [*prologue, *body]
    after += _steps(last, cleanup)
    lines = [*map(_ascii_remark, before), *(after if needs.utf8 else map(_ascii_remark, after))]
    if cleanup:
        lines += ["", "rem Leave no helper variables behind.", *cleanup]
    lines.append("exit /b 0")
    return NEWLINE.join(lines) + NEWLINE
