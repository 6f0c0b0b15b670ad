"""Hostile input through the real command line (`python -m invoke ...`): every bad flag, value,
configuration file and facts file ends with one paragraph, no traceback and its documented exit code
(2 for bad input), and `--help` works on every task.

Each case is a separate Invoke process; they start together (a thread pool over subprocesses) in a
module fixture and the tests read their results, so the module costs about one process start per
CPU instead of one per case.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support import HOSTS_DIR, REPO_ROOT, run_invoke

VS2017 = str(HOSTS_DIR / "vs2017-cuda90-cuda100.json")
CPU_ONLY = str(HOSTS_DIR / "cpu-only.json")
PLAN = ["--host", VS2017, "--cuda", "9.0", "--pytorch-version", "1.0.1"]
KEPT = "rem the user's own script, which a refused run must leave as it is\n"


def _drop_root_file_access() -> None:
    """In the child: give up CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH so that root, like any user,
    cannot write into a read-only folder (PR_CAPBSET_DROP; the exec then leaves them out)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _as_plain_user() -> Callable[[], None] | None:
    return _drop_root_file_access if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def _run(
    args: list[str], *, env: dict[str, str] | None = None, restricted: bool = False, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT), *args],
        cwd=cwd or REPO_ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        preexec_fn=_as_plain_user() if restricted else None,
    )


@dataclass
class Case:
    args: list[str]
    code: int
    text: str
    env: dict[str, str] = field(default_factory=dict)
    restricted: bool = False  # run without root's file-access override (read-only folders)
    secret: str = ""  # a secret's value in `env`, which no output may show


def _write_facts(folder: Path, name: str, change: Callable[[dict], None]) -> str:
    data = json.loads(Path(VS2017).read_text(encoding="utf-8"))
    change(data)
    path = folder / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("hostile")
    (root / "a folder").mkdir()
    (root / "empty").mkdir()
    (root / "cache").mkdir()
    (root / "read-only").mkdir()
    (root / "bad.lock").write_bytes(b'["mkl_2020.2.254.7z"]\nsha256 = "\xff\xfe not utf-8"\n')
    (root / "deep.json").write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    (root / "deep-object.json").write_text(
        '{"schema": 2, "os": "windows", "python": ' + '{"a": ' * 200_000 + "1" + "}" * 200_000 + "}", encoding="utf-8"
    )
    _write_facts(root, "vs2013.json", lambda d: d["visual_studio"][0].update(product_line="2013"))
    _write_facts(root, "empty-cuda-path.json", lambda d: d["cuda"][0].update(path=""))
    for name, text in {
        "jobs-true": "winbuild:\n  jobs: true\n",
        "jobs-float": "winbuild:\n  jobs: 4.7\n",
        "cuda-float": "winbuild:\n  cuda: 10.10\n",
        "cache-number": "winbuild:\n  cache_dir: 5\n",
        "generator-mapping": "winbuild:\n  generator: {ninja: true}\n",
    }.items():
        home = root / "homes" / name
        home.mkdir(parents=True)
        (home / ".invoke.yaml").write_text(text, encoding="utf-8")
    (root / "runtime-mapping.yaml").write_text("winbuild:\n  toolset: [14, 11]\n", encoding="utf-8")
    (root / "runtime-broken.yaml").write_text('winbuild:\n  cuda: "9.0\n', encoding="utf-8")
    outputs = root / "outputs"  # --output targets that must survive a refused run as they are
    outputs.mkdir()
    os.mkfifo(outputs / "fifo")
    (outputs / "link-to-fifo").symlink_to("fifo")
    (outputs / "kept.bat").write_text(KEPT, encoding="utf-8")
    _write_facts(root, "cpu-count-negative.json", lambda d: d.update(cpu_count=-4))
    _write_facts(root, "cpu-count-zero.json", lambda d: d.update(cpu_count=0))
    (root / "read-only").chmod(0o555)
    yield root
    (root / "read-only").chmod(0o755)


