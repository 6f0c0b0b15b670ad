"""Stand-in Visual Studio 2017 Build Tools for the cmd tier, written for these tests.

They behave like the real scripts where it matters to pytorch-winbuild: vcvarsall.bat takes an
architecture (`x86`, `x64`/`amd64`, `x86_amd64`/`x86_x64`, `amd64_x86`/`x64_x86`) and
`-vcvars_ver=<toolset>` and hands over to Common7\\Tools\\VsDevCmd.bat, which sets up the Windows
SDK and calls vsdevcmd\\ext\\vcvars.bat for the MSVC toolset. A missing toolset gives the real
`[ERROR:vcvars.bat] ...` and `[ERROR:VsDevCmd.bat] ...` lines and exit status 0. The toolset
folders use the real names (bin\\Hostx64\\x64) while the scripts write HostX64, as the real ones
do. Everything lives under `<root>/Program Files (x86)/`, so every path has spaces and `(x86)`.

Kept doubles (docs/test-doubles.md): Visual Studio cannot be installed or run on Linux, and its own
scripts are Microsoft's, not redistributable; the command interpreter that runs these is real (Wine's
cmd). The `[ERROR:...]` lines and variable names follow Microsoft's scripts as build logs quote them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild.facts.cmd_line import to_wine_path
from pytorch_winbuild.facts.model import VisualStudio

SDK_VERSION = "10.0.17763.0"

VCVARSALL = r"""@echo off
@REM Stand-in for Visual Studio 2017's VC\Auxiliary\Build\vcvarsall.bat (pytorch-winbuild tests).
set "__VCVARSALL_ARGS=%*"
set "__VCVARSALL_ARCH_ARG="
set "__VCVARSALL_HOST="
set "__VCVARSALL_TARGET="
set "__VCVARSALL_VER="
set "__VCVARSALL_BAD="

@REM Split on spaces only: -vcvars_ver=14.11 must stay one argument, which %1 %2 would not keep.
:parse_loop
set "__VCVARSALL_REST=%__VCVARSALL_ARGS%"
set "__VCVARSALL_ARGS="
for /F "tokens=1,* delims= " %%a in ("%__VCVARSALL_REST%") do (
    set "__VCVARSALL_ARG=%%a"
    set "__VCVARSALL_ARGS=%%b"
    call :parse_one
)
if defined __VCVARSALL_ARGS goto :parse_loop

if defined __VCVARSALL_BAD goto :usage
if not defined __VCVARSALL_TARGET goto :usage

set "VSCMD_ARG_HOST_ARCH=%__VCVARSALL_HOST%"
set "VSCMD_ARG_TGT_ARCH=%__VCVARSALL_TARGET%"
if defined __VCVARSALL_VER set "VSCMD_ARG_VCVARS_VER=%__VCVARSALL_VER%"
call "%~dp0..\..\..\Common7\Tools\VsDevCmd.bat"
if not "%__VSCMD_SCRIPT_ERR_COUNT%"=="0" goto :end
echo [vcvarsall.bat] Environment initialized for: '%__VCVARSALL_ARCH_ARG%'
goto :end

:parse_one
if /I "%__VCVARSALL_ARG:~0,12%"=="-vcvars_ver=" (
    set "__VCVARSALL_VER=%__VCVARSALL_ARG:~12%"
    exit /B 0
)
set "__VCVARSALL_HOST="
if /I "%__VCVARSALL_ARG%"=="x86" call :set_arch x86 x86
if /I "%__VCVARSALL_ARG%"=="x64" call :set_arch x64 x64
if /I "%__VCVARSALL_ARG%"=="amd64" call :set_arch x64 x64
if /I "%__VCVARSALL_ARG%"=="x86_amd64" call :set_arch x86 x64
if /I "%__VCVARSALL_ARG%"=="x86_x64" call :set_arch x86 x64
if /I "%__VCVARSALL_ARG%"=="amd64_x86" call :set_arch x64 x86
if /I "%__VCVARSALL_ARG%"=="x64_x86" call :set_arch x64 x86
if defined __VCVARSALL_HOST (
    set "__VCVARSALL_ARCH_ARG=%__VCVARSALL_ARG%"
    exit /B 0
)
echo [ERROR:vcvarsall.bat] Invalid argument found : %__VCVARSALL_ARG%
set "__VCVARSALL_BAD=1"
exit /B 0

