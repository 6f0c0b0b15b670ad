"""Probing: the parsers on real-format inputs, the Windows probe on a fake Windows tree, this machine.

The fake tree is laid out exactly like a real install (`Program Files (x86)\\Microsoft Visual
Studio\\2017\\BuildTools\\VC\\Tools\\MSVC\\14.11.25503`, `NVIDIA GPU Computing Toolkit\\CUDA\\v9.0`,
…): Visual Studio, vswhere.exe and the registry cannot run on Linux, so they are stand-ins (shell
scripts the probe really runs, a dictionary for HKLM). What does exist here is used for real: CUDA
13.0's nvcc and headers (/usr/local/cuda) as a toolkit of that tree and as a Linux toolkit, and the
real cmake, ninja, git and sccache as the tools on its PATH (build tier). docs/test-doubles.md lists
every double and why it is kept.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytorch_winbuild.facts.model import facts_from_dict, load_facts
from pytorch_winbuild.facts.probe import probe, probe_linux, probe_report
from pytorch_winbuild.facts.probe_common import (
    CommandResult,
    cuda_major_minor,
    parse_cmake_version,
    parse_cuda_version_json,
    parse_cuda_version_txt,
    parse_cudnn_version,
    parse_host_config_msc_range,
    parse_nvcc_version,
    parse_tool_version,
    run_command,
)
from pytorch_winbuild.facts.probe_windows import VSWHERE_ARGS, parse_vswhere, probe_windows

REPO_ROOT = Path(__file__).resolve().parent.parent
HOSTS_DIR = REPO_ROOT / "build_config" / "hosts"
# CUDA 13.0 as NVIDIA installs it on the project's Linux machines and CI (the build tier needs it).
REAL_CUDA = Path("/usr/local/cuda")
# CUDA 13.0's include/crt/host_config.h: `#if _MSC_VER < 1920 || _MSC_VER >= 1950` (VS 2019 and 2022 only),
# the line of NVIDIA's header as installed (its #error names "between 2019 and 2022 (inclusive)").
CUDA_13_0_MSC_RANGE = (1920, 1950)


def real_cuda_release() -> tuple[str, str]:
    """(MAJOR.MINOR, full version) of the real toolkit in NVIDIA's own words, not through the probe's
    parsers: CUDA_VERSION in include/cuda.h (1000 * major + 10 * minor) and nvcc's `release X.Y, VX.Y.Z`."""
    define = re.search(r"^#define CUDA_VERSION (\d+)$", (REAL_CUDA / "include" / "cuda.h").read_text(), re.MULTILINE)
    assert define, "include/cuda.h defines CUDA_VERSION"
    number = int(define.group(1))
    banner = subprocess.run(
        [str(REAL_CUDA / "bin" / "nvcc"), "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    release = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", banner)
    assert release and release.group(1) == f"{number // 1000}.{number % 1000 // 10}", banner
    assert release.group(1) == "13.0", "the project's machines have CUDA 13.0 at /usr/local/cuda"
    return release.group(1), release.group(2)


# ---------------------------------------------------------------- real-format inputs

# The shapes of NVIDIA's host_config.h, reduced to the lines around the MSVC guard (and a GNU
# guard before it, which must not be mistaken for it). Messages shortened. Written by hand from the
# headers' guards as build_config/hosts/README.md cites them (CUDA 8.0 and 9.0.176: CUDAapi.jl's table
# and build logs quoting the lines; 12.x: headers of 12.4-12.9), not from the parser's output;
# test_the_real_cuda_13_header_has_the_guard_the_shapes_reduce checks the shape against NVIDIA's real header.
HOST_CONFIG_CUDA80 = """
#if defined(__GNUC__)
#if __GNUC__ > 5
#error -- unsupported GNU version! gcc versions later than 5 are not supported!
#endif /* __GNUC__ > 5 */
#endif /* __GNUC__ */

#if defined(_WIN32)

#if _MSC_VER < 1600 || _MSC_VER > 1900

#error -- unsupported Microsoft Visual Studio version! Only the versions 2010, 2012, 2013 and 2015 are supported!

#endif /* _MSC_VER < 1600 || _MSC_VER > 1900 */

#endif /* _WIN32 */
"""

HOST_CONFIG_CUDA90 = """
#if defined(_WIN32)

#if _MSC_VER < 1600 || _MSC_VER > 1911

#error -- unsupported Microsoft Visual Studio version! Only the versions 2012, 2013, 2015 and 2017 are supported!

#elif _MSC_VER == 1600 /* _MSC_VERION == 1600 */

#pragma message("support for Microsoft Visual Studio 2010 has been deprecated!")

#endif /* _MSC_VER < 1600 || _MSC_VER > 1800 || _MSC_VERSION == 1600 */

#endif /* _WIN32 */
"""

HOST_CONFIG_CUDA101 = """
#if !__NV_NO_HOST_COMPILER_CHECK
#if defined(_WIN32)

#if _MSC_VER < 1700 || _MSC_VER >= 1930

#error -- unsupported Microsoft Visual Studio version! Only the versions between 2015 and 2019 (inclusive) are supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check.

#elif _MSC_VER >= 1700 && _MSC_VER < 1900

#pragma message("support for this version of Microsoft Visual Studio has been deprecated! Only the versions between 2015 and 2019 (inclusive) are supported!")

#endif /* (_MSC_VER < 1700 || _MSC_VER >= 1930) || (_MSC_VER >= 1700 && _MSC_VER < 1900) */

#endif /* _WIN32 */
#endif  /* !__NV_NO_HOST_COMPILER_CHECK */
"""  # noqa: E501 - CUDA's host_config.h as NVIDIA ships it

HOST_CONFIG_CUDA12 = """
#if !__NV_NO_HOST_COMPILER_CHECK
#if defined(__GNUC__)
#if __GNUC__ > 13
#error -- unsupported GNU version! gcc versions later than 13 are not supported!
#endif /* __GNUC__ > 13 */
#endif /* __GNUC__ */

#if defined(_WIN32)

#if _MSC_VER < 1910 || _MSC_VER >= 1950

#error -- unsupported Microsoft Visual Studio version! Only the versions between 2017 and 2022 (inclusive) are supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check.

#elif _MSC_VER >= 1910 && _MSC_VER < 1910

#pragma message("support for this version of Microsoft Visual Studio has been deprecated! Only the versions between 2017 and 2022 (inclusive) are supported!")

#endif /* (_MSC_VER < 1910 || _MSC_VER >= 1950) || (_MSC_VER >= 1910 && _MSC_VER < 1910) */

#endif /* _WIN32 */
#endif  /* !__NV_NO_HOST_COMPILER_CHECK */
"""  # noqa: E501 - CUDA's host_config.h as NVIDIA ships it

# CUDA ≥ 9 keeps include\host_config.h as a forwarding header without any guard.
HOST_CONFIG_FORWARDER = """
#if !defined(__CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__)
#define __CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__
#define __UNDEF_CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS_HOST_CONFIG_H_WRAPPER__
#endif
#include "crt/host_config.h"
"""

VERSION_JSON_CUDA124 = """{
   "cuda" : {
      "name" : "CUDA SDK",
      "version" : "12.4.1"
   },
   "cuda_cccl" : {
      "name" : "CUDA C++ Core Compute Libraries",
      "version" : "12.4.127"
   },
   "cuda_nvcc" : {
      "name" : "CUDA NVCC",
      "version" : "12.4.131"
   }
}
"""

VERSION_TXT_CUDA90 = "CUDA Version 9.0.176\nCUDA Patch Version 9.0.176.1\nCUDA Patch Version 9.0.176.2\n"

# `nvcc --version` of CUDA 13.0 as installed here, copied unchanged (test_the_nvcc_banner_is_a_real_capture checks it).
NVCC_VERSION_CUDA130 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""

CUDNN_H_7 = """#if !defined(CUDNN_H_)
#define CUDNN_H_

#define CUDNN_MAJOR 7
#define CUDNN_MINOR 6
#define CUDNN_PATCHLEVEL 5

#define CUDNN_VERSION (CUDNN_MAJOR * 1000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)
"""

# cuDNN ≥ 8: cudnn.h only includes the others; the numbers live in cudnn_version.h.
CUDNN_H_9 = '#if !defined(CUDNN_H_)\n#define CUDNN_H_\n#include "cudnn_version.h"\n#include "cudnn_graph.h"\n'
CUDNN_VERSION_H_9 = """#ifndef CUDNN_VERSION_H_
#define CUDNN_VERSION_H_

#define CUDNN_MAJOR 9
#define CUDNN_MINOR 1
#define CUDNN_PATCHLEVEL 0

#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)
"""


def vswhere_entry(path: Path | str, version: str, product: str, line: str, display: str) -> dict:
    """An instance as `vswhere -format json` prints it (abridged to the fields that matter plus noise)."""
    return {
        "instanceId": "5e1b0e52",
        "installDate": "2019-03-14T10:12:54Z",
        "installationName": f"VisualStudio/{version}",
        "installationPath": str(path),
        "installationVersion": version,
        "productId": f"Microsoft.VisualStudio.Product.{product}",
        "productPath": str(path) + "\\Common7\\IDE\\devenv.exe",
        "state": 4294967295,
        "isComplete": True,
        "isLaunchable": True,
        "isPrerelease": False,
        "isRebootRequired": False,
        "displayName": display,
        "description": "Die Visual Studio Build Tools ermöglichen das Erstellen von C++-Apps.",
        "channelId": f"VisualStudio.{version.split('.')[0]}.Release",
        "catalog": {
            "buildBranch": "d15.9",
            "productDisplayVersion": version,
            "productLine": f"Dev{version.split('.')[0]}",
            "productLineVersion": line,
            "productMilestoneIsPreRelease": "False",
        },
        "properties": {
            "campaignId": "",
            "nickname": "",
            "setupEngineFilePath": "C:\\Program Files (x86)\\Microsoft Visual Studio\\Installer\\setup.exe",
        },
    }


# ---------------------------------------------------------------- parsers


@pytest.mark.parametrize(
    "text, expected",
    [
        (HOST_CONFIG_CUDA80, (1600, 1901)),
        (HOST_CONFIG_CUDA90, (1600, 1912)),
        (HOST_CONFIG_CUDA101, (1700, 1930)),
        (HOST_CONFIG_CUDA12, (1910, 1950)),
        (HOST_CONFIG_CUDA12.replace("\n", "\r\n"), (1910, 1950)),
        # a guard split over lines with a continuation
        (
            "#if defined(_WIN32)\n"
            "#if (_MSC_VER < 1910) || \\\n"
            "    (_MSC_VER >= 1940)\n"
            "#error -- unsupported Microsoft Visual Studio version!\n"
            "#endif\n"
            "#endif\n",
            (1910, 1940),
        ),
        # the CUDA 4 era spelling of the message
        (
            "#if defined(_WIN32)\n"
            "#if _MSC_VER < 1400 || _MSC_VER > 1600\n"
            "#error -- unsupported MSVC version! Only MSVC 8.0, 9.0, and 10.0 are supported!\n"
            "#endif\n"
            "#endif\n",
            (1400, 1601),
        ),
    ],
)
def test_host_config_guard_becomes_a_half_open_range(text: str, expected: tuple[int, int]) -> None:
    assert parse_host_config_msc_range(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        HOST_CONFIG_FORWARDER,
        "",
        # a user "fixed" nvcc by commenting the error out: there is no guard any more
        HOST_CONFIG_CUDA90.replace("#error --", "//#error --"),
        HOST_CONFIG_CUDA90.replace("#error --", "/* #error -- ").replace("are supported!\n", "are supported! */\n", 1),
        # ... or by deleting the upper bound: no complete range to report
        HOST_CONFIG_CUDA90.replace(" || _MSC_VER > 1911", ""),
        # only the GNU guard
        "#if __GNUC__ > 6\n#error -- unsupported GNU version! gcc versions later than 6 are not supported!\n#endif\n",
        # an MSVC error that is not directly under the #if it belongs to
        "#if _MSC_VER < 1600 || _MSC_VER > 1911\n"
        "#define SOMETHING 1\n"
        "#error -- unsupported Microsoft Visual Studio version!\n"
        "#endif\n",
    ],
)
def test_host_config_without_a_complete_guard_gives_none(text: str) -> None:
    assert parse_host_config_msc_range(text) is None