def _cases(root: Path) -> dict[str, Case]:
    home = lambda name: {"HOME": str(root / "homes" / name)}  # noqa: E731
    cache = ["--cache-dir", str(root / "cache")]
    return {
        # crashes before: a raw Invoke traceback (exit 1) or "internal error" (exit 70)
        "fetch-deps --jobs abc": Case(["fetch-deps", "--jobs", "abc", "--dry-run"], 2, "--jobs 'abc' is not a number"),
        "env --output <a folder>": Case(["env", *PLAN, "--output", str(root / "a folder")], 2, "is a folder"),
        "non-UTF-8 lock file": Case(
            [
                "fetch-deps",
                "--cuda",
                "cpu",
                *cache,
                "--from-dir",
                str(root / "empty"),
                "--lock-file",
                str(root / "bad.lock"),
            ],
            2,
            "not UTF-8 text",
        ),
        "facts: Visual Studio 2013": Case(
            ["build", "--dry-run", "--host", str(root / "vs2013.json")],
            2,
            "visual_studio[0].product_line: Visual Studio '2013' is not a product line pytorch-winbuild knows",
        ),
        "facts: JSON 200,000 deep": Case(["env", "--host", str(root / "deep.json")], 2, "nested too deeply"),
        "facts: object 200,000 deep": Case(
            ["doctor", "--host", str(root / "deep-object.json")], 2, "nested too deeply"
        ),
        "invoke.yaml jobs: true": Case(
            ["env", *PLAN], 2, "winbuild.jobs is the YAML boolean true", env=home("jobs-true")
        ),
        "invoke.yaml jobs: 4.7": Case(["env", *PLAN], 2, "winbuild.jobs is the number 4.7", env=home("jobs-float")),
        "invoke.yaml cuda: 10.10": Case(
            ["env", *PLAN], 2, "winbuild.cuda is the number 10.1; expected text", env=home("cuda-float")
        ),
        "invoke.yaml cache_dir: 5": Case(
            ["env", *PLAN], 2, "winbuild.cache_dir is the number 5", env=home("cache-number")
        ),
        "invoke.yaml generator mapping": Case(
            ["env", *PLAN], 2, "winbuild.generator is a mapping", env=home("generator-mapping")
        ),
        "-f toolset list": Case(
            ["-f", str(root / "runtime-mapping.yaml"), "env", *PLAN], 2, "winbuild.toolset is a list"
        ),
        "-f broken YAML": Case(["-f", str(root / "runtime-broken.yaml"), "env", *PLAN], 2, "not valid YAML"),
        "-f missing file": Case(["-f", str(root / "missing.yaml"), "env", *PLAN], 2, "does not exist"),
        "INVOKE_WINBUILD_JOBS=4.5": Case(
            ["env", *PLAN], 2, "winbuild.jobs '4.5' is not a whole number", env={"INVOKE_WINBUILD_JOBS": "4.5"}
        ),
        "read-only cache (fetch-deps)": Case(
            ["fetch-deps", "--cuda", "cpu", "--cache-dir", str(root / "read-only"), "--from-dir", str(root / "empty")],
            2,
            "cannot be written (Permission denied)",
            restricted=True,
        ),
        "read-only cache (clean)": Case(
            ["clean", "--deps", "--cache-dir", str(root / "read-only")],
            2,
            "is not a pytorch-winbuild cache",  # nothing to remove, so not asked to be writable (issue 29 point 10c)
            restricted=True,
        ),
        "read-only cache (nightly)": Case(
            ["nightly", "--cache-dir", str(root / "read-only")],
            2,
            "cannot be written (Permission denied)",
            restricted=True,
        ),
        "env --output in a read-only folder": Case(
            ["env", *PLAN, "--output", str(root / "read-only" / "env.bat")],
            2,
            "cannot be written (Permission denied); nothing was written",
            restricted=True,
        ),
        "verify --python /nonexistent": Case(
            ["verify", "--python", "/nonexistent"], 2, "--python /nonexistent: no such file"
        ),
        "verify --python <a folder>": Case(
            ["verify", "--python", str(root / "a folder")], 2, "is a folder, not a Python executable"
        ),
        # the command line itself: exit 1 and Invoke's "No idea what ..." before
        "unknown flag": Case(["build", "--dry-rn"], 2, "`invoke build` has no flag --dry-rn; did you mean --dry-run?"),
        "unknown flag with a value": Case(
            ["fetch-deps", "--magma-debugg", "--dry-run"], 2, "has no flag --magma-debugg; did you mean --magma-debug?"
        ),
        "unknown flag, nothing close": Case(["doctor", "--zzz"], 2, "`invoke doctor` has no flag --zzz."),
        "unknown task": Case(["biuld", "--dry-run"], 2, "there is no task named 'biuld'; did you mean build?"),
        "flag without its value": Case(
            ["build", "--dry-run", "--source"], 2, "--source of `invoke build` needs a value"
        ),
        "missing PATH": Case(["build-ext"], 2, "`invoke build-ext` needs PATH"),
        # accepted before, though wrong
        "fetch-deps --jobs true": Case(
            ["fetch-deps", "--jobs", "true", "--dry-run"], 2, "--jobs 'true' is not a number"
        ),
        "fetch-deps --jobs 4.7": Case(
            ["fetch-deps", "--jobs", "4.7", "--dry-run"], 2, "--jobs '4.7' is not a whole number"
        ),
        "fetch-deps --jobs -1": Case(["fetch-deps", "--jobs=-1", "--dry-run"], 2, "--jobs -1: expected 0 or more"),
        "build --jobs true": Case(["build", "--dry-run", *PLAN, "--jobs", "true"], 2, "--jobs 'true' is not a number"),
        "build --jobs 4.7": Case(
            ["build", "--dry-run", *PLAN, "--jobs", "4.7"], 2, "--jobs '4.7' is not a whole number"
        ),
        "env --jobs 0": Case(["env", *PLAN, "--jobs", "0"], 2, "--jobs 0: expected 1 or more"),
        "empty --source": Case(["build", "--dry-run", *PLAN, "--source", ""], 2, "--source of `invoke build` is empty"),
        "empty --cache-dir": Case(
            ["fetch-deps", "--dry-run", "--cache-dir", " "], 2, "--cache-dir of `invoke fetch-deps` is empty"
        ),
        # The cache folder named as the user gave it: by the setting, not by a --cache-dir they never passed.
        "cache folder from INVOKE_WINBUILD_CACHE_DIR is a file": Case(
            ["clean", "--deps"],
            2,
            f"configuration error: winbuild.cache_dir {root / 'bad.lock'}: {root / 'bad.lock'} is a file, not a "
            "folder. Fix: point winbuild.cache_dir at another folder",
            env={"INVOKE_WINBUILD_CACHE_DIR": str(root / "bad.lock")},
        ),
        "empty PATH": Case(["build-ext", ""], 2, "PATH of `invoke build-ext` is empty"),
        "empty --only": Case(["nightly", *cache, "--only", ""], 2, "--only of `invoke nightly` is empty"),
        "facts: empty CUDA path": Case(
            ["build", "--dry-run", "--host", str(root / "empty-cuda-path.json"), "--cuda", "9.0"],
            2,
            "cuda[0].path: empty path",
        ),
        "nightly --min-free-gb nan": Case(
            ["nightly", *cache, "--min-free-gb", "nan"], 2, "--min-free-gb 'nan' is not a finite number"
        ),
        "nightly --min-free-gb inf": Case(
            ["nightly", *cache, "--min-free-gb", "inf"], 2, "--min-free-gb 'inf' is not a finite number"
        ),
        "nightly --min-free-gb -1": Case(
            ["nightly", *cache, "--min-free-gb", "-1"], 2, "--min-free-gb -1: expected 0 or more"
        ),
        "nightly --keep-days 2.5": Case(
            ["nightly", *cache, "--keep-days", "2.5"], 2, "--keep-days '2.5' is not a whole number"
        ),
        # a final newline passed the version checks ($ matches before it): exit 3 for --toolset, two lines for --cuda
        "build --toolset 14.11<newline>": Case(
            ["build", "--dry-run", "--host", VS2017, "--toolset", "14.11\n"],
            2,
            "--toolset '14.11\\n' is not an MSVC toolset version.",
        ),
        "build --cuda 9.0<newline>": Case(
            ["build", "--dry-run", "--host", VS2017, "--cuda", "9.0\n"], 2, "--cuda '9.0\\n' is not X.Y"
        ),
        "facts: cpu_count -4": Case(
            ["build", "--dry-run", "--host", str(root / "cpu-count-negative.json")],
            2,
            "cpu_count: expected a number of logical processors from 1 to 65536, got -4.",
        ),
        "facts: cpu_count 0": Case(
            ["env", "--host", str(root / "cpu-count-zero.json")],
            2,
            "cpu_count: expected a number of logical processors from 1 to 65536, got 0.",
        ),
        # --output replaced a FIFO (or, as root, a device) with a regular file
        "env --output <a FIFO>": Case(
            ["env", *PLAN, "--format", "bat", "--output", str(root / "outputs" / "fifo")],
            2,
            "is not a regular file (a pipe, socket or device); nothing was written.",
        ),
        "env --output <a symlink to a FIFO>": Case(
            ["env", *PLAN, "--format", "bat", "--output", str(root / "outputs" / "link-to-fifo")],
            2,
            "is not a regular file (a pipe, socket or device); nothing was written.",
        ),
        # a secret's value inside a path was written into the script as *** (a script that sets another path)
        "env --format bat, a password inside a path": Case(
            ["env", *PLAN, "--format", "bat", "--output", str(root / "outputs" / "kept.bat")],
            2,
            "--format bat: the value of CLCACHE_DIR contains the value of SCCACHE_REDIS_PASSWORD, a secret,",
            env={"SCCACHE_REDIS_PASSWORD": "builder"},  # the facts' user: C:\\Users\\builder\\AppData\\...
            secret="builder",
        ),
        "build --dry-run --format ps1, a token inside a path": Case(
            ["build", "--dry-run", *PLAN, "--format", "ps1"],
            2,
            "--format ps1: the value of CUDA_PATH contains the value of MY_TOKEN, a secret,",
            env={"MY_TOKEN": "Files"},  # C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v9.0
            secret="Files",
        ),
    }


