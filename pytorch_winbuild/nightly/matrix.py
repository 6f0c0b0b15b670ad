"""build_config/nightly.toml: the nightly's settings and its matrix of entries, checked on load.

Every entry is validated before anything runs (a typo found at 3 a.m. after two hours of
building is a wasted night), with errors that name the file, the entry and the key.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from pytorch_winbuild.builder.source import check_ref, check_repo
from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.json_file import JsonObject
from pytorch_winbuild.knowledge.choices import CudaWord, Mode, cuda_release_of
from pytorch_winbuild.knowledge.config_files import load_toml, optional, require
from pytorch_winbuild.knowledge.model import Knowledge
from pytorch_winbuild.knowledge.versions import RELEASE_TAG
from pytorch_winbuild.planning.gpu_plan import checked_arch_list
from pytorch_winbuild.planning.options import Options, parse_options
from pytorch_winbuild.planning.python_choice import PythonRequest
from pytorch_winbuild.text.redact import is_secret_name, redact_text

DEFAULT_MATRIX = "nightly.toml"
MODES = ("wheel",)
PYTHON_CURRENT = "current"  # the Python running the nightly: the path of this interpreter


def entry_python(text: str, label: str = "python") -> PythonRequest:
    """An entry's `python` as the build's --python: auto, X.Y, a path, or "current" (this interpreter)."""
    return PythonRequest("path", sys.executable) if text == PYTHON_CURRENT else PythonRequest.parse(text, label)


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Entry keys that are `invoke build` flags of the same name, with their type; the plan checks their values.
PLAN_KEYS: dict[str, type[str] | type[int]] = {
    "vs": str,
    "toolset": str,
    "generator": str,
    "compiler_cache": str,
    "arch_list": str,
    "jobs": int,
    "cmake": str,
}
ENTRY_KEYS = {"name", "repo", "ref", "cuda", "python", "mode", "env", "min_free_gb", "runs_on", *PLAN_KEYS}
SETTINGS_KEYS = {"output_dir", "keep_days", "min_free_gb"}
# Retention's bound: a century of nights, more than any runner keeps and far inside a date's range (a larger
# keep_days made the oldest kept day fall before year 1, which crashed retention after the whole night's builds).
MAX_KEEP_DAYS = 36_500
SHARED_CACHE_KEYS = {"env"}


@dataclass(frozen=True)
class Settings:
    output_dir: Path
    keep_days: int
    min_free_gb: float


@dataclass(frozen=True)
class Entry:
    """One configuration built every night."""

    name: str
    repo: str
    ref: str | None
    cuda: str
    python: str  # "current", "X.Y" or a path
    mode: str
    env: tuple[tuple[str, str], ...]
    min_free_gb: float
    plan_options: tuple[tuple[str, str | int], ...]  # (Options field, value) from PLAN_KEYS, as written (to_dict)
    request: Options  # the entry's plan options, parsed once when the matrix was read
    # Where min_free_gb came from, as a user would change it: the entry's key, [settings] or --min-free-gb.
    min_free_gb_from: str = "min_free_gb"
    # The runner labels of its GitHub Actions job (`runs_on`); empty: made from what it needs (runner_labels.py).
    # Not part of to_dict: which runner builds it does not change the wheel.
    runs_on: tuple[str, ...] = ()

    def options(self, *, cache_dir: Path, source_dir: Path) -> Options:
        """The plan's options for this entry on this runner: its own values, with the runner's folders."""
        return replace(self.request, cache_dir=cache_dir, source_dir=source_dir)

    def to_dict(self) -> JsonObject:
        return {
            "name": self.name,
            "repo": redact_text(self.repo),
            "ref": self.ref,
            "cuda": self.cuda,
            "python": self.python,
            "mode": self.mode,
            "env": dict(self.env),
            "min_free_gb": self.min_free_gb,
            **dict(self.plan_options),
        }

    def config_hash(self, plan_identity: JsonObject) -> str:
        """What decides the wheel besides the source: the entry's table (but its disk threshold) and the plan
        made for it."""
        entry = {key: value for key, value in self.to_dict().items() if key != "min_free_gb"}
        text = json.dumps({"entry": entry, "plan": plan_identity}, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def table_hash(self) -> str:
        """The entry's table alone (but its disk threshold): the part of config_hash a fleet's planner can
        compare on a machine that is not the runner (it cannot make the runner's plan)."""
        entry = {key: value for key, value in self.to_dict().items() if key != "min_free_gb"}
        text = json.dumps(entry, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Matrix:
    source: str
    settings: Settings
    shared_cache_env: tuple[tuple[str, str], ...]
    entries: tuple[Entry, ...]

    def select(self, names: tuple[str, ...]) -> tuple[Entry, ...]:
        """The entries --only names (all of them without --only), in the matrix's order."""
        if not names:
            return self.entries
        known = {entry.name for entry in self.entries}
        unknown = [name for name in names if name not in known]
        if unknown:
            raise ConfigurationError(
                f"--only {', '.join(unknown)}: no such entry in {self.source}.",
                fix=f"pass one of {', '.join(sorted(known))}.",
            )
        return tuple(entry for entry in self.entries if entry.name in names)

    def with_overrides(self, *, output_dir: Path | None, keep_days: int | None, min_free_gb: float | None) -> Matrix:
        """Command-line flags win over [settings]; an explicit --min-free-gb applies to every entry."""
        settings = Settings(
            output_dir=output_dir if output_dir is not None else self.settings.output_dir,
            keep_days=_positive_days(keep_days, "--keep-days") if keep_days is not None else self.settings.keep_days,
            min_free_gb=_free_gb(min_free_gb, "--min-free-gb")
            if min_free_gb is not None
            else self.settings.min_free_gb,
        )
        entries = (
            self.entries
            if min_free_gb is None
            else tuple(
                replace(entry, min_free_gb=settings.min_free_gb, min_free_gb_from="--min-free-gb")
                for entry in self.entries
            )
        )
        return replace(self, settings=settings, entries=entries)


def _positive_days(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_KEEP_DAYS:
        shown = repr(value) if len(repr(value)) <= 24 else f"{repr(value)[:20]}…"
        raise ConfigurationError(
            f"{where}: expected a whole number of days from 1 to {MAX_KEEP_DAYS} (100 years), got {shown}.",
            fix="keep_days is how many days of nightly folders retention keeps, e.g. 14.",
        )
    return value


def _free_gb(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{where}: expected a number of GB, 0 or more, got {value!r}.")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond a float's range
        number = -math.inf if value < 0 else math.inf
    if number == math.inf and isinstance(value, int):
        raise ConfigurationError(
            f"{where}: {str(value)[:20]}… GB is more than any disk.",
            fix="write the free space the entry needs in GB, e.g. 40.",
        )
    if not math.isfinite(number) or number < 0:  # nan compares false with everything: the check would always pass
        raise ConfigurationError(
            f"{where}: expected a number of GB, 0 or more, got {value!r}.",
            fix="write the free space the entry needs in GB, e.g. 40.",
        )
    return number


def _unknown_keys(table: Mapping[str, object], known: set[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown key(s) {', '.join(unknown)}.", fix=f"the keys are {', '.join(sorted(known))}."
        )


def _variables(table: dict[str, object], key: str, where: str) -> tuple[tuple[str, str], ...]:
    """A table of environment variables; credentials are refused (they come from the runner's secrets)."""
    variables: dict[str, object] = optional(table, key, dict, where, {})
    checked = []
    for name, value in variables.items():
        if not _VARIABLE.fullmatch(name):
            raise ConfigurationError(
                f"{where}.{key}: {name!r} is not a valid environment variable name (letters, digits and '_', "
                "not starting with a digit)."
            )
        if not isinstance(value, str):
            raise ConfigurationError(
                f"{where}.{key}.{name}: expected a string, got {type(value).__name__} {value!r}.",
                fix=f'quote it: {name} = "{value}".',
            )
        if is_secret_name(name) or redact_text(value) != value:
            raise ConfigurationError(
                f"{where}.{key}.{name}: looks like a credential, and credentials never go in a file in the repo.",
                fix=f"set {name} in the runner's environment instead (a GitHub Actions secret passed as env, or "
                "the scheduled task's user environment).",
            )
        checked.append((name, value))
    return tuple(checked)


def _plan_options(table: dict[str, object], where: str) -> tuple[tuple[str, str | int], ...]:
    """The entry's `invoke build` options as written, each of its TOML type (parse_options reads their values)."""
    return tuple((key, require(table, key, kind, where)) for key, kind in PLAN_KEYS.items() if key in table)


def _request(
    knowledge: Knowledge, cuda: str, python: PythonRequest, written: tuple[tuple[str, str | int], ...], where: str
) -> Options:
    """The entry's plan options, each value read once by the same parser as the command line's flags."""
    raw = {key: value for key, value in written if key != "jobs"}
    labels = {key: f"{where}.{key}" for key in (*raw, "jobs", "cuda")}
    try:
        request = parse_options(knowledge, {**raw, "cuda": cuda}, labels, jobs=dict(written).get("jobs"), python=python)
    except ConfigurationError as error:
        fix = "use X.Y (e.g. 12.4) or cpu." if error.message.startswith(f"{where}.cuda") else error.fix
        raise ConfigurationError(error.message, fix=fix) from None
    if request.cuda is CudaWord.AUTO:
        raise ConfigurationError(
            f"{where}.cuda: '{CudaWord.AUTO}' would let the runner's installs decide what a nightly entry builds.",
            fix="name the CUDA version (e.g. 12.4) or cpu.",
        )
    if request.cmake.kind == "path":
        raise ConfigurationError(
            f"{where}.cmake: {request.cmake.value[:100]!r} is a path; an entry runs on whichever runner takes it, so "
            "it names a CMake release from PyPI, which the build venv installs on every runner alike.",
            fix='write a release such as cmake = "3.31", or leave the key out for the plan\'s choice.',
        )
    return replace(request, mode=Mode.WHEEL)


def _entry(table: object, index: int, source: str, default_free_gb: float, knowledge: Knowledge) -> Entry:
    where = f"{source}: entry[{index}]"
    if not isinstance(table, dict):
        raise ConfigurationError(f"{where}: expected a table ([[entry]]).")
    name = require(table, "name", str, where)
    if not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"{where}.name: {name!r} must be letters, digits, '.', '_' and '-' (it names the entry's folders)."
        )
    where = f"{source}: entry '{name}'"
    _unknown_keys(table, ENTRY_KEYS, where)
    cuda = require(table, "cuda", str, where)
    mode = optional(table, "mode", str, where, MODES[0])
    if mode not in MODES:
        raise ConfigurationError(
            f'{where}.mode: {mode!r}; the nightly builds wheels (mode = "wheel"): install or develop would '
            "change the runner's own Python."
        )
    python = optional(table, "python", str, where, "auto").strip()
    written = _plan_options(table, where)
    # Read now: a bad value stops the night before any entry builds.
    request = _request(knowledge, cuda, entry_python(python, f"{where}.python"), written, where)
    repo = require(table, "repo", str, where)
    check_repo(repo, f"{where}.repo")
    ref = optional(table, "ref", str, where, "") or None
    if ref is not None:
        check_ref(ref, f"{where}.ref")
    return Entry(
        name=name,
        repo=repo,
        ref=ref,
        cuda=str(request.cuda),
        python=python,
        mode=mode,
        env=_variables(table, "env", where),
        min_free_gb=_free_gb(table["min_free_gb"], f"{where}.min_free_gb")
        if "min_free_gb" in table
        else default_free_gb,
        plan_options=written,
        request=_arch_list_for_cuda(request, ref, where, knowledge),
        min_free_gb_from=f"min_free_gb of entry '{name}' in {source}"
        if "min_free_gb" in table
        else f"[settings] min_free_gb in {source}",
        runs_on=_runs_on(table, where),
    )


_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")  # a runner label GitHub accepts (letters, digits, . _ -)


def _runs_on(table: dict[str, object], where: str) -> tuple[str, ...]:
    """`runs_on`: the runner labels of the entry's job, a label or a list of them, instead of the ones made
    from what it needs (build_config/runner_labels.toml)."""
    if "runs_on" not in table:
        return ()
    value = table["runs_on"]
    labels = [value] if isinstance(value, str) else value
    if not isinstance(labels, list) or not labels or not all(isinstance(label, str) for label in labels):
        raise ConfigurationError(
            f"{where}.runs_on: expected a runner label or a list of them, got {value!r}.",
            fix='e.g. runs_on = ["self-hosted", "windows", "x64", "gpu-box"].',
        )
    names = [label for label in labels if isinstance(label, str)]  # every label, checked above
    for label in names:
        if not _LABEL.fullmatch(label):
            raise ConfigurationError(
                f"{where}.runs_on: {label!r} is not a runner label (letters, digits, '.', '_' and '-', at most "
                "100 characters).",
                fix="name the labels as the runners were registered with them (Settings > Actions > Runners).",
            )
    return tuple(dict.fromkeys(names))


def _arch_list_for_cuda(request: Options, ref: str | None, where: str, knowledge: Knowledge) -> Options:
    """An arch_list the entry's nvcc would refuse fails now, not at 3 a.m. an hour into the build. Its names
    are read as the release the ref tags builds them (a branch: as the newest release read)."""
    release = cuda_release_of(request.cuda)
    if request.arch_list is not None and release is not None:
        tag = RELEASE_TAG.fullmatch(ref or "")
        names = knowledge.gpu.names_for(tag.group(1) if tag else "main", "cmake")
        try:
            checked_arch_list(knowledge, release, request.arch_list, names, flag="arch_list =")
        except ConfigurationError as error:
            raise ConfigurationError(f"{where}: {error.message}", fix=error.fix) from None
    return request


def parse_settings(data: dict[str, object], source: str) -> Settings:
    """A matrix file's [settings], checked."""
    settings_table: dict[str, object] = require(data, "settings", dict, source)
    where = f"{source}: settings"
    _unknown_keys(settings_table, SETTINGS_KEYS, where)
    return Settings(
        output_dir=Path(require(settings_table, "output_dir", str, where)),
        keep_days=_positive_days(require(settings_table, "keep_days", int, where), f"{where}.keep_days"),
        min_free_gb=_free_gb(require(settings_table, "min_free_gb", (int, float), where), f"{where}.min_free_gb"),
    )


def parse_matrix(data: dict[str, object], source: str, knowledge: Knowledge) -> Matrix:
    """Check every key of a matrix file, naming the file, entry and key on any problem."""
    _unknown_keys(data, {"settings", "shared_cache", "entry"}, source)
    settings = parse_settings(data, source)
    shared: dict[str, object] = optional(data, "shared_cache", dict, source, {})
    _unknown_keys(shared, SHARED_CACHE_KEYS, f"{source}: shared_cache")
    tables: list[object] = require(data, "entry", list, source)
    if not tables:
        raise ConfigurationError(
            f"{source}: the matrix has no [[entry]].", fix="add at least one [[entry]] with name, repo and cuda."
        )
    entries = [_entry(table, index, source, settings.min_free_gb, knowledge) for index, table in enumerate(tables)]
    seen: set[str] = set()
    for entry in entries:
        if entry.name in seen:
            raise ConfigurationError(
                f"{source}: entry '{entry.name}' appears twice.",
                fix="give every entry its own name (it names the entry's folders).",
            )
        seen.add(entry.name)
    return Matrix(source, settings, _variables(shared, "env", f"{source}: shared_cache"), tuple(entries))


def _matrix_file(path: Path | str | None) -> tuple[Path, str]:
    """The matrix file (default: build_config/nightly.toml) and its name in messages."""
    path = Path(path) if path else Path(DEFAULT_MATRIX)
    return path, str(path) if path.exists() else f"build_config/{path}"


def load_matrix(path: Path | str | None, knowledge: Knowledge) -> Matrix:
    """The matrix file (default: build_config/nightly.toml), checked."""
    path, label = _matrix_file(path)
    return parse_matrix(load_toml(path), label, knowledge)


def load_settings(path: Path | str | None = None) -> Settings:
    """The matrix file's [settings] alone (default: build_config/nightly.toml's), checked: what a command that builds
    no entry needs of it (nightly-merge's keep_days, without a plan)."""
    path, label = _matrix_file(path)
    return parse_settings(load_toml(path), label)