def test_host_config_stale_numbers_in_comments_are_ignored() -> None:
    # NVIDIA's own #endif comment in CUDA 9.x says 1800; only the #if counts.
    assert "1800" in HOST_CONFIG_CUDA90
    assert parse_host_config_msc_range(HOST_CONFIG_CUDA90) == (1600, 1912)


def test_cuda_version_files() -> None:
    assert parse_cuda_version_json(VERSION_JSON_CUDA124) == "12.4.1"
    assert parse_cuda_version_json('{"cuda": {"name": "CUDA SDK", "version": "11.8.20220929"}}') == "11.8.20220929"
    assert parse_cuda_version_json("{not json") is None
    assert parse_cuda_version_json('{"cuda_nvcc": {"version": "12.4.131"}}') is None
    assert parse_cuda_version_json('["cuda"]') is None
    assert parse_cuda_version_txt(VERSION_TXT_CUDA90) == "9.0.176"
    assert parse_cuda_version_txt("CUDA Version 8.0.61\r\n") == "8.0.61"
    assert parse_cuda_version_txt("garbage") is None
    assert cuda_major_minor("9.0.176") == "9.0"
    assert cuda_major_minor("12.4") == "12.4"
    assert cuda_major_minor("twelve") is None


def test_nvcc_version_output() -> None:
    assert parse_nvcc_version(NVCC_VERSION_CUDA130) == "13.0.88"
    assert parse_nvcc_version("Cuda compilation tools, release 9.0, V9.0.176\r\n") == "9.0.176"
    assert parse_nvcc_version("bash: nvcc: command not found") is None