@pytest.fixture(scope="module")
def results(workspace: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    cases = _cases(workspace)
    with ThreadPoolExecutor(max_workers=max(4, os.cpu_count() or 4)) as pool:
        futures = {
            name: pool.submit(_run, case.args, env=case.env, restricted=case.restricted, cwd=workspace)
            for name, case in cases.items()
        }
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="module")
def root_is_restricted(workspace: Path) -> bool:
    """Whether a restricted child really cannot write into the read-only folder (always, as a plain user)."""
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; open(sys.argv[1], 'w')", str(workspace / "read-only" / "probe")],
        capture_output=True,
        preexec_fn=_as_plain_user(),
    )
    return probe.returncode != 0


def _assert_one_paragraph(result: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == code, output
    assert "Traceback" not in output
    assert text in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # one paragraph, nothing else
    assert " Fix: " in lines[0]


@pytest.mark.parametrize("name", list(_cases(Path("/-")).keys()))
def test_bad_input_is_one_paragraph_with_exit_2(name: str, workspace: Path, results: dict, root_is_restricted: bool):
    case = _cases(workspace)[name]
    if case.restricted and not root_is_restricted:
        # A tier must fail, not skip: without CAP_SETPCAP, root writes into any folder and the case proves nothing.
        pytest.fail(
            "this machine cannot take away root's access to a read-only folder (no CAP_SETPCAP): run the tests as a "
            "normal user, or in a container that keeps CAP_SETPCAP.",
            pytrace=False,
        )
    _assert_one_paragraph(results[name], case.code, case.text)
    if case.secret:
        assert case.secret not in results[name].stdout + results[name].stderr


def test_nothing_is_half_written(workspace: Path, results: dict):
    assert list((workspace / "read-only").iterdir()) == []  # neither env.bat nor a temporary file
    assert list((workspace / "a folder").iterdir()) == []
    assert not (workspace / "cache" / "nightly").exists()  # a rejected nightly flag starts nothing
    outputs = workspace / "outputs"
    assert sorted(p.name for p in outputs.iterdir()) == ["fifo", "kept.bat", "link-to-fifo"]  # no temporary file
    assert stat.S_ISFIFO((outputs / "fifo").lstat().st_mode)
    assert (outputs / "link-to-fifo").is_symlink() and os.readlink(outputs / "link-to-fifo") == "fifo"
    assert (outputs / "kept.bat").read_text(encoding="utf-8") == KEPT


def test_env_output_through_a_symlink_writes_the_file_it_points_to(tmp_path: Path):
    real = tmp_path / "real.bat"
    real.write_text("old contents\n", encoding="utf-8")
    (tmp_path / "link.bat").symlink_to("real.bat")
    result = _run(["env", *PLAN, "--format", "bat", "--output", str(tmp_path / "link.bat")])
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "link.bat").is_symlink() and os.readlink(tmp_path / "link.bat") == "real.bat"
    assert 'set "CUDA_PATH=' in real.read_text(encoding="utf-8")


