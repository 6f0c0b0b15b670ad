<#
.SYNOPSIS
Registers a daily Windows scheduled task that runs `invoke nightly` from this repo, or removes it
with -Unregister. For machines without a GitHub Actions runner (Task Scheduler alone).

.DESCRIPTION
The task runs, every day at -At (local time), in this repo's folder:
    <venv>\Scripts\python.exe -m invoke nightly [--matrix ...] [--cache-dir ...] [--output-dir ...]
with its console output appended to -LogFile. Its "Last Run Result" is the nightly's exit code:
0 all entries built or skipped, 5 an entry failed, 7 another nightly was running, 2 a
configuration error. It runs as -User whether or not that user is logged on (S4U: no password
is stored, and network shares are not reachable with the user's credentials), with that user's
environment variables: set the shared cache's credentials there once, e.g.
    [Environment]::SetEnvironmentVariable('SCCACHE_REDIS_PASSWORD', '...', 'User')
Run scripts\bootstrap_runner.ps1 first (it creates the venv).

Every night ends by regenerating the wheel channel in the output folder (-OutputDir, or the
matrix's output_dir, dist\nightly by default): index.html (the dashboard), simple\ (the pip index)
and entries\<entry>\simple\. Point any static web server at that folder, e.g.
    python -m http.server 8080 --directory C:\pytorch-winbuild\dist\nightly
or an IIS site whose physical path is the folder (docs/nightly.md, "The wheel channel": MIME types for .whl
and .log, and allowDoubleEscaping, since wheel names hold a '+').
The task's own log (-LogFile) is kept outside that folder, so the server does not publish it.

.EXAMPLE
.\scripts\register_nightly_task.ps1 -At 02:00 -CacheDir C:\pytorch-winbuild\cache -OutputDir C:\pytorch-winbuild\dist\nightly
.\scripts\register_nightly_task.ps1 -Unregister
#>
[CmdletBinding(DefaultParameterSetName = 'Register')]
param(
    [Parameter(ParameterSetName = 'Unregister', Mandatory = $true)]
    [switch] $Unregister,

    [string] $TaskName = 'pytorch-winbuild nightly',

    [Parameter(ParameterSetName = 'Register')]
    [string] $At = '02:00',

    [Parameter(ParameterSetName = 'Register')]
    [string] $Venv = (Join-Path (Split-Path -Parent $PSScriptRoot) '.venv'),

    [Parameter(ParameterSetName = 'Register')]
    [string] $Matrix,

    [Parameter(ParameterSetName = 'Register')]
    [string] $CacheDir,

    [Parameter(ParameterSetName = 'Register')]
    [string] $OutputDir,

    [Parameter(ParameterSetName = 'Register')]
    [string] $LogFile = (Join-Path (Split-Path -Parent $PSScriptRoot) 'dist\nightly-task.log'),

    [Parameter(ParameterSetName = 'Register')]
    [string] $User = "$env:USERDOMAIN\$env:USERNAME",

    [Parameter(ParameterSetName = 'Register')]
    [int] $TimeLimitHours = 12
)

$ErrorActionPreference = 'Stop'
$RepoRoot = Split-Path -Parent $PSScriptRoot

if ($Unregister) {
    if (Get-ScheduledTask -TaskName $TaskName -ErrorAction SilentlyContinue) {
        Unregister-ScheduledTask -TaskName $TaskName -Confirm:$false
        Write-Host "Removed the scheduled task '$TaskName'."
    } else {
        Write-Host "There is no scheduled task '$TaskName'; nothing to remove."
    }
    return
}

$python = Join-Path $Venv 'Scripts\python.exe'
if (-not (Test-Path -LiteralPath $python)) {
    throw "No Python environment at ${Venv}: run scripts\bootstrap_runner.ps1 -Venv $Venv first."
}

# invoke nightly and its flags; cmd.exe runs it so that its output can be appended to the log.
$nightly = @("`"$python`"", '-m', 'invoke', 'nightly')
if ($Matrix) { $nightly += @('--matrix', "`"$Matrix`"") }
if ($CacheDir) { $nightly += @('--cache-dir', "`"$CacheDir`"") }
if ($OutputDir) { $nightly += @('--output-dir', "`"$OutputDir`"") }
New-Item -ItemType Directory -Force -Path (Split-Path -Parent $LogFile) | Out-Null
$command = "$($nightly -join ' ') >> `"$LogFile`" 2>&1"

$action = New-ScheduledTaskAction -Execute 'cmd.exe' -Argument "/d /c `"$command`"" -WorkingDirectory $RepoRoot
$trigger = New-ScheduledTaskTrigger -Daily -At $At
$settings = New-ScheduledTaskSettingsSet -StartWhenAvailable -MultipleInstances IgnoreNew -ExecutionTimeLimit (New-TimeSpan -Hours $TimeLimitHours) -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries
$principal = New-ScheduledTaskPrincipal -UserId $User -LogonType S4U -RunLevel Limited

Register-ScheduledTask -TaskName $TaskName -Description "Nightly PyTorch wheels: invoke nightly from $RepoRoot (pytorch-winbuild)." -Action $action -Trigger $trigger -Settings $settings -Principal $principal -Force | Out-Null
Write-Host "Registered '$TaskName': every day at $At, as $User, in $RepoRoot."
Write-Host "  runs: cmd.exe /d /c `"$command`""
Write-Host "  run it now: Start-ScheduledTask -TaskName '$TaskName'; remove it: .\scripts\register_nightly_task.ps1 -Unregister"
$site = if ($OutputDir) { $OutputDir } else { Join-Path $RepoRoot 'dist\nightly' }
Write-Host "  wheel channel (after each night): $site\index.html (dashboard), $site\simple\ (pip index)"
Write-Host "  serve it: python -m http.server 8080 --directory `"$site`" (or an IIS site on that folder), then"
Write-Host "            pip install --index-url http://<this machine>:8080/simple/ torch"