def test_cudnn_headers() -> None:
    assert parse_cudnn_version(CUDNN_H_7) == "7.6.5"
    assert parse_cudnn_version(CUDNN_VERSION_H_9) == "9.1.0"
    assert parse_cudnn_version(CUDNN_H_9) is None


def test_tool_version_outputs() -> None:
    assert (
        parse_cmake_version(
            "cmake version 3.27.4\n\nCMake suite maintained and supported by Kitware (kitware.com/cmake).\n"
        )
        == "3.27.4"
    )
    assert parse_cmake_version("cmake3 version 3.10.2\n") == "3.10.2"
    assert parse_cmake_version("CMake Error: no version\n") is None
    assert parse_tool_version("1.13.2.git.kitware.jobserver-pipe-1\n") == "1.13.2"
    assert parse_tool_version("1.8.2\r\n") == "1.8.2"
    assert parse_tool_version("git version 2.43.0.windows.1\n") == "2.43.0"
    assert parse_tool_version("sccache 0.8.1\n") == "0.8.1"
    assert parse_tool_version("usage: tool [options]") is None


def test_vswhere_json_with_every_kind_of_instance() -> None:
    entries = [
        vswhere_entry(
            "C:\\Program Files (x86)\\Microsoft Visual Studio\\2017\\BuildTools",
            "15.9.28307.812",
            "BuildTools",
            "2017",
            "Visual Studio Build Tools 2017",
        ),
        vswhere_entry(
            "C:\\Program Files\\Microsoft Visual Studio\\2022\\Community",
            "17.14.36915.13",
            "Community",
            "2022",
            "Visual Studio Community 2022",
        ),
        vswhere_entry(
            "C:\\Program Files\\Microsoft Visual Studio\\18\\Community",
            "18.0.11111.16",
            "Community",
            "18",
            "Visual Studio Community 2026",
        ),
        {"instanceId": "VisualStudio.14.0", "installationPath": "", "installationVersion": "14.0"},
        "not an object",
    ]
    entries[2]["isPrerelease"] = True
    instances = parse_vswhere(json.dumps(entries, indent=2, ensure_ascii=False))
    assert [(i.product_line, i.product, i.version, i.prerelease) for i in instances] == [
        ("2017", "BuildTools", "15.9.28307.812", False),
        ("2022", "Community", "17.14.36915.13", False),
        ("2026", "Community", "18.0.11111.16", True),
    ]
    assert instances[0].path == "C:\\Program Files (x86)\\Microsoft Visual Studio\\2017\\BuildTools"
    assert instances[1].display_name == "Visual Studio Community 2022"


def test_vswhere_output_edge_cases() -> None:
    assert parse_vswhere("[]") == []
    assert (
        len(
            parse_vswhere(
                "\ufeff" + json.dumps([vswhere_entry("C:\\VS", "16.11.33529.622", "Professional", "2019", "VS")])
            )
        )
        == 1
    )
    # a logo line before the list (older vswhere without -nologo)
    logo = (
        "Visual Studio Locator version 2.5.2+gebb9f26a3d [query version 3.0.4492.23473]\n"
        "Copyright (C) Microsoft Corporation. All rights reserved.\n"
        "\n"
    )
    assert parse_vswhere(logo + "[]") == []
    for garbage in ("", "<html>Proxy error</html>", '{"instances": []}', "[{"):
        with pytest.raises(ValueError):
            parse_vswhere(garbage)


# ---------------------------------------------------------------- a fake Windows machine