:set_arch
set "__VCVARSALL_HOST=%~1"
set "__VCVARSALL_TARGET=%~2"
exit /B 0

:usage
echo [ERROR:vcvarsall.bat] Error in script usage. The correct usage is:
echo Syntax:
echo     vcvarsall.bat [arch] [-vcvars_ver=vc_version]
echo where :
echo     [arch]: x86, amd64, x86_amd64, x86_x64, amd64_x86, x64_x86
echo     [vc_version] : "14.0" for the VS 2015 compiler toolset, or "14.1x" for a VS 2017 toolset

:end
set "__VCVARSALL_ARGS="
set "__VCVARSALL_REST="
set "__VCVARSALL_ARG="
set "__VCVARSALL_ARCH_ARG="
set "__VCVARSALL_HOST="
set "__VCVARSALL_TARGET="
set "__VCVARSALL_VER="
set "__VCVARSALL_BAD="
set "__VSCMD_SCRIPT_ERR_COUNT="
exit /B 0
"""

VSDEVCMD = r"""@echo off
@REM Stand-in for Visual Studio 2017's Common7\Tools\VsDevCmd.bat (pytorch-winbuild tests).
set "__VSCMD_SCRIPT_ERR_COUNT=0"
call :full_path VSINSTALLDIR "%~dp0..\.."

if defined VSCMD_ARG_no_logo goto :after_banner
echo **********************************************************************
echo ** Visual Studio 2017 Developer Command Prompt v15.9.4
echo ** Copyright (c) 2017 Microsoft Corporation
echo **********************************************************************
:after_banner

if not defined __VSCMD_PREINIT_PATH set "__VSCMD_PREINIT_PATH=%PATH%"
set "VS150COMNTOOLS=%VSINSTALLDIR%Common7\Tools\"
set "VisualStudioVersion=15.0"
set "VSCMD_VER=15.9.4"
set "DevEnvDir=%VSINSTALLDIR%Common7\IDE\"
set "VSCMD_ARG_app_plat=Desktop"

@REM Windows SDK (the real script reads its folder from the registry).
call :full_path WindowsSdkDir "%VSINSTALLDIR%..\..\..\Windows Kits\10"
set "WindowsSDKVersion=@SDK@\"
set "WindowsSDKLibVersion=@SDK@\"
set "UCRTVersion=@SDK@"
set "UniversalCRTSdkDir=%WindowsSdkDir%"
set "WindowsSdkBinPath=%WindowsSdkDir%bin\"
set "INCLUDE=%WindowsSdkDir%include\@SDK@\ucrt;%WindowsSdkDir%include\@SDK@\shared;%WindowsSdkDir%include\@SDK@\um;%INCLUDE%"
set "LIB=%WindowsSdkDir%lib\@SDK@\ucrt\%VSCMD_ARG_TGT_ARCH%;%WindowsSdkDir%lib\@SDK@\um\%VSCMD_ARG_TGT_ARCH%;%LIB%"
set "PATH=%WindowsSdkDir%bin\@SDK@\%VSCMD_ARG_HOST_ARCH%;%PATH%"

call "%~dp0vsdevcmd\ext\vcvars.bat"
if "%__VCVARS_SCRIPT_ERROR%"=="1" set /A __VSCMD_SCRIPT_ERR_COUNT+=1
set "__VCVARS_SCRIPT_ERROR="

if "%__VSCMD_SCRIPT_ERR_COUNT%"=="0" goto :end
echo [ERROR:%~nx0] *** VsDevCmd.bat encountered errors. Environment may be incomplete and/or incorrect. ***
echo [ERROR:%~nx0] In an uninitialized command prompt, please 'set VSCMD_DEBUG=[value]' and then re-run
echo [ERROR:%~nx0] vsdevcmd.bat [args] for additional details.
goto :end