def test_env_output_replaces_the_file_whole(tmp_path: Path):
    target = tmp_path / "build_env.bat"
    target.write_text("old contents that must not survive\n", encoding="utf-8")
    result = _run(["env", *PLAN, "--format", "bat", "--output", str(target)])
    assert result.returncode == 0, result.stderr
    text = target.read_text(encoding="utf-8")
    assert "old contents" not in text and 'set "CUDA_PATH=' in text
    assert [p.name for p in tmp_path.iterdir()] == ["build_env.bat"]  # no temporary file left beside it


# ------------------------------------------------------------------ --help on every task


def _task_names() -> list[str]:
    listing = _run(["--list"])
    assert listing.returncode == 0, listing.stderr
    return re.findall(r"^  ([a-z][\w-]*)(?:\s|$)", listing.stdout, re.MULTILINE)


@pytest.fixture(scope="module")
def helps() -> dict[tuple[str, str], subprocess.CompletedProcess[str]]:
    names = _task_names()
    assert {"build", "build-ext", "diagnose", "doctor", "env", "fetch-deps", "nightly", "verify", "clean"} <= set(names)
    with ThreadPoolExecutor(max_workers=max(4, os.cpu_count() or 4)) as pool:
        futures = {(name, flag): pool.submit(_run, [name, flag]) for name in names for flag in ("--help", "-h")}
        return {key: future.result() for key, future in futures.items()}