# Kept double: the Windows registry (winreg) does not exist on Linux.
class FakeRegistry:
    """HKLM as a dictionary: winreg does not exist here."""

    def __init__(self, keys: set[str] | None = None, values: dict[tuple[str, str], object] | None = None) -> None:
        self.keys = keys or set()
        self.values = values or {}

    def value(self, key: str, name: str) -> object | None:
        return self.values.get((key, name))

    def has_key(self, key: str) -> bool:
        return key in self.keys


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def script(path: Path, body: str) -> Path:
    """An executable that the probe really runs (a shell script, whatever its .exe name)."""
    write(path, "#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# Kept double: a Windows install of Visual Studio and of CUDA for Windows cannot exist on Linux; the
# tree has their real folder and file names (Microsoft's and NVIDIA's layouts).
class FakeWindows:
    """A Windows machine under `base`: C:\\Program Files (x86), C:\\Program Files, %TEMP%."""

    def __init__(self, base: Path) -> None:
        self.pf86 = base / "Program Files (x86)"
        self.pf = base / "Program Files"
        self.vswhere = self.pf86 / "Microsoft Visual Studio" / "Installer" / "vswhere.exe"
        self.vs2017 = self.pf86 / "Microsoft Visual Studio" / "2017" / "BuildTools"
        self.vs2015 = self.pf86 / "Microsoft Visual Studio 14.0"
        self.cuda_base = self.pf / "NVIDIA GPU Computing Toolkit" / "CUDA"
        self.nvtoolsext = self.pf / "NVIDIA Corporation" / "NvToolsExt"
        self.temp = base / "Users" / "Jürgen Müller" / "AppData" / "Local" / "Temp"
        self.environ = {
            "ProgramFiles(x86)": str(self.pf86),
            "ProgramFiles": str(self.pf),
            "PATH": "",
            "TEMP": str(self.temp),
        }

    def install_vs2017(self) -> None:
        for toolset in ("14.11.25503", "14.16.27023"):
            (self.vs2017 / "VC" / "Tools" / "MSVC" / toolset / "bin" / "Hostx64" / "x64").mkdir(parents=True)
        (self.vs2017 / "VC" / "Tools" / "MSVC" / "14.16.27023.old").mkdir()
        write(self.vs2017 / "VC" / "Tools" / "MSVC" / "readme.txt")
        build = self.vs2017 / "VC" / "Auxiliary" / "Build"
        for name in ("vcvarsall.bat", "vcvars64.bat", "vcvarsx86_amd64.bat", "vcvars32.bat", "vcvarsamd64_x86.bat"):
            write(build / name, "@echo off\r\n")
        write(build / "Microsoft.VCToolsVersion.default.txt", "14.16.27023\r\n")
        write(build / "14.11" / "Microsoft.VCToolsVersion.14.11.props", "<Project/>")

    def install_vswhere(self, body: str | None = None) -> None:
        """By default a vswhere that lists the VS 2017 Build Tools, in UTF-8, as `-utf8` asks."""
        listing = [vswhere_entry(self.vs2017, "15.9.28307.812", "BuildTools", "2017", "Visual Studio Build Tools 2017")]
        write(self.vswhere.parent / "listing.json", json.dumps(listing, indent=2, ensure_ascii=False))
        # Kept double: vswhere.exe is a Windows program that reads Visual Studio's setup state; neither exists here.
        args = " ".join(VSWHERE_ARGS)  # quoted in the case pattern, so `*` is literal
        default = (
            f'case "$*" in\n  "{args}") cat "$(dirname "$0")/listing.json" ;;\n  *) echo "unexpected arguments: $*" '
            ">&2; exit 87 ;;\nesac\n"
        )
        script(self.vswhere, body if body is not None else default)

    def install_vs2015(self) -> None:
        vc = self.vs2015 / "VC"
        write(vc / "vcvarsall.bat", "@echo off\r\n")
        write(vc / "bin" / "amd64" / "cl.exe")
        write(vc / "bin" / "amd64" / "vcvars64.bat")
        write(vc / "bin" / "x86_amd64" / "vcvarsx86_amd64.bat")
        write(vc / "bin" / "vcvars32.bat")
        write(self.vs2015 / "Common7" / "IDE" / "devenv.exe")
        (self.vs2015 / "Common7" / "Tools").mkdir(parents=True)
        self.environ["VS140COMNTOOLS"] = str(self.vs2015 / "Common7" / "Tools") + os.sep

    def install_cuda(
        self,
        version: str,
        *,
        version_file: tuple[str, str],
        host_config: dict[str, str],
        extra: dict[str, str] | None = None,
    ) -> Path:
        root = self.cuda_base / f"v{version}"
        write(root / "bin" / "nvcc.exe")
        write(root / "include" / "cuda_runtime.h")
        write(root / version_file[0], version_file[1])
        for relative, text in {**host_config, **(extra or {})}.items():
            write(root / relative, text)
        self.environ[f"CUDA_PATH_V{version.replace('.', '_')}"] = str(root)
        return root

    def install_nvtoolsext(self) -> None:
        write(self.nvtoolsext / "lib" / "x64" / "nvToolsExt64_1.lib")
        write(self.nvtoolsext / "include" / "nvToolsExt.h")
        self.environ["NVTOOLSEXT_PATH"] = str(self.nvtoolsext) + os.sep

    def full_machine(self) -> FakeWindows:
        self.install_vs2017()
        self.install_vswhere()
        self.install_vs2015()
        self.install_nvtoolsext()
        self.install_cuda(
            "8.0",
            version_file=("version.txt", "CUDA Version 8.0.61\r\n"),
            host_config={"include/host_config.h": HOST_CONFIG_CUDA80},
        )
        self.install_cuda(
            "9.0",
            version_file=("version.txt", VERSION_TXT_CUDA90),
            host_config={
                "include/crt/host_config.h": HOST_CONFIG_CUDA90,
                "include/host_config.h": HOST_CONFIG_FORWARDER,
            },
            extra={"include/cudnn.h": CUDNN_H_7},
        )
        root = self.install_cuda(
            "12.4",
            version_file=("version.json", VERSION_JSON_CUDA124),
            host_config={
                "include/crt/host_config.h": HOST_CONFIG_CUDA12,
                "include/host_config.h": HOST_CONFIG_FORWARDER,
            },
            extra={
                "include/cudnn.h": CUDNN_H_9,
                "include/cudnn_version.h": CUDNN_VERSION_H_9,
                "include/nvtx3/nvToolsExt.h": "",
            },
        )
        self.environ["CUDA_PATH"] = str(root)
        return self


PYTHON = facts_from_dict(
    {
        "schema": 1,
        "os": "windows",
        "python": {"version": "3.6.8", "bits": 64, "executable": "C:\\Program Files\\Python36\\python.exe"},
    }
).python
COMMUNITY_2015 = FakeRegistry(
    keys={r"SOFTWARE\Microsoft\DevDiv\vs\Servicing\14.0\community"},
    values={(r"SYSTEM\CurrentControlSet\Control\FileSystem", "LongPathsEnabled"): 1},
)


def probe_fake(machine: FakeWindows, registry: FakeRegistry | None = COMMUNITY_2015, **kwargs):
    return probe_windows(machine.environ, registry=registry, python=PYTHON, cpu_count=8, **kwargs)


@pytest.fixture(params=["plain", "spaces (x86) & ünïcödé 用户"], ids=["plain", "awkward-path"])
def machine(request: pytest.FixtureRequest, tmp_path: Path) -> FakeWindows:
    base = tmp_path / "C" if request.param == "plain" else tmp_path / request.param / "C drive"
    return FakeWindows(base)


def test_probe_windows_reads_a_whole_machine(machine: FakeWindows) -> None:
    machine.full_machine()
    report = probe_fake(machine)
    facts = report.facts
    assert report.notes == ()
    assert facts.os == "windows"
    assert facts.python == PYTHON and facts.cpu_count == 8
    assert facts.long_paths_enabled is True
    assert facts.temp_dir == str(machine.temp)

    vs2015, vs2017 = facts.visual_studio
    assert (vs2015.product_line, vs2015.version, vs2015.product, vs2015.toolsets) == (
        "2015",
        "14.0",
        "Community",
        ("14.0",),
    )
    assert vs2015.path == str(machine.vs2015)
    assert vs2015.cl_x64 == str(machine.vs2015 / "VC" / "bin" / "amd64" / "cl.exe")
    assert vs2015.vcvars == {
        "vcvarsall.bat": str(machine.vs2015 / "VC" / "vcvarsall.bat"),
        "vcvarsx86_amd64.bat": str(machine.vs2015 / "VC" / "bin" / "x86_amd64" / "vcvarsx86_amd64.bat"),
        "vcvars64.bat": str(machine.vs2015 / "VC" / "bin" / "amd64" / "vcvars64.bat"),
        "vcvars32.bat": str(machine.vs2015 / "VC" / "bin" / "vcvars32.bat"),
    }
    assert vs2015.display_name == "Visual Studio Community 2015"

    assert (vs2017.product_line, vs2017.version, vs2017.product) == ("2017", "15.9.28307.812", "BuildTools")
    assert vs2017.path == str(machine.vs2017)
    assert vs2017.toolsets == ("14.11.25503", "14.16.27023")
    assert vs2017.default_toolset == "14.16.27023"
    build = machine.vs2017 / "VC" / "Auxiliary" / "Build"
    assert vs2017.vcvars == {
        name: str(build / name) for name in ("vcvarsall.bat", "vcvarsx86_amd64.bat", "vcvars64.bat", "vcvars32.bat")
    }
    assert vs2017.cl_x64 is None and vs2017.display_name == "Visual Studio Build Tools 2017"

    cuda80, cuda90, cuda124 = facts.cuda
    assert (cuda80.version, cuda80.full_version, cuda80.msc_range, cuda80.env_var) == (
        "8.0",
        "8.0.61",
        (1600, 1901),
        "CUDA_PATH_V8_0",
    )
    assert (cuda90.version, cuda90.full_version, cuda90.msc_range, cuda90.cudnn) == (
        "9.0",
        "9.0.176",
        (1600, 1912),
        "7.6.5",
    )
    assert cuda80.nvtx == cuda90.nvtx == str(machine.nvtoolsext)
    assert cuda80.cudnn is None
    assert (cuda124.version, cuda124.full_version, cuda124.msc_range, cuda124.cudnn) == (
        "12.4",
        "12.4.1",
        (1910, 1950),
        "9.1.0",
    )
    assert cuda124.nvtx == str(machine.cuda_base / "v12.4" / "include" / "nvtx3")
    assert cuda124.env_var == "CUDA_PATH_V12_4"
    assert cuda124.path == str(machine.cuda_base / "v12.4")
    assert cuda124.nvcc == str(machine.cuda_base / "v12.4" / "bin" / "nvcc.exe")
    assert facts.cuda_path == str(machine.cuda_base / "v12.4")
    assert facts.cuda_by_version("9.0") == cuda90

    # what the probe finds is exactly what a facts file written from it reads back
    assert facts_from_dict(json.loads(facts.to_json())) == facts


def test_probe_windows_without_a_registry_and_with_build_tools_2015(machine: FakeWindows) -> None:
    machine.install_vs2015()
    (machine.vs2015 / "Common7" / "IDE" / "devenv.exe").unlink()
    facts = probe_fake(machine, registry=None).facts
    assert facts.long_paths_enabled is None
    assert [(vs.product_line, vs.product, vs.display_name) for vs in facts.visual_studio] == [
        ("2015", "BuildTools", "Visual C++ Build Tools 2015")
    ]


def test_vs2015_found_in_its_default_folder_without_vs140comntools(machine: FakeWindows) -> None:
    machine.install_vs2015()
    del machine.environ["VS140COMNTOOLS"]
    facts = probe_fake(machine, registry=FakeRegistry()).facts
    assert [vs.path for vs in facts.visual_studio] == [str(machine.vs2015)]
    assert facts.visual_studio[0].product == "Unknown"
    assert facts.long_paths_enabled is False


def test_a_stale_vs140comntools_is_a_note(machine: FakeWindows) -> None:
    machine.environ["VS140COMNTOOLS"] = str(machine.pf86 / "Old Visual Studio" / "Common7" / "Tools") + os.sep
    report = probe_fake(machine)
    assert report.facts.visual_studio == ()
    assert any("VS140COMNTOOLS" in note and "vcvarsall.bat" in note for note in report.notes)


@pytest.mark.parametrize(
    "body, problem",
    [
        ('echo "Error 0x80070005: access is denied" >&2\nexit 5\n', "exit status 5: Error 0x80070005"),
        ('echo "<html><body>Proxy Authentication Required</body></html>"\n', "not its JSON list"),
        ("echo '[{\"installationPath\": '\n", "not its JSON list"),
    ],
    ids=["fails", "garbage", "truncated-json"],
)
def test_a_broken_vswhere_means_no_instances_and_a_note(machine: FakeWindows, body: str, problem: str) -> None:
    machine.install_vs2017()
    machine.install_vswhere(body)
    machine.install_vs2015()
    report = probe_fake(machine)
    assert [vs.product_line for vs in report.facts.visual_studio] == ["2015"]
    vswhere_notes = [note for note in report.notes if "vswhere.exe" in note]
    assert len(vswhere_notes) == 1 and problem in vswhere_notes[0], report.notes
    assert "cannot be listed" in vswhere_notes[0]


def test_a_vswhere_that_cannot_run_or_hangs_is_a_note(machine: FakeWindows) -> None:
    machine.install_vs2017()
    write(machine.vswhere, "MZ\x90\x00 not a program for this OS")
    report = probe_fake(machine)
    assert report.facts.visual_studio == ()
    assert any("vswhere.exe" in note and "could not start" in note for note in report.notes), report.notes

    machine.install_vswhere("sleep 30\n")
    started = time.monotonic()
    report = probe_fake(machine, run=lambda args, timeout: run_command(args, min(timeout, 0.5)))
    assert time.monotonic() - started < 10
    assert any("vswhere.exe" in note and "timed out after 0.5 s" in note for note in report.notes), report.notes


def test_no_vswhere_at_all_is_a_note(machine: FakeWindows) -> None:
    report = probe_fake(machine)
    assert report.facts.visual_studio == ()
    assert any("vswhere.exe was not found" in note for note in report.notes)


def test_vswhere_is_also_found_on_path(machine: FakeWindows, tmp_path: Path) -> None:
    machine.install_vs2017()
    machine.install_vswhere()
    elsewhere = tmp_path / "choco bin"
    elsewhere.mkdir()
    machine.vswhere.rename(elsewhere / "vswhere.exe")
    (machine.vswhere.parent / "listing.json").rename(elsewhere / "listing.json")
    machine.environ["PATH"] = f'C:\\Windows\\system32;"{elsewhere}";C:\\Windows'
    facts = probe_fake(machine).facts
    assert [vs.toolsets for vs in facts.visual_studio] == [("14.11.25503", "14.16.27023")]


def test_32_bit_python_on_64_bit_windows_still_finds_cuda_and_a_preview(machine: FakeWindows) -> None:
    # WOW64 gives a 32-bit process ProgramFiles = the x86 folder; ProgramW6432 keeps the real one.
    machine.install_cuda(
        "12.4",
        version_file=("version.json", VERSION_JSON_CUDA124),
        host_config={"include/crt/host_config.h": HOST_CONFIG_CUDA12},
    )
    machine.environ["ProgramW6432"] = machine.environ["ProgramFiles"]
    machine.environ["ProgramFiles"] = machine.environ["ProgramFiles(x86)"]
    preview = machine.pf / "Microsoft Visual Studio" / "2022" / "Preview"
    (preview / "VC" / "Tools" / "MSVC" / "14.50.35503").mkdir(parents=True)
    entry = vswhere_entry(preview, "17.14.36203.30", "Community", "2022", "Visual Studio Community 2022")
    entry["isPrerelease"] = True
    machine.install_vswhere(f"cat <<'EOF'\n{json.dumps([entry])}\nEOF\n")
    python32 = facts_from_dict(
        {
            "schema": 1,
            "os": "windows",
            "python": {"version": "3.6.8", "bits": 32, "executable": "C:\\Python36-32\\python.exe"},
        }
    ).python
    report = probe_windows(machine.environ, registry=None, python=python32, cpu_count=4)
    facts = report.facts
    assert facts.python.bits == 32
    assert [c.version for c in facts.cuda] == ["12.4"]
    (vs,) = facts.visual_studio
    assert (vs.display_name, vs.toolsets, vs.default_toolset, vs.vcvars) == (
        "Visual Studio Community 2022 (Preview)",
        ("14.50.35503",),
        None,
        {},
    )


def test_vswhere_instance_whose_folder_is_gone(machine: FakeWindows) -> None:
    machine.install_vswhere()  # lists the VS 2017 Build Tools, which are not on disk
    report = probe_fake(machine)
    assert report.facts.visual_studio == ()
    assert any("does not exist" in note for note in report.notes)


def test_cuda_folders_are_deduplicated_and_leftovers_noted(machine: FakeWindows) -> None:
    root = machine.install_cuda("10.0", version_file=("version.txt", "CUDA Version 10.0.130\n"), host_config={})
    machine.environ["CUDA_PATH"] = str(root) + os.sep  # the installer writes it with a trailing backslash
    machine.environ["cuda_path_v10_0"] = machine.environ.pop("CUDA_PATH_V10_0")  # names are case-insensitive on Windows
    (machine.cuda_base / "v9.2" / "extras").mkdir(parents=True)  # what an uninstaller leaves behind
    machine.environ["CUDA_PATH_V11_8"] = str(machine.cuda_base / "v11.8")
    report = probe_fake(machine)
    assert [(c.version, c.env_var, c.msc_range, c.nvtx) for c in report.facts.cuda] == [
        ("10.0", "CUDA_PATH_V10_0", None, None)
    ]
    assert any("CUDA_PATH_V11_8" in note and "not a CUDA toolkit" in note for note in report.notes)
    assert any("v9.2" in note and "not a CUDA toolkit" in note for note in report.notes)


@pytest.mark.build
def test_cuda_without_version_files_asks_nvcc(machine: FakeWindows) -> None:
    """The real CUDA 13.0 nvcc (as bin/nvcc.exe) and NVIDIA's own headers in a toolkit folder without version files."""
    major_minor, full = real_cuda_release()
    root = machine.cuda_base / f"v{major_minor}"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc.exe").symlink_to(REAL_CUDA / "bin" / "nvcc")
    (root / "include" / "crt").mkdir(parents=True)
    shutil.copyfile(REAL_CUDA / "include" / "cuda_runtime.h", root / "include" / "cuda_runtime.h")
    shutil.copyfile(REAL_CUDA / "include" / "crt" / "host_config.h", root / "include" / "crt" / "host_config.h")
    facts = probe_fake(machine).facts
    assert [(c.version, c.full_version, c.msc_range, c.env_var) for c in facts.cuda] == [
        (major_minor, full, CUDA_13_0_MSC_RANGE, None)
    ]


def test_cudnn_include_dir_is_used_when_cuda_has_no_cudnn(machine: FakeWindows, tmp_path: Path) -> None:
    machine.install_cuda("12.4", version_file=("version.json", VERSION_JSON_CUDA124), host_config={})
    cudnn = tmp_path / "NVIDIA" / "CUDNN" / "v9.1" / "include" / "12.4"
    write(cudnn / "cudnn_version.h", CUDNN_VERSION_H_9)
    machine.environ["CUDNN_INCLUDE_DIR"] = str(cudnn)
    assert [c.cudnn for c in probe_fake(machine).facts.cuda] == ["9.1.0"]


def _real_tool(name: str) -> tuple[str, str]:
    """The real tool (the pip packages' cmake and ninja, git, sccache) and the MAJOR.MINOR.PATCH of its
    own `--version` banner, read here with a plain pattern rather than the probe's parsers."""
    import cmake
    import ninja

    found = {
        "cmake": str(Path(cmake.CMAKE_BIN_DIR) / "cmake"),
        "ninja": str(Path(ninja.BIN_DIR) / "ninja"),
    }.get(name) or shutil.which(name)
    assert found, f"the build tier needs {name} on PATH"
    banner = subprocess.run([found, "--version"], capture_output=True, text=True, check=True, timeout=60).stdout
    version = re.search(r"(\d+\.\d+\.\d+)", banner.splitlines()[0])
    assert version, banner
    return found, version.group(1)


@pytest.mark.build
def test_windows_tools_on_path_are_probed_in_parallel(machine: FakeWindows, tmp_path: Path) -> None:
    """The real cmake, ninja, git and sccache, each behind a 0.6 s pause: one after another they would take 2.4 s."""
    bin_dir = tmp_path / "Program Files" / "CMake" / "bin"
    scripts_dir = tmp_path / "Python36" / "Scripts"
    expected = {}
    for name, folder in (("cmake", bin_dir), ("ninja", scripts_dir), ("sccache", scripts_dir), ("git", scripts_dir)):
        real, expected[name] = _real_tool(name)
        script(folder / f"{name}.exe", f'sleep 0.6\nexec "{real}" "$@"\n')
    # Kept double: a tool whose --version fails; no real tool here fails on purpose.
    script(scripts_dir / "ccache.exe", "sleep 0.6\necho broken >&2\nexit 1\n")
    # Kept doubles, present only: clcache (Windows only) and 7-Zip are found by name, their versions never asked.
    write(scripts_dir / "clcache.exe")
    write(machine.pf / "7-Zip" / "7z.exe")
    machine.environ["Path"] = f"{bin_dir};{scripts_dir}"
    started = time.monotonic()
    report = probe_fake(machine)
    elapsed = time.monotonic() - started
    tools = report.facts.tools
    assert {name: tool.version for name, tool in tools.items()} == {
        **expected,
        "clcache": None,
        "ccache": None,
        "7z": None,
    }
    assert tools["cmake"].path == str(bin_dir / "cmake.exe")
    assert tools["7z"].path == str(machine.pf / "7-Zip" / "7z.exe")
    assert any("ccache" in note and "exit status 1: broken" in note for note in report.notes)
    assert elapsed < 2.0, f"tool versions were not probed in parallel ({elapsed:.2f} s)"


def test_no_secret_reaches_facts_or_notes(machine: FakeWindows) -> None:
    machine.full_machine()
    machine.environ.update(
        {
            "CUDA_PATH": "https://builder:S3cretPa55@cuda-mirror.example.com/v12.4",
            "CUDA_PATH_V11_8": "https://builder:S3cretPa55@cuda-mirror.example.com/v11.8",
            "GITHUB_TOKEN": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
            "SCCACHE_REDIS_PASSWORD": "hunter2-redis-password",
            "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        }
    )
    report = probe_fake(machine)
    written = report.facts.to_json() + "\n".join(report.notes)
    for secret in ("S3cretPa55", "A1b2C3d4E5f6G7h8I9j0", "hunter2", "wJalrXUtnFEMI"):
        assert secret not in written
    assert report.facts.cuda_path == "https://builder:***@cuda-mirror.example.com/v12.4"
    # nothing from the environment is dumped: only the folders the plan needs
    assert (
        "GITHUB_TOKEN" not in written and "SCCACHE" not in written and "PATH" not in json.loads(report.facts.to_json())
    )


# ---------------------------------------------------------------- a fake Linux machine


@pytest.mark.build
def test_probe_linux_on_a_fake_tree_and_the_real_toolkit(tmp_path: Path) -> None:
    """A CUDA 11.8 tree (kept double: no CUDA 11.8 here) in a fake /usr/local; the real CUDA 13.0 as CUDA_HOME."""
    major_minor, full = real_cuda_release()
    assert not list((REAL_CUDA / "include").glob("cudnn*.h")), "the expected cuDNN below is 'none installed'"
    usr_local = tmp_path / "usr" / "local"
    cuda118 = usr_local / "cuda-11.8"
    write(cuda118 / "bin" / "nvcc")
    write(cuda118 / "include" / "cuda_runtime.h")
    write(cuda118 / "lib64" / "libnvToolsExt.so")
    write(cuda118 / "version.json", '{"cuda": {"name": "CUDA SDK", "version": "11.8.20220929"}}')
    write(
        cuda118 / "include" / "cudnn_version.h",
        CUDNN_H_7.replace("CUDNN_MAJOR 7", "CUDNN_MAJOR 8").replace("CUDNN_MINOR 6", "CUDNN_MINOR 9"),
    )
    (usr_local / "cuda").symlink_to(cuda118)
    report = probe_linux(
        {"CUDA_HOME": str(REAL_CUDA), "PATH": str(REAL_CUDA / "bin"), "TMPDIR": "/var/tmp"},
        python=PYTHON,
        cpu_count=4,
        usr_local=usr_local,
    )
    facts = report.facts
    assert report.notes == ()
    assert (facts.os, facts.visual_studio, facts.long_paths_enabled, facts.temp_dir, facts.cpu_count) == (
        "linux",
        (),
        None,
        "/var/tmp",
        4,
    )
    assert [(c.version, c.full_version, c.path, c.msc_range, c.nvtx, c.cudnn) for c in facts.cuda] == [
        ("11.8", "11.8.20220929", str(usr_local / "cuda"), None, str(usr_local / "cuda"), "8.9.5"),
        (major_minor, full, str(REAL_CUDA), None, str(REAL_CUDA / "include" / "nvtx3"), None),
    ]


def test_nvcc_wrapper_outside_a_toolkit_is_a_note(tmp_path: Path) -> None:
    # Not a double: the input under test, a wrapper script outside any toolkit (as /usr/local/bin/nvcc often is).
    wrapper = script(tmp_path / "bin" / "nvcc", 'exec /opt/cuda/bin/nvcc "$@"\n')
    report = probe_linux({"PATH": str(wrapper.parent)}, python=PYTHON, usr_local=tmp_path / "nothing")
    assert report.facts.cuda == ()
    assert any("nvcc is on PATH" in note for note in report.notes)


# ---------------------------------------------------------------- this machine


@pytest.mark.build
def test_probe_reports_this_linux_machine_honestly() -> None:
    """This machine's tools and CUDA as their own banners and NVIDIA's own files give them: the build
    tier's tools (conftest's TIER_TOOLS), 7-Zip, and the CUDA 13.0 toolkit at /usr/local/cuda."""
    started = time.monotonic()
    report = probe_report()
    elapsed = time.monotonic() - started
    facts = report.facts
    assert facts.os == "linux"
    assert facts.python.version == platform.python_version() and facts.python.bits == 64
    assert facts.visual_studio == () and facts.long_paths_enabled is None
    expected = {}
    for name in ("cmake", "ninja", "git", "sccache", "ccache"):
        path = shutil.which(name)
        assert path, f"the build tier needs {name} on PATH"
        # MAJOR.MINOR.PATCH on the first line of the tool's own banner: "cmake version X.Y.Z", "X.Y.Z"
        # (ninja), "git version X.Y.Z", "sccache X.Y.Z", "ccache version X.Y.Z"
        banner = subprocess.run([path, "--version"], capture_output=True, text=True, check=True, timeout=60).stdout
        version = re.search(r"(\d+\.\d+\.\d+)", banner.splitlines()[0])
        assert version, (name, banner)
        expected[name] = (path, version.group(1))
    seven_zip = next((found for found in map(shutil.which, ("7z", "7zz", "7za")) if found), None)
    assert seven_zip, "7-Zip (Debian's 7zip or p7zip-full) is on PATH here and on CI"
    assert {name: (tool.path, tool.version) for name, tool in facts.tools.items() if name != "7z"} == expected
    assert facts.tools["7z"].path == seven_zip  # found by name, its version never asked
    # the real CUDA 13.0 at /usr/local/cuda (the build tier's nvcc), in NVIDIA's own words
    major_minor, full = real_cuda_release()
    real = [cuda for cuda in facts.cuda if Path(cuda.path).resolve() == REAL_CUDA.resolve()]
    assert [(c.version, c.full_version) for c in real] == [(major_minor, full)], facts.cuda
    # No MSVC on Linux: the probe leaves the range out, though NVIDIA's header has its Windows guard.
    header = (REAL_CUDA / "include" / "crt" / "host_config.h").read_text(encoding="utf-8")
    guard = re.search(r"^#if _MSC_VER < (\d+) \|\| _MSC_VER >= (\d+)$", header, re.MULTILINE)
    assert guard and (int(guard.group(1)), int(guard.group(2))) == CUDA_13_0_MSC_RANGE
    assert all(cuda.msc_range is None for cuda in facts.cuda)
    # this machine's memory, as psutil and /proc/meminfo see it (available memory moves between probes)
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    assert facts.memory_total_mib == int(meminfo["MemTotal"].split()[0]) // 1024
    assert facts.swap_total_mib == int(meminfo["SwapTotal"].split()[0]) // 1024
    assert facts.memory_available_mib is not None and 0 < facts.memory_available_mib <= facts.memory_total_mib
    again = probe()
    assert again.memory_available_mib is not None
    assert dataclasses.replace(again, memory_available_mib=facts.memory_available_mib) == facts_from_dict(
        json.loads(facts.to_json())
    )
    assert elapsed < 5.0, f"probing took {elapsed:.2f} s"


GPU_QUESTION = (
    "import sys; from pytorch_winbuild.facts.probe import probe; "
    "facts = probe(gpus={ask}); print(facts.gpus, 'pynvml' in sys.modules, facts.memory_total_mib is not None)"
)


@pytest.mark.parametrize(("ask", "expected"), [(False, "None False True"), (True, "() True True")])
def test_a_cpu_only_probe_does_not_ask_the_driver(ask: bool, expected: str) -> None:
    """The interpreter's own module table says whether NVML's bindings were loaded to ask the driver.
    This machine has no NVIDIA driver, so a real ask finds no GPUs: () rather than None ("not asked")."""
    done = subprocess.run(
        [sys.executable, "-c", GPU_QUESTION.format(ask=ask)], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split("\n")[0] == expected


def test_the_cuda_cpu_plan_path_probes_without_gpus(tmp_path: Path) -> None:
    """`build --cuda cpu --dry-run` runs end to end without loading NVML's bindings."""
    script = (
        "import runpy, sys; sys.argv = ['invoke', 'build', '--cuda', 'cpu', '--dry-run', '--cache-dir', sys.argv[1]]\n"
        "code = 0\n"
        "try:\n    runpy.run_module('invoke', run_name='__main__')\n"
        "except SystemExit as stop:\n    code = stop.code\n"
        "print('EXIT', code, 'pynvml' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert "CPU-only build" in done.stdout and done.stdout.rstrip().endswith("EXIT 0 False"), done.stdout + done.stderr


@pytest.mark.build
def test_the_nvcc_banner_is_a_real_capture() -> None:
    banner = subprocess.run([str(REAL_CUDA / "bin" / "nvcc"), "--version"], capture_output=True, text=True, check=True)
    assert banner.stdout == NVCC_VERSION_CUDA130


@pytest.mark.build
def test_the_real_cuda_13_header_has_the_guard_the_shapes_reduce() -> None:
    """NVIDIA's installed CUDA 13.0 include/crt/host_config.h: the range of its guard, and the layout the
    hand-written HOST_CONFIG_CUDA12 keeps (`#if` guard, blank line, `#error -- unsupported ...`)."""
    text = (REAL_CUDA / "include" / "crt" / "host_config.h").read_text(encoding="utf-8")
    assert parse_host_config_msc_range(text) == CUDA_13_0_MSC_RANGE
    shape = re.compile(
        r"^#if defined\(_WIN32\)\n\n#if _MSC_VER < (\d+) \|\| _MSC_VER >= (\d+)\n\n"
        r"#error -- unsupported Microsoft Visual Studio version! Only the versions between \d+ and \d+ \(inclusive\)",
        re.MULTILINE,
    )
    real, reduced = shape.search(text), shape.search(HOST_CONFIG_CUDA12)
    assert real and reduced
    assert (int(real.group(1)), int(real.group(2))) == CUDA_13_0_MSC_RANGE
    # NVIDIA's own #endif comment is stale here too (it says 1910): only the #if counts, as the parser assumes.
    assert "#endif /* (_MSC_VER < 1910 || _MSC_VER >= 1950) */" in text


def test_run_command_never_raises() -> None:
    assert run_command(["/nonexistent/tool.exe", "--version"], 1.0).error.startswith("could not start")
    assert run_command(["sh", "-c", "sleep 5"], 0.2).error == "timed out after 0.2 s"
    result = run_command(["sh", "-c", "echo ok; echo warn >&2; exit 3"], 5.0)
    assert (result.returncode, result.stdout, result.stderr, result.ok) == (3, "ok\n", "warn\n", False)
    assert (
        CommandResult(2, "", "https://u:topsecret@h/x failed\n").problem() == "exit status 2: https://u:***@h/x failed"
    )


# ---------------------------------------------------------------- shipped facts files

SHIPPED = sorted(HOSTS_DIR.glob("*.json"))

# msc_range per CUDA version, as each release's own host_config.h states it (None: not established,
# the planner falls back to its table). Sources are listed in build_config/hosts/README.md.
RESEARCHED_MSC_RANGES = {
    "8.0": (1600, 1901),
    "9.0": (1600, 1912),
    "10.0": None,
    "12.4": (1910, 1950),
    "12.8": (1910, 1950),
}


def test_the_typical_machines_are_shipped() -> None:
    assert {path.name for path in SHIPPED} >= {
        "vs2015-cuda80.json",
        "vs2017-cuda90-cuda100.json",
        "vs2019-vs2022-cuda12.json",
        "cpu-only.json",
        "vs2015-vs2017-cuda80-cuda90.json",
    }


@pytest.mark.parametrize("path", SHIPPED, ids=[path.name for path in SHIPPED])
def test_shipped_facts_file_loads_and_round_trips(path: Path, tmp_path: Path) -> None:
    facts = load_facts(path)
    copy = tmp_path / path.name
    copy.write_text(facts.to_json(), encoding="utf-8")
    assert load_facts(copy) == facts
    assert facts.to_json() == path.read_text(encoding="utf-8"), (
        "regenerate the file with Facts.to_json() so it stays canonical"
    )
    assert facts.os == "windows" and facts.python.bits == 64 and facts.description
    for vs in facts.visual_studio:
        assert vs.default_toolset in vs.toolsets
        assert "vcvarsall.bat" in vs.vcvars and all(script.startswith(vs.path + "\\") for script in vs.vcvars.values())
    for cuda in facts.cuda:
        assert cuda.msc_range == RESEARCHED_MSC_RANGES[cuda.version]
        assert cuda.path.startswith("C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v" + cuda.version)
        assert cuda.env_var == "CUDA_PATH_V" + cuda.version.replace(".", "_")
        assert cuda.nvtx is not None
    if facts.cuda:
        assert facts.cuda_by_version(facts.cuda_path.rsplit("\\v", 1)[1]) is not None


# Microsoft's numbering: product line → installationVersion major, and the MSVC toolsets it ships
# (toolset 14.N is _MSC_VER 1900 + N: 14.0 VS 2015, 14.1x VS 2017, 14.2x VS 2019, 14.3x-14.4x VS 2022).
MICROSOFT_LINES = {"2015": ("14", range(0, 1)), "2017": ("15", range(10, 20)), "2019": ("16", range(20, 30))}
MICROSOFT_LINES["2022"] = ("17", range(30, 50))


@pytest.mark.parametrize("path", SHIPPED, ids=[path.name for path in SHIPPED])
def test_shipped_facts_files_follow_microsoft_and_nvidia_layouts(path: Path) -> None:
    """The hand-written machines against the products' own layouts, not against the probe's output."""
    facts = load_facts(path)
    for vs in facts.visual_studio:
        major, minors = MICROSOFT_LINES[vs.product_line]
        assert vs.version.split(".")[0] == major, vs.version
        assert all(int(toolset.split(".")[1]) in minors for toolset in vs.toolsets), vs.toolsets
        # VS 2015: VC\vcvarsall.bat; VS 2017 and later: VC\Auxiliary\Build\vcvarsall.bat
        folder = "\\VC\\" if vs.product_line == "2015" else "\\VC\\Auxiliary\\Build\\"
        assert vs.vcvars["vcvarsall.bat"] == vs.path + folder + "vcvarsall.bat"
    for cuda in facts.cuda:
        # NVIDIA's Windows installer: <ProgramFiles>\NVIDIA GPU Computing Toolkit\CUDA\v<X.Y>\bin\nvcc.exe
        assert cuda.nvcc == f"C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v{cuda.version}\\bin\\nvcc.exe"
        assert cuda.full_version is None or cuda.full_version.startswith(cuda.version + ".")


def test_an_instance_of_a_visual_studio_it_does_not_know_is_left_out_with_a_note(tmp_path: Path) -> None:
    """A future product line (vswhere's productLineVersion '2030') would make plans and doctor index an unknown line."""
    machine = FakeWindows(tmp_path / "C")
    machine.install_vs2017()
    machine.install_vswhere()
    listing = [vswhere_entry(machine.vs2017, "15.9.28307.812", "BuildTools", "2030", "Visual Studio Build Tools 2030")]
    write(machine.vswhere.parent / "listing.json", json.dumps(listing))
    report = probe_fake(machine)
    assert report.facts.visual_studio == ()
    assert any("does not know Visual Studio '2030'" in note for note in report.notes)