:full_path
set "%~1=%~f2\"
exit /B 0

:end
exit /B 0
"""  # noqa: E501 - cmd cannot continue a line inside quotes

VCVARS_EXT = r"""@echo off
@REM Stand-in for VsDevCmd's ext\vcvars.bat: picks the MSVC toolset and adds it to the environment.
set "__VCVARS_VERSION=%VSCMD_ARG_VCVARS_VER%"
if not defined __VCVARS_VERSION set /P __VCVARS_VERSION=<"%VSINSTALLDIR%VC\Auxiliary\Build\Microsoft.VCToolsVersion.default.txt"
if exist "%VSINSTALLDIR%VC\Tools\MSVC\%__VCVARS_VERSION%\" goto :found

@REM A short version (14.11) selects the newest installed 14.11.xxxxx folder.
set "__VCVARS_FULL="
for /F "delims=" %%a in ('dir /b /ad /o-n "%VSINSTALLDIR%VC\Tools\MSVC\%__VCVARS_VERSION%.*" 2^>nul') do set "__VCVARS_FULL=%%a"
if not defined __VCVARS_FULL goto :not_found
set "__VCVARS_VERSION=%__VCVARS_FULL%"
goto :found

:not_found
echo [ERROR:%~nx0] Toolset directory for version '%__VCVARS_VERSION%' was not found.
set "__VCVARS_SCRIPT_ERROR=1"
goto :end

:found
if /I "%VSCMD_ARG_HOST_ARCH%"=="x64" set "__VCVARS_HOST_DIR=HostX64"
if /I "%VSCMD_ARG_HOST_ARCH%"=="x86" set "__VCVARS_HOST_DIR=HostX86"
set "VCINSTALLDIR=%VSINSTALLDIR%VC\"
set "VCIDEInstallDir=%VSINSTALLDIR%Common7\IDE\VC\"
set "VCToolsVersion=%__VCVARS_VERSION%"
set "VCToolsInstallDir=%VCINSTALLDIR%Tools\MSVC\%__VCVARS_VERSION%\"
set "VCToolsRedistDir=%VCINSTALLDIR%Redist\MSVC\%__VCVARS_VERSION%\"
set "__VCVARS_CROSS_BIN="
if /I not "%VSCMD_ARG_HOST_ARCH%"=="%VSCMD_ARG_TGT_ARCH%" set "__VCVARS_CROSS_BIN=%VCToolsInstallDir%bin\%__VCVARS_HOST_DIR%\%VSCMD_ARG_HOST_ARCH%;"
set "PATH=%VCToolsInstallDir%bin\%__VCVARS_HOST_DIR%\%VSCMD_ARG_TGT_ARCH%;%__VCVARS_CROSS_BIN%%VCIDEInstallDir%VCPackages;%PATH%"
set "INCLUDE=%VCToolsInstallDir%ATLMFC\include;%VCToolsInstallDir%include;%INCLUDE%"
set "LIB=%VCToolsInstallDir%ATLMFC\lib\%VSCMD_ARG_TGT_ARCH%;%VCToolsInstallDir%lib\%VSCMD_ARG_TGT_ARCH%;%LIB%"
set "LIBPATH=%VCToolsInstallDir%ATLMFC\lib\%VSCMD_ARG_TGT_ARCH%;%VCToolsInstallDir%lib\%VSCMD_ARG_TGT_ARCH%;%VCToolsInstallDir%lib\x86\store\references;%LIBPATH%"
set "Platform=%VSCMD_ARG_TGT_ARCH%"
set "CommandPromptType=Native"
if /I not "%VSCMD_ARG_HOST_ARCH%"=="%VSCMD_ARG_TGT_ARCH%" set "CommandPromptType=Cross"