def test_help_works_on_every_task(helps: dict):
    for (name, flag), result in helps.items():
        assert result.returncode == 0, f"invoke {name} {flag}: {result.stdout}{result.stderr}"
        assert f"[--core-opts] {name} " in result.stdout and "Options:" in result.stdout, f"invoke {name} {flag}"
        assert "Traceback" not in result.stderr and "is not a folder" not in result.stderr


def test_no_task_binds_h_to_anything_but_help(helps: dict):
    for (name, flag), result in helps.items():
        bound = re.findall(r"^\s+-h\b[^\n]*", result.stdout, re.MULTILINE)
        assert not bound, f"invoke {name} {flag} shows -h bound to a flag: {bound}"


def test_a_dry_run_refuses_a_ref_git_would_read_as_an_option(tmp_path: Path) -> None:
    marker = tmp_path / "x"
    result = run_invoke(
        "build",
        "--dry-run",
        "--cuda",
        "cpu",
        "--repo",
        "https://github.com/pytorch/pytorch",
        "--ref",
        f"--upload-pack=touch {marker};",
    )
    assert result.returncode == 2 and "starts with '-'" in result.stderr and "Traceback" not in result.stderr
    assert not marker.exists()


def test_an_unknown_placeholder_in_deps_toml_names_the_key() -> None:
    import tomllib

    from pytorch_winbuild.errors import ConfigurationError
    from pytorch_winbuild.knowledge.catalog import parse_catalog

    data = tomllib.loads((REPO_ROOT / "build_config" / "deps.toml").read_text(encoding="utf-8"))
    data["magma"]["file"] = "magma_{version}_{cuda}_{variant}.7z"
    with pytest.raises(ConfigurationError) as error:
        parse_catalog(data, REPO_ROOT / "build_config" / "deps.toml")
    assert "magma.file" in error.value.paragraph() and "{cuda}" in error.value.paragraph()
