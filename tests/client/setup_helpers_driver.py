"""Run one PyTorch release's own tools/setup_helpers on a plan's Windows environment, recording cmake.

Usage: python -S setup_helpers_driver.py REQUEST.json RESULT.json

REQUEST (written by tests/client/test_client_setup_helpers.py): `tree` (the release's unpacked
source), `setuptools` (the plan's pinned setuptools wheel, unpacked), `winroot` (a folder standing
for drive C: of the machine the facts file describes: the files the facts name, made empty),
`cwd` (the build's working folder), `env` (the Windows environment the build starts with: the
machine's, vcvars', then the plan's changes), `version` (PyTorch's version).

It imports the release's tools/build_pytorch_libs.py and calls its build entry (`build_pytorch`,
`build_caffe2` up to 1.13) as setup.py's build_deps() does, which runs CMake.generate and
CMake.build. Nothing of PyTorch's code is changed; only what needs Windows is patched, each patch
as narrow as the code allows:

1. os.environ: the plan's Windows environment in an os._Environ built as os.py builds it on
   Windows (encodekey = str.upper): names are upper-cased when stored and when looked up, so
   os.getenv("VCToolsVersion") finds VCTOOLSVERSION and os.environ.copy() (`my_env`) has upper-case
   keys, as on Windows. os.getenv reads the module's `environ`, so it sees the replacement.
2. setuptools is the plan's pin (its build venv's setuptools==X), first on sys.path; `-S` keeps this
   machine's site-packages out. On Windows, importing setuptools runs
   setuptools.monkey.patch_for_msvc_specialized_compiler(), which imports distutils._msvccompiler
   and puts setuptools.msvc.msvc14_get_vc_env in its place; on Linux that function returns early. The
   driver calls it once more with `platform.system` answering "Windows" for that call only, and
   gives setuptools.msvc the real os.environ (on Linux it imports a stand-in dict). Without
   DISTUTILS_USE_SDK that function would look for vcvarsall.bat: `_msvc14_find_vcvarsall` is
   replaced by one that finds none, so the build fails with setuptools' own message.
3. tools/setup_helpers/env.py: IS_WINDOWS = True, IS_LINUX = IS_DARWIN = False, set right after
   env.py is imported and before cmake.py and build_pytorch_libs.py copy them (`from .env import`).
   `platform.system()` itself is not patched: os.path, subprocess and the rest stay Linux's.
4. tools/setup_helpers/__init__.py `which`: replaced, before cmake.py imports it, by the same
   search done the Windows way: PATH split on ';', the PATHEXT extensions tried, paths under
   `winroot` (ntpath joins; `os.access` on Windows is true for any existing file).
5. tools/build_pytorch_libs.py `glob`: patterns on C: (`C:/Program Files/NVIDIA GPU Computing
   Toolkit/CUDA/v*.*`) are matched in `winroot` and answered as Windows' glob answers them (the
   pattern's folder, a backslash, the name; NTFS lists names in order).
6. tools/setup_helpers/cmake.py `check_call`: records (argv, cwd, env) instead of running cmake.
   CMake.run, its command line and everything before it are PyTorch's.

setup.py's computed `cmake_python_library` (a Windows path to pythonXY.lib) is passed as None:
the plans do not set it and no assertion reads it.
"""

from __future__ import annotations

import contextlib
import io
import json
import ntpath
import os
import sys
from pathlib import Path


def main() -> int:
    request = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    result_path = Path(sys.argv[2])
    winroot = Path(request["winroot"])
    sys.path[:0] = [request["setuptools"], request["tree"]]
    os.chdir(request["cwd"])
    # 1: a Windows-shaped mapping in place of Linux's (no process is started: nothing needs the real one)
    os.environ = windows_environ(request["env"])  # noqa: B003

    calls: list[dict] = []
    printed = io.StringIO()
    outcome: dict = {"exit": None}
    with contextlib.redirect_stdout(printed):
        try:
            outcome.update(run_release(request, winroot, calls))
        except SystemExit as stop:  # PyTorch's own sys.exit (an unsupported CMAKE_GENERATOR, ...)
            outcome["exit"] = stop.code
        except Exception as error:  # reported to the test, which fails with it
            outcome["exit"] = f"{type(error).__name__}: {error}"
    outcome.update(calls=calls, printed=printed.getvalue())
    result_path.write_text(json.dumps(outcome), encoding="utf-8")
    return 0


def windows_environ(env: dict[str, str]) -> os._Environ:
    """os.environ as os.py builds it on Windows: keys upper-cased when stored and when looked up."""

    def check_str(value: str) -> str:
        if not isinstance(value, str):
            raise TypeError(f"str expected, not {type(value).__name__}")
        return value

    def encodekey(key: str) -> str:
        return check_str(key).upper()

    data = {name.upper(): value for name, value in env.items()}
    return os._Environ(data, encodekey, str, check_str, str)  # type: ignore[attr-defined]


def windows_to_local(winroot: Path, path: str) -> Path:
    drive, rest = ntpath.splitdrive(path.lower())  # NTFS compares names case-insensitively: the tree is lower-case
    parts = [part for part in rest.replace("/", "\\").split("\\") if part]
    return winroot.joinpath(drive.rstrip(":") or "c", *parts)


def run_release(request: dict, winroot: Path, calls: list[dict]) -> dict:
    import platform

    import setuptools  # the plan's pin, imported as setup.py imports it
    import setuptools.monkey
    import setuptools.msvc

    patch = getattr(setuptools.monkey, "patch_for_msvc_specialized_compiler", None)
    if patch is not None:  # 2
        setuptools.msvc.environ = os.environ
        real_system = platform.system
        platform.system = lambda: "Windows"
        try:
            patch()
        finally:
            platform.system = real_system
        if hasattr(setuptools.msvc, "_msvc14_find_vcvarsall"):
            setuptools.msvc._msvc14_find_vcvarsall = lambda plat_spec: (None, None)

    import tools.setup_helpers as helpers

    def which(thefile: str) -> str | None:  # 4
        for folder in os.environ.get("PATH", "").split(";"):
            fname = ntpath.join(folder, thefile)
            for name in [fname] + [fname + ext for ext in os.environ.get("PATHEXT", "").split(";")]:
                if windows_to_local(winroot, name).is_file():
                    return name
        return None

    helpers.which = which
    import tools.setup_helpers.env as env

    env.IS_WINDOWS, env.IS_LINUX, env.IS_DARWIN = True, False, False  # 3
    import tools.setup_helpers.cmake as cmake

    def check_call(command: list[str], cwd: str | None = None, env: dict | None = None) -> int:  # 6
        calls.append({"argv": list(command), "cwd": cwd, "env": dict(env or {})})
        return 0

    cmake.check_call = check_call
    import tools.build_pytorch_libs as libs

    def windows_glob(pattern: str) -> list[str]:  # 5
        import glob

        folder, name_pattern = pattern.replace("\\", "/").rsplit("/", 1)
        local = windows_to_local(winroot, folder)
        names = sorted((Path(found).name for found in glob.glob(str(local / name_pattern.lower()))), key=str.upper)
        return [folder + "\\" + name for name in names]

    libs.glob = windows_glob
    build = getattr(libs, "build_pytorch", None) or libs.build_caffe2
    build(
        version=request["version"],
        cmake_python_library=None,
        build_python=True,
        rerun_cmake=False,
        cmake_only=False,
        cmake=cmake.CMake(),
    )
    return {"use_ninja": cmake.USE_NINJA, "entry": build.__name__}


if __name__ == "__main__":
    sys.exit(main())