:end
set "__VCVARS_VERSION="
set "__VCVARS_FULL="
set "__VCVARS_HOST_DIR="
set "__VCVARS_CROSS_BIN="
exit /B 0
"""  # noqa: E501 - cmd cannot continue a line inside quotes

SHORTCUTS = {
    "vcvars64.bat": "x64",
    "vcvars32.bat": "x86",
    "vcvarsx86_amd64.bat": "x86_amd64",
    "vcvarsamd64_x86.bat": "amd64_x86",
}


def write_bat(path: Path, text: str) -> Path:
    """Batch files are read by cmd line by line; CRLF endings are what labels and goto expect."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.replace("\r\n", "\n").replace("\n", "\r\n").encode("ascii"))
    return path


@dataclass(frozen=True)
class StandInVisualStudio:
    install: Path  # <root>/Program Files (x86)/Microsoft Visual Studio/2017/BuildTools
    toolsets: tuple[str, ...]

    @property
    def build_dir(self) -> Path:
        return self.install / "VC" / "Auxiliary" / "Build"

    def script(self, name: str = "vcvarsall.bat") -> str:
        """The script's path as cmd under Wine sees it."""
        return to_wine_path(self.build_dir / name)

    def toolset_dir(self, toolset: str) -> str:
        return to_wine_path(self.install / "VC" / "Tools" / "MSVC" / toolset)

    def facts(self) -> VisualStudio:
        """What probing would report for this instance."""
        return VisualStudio(
            product_line="2017",
            version="15.9.28307.222",
            product="BuildTools",
            path=to_wine_path(self.install),
            toolsets=self.toolsets,
            vcvars={path.name: to_wine_path(path) for path in sorted(self.build_dir.glob("vcvars*.bat"))},
            default_toolset=self.toolsets[-1],
            display_name="Visual Studio Build Tools 2017",
        )


def make_visual_studio(
    root: Path, toolsets: tuple[str, ...] = ("14.11.25503", "14.16.27023"), *, with_compiler: bool = True
) -> StandInVisualStudio:
    """Lay out a Build Tools instance with the given toolsets (the last one is the default).

    Without `with_compiler` the toolset folders exist but hold no cl.exe, as after a partial
    uninstall of the C++ build tools.
    """
    program_files = root / "Program Files (x86)"
    install = program_files / "Microsoft Visual Studio" / "2017" / "BuildTools"
    build = install / "VC" / "Auxiliary" / "Build"
    write_bat(build / "vcvarsall.bat", VCVARSALL)
    for name, arch in SHORTCUTS.items():
        write_bat(build / name, f'@call "%~dp0vcvarsall.bat" {arch} %*\n')
    (build / "Microsoft.VCToolsVersion.default.txt").write_bytes(toolsets[-1].encode("ascii") + b"\r\n")
    write_bat(install / "Common7" / "Tools" / "VsDevCmd.bat", VSDEVCMD.replace("@SDK@", SDK_VERSION))
    write_bat(install / "Common7" / "Tools" / "vsdevcmd" / "ext" / "vcvars.bat", VCVARS_EXT)
    (install / "Common7" / "IDE" / "VC" / "VCPackages").mkdir(parents=True)
    for toolset in toolsets:
        msvc = install / "VC" / "Tools" / "MSVC" / toolset
        for folder in ("include", "ATLMFC/include", "lib/x64", "lib/x86/store/references", "ATLMFC/lib/x64"):
            (msvc / folder).mkdir(parents=True, exist_ok=True)
        for host in ("Hostx64", "Hostx86"):
            for target in ("x64", "x86"):
                bin_dir = msvc / "bin" / host / target
                bin_dir.mkdir(parents=True)
                if with_compiler:
                    (bin_dir / "cl.exe").write_bytes(b"MZ stand-in for " + f"{toolset} {host} {target}".encode("ascii"))
    sdk = program_files / "Windows Kits" / "10"
    for folder in ("ucrt", "shared", "um"):
        (sdk / "include" / SDK_VERSION / folder).mkdir(parents=True)
    for folder in ("ucrt/x64", "um/x64", "ucrt/x86", "um/x86"):
        (sdk / "lib" / SDK_VERSION / folder).mkdir(parents=True)
    for arch in ("x64", "x86"):
        (sdk / "bin" / SDK_VERSION / arch).mkdir(parents=True)
    return StandInVisualStudio(install=install, toolsets=toolsets)
