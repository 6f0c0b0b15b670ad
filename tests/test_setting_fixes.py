"""A value set by the configuration (INVOKE_WINBUILD_*, invoke.yaml, -f FILE) is blamed as the setting it came from,
not as a flag the user never typed, and the fix printed for it works when followed as printed, with the setting still
in place (issue 38, point 7).

Each case runs the real CLI twice: once with the setting, and once more with the fix applied as the text says: a
flag added to the command line ("pass --python 3.12": the flag wins over the setting), or the setting removed
("remove winbuild.arch_list (... INVOKE_WINBUILD_ARCH_LIST)"). The second run must plan (exit 0).
"""

from __future__ import annotations

import re

import pytest
from support import HOSTS_DIR, run_invoke

HOST = str(HOSTS_DIR / "vs2019-vs2022-cuda12.json")
VS2022_ONLY = str(HOSTS_DIR / "cpu-only.json")
# A fix's first way: flags to add ("--python 3.12", "--cmake auto"), or a variable to unset.
FIRST_FLAGS = re.compile(r"(?:pass|e\.g\.) ((?:--[a-z-]+ [^\s,;()]+ ?)+)")
UNSET = re.compile(r"remove winbuild\.[a-z_]+ \(from invoke\.yaml, the -f file or (INVOKE_WINBUILD_[A-Z_]+)\)")

CASES = (
    # (setting, value, flags, what the refusal must say); the facts file is HOST unless the flags name one
    ("python", "3.5", (), "Python 3.5 (winbuild.python) is not installed"),
    ("vs", "2015", (), "Visual Studio 2015 (winbuild.vs) is not installed"),
    ("pytorch_version", "1.0.1", (), "PyTorch 1.0.1 (from winbuild.pytorch_version) cannot be planned here"),
    ("cmake", "3.10", ("--pytorch-version", "2.6"), "winbuild.cmake 3.10 has Windows wheels for none"),
    ("arch_list", "3.5", ("--cuda", "12.8"), "winbuild.arch_list '3.5': CUDA 12.8's nvcc does not compile for 3.5"),
    ("python", "C:\\nowhere\\python.exe", (), "winbuild.python C:\\nowhere\\python.exe is not one of"),
    ("toolset", "14.11", (), "toolset 14.11 (winbuild.toolset) is not installed"),
    # No flag word undoes a pinned release: the fix removes the setting (Visual Studio 2022 builds no 1.0.1).
    (
        "pytorch_version",
        "1.0.1",
        ("--host", VS2022_ONLY, "--python", "3.9", "--generator", "vs"),
        "Fix: remove winbuild.pytorch_version",
    ),
)


def _followed(fix: str, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command line's extra flags and the environment after following the fix's first way as printed."""
    unset = UNSET.search(fix)
    flags = FIRST_FLAGS.search(fix)
    if unset and (not flags or unset.start() < flags.start()):
        return [], {name: value for name, value in env.items() if name != unset.group(1)}
    assert flags, f"no way to follow in: {fix}"
    return [word.removesuffix(".") for word in flags.group(1).split()], env  # the sentence's full stop


@pytest.mark.parametrize(("name", "value", "flags", "said"), CASES, ids=[f"{c[0]}={c[1]}" for c in CASES])
def test_a_setting_is_named_as_itself_and_its_fix_plans_when_followed(
    name: str, value: str, flags: tuple[str, ...], said: str
) -> None:
    env = {f"INVOKE_WINBUILD_{name.upper()}": value}
    host = () if "--host" in flags else ("--host", HOST)
    refused = run_invoke("build", "--dry-run", *host, *flags, env=env)
    assert refused.returncode in (2, 3), refused.stdout + refused.stderr
    message = " ".join(refused.stderr.split())
    assert said in message, message
    flag = f"--{name.replace('_', '-')}"
    assert f"({flag})" not in message and f"from {flag})" not in message, message
    fix = message.split(" Fix: ", 1)[1]
    extra, env_after = _followed(fix, env)
    followed = run_invoke("build", "--dry-run", *host, *flags, *extra, env=env_after)
    assert followed.returncode == 0, f"{fix}\n-> {extra} {env_after}\n{followed.stderr}"


def test_a_setting_without_a_default_word_is_removed_and_a_flag_is_left_out() -> None:
    """No flag word undoes winbuild.arch_list, so leaving it out means removing the setting; a flag is left out.
    Both are ways make_plan plans before it shows them (planning/fixes.py left_out)."""
    from dataclasses import replace

    from support import plan_options

    from pytorch_winbuild.planning.fixes import left_out

    options = plan_options(cuda="12.8", arch_list="3.5", cmake="3.10")
    options = replace(options, labels={"arch_list": "winbuild.arch_list", "cmake": "winbuild.cmake"})
    texts = [way.text for level in left_out(options) for way in level]
    assert texts[:3] == [
        "leave --cuda out",
        "remove winbuild.arch_list (from invoke.yaml, the -f file or INVOKE_WINBUILD_ARCH_LIST)",
        "pass --cmake auto (it overrides winbuild.cmake)",
    ], texts
    assert texts[-1].startswith("leave --cuda out and remove winbuild.arch_list"), texts
