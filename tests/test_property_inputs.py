"""Property-based tests (Hypothesis) over every input a user controls: each task's flags, the facts
files, the TOML files (nightly matrix, MKL/MAGMA catalog, diagnosis rules) and the Invoke YAML/JSON
configuration. Whatever the input: never a traceback, the exit code always one of README's "Exit
codes" (70, "internal error", is documented as the bug case and so counts as a failure here), and
nothing written outside the cache and the outputs the command line names.

Two layers, sized for CI (about 30 s for the module on 2 cores):

- In-process, many examples: the validators called on hypothesis-made inputs — mutations of the
  shipped files (values replaced at random key paths by random JSON/TOML values, control
  characters, unicode digits, huge numbers, deep nesting; keys deleted or added; raw text edits),
  and random plan options. Each must return its result or raise ConfigurationError (WinbuildError
  for the planner, which may also say 3, "toolchain"); anything else is a crash the CLI would show
  as exit 70 with a traceback.

- Through the real command line (`python -m invoke`, about 0.4 s a process), few examples: for every
  task `invoke --list` shows, flags drawn from that task's `--help` with random values (empty, '-x',
  numbers, unicode, junk, paths inside the sandbox, hostile facts/TOML/log files written there) and
  sometimes a hostile configuration (~/.invoke.yaml, -f FILE, INVOKE_WINBUILD_*). Every process runs
  in its own sandbox: HOME, TMPDIR and the working folder are inside it, `--cache-dir` points into it,
  HTTP(S) proxies point at a closed port (nothing can reach the network), and GITHUB_*/INVOKE_*
  variables are removed. Afterwards the sandbox may only have changed under the cache folders and the
  named outputs (--cache-dir, --output, --lock-file, --log-dir, --output-dir), and the repo's
  build_config/, cache/ and top level not at all.

Tasks that act are run only with a flag that keeps them from acting (the flag is always placed right
after the task name, where no other flag can take it as its value):

- build: always `--dry-run` (a real build compiles PyTorch for hours).
- fetch-deps: `--dry-run`, or a local source with no network: `--mirror file://<sandbox>/mirror/`
  or `--from-dir <sandbox>/mirror`, a folder holding junk archives (so it fails with 4 or 2).
- nightly: always `--output-dir` inside the sandbox and `--min-free-gb` either huge (1e12: every
  entry stops at its disk stage, before any clone or build; exit 5) or malformed (exit 2).
- nightly-merge, nightly-site: always `--output-dir` (and nightly-site's `--stage`) inside the sandbox.
- build-ext: has no dry run; its PATH is never a folder (missing, a file, empty), so it stops with
  exit 2 before anything runs. Only the command line and configuration layers are exercised.
- verify: always `--python` with something that is not a Python with torch (missing, a folder, a
  non-executable file, a script printing junk); without it, it imports torch (seconds a run).
- doctor, env, clean, diagnose: safe with any flag (clean only ever sees sandbox cache folders).

A task this module does not know fails the test until someone decides how to run it safely.
Values never equal a task name and never repeat a flag: Invoke would run that task after this one.

Out of reach, and so left out: a ~/.invoke.yaml (or .json) that Invoke itself cannot load (broken
syntax, a top level that is not a mapping). `python -m invoke` reads it before it imports tasks.py
and stops with its own traceback; the same content is tried through `-f FILE`.

Knobs: WINBUILD_PROPERTY_EXAMPLES (in-process examples, default 100) and
WINBUILD_PROPERTY_CLI_EXAMPLES (command-line examples per task, default 4; each example runs a
batch of up to 4 processes at once). CLI examples are not shrunk (each step costs processes); the
failure message carries the exact command, its environment and its input files.
"""

from __future__ import annotations

import atexit
import copy
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime, time
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from support import HOSTS_DIR, REPO_ROOT, plan_options

from pytorch_winbuild.diagnosis.rules import load_rules
from pytorch_winbuild.errors import ConfigurationError, InternalError, WinbuildError
from pytorch_winbuild.faces.config_check import check_config_files
from pytorch_winbuild.faces.doctor import doctor_checks, render_doctor
from pytorch_winbuild.faces.render import FORMATS, render
from pytorch_winbuild.faces.tasks import WINBUILD_DEFAULTS, namespace
from pytorch_winbuild.facts.model import Facts, facts_from_dict, load_facts
from pytorch_winbuild.facts.source_tree import SourceTree
from pytorch_winbuild.knowledge.catalog import Catalog, parse_catalog, select_archives
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.nightly.matrix import Matrix, parse_matrix
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.plan_model import Plan
from pytorch_winbuild.planning.request import PlanRequest

if not os.environ.get(
    "HYPOTHESIS_STORAGE_DIRECTORY"
):  # not .hypothesis/ in the repo: nothing here writes outside temp folders
    _HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="pwb-hypothesis-")
    set_hypothesis_home_dir(_HYPOTHESIS_HOME)
    atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, True)

CONFIG = REPO_ROOT / "build_config"
KNOWLEDGE = load_knowledge()
HOST_FILES = sorted(HOSTS_DIR.glob("*.json"))
HOST_DOCS = {path.name: json.loads(path.read_text(encoding="utf-8")) for path in HOST_FILES}
HOST_TEXTS = {path.name: path.read_bytes() for path in HOST_FILES}
MATRIX_DOC = tomllib.loads((CONFIG / "nightly.toml").read_text(encoding="utf-8"))
CATALOG_DOC = tomllib.loads((CONFIG / "deps.toml").read_text(encoding="utf-8"))
RULES_DOC = tomllib.loads((CONFIG / "diagnosis.toml").read_text(encoding="utf-8"))
CONFIG_DOC = {
    "winbuild": {
        "cuda": "9.0",
        "vs": "2017",
        "toolset": "14.11",
        "generator": "ninja",
        "compiler_cache": "none",
        "arch_list": "6.1",
        "jobs": 4,
        "pytorch_version": "1.0.1",
        "cache_dir": "cache",
        "mirror": None,
    }
}

IN_PROCESS_EXAMPLES = int(os.environ.get("WINBUILD_PROPERTY_EXAMPLES", "100"))
CLI_EXAMPLES = int(os.environ.get("WINBUILD_PROPERTY_CLI_EXAMPLES", "4"))
BATCH = max(1, min(4, os.cpu_count() or 1))
PROCESS_TIMEOUT = 90

IN_PROCESS = settings(
    max_examples=IN_PROCESS_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=list(HealthCheck),
)
THROUGH_CLI = settings(
    max_examples=CLI_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
)


# ------------------------------------------------------------------ the documented exit codes


def documented_exit_codes() -> dict[int, str]:
    """README's "Exit codes" table: code → meaning."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Exit codes", 1)[1]
    section = section.split("\n#", 1)[0]
    return {
        int(match.group(1)): match.group(2).strip()
        for match in re.finditer(r"^\| (\d+) \| (.+?) \|\s*$", section, re.MULTILINE)
    }


EXIT_CODES = documented_exit_codes()
ALLOWED_EXIT_CODES = frozenset(code for code in EXIT_CODES if code != InternalError.exit_code)


def test_the_documented_exit_codes_are_read_and_name_every_error_class():
    classes = {cls.exit_code for cls in _subclasses(WinbuildError)} - {WinbuildError.exit_code}
    assert {0, 2, 3, 130} <= set(EXIT_CODES), EXIT_CODES
    assert classes <= set(EXIT_CODES), (
        f"error classes with undocumented exit codes: {sorted(classes - set(EXIT_CODES))}"
    )
    assert InternalError.exit_code in EXIT_CODES and "traceback" in EXIT_CODES[InternalError.exit_code]


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


# ------------------------------------------------------------------ values

TASK_NAMES = tuple(namespace.task_names)


def _is_task_name(value: str) -> bool:
    normal = value.strip().lower().replace("_", "-")
    return any(normal == name.lower().replace("_", "-") for name in TASK_NAMES)


# Strings a fuzzer dictionary would hold for this tool: the domain's own words, near misses, unicode
# digits that pass str.isdigit() but not int() ("²") or pass both ("٩"), control characters, format
# placeholders (deps.toml's `file`), URLs with credentials, paths of both OSes.
NASTY_STRINGS = [
    "", " ", "\t", "\n", "\r\n", "\x00", "\x07", "\x1b[2J", "\x7f", "\u0085", "\u2028", "\u202e", "\ufeff", "\ud800",
    "9.0", "10.0", "12.4", "13.0", "8.0", "9", "9.0.176", "9.²", "٩.٠", "１２.４", "²", "14.11", "14.²", "14.0", "14",
    "15.9.28307.812",
    "2015", "2017", "2019", "2022", "2013", "windows", "linux", "darwin", "cpu", "auto", "ninja", "vs", "sccache",
    "clcache", "none",
    "3.6.8", "3.11", "3.²", "2.13.0", "latest", "0.4.1", "1.0.1", "6.1", "7.5;8.6+PTX", "Ampere", "9.0a", "580.159.04",
    "419.67",
    "C:\\Program Files\\x", "C:\\Users\\ü\\AppData\\Local\\Temp", "C:/x", "\\\\server\\share", "/usr/local/cuda", "~",
    "..", ".",
    "-x", "--help", "%PATH%", "$HOME", "`id`", '"', "'", "\\",
    "{version}", "{version:d}", "{version!r}", "{cuda_prefix}", "{variant:>5}", "{", "}", "{}", "{0}", "{version.x}",
    "https://user:secret@example.invalid/x", "https://s3.amazonaws.com/ossci-windows/", "file:///nonexistent/",
    "ghp_" + "a" * 36,
    "release", "debug", "native", "py7zr", "cuda90", "cuda124", "wheel", "install", "main", "..", "@{u}", "a b",
    "NaN", "inf", "-1", "0", "1e309", "18446744073709551616",
]  # fmt: skip

long_text = st.sampled_from([300, 3000]).map(lambda n: "a" * n)  # built in a map: a strategy's repr stays short
text_values = st.one_of(
    st.sampled_from(NASTY_STRINGS), long_text, st.text(max_size=40), st.text(st.characters(codec="utf-8"), max_size=10)
)
huge_ints = st.sampled_from([300, 4000]).map(
    lambda n: 10**n
)  # up to 4300 digits: what json/tomllib/yaml can still read
int_values = st.one_of(
    st.integers(), st.sampled_from([0, -1, 1, 2, 32, 64, 1600, 1912, 2**31, 2**63, -(2**63) - 1, 2**64]), huge_ints
)
float_values = st.floats(allow_nan=True, allow_infinity=True)
json_scalars = st.one_of(st.none(), st.booleans(), int_values, float_values, text_values)


def _nest(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"a": value}
    return value


deep_values = st.integers(min_value=10, max_value=300).map(
    _nest
)  # json.loads reaches ~1000 deep; the stack here is deeper than the CLI's
json_values = st.one_of(
    json_scalars,
    deep_values,
    st.recursive(
        json_scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text_values, inner, max_size=4)),
        max_leaves=8,
    ),
)
toml_scalars = st.one_of(
    st.booleans(), int_values.filter(lambda n: -(2**63) <= n < 2**63), float_values,
    st.text(st.characters(codec="utf-8"), max_size=40),
    st.sampled_from([s for s in NASTY_STRINGS if "\ud800" not in s]),
    st.datetimes(), st.dates(), st.times(),
)  # fmt: skip
toml_values = st.one_of(
    toml_scalars,
    st.integers(min_value=10, max_value=200).map(lambda depth: _nest(depth, "x")),
    st.recursive(
        toml_scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=12), inner, max_size=4),
        ),
        max_leaves=8,
    ),
)


class Raw(str):
    """A token written into a file as it is (a number longer than Python's int/str limit, a nesting
    deeper than the parser's), for the file-level strategies; never given to a function directly."""


RAW_TOKENS = {
    "digits-5000": "1" * 5000,
    "digits-4301": "-" + "9" * 4301,
    "1e999": "1e999",
    "-0": "-0",
    "nest-990": "[" * 990 + "]" * 990,
    "nest-5000": "[" * 5000 + "]" * 5000,
    "zeros": "0" * 50 + "1",
}
raw_tokens = st.sampled_from(sorted(RAW_TOKENS)).map(lambda name: Raw(RAW_TOKENS[name]))


# ------------------------------------------------------------------ mutations of a document


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _get(node: Any, path: tuple) -> Any:
    for step in path:
        node = node[step]
    return node


@st.composite
def mutated(
    draw: st.DrawFn,
    base: Any,
    values: st.SearchStrategy,
    keys: st.SearchStrategy = text_values,
    max_changes: int = 3,
    root: bool = True,
) -> Any:
    """`base` with 1..max_changes changes at random key paths: a value tweaked or replaced, a key or
    item removed, a key added, a value wrapped in a list; with `root`, the whole document may be
    replaced (JSON and YAML files can hold any value; a TOML file is always a table, see as_toml)."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=max_changes))):
        path = draw(st.sampled_from(_paths(doc)))
        operation = draw(st.sampled_from(["tweak", "tweak", "replace", "replace", "delete", "add", "wrap"]))
        if not path:
            if root and operation == "replace" and draw(st.integers(0, 9)) == 0:
                doc = copy.deepcopy(draw(values))
            continue
        parent, last = _get(doc, path[:-1]), path[-1]
        if operation == "tweak" and not isinstance(parent[last], (dict, list)):
            parent[last] = draw(tweaked(parent[last]))
        elif operation in ("replace", "tweak"):
            parent[last] = copy.deepcopy(draw(values))
        elif operation == "delete":
            del parent[last]
        elif operation == "wrap":
            parent[last] = [parent[last]]
        else:
            target = parent[last]
            if isinstance(target, dict):
                target[draw(keys)] = copy.deepcopy(draw(values))
            elif isinstance(target, list):
                target.insert(draw(st.integers(0, len(target))), copy.deepcopy(draw(values)))
            else:
                parent[last] = copy.deepcopy(draw(values))
    return doc


ODD_CHARACTERS = [
    "²",
    "٣",
    "１",
    "\x00",
    "\x1b",
    "\n",
    "\u202e",
    "\ufeff",
    " ",
    "\\",
    "/",
    "'",
    '"',
    "{",
    "%",
    "é",
    "\U0001f600",
    "\ud800",
    ":d",
    "!x",
    ":>99999999999",
    "{}",
]


def tweaked(value: Any) -> st.SearchStrategy:
    """A near miss of `value`, the kind a hand edit makes: for text, a character replaced or added
    (a superscript digit that passes str.isdigit() but not int(), a control character, a quote),
    cut, emptied, padded; for a number, off by one, negated, huge, a float, text."""
    if isinstance(value, str):
        at = st.integers(0, len(value))
        odd = st.sampled_from(ODD_CHARACTERS)
        return st.one_of(
            st.tuples(at, odd).map(lambda t: value[: t[0]] + t[1] + value[t[0] + 1 :]),
            st.tuples(at, odd).map(lambda t: value[: t[0]] + t[1] + value[t[0] :]),
            at.map(lambda n: value[:n]),
            st.sampled_from(["", " ", value + " ", " " + value, value.upper(), value * 3, value + "." + value]),
        )
    if isinstance(value, bool):
        return st.sampled_from([not value, int(value), str(value).lower(), None])
    if isinstance(value, int):
        return st.sampled_from(
            [
                value + 1,
                value - 1,
                -value,
                0,
                value * 10**6,
                float(value) if abs(value) < 2**1000 else math.inf,
                str(value),
                10**400,
                10**4000,
                None,
            ]
        )
    if isinstance(value, float):
        return st.sampled_from(
            [-value, int(value) if math.isfinite(value) else 0, math.nan, math.inf, str(value), None]
        )
    return json_values


def as_toml(doc: Any) -> Any:
    """What tomllib could have returned: no null, no lone surrogate (TOML is UTF-8 text)."""
    if isinstance(doc, dict):
        return {as_toml(key): as_toml(value) for key, value in doc.items()}
    if isinstance(doc, list):
        return [as_toml(value) for value in doc]
    if isinstance(doc, str) and not isinstance(doc, Raw):
        return doc.encode("utf-8", "ignore").decode("utf-8")
    return "" if doc is None else doc


# ------------------------------------------------------------------ writing documents as files


def dump_json(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {dump_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dump_json(v) for v in value) + "]"
    if isinstance(value, (datetime, date, time)):
        return json.dumps(value.isoformat())
    return json.dumps(value)


def _toml_value(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if value is None:
        return '"null"'
    return json.dumps(str(value))


def dump_toml(doc: Any) -> str:
    """TOML with every table inline (tomllib reads `entry = [{...}]` as [[entry]])."""
    if not isinstance(doc, dict):
        return f"value = {_toml_value(doc)}\n"
    return "".join(f"{json.dumps(str(k))} = {_toml_value(v)}\n" for k, v in doc.items())


def dump_yaml(doc: Any, block: bool) -> str:
    """Block-style YAML (PyYAML's own writer), or flow style (JSON, which YAML reads) when the
    document holds raw tokens."""
    if block and not any(isinstance(_get(doc, path), Raw) for path in _paths(doc)):
        try:
            return yaml.safe_dump(doc, allow_unicode=True)
        except yaml.YAMLError:
            pass
    return dump_json(doc) + "\n"


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate stays: a broken file is an input too


SNIPPETS = [b"1" * 50, b"[" * 30, b"{", b"}", b"]", b"\x00", b"\xff\xfe", b"\xef\xbb\xbf", b'"', b"\\", b"\n[", b"]]",
            b"nan", b"-inf", b"1e999", b"'''", b'"""', b"\xe2\x80\xa8", b"9" * 400, b"&a [*a]", b"*a",
            b"!!python/object/apply:os.system ['true']", b"\t", b"\r"]  # fmt: skip


@st.composite
def text_mutated(draw: st.DrawFn, original: bytes) -> bytes:
    """Raw edits of a file's bytes: snippets inserted or written over, a cut, the whole file truncated."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        how = draw(st.sampled_from(["insert", "overwrite", "cut", "truncate"]))
        snippet = draw(
            st.one_of(
                st.sampled_from(SNIPPETS),
                st.sampled_from([5000, 3000]).map(lambda n: b"1" * n),
                st.sampled_from([1000, 3000]).map(lambda n: b"[" * n),
                st.binary(max_size=16),
            )
        )
        if how == "insert":
            data[at:at] = snippet
        elif how == "overwrite":
            data[at : at + len(snippet)] = snippet
        elif how == "cut":
            del data[at : at + draw(st.integers(1, 64))]
        else:
            del data[at:]
    return bytes(data)


# ------------------------------------------------------------------ in-process properties

FACT_VALUES = st.one_of(
    json_values,
    st.sampled_from(
        [
            v
            for doc in HOST_DOCS.values()
            for v in (doc.get("visual_studio") or [None])[:1] + (doc.get("cuda") or [None])[:1]
        ]
    ),
)
PLAN_CACHE = "C:\\pwb\\cache"


def _locate(archive: Any) -> tuple[str, bool]:
    return f"{PLAN_CACHE}\\deps\\{archive.folder_name}", False


def _plan_and_render(raw: dict[str, Any], facts: Facts, source_version: tuple[str, str] | None = None) -> None:
    """What `invoke env` / `build --dry-run` do with flags and facts: a plan in every format, or a WinbuildError."""
    try:
        options = plan_options(**raw)
        plan = make_plan(
            PlanRequest(options, tree=SourceTree(version=source_version), locate_archive=_locate), facts, KNOWLEDGE
        )
    except WinbuildError as error:
        assert not isinstance(error, InternalError)
        error.paragraph()
        return
    assert isinstance(plan, Plan)
    plan.final_env()
    for fmt in FORMATS:
        try:
            render(plan, fmt).encode("utf-8")  # env writes it as UTF-8, to a file or standard output
        except ConfigurationError as error:
            error.paragraph()


@IN_PROCESS
@given(host=st.sampled_from(sorted(HOST_DOCS)), data=st.data())
def test_facts_from_dict_gives_facts_or_a_configuration_error(host: str, data: st.DataObject):
    doc = data.draw(mutated(HOST_DOCS[host], FACT_VALUES), label="facts")
    try:
        facts = facts_from_dict(doc, "fuzz.json", KNOWLEDGE.products)
    except ConfigurationError as error:
        error.paragraph()
        return
    assert isinstance(facts, Facts)
    facts.to_json().encode("utf-8")  # doctor --json: what it writes must be UTF-8 text
    try:  # doctor --host
        render_doctor(facts, doctor_checks(facts, KNOWLEDGE)).encode("utf-8")
    except WinbuildError as error:
        assert not isinstance(error, InternalError)
        error.paragraph()
    cuda = data.draw(st.sampled_from(["auto", "cpu", *(c.version for c in facts.cuda)]), label="cuda")
    version = data.draw(st.sampled_from([None, "0.4.1", "1.0.1", "2.13.0", "latest"]), label="pytorch_version")
    _plan_and_render(dict(cuda=cuda, pytorch_version=version, cache_dir=PLAN_CACHE), facts)


@IN_PROCESS
@given(host=st.sampled_from(sorted(HOST_TEXTS)), data=st.data())
def test_load_facts_on_an_edited_file_gives_facts_or_a_configuration_error(
    host: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
):
    content = data.draw(
        st.one_of(
            text_mutated(HOST_TEXTS[host]),
            mutated(HOST_DOCS[host], st.one_of(FACT_VALUES, raw_tokens)).map(lambda d: _encode(dump_json(d))),
        ),
        label="file",
    )
    path = _scratch(tmp_path_factory) / "facts.json"
    path.write_bytes(content)
    try:
        assert isinstance(load_facts(path), Facts)
    except ConfigurationError as error:
        error.paragraph()


def _choice_or_junk(choices: list[Any]) -> st.SearchStrategy:
    return st.one_of(st.sampled_from(choices), text_values)


OPTIONS = st.fixed_dictionaries(  # raw values, as flags and settings give them: the edge's parser reads them
    dict(
        cuda=_choice_or_junk(["auto", "cpu", *KNOWLEDGE.cuda]),
        vs=_choice_or_junk(["auto", *KNOWLEDGE.products]),
        toolset=st.one_of(st.none(), _choice_or_junk(["14.0", "14.11", "14.12", "14.16", "14.29", "14.44", "14.99"])),
        generator=_choice_or_junk(["auto", "ninja", "vs"]),
        compiler_cache=_choice_or_junk(["auto", "none", *KNOWLEDGE.compiler_caches]),
        arch_list=st.one_of(
            st.none(), _choice_or_junk(["6.1", "7.5;8.6+PTX", "Ampere;Hopper", "9.0a", "5.0", "10.0f", "8.6+PTX;9.0"])
        ),
        jobs=st.one_of(st.none(), int_values),
        pytorch_version=st.one_of(
            st.none(), _choice_or_junk(["0.4.1", "1.0.1", "1.13", "2.13.0", "latest", "2.6.0a0+git1234", "v1.0.1"])
        ),
        mode=_choice_or_junk(["install", "develop", "wheel"]),
        libtorch=st.booleans(),
        cache_dir=_choice_or_junk([PLAN_CACHE, "cache", "/home/you/.cache/pytorch-winbuild", "C:\\Users\\ü ser\\pwb"]),
        cache_dir_given=st.booleans(),
        source_dir=st.one_of(st.none(), _choice_or_junk(["C:\\src\\pytorch", "/src/pytorch", "C:\\" + "x" * 300])),
        mkl_version=st.one_of(st.none(), _choice_or_junk(sorted(CATALOG_DOC["mkl"]["versions"]))),
        magma_version=st.one_of(st.none(), _choice_or_junk(["2.4.0", "2.5.4", "2.5.4,2.5.2", ","])),
        magma_debug=st.booleans(),
        no_magma=st.booleans(),
    )
)


@IN_PROCESS
@given(
    host=st.sampled_from(sorted(HOST_DOCS)),
    options=OPTIONS,
    source_version=st.one_of(
        st.none(), st.tuples(_choice_or_junk(["1.0.1", "2.6.0a0", "0.4.0"]), st.just("C:\\src\\version.txt"))
    ),
)
def test_make_plan_gives_a_plan_or_a_winbuild_error(
    host: str, options: dict[str, Any], source_version: tuple[str, str] | None
):
    facts = facts_from_dict(HOST_DOCS[host], host, KNOWLEDGE.products)
    _plan_and_render(options, facts, source_version)


@IN_PROCESS
@given(doc=mutated(MATRIX_DOC, toml_values, keys=st.text(max_size=12), root=False).map(as_toml))
def test_parse_matrix_gives_a_matrix_or_a_configuration_error(doc: Any):
    try:
        assert isinstance(parse_matrix(doc, "nightly.toml", KNOWLEDGE), Matrix)
    except ConfigurationError as error:
        error.paragraph()


@IN_PROCESS
@given(
    doc=mutated(CATALOG_DOC, toml_values, keys=st.text(max_size=12), root=False).map(as_toml),
    cuda=st.one_of(st.none(), _choice_or_junk(["9.0", "10.1", "12.4", "13.0"])),
    debug=st.booleans(),
)
def test_parse_catalog_gives_a_catalog_or_a_configuration_error(doc: Any, cuda: str | None, debug: bool):
    try:
        catalog = parse_catalog(doc, Path("deps.toml"))
    except ConfigurationError as error:
        error.paragraph()
        return
    assert isinstance(catalog, Catalog)
    try:  # and what fetch-deps asks of it
        select_archives(
            cuda=KNOWLEDGE.cuda.get(cuda) if cuda else None,  # fetch-deps refuses an unknown --cuda before this
            mkl_version=catalog.mkl_default,
            magma_versions=[],
            magma_debug=debug,
            catalog=catalog,
        )
    except ConfigurationError as error:
        error.paragraph()


@IN_PROCESS
@given(data=st.data())
def test_load_rules_gives_rules_or_a_configuration_error(data: st.DataObject, tmp_path_factory: pytest.TempPathFactory):
    small = {"rule": RULES_DOC["rule"][:3]}  # three rules: the shape of the file, at a fraction of the compile time
    content = data.draw(
        st.one_of(
            mutated(small, st.one_of(toml_values, raw_tokens), keys=st.text(max_size=12), root=False).map(
                lambda d: _encode(dump_toml(d))
            ),
            text_mutated(_encode(dump_toml(small))),
        ),
        label="rules",
    )
    path = _scratch(tmp_path_factory) / "rules.toml"
    path.write_bytes(content)
    try:
        load_rules(path)
    except ConfigurationError as error:
        error.paragraph()


CONFIG_VALUES = st.one_of(json_values, raw_tokens)


@IN_PROCESS
@given(data=st.data())
def test_config_check_passes_or_gives_a_configuration_error(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
):
    """config_check.check_config_files, what tasks.py runs on ~/.invoke.yaml and `-f FILE` before Invoke reads them."""
    suffix = data.draw(st.sampled_from([".yaml", ".yml", ".json"]), label="suffix")
    doc = data.draw(mutated(CONFIG_DOC, CONFIG_VALUES), label="config")
    text = dump_json(doc) if suffix == ".json" else dump_yaml(doc, block=data.draw(st.booleans(), label="block style"))
    content = data.draw(st.one_of(st.just(_encode(text)), text_mutated(_encode(text))), label="file")
    path = _scratch(tmp_path_factory) / f"invoke{suffix}"
    path.write_bytes(content)
    try:
        check_config_files([path], WINBUILD_DEFAULTS)
    except ConfigurationError as error:
        error.paragraph()


_SCRATCH: list[Path] = []


def _scratch(factory: pytest.TempPathFactory) -> Path:
    """One folder for the in-process file properties (function-scoped tmp_path does not mix with @given)."""
    if not _SCRATCH:
        _SCRATCH.append(factory.mktemp("property-scratch"))
    return _SCRATCH[0]


# ------------------------------------------------------------------ the command line: flags from --help


def _run_invoke_quick(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "invoke", "--search-root", str(REPO_ROOT), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**_base_env(), "HOME": _empty_home()},
        timeout=PROCESS_TIMEOUT,
        check=True,
    )
    return result.stdout


@lru_cache(maxsize=1)
def _empty_home() -> str:
    home = tempfile.mkdtemp(prefix="pwb-property-home-")
    atexit.register(shutil.rmtree, home, True)
    return home


def _listed_tasks() -> list[str]:
    text = _run_invoke_quick("--list")
    return re.findall(r"^  (\S+)", text.split("Available tasks:", 1)[1], re.MULTILINE)


@dataclass(frozen=True)
class Flag:
    name: str  # without the dashes
    takes_value: bool


@cache
def task_flags(task: str) -> tuple[Flag, ...]:
    """The flags `invoke --help TASK` shows (`--help` after the task name would be a PATH for build-ext)."""
    text = _run_invoke_quick("--help", task).split("Options:", 1)[1]
    repeatable = {
        name.replace("_", "-") for name in namespace.tasks[task].iterable
    }  # shown without =STRING, yet each takes a value
    return tuple(
        Flag(match.group(1), match.group(2) is not None or match.group(1) in repeatable)
        for match in re.finditer(r"^  (?:-\w(?: \w+)?, )?--([\w-]+)(=\w+)?", text, re.MULTILINE)
    )


@dataclass
class Spec:
    """One command line and the sandbox it needs; '@SB@' stands for the sandbox folder."""

    task: str
    core: list[str] = field(default_factory=list)  # Invoke's flags before the task name
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)  # sandbox-relative path → content
    executables: set[str] = field(default_factory=set)
    outputs: list[str] = field(default_factory=list)  # named outputs: the only places it may write (with the caches)


SB = "@SB@"
WRITER_FLAGS = ("cache-dir", "output", "lock-file", "log-dir", "output-dir")
DASHES = ["-x", "-", "--", "-1", "--nope", "-0.5"]
plain_text = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=24).filter(
    lambda s: "/" not in s and not s.startswith("-") and s not in (".", "..") and not _is_task_name(s)
)
generic = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "0",
            "1",
            "-0",
            "4.5",
            "1e309",
            "nan",
            "inf",
            "99999999999999999999999",
            "auto",
            "cpu",
            "none",
            "ünïcødé",
            "日本語",
            "🙂",
            "C:\\x",
            "%PATH%",
            "$HOME",
            "²",
            "٣",
        ]
    ),
    st.sampled_from(DASHES),
    plain_text,
)
DOMAIN = {
    "cuda": [
        "auto",
        "cpu",
        "9.0",
        "10.0",
        "12.4",
        "12.8",
        "13.0",
        "8.0",
        "99.9",
        "9",
        "9.0.176",
        "cu124",
        "CPU",
        "٩.٠",
        "9.²",
    ],
    "vs": ["auto", "2015", "2017", "2019", "2022", "2026", "2013", "17", "vs2019"],
    "toolset": ["14.0", "14.11", "14.16", "14.29", "14.44", "14.99", "15.0", "14.11.25503", "14", "14.²"],
    "generator": ["ninja", "vs", "auto", "Ninja", "make"],
    "compiler-cache": ["clcache", "sccache", "ccache", "none", "auto", "buildcache"],
    "arch-list": ["6.1", "7.5;8.6+PTX", "Ampere;Hopper", "9.0a", "5.0", "12.0", "+PTX", ";;", "6.1 7.5", "sm_61"],
    "jobs": ["1", "4", "0", "-1", "4.5", "1e3", "99999999999999999999999999", " 4 ", "٤", "²"],
    "pytorch-version": [
        "0.4.1",
        "1.0.1",
        "1.13",
        "2.13.0",
        "latest",
        "nightly",
        "2.6.0a0+git1234",
        "v1.0.1",
        "0.3",
        "99.0",
        "1..2",
        "2.²",
    ],
    "mkl-version": ["2018.2.185", "2019.4.245", "2020.0.166", "2020.2.254", "2021.0"],
    "magma-version": ["2.4.0", "2.5.4", "2.5.4,2.5.2", ",", ",,2.5.0", "9.9.9"],
    "format": ["table", "json", "bat", "ps1", "sh", "csv"],
    "mode": ["install", "develop", "wheel", "inplace", "bdist"],
    "keep-days": ["1", "14", "0", "-3", "1.5", "1e9"],
    "ref": ["main", "v2.6.0", "release/2.6", "..", "a b", "HEAD~1", "@{u}"],
    "repo": [
        "https://github.com/pytorch/pytorch.git",
        "https://user:secret@example.invalid/pytorch.git",
        "ssh://git@example.invalid:x/y",
        "file:///nonexistent/repo",
        "https://[::1",
        "git@host:path",
    ],
    "only": ["cpu-py311", "cu124-py311", "nope", "a b"],
    "mirror": [
        "https://example.invalid/ossci-windows/",
        "file:///nonexistent/",
        "ftp://example.invalid/",
        "http://user:pw@example.invalid/",
        "https://",
        "file://server/share/",
    ],
    "jobs-fetch": ["0", "1", "4", "-1", "x"],
}
WRITER_VALUES = st.one_of(
    st.sampled_from(
        [
            f"{SB}/out/x",
            f"{SB}/out/new/deeper/x",
            f"{SB}/out",
            f"{SB}/cache",
            f"{SB}/in/file.txt",
            f"{SB}/out/ünï cødé",
            "",
            " ",
            ".",
            "..",
            "rel",
            "rel/x",
            "~",
        ]
    ),
    plain_text,
)
READER_VALUES = st.one_of(
    st.sampled_from(
        [
            f"{SB}/in",
            f"{SB}/in/file.txt",
            f"{SB}/in/missing",
            f"{SB}/in/empty.txt",
            f"{SB}/in/binary.bin",
            "",
            ".",
            "..",
            "~",
        ]
    ),
    plain_text,
)
NOT_A_FOLDER = st.one_of(
    st.sampled_from([f"{SB}/in/missing", f"{SB}/in/file.txt", f"{SB}/in/missing/setup.py", "", " "]), plain_text
)
ARCHIVE_NAMES = [
    "mkl_2020.2.254.7z",
    "mkl_2018.2.185.7z",
    "mkl_2019.4.245.7z",
    "mkl_2020.0.166.7z",
    "magma_2.5.4_cuda124_release.7z",
    "magma_2.4.0_cuda90_release.7z",
    "magma_2.5.4_cuda128_release.7z",
]
JUNK_ARCHIVE = st.one_of(
    st.binary(max_size=256), st.binary(max_size=128).map(lambda b: b"7z\xbc\xaf\x27\x1c\x00\x04" + b)
)


def _file_value(draw: st.DrawFn, spec: Spec, name: str, content: st.SearchStrategy, junk: bool = False) -> str:
    """A path to a file with drawn content in the sandbox, or (junk) a reader path."""
    if junk and draw(st.booleans()):
        return draw(READER_VALUES)
    path = f"in/{name}"
    spec.files[path] = draw(content)
    return f"{SB}/{path}"


FACTS_CONTENT = st.one_of(
    st.sampled_from(sorted(HOST_TEXTS)).flatmap(lambda host: text_mutated(HOST_TEXTS[host])),
    st.sampled_from(sorted(HOST_DOCS))
    .flatmap(lambda host: mutated(HOST_DOCS[host], st.one_of(FACT_VALUES, raw_tokens)))
    .map(lambda d: _encode(dump_json(d))),
)
MATRIX_CONTENT = st.one_of(
    text_mutated((CONFIG / "nightly.toml").read_bytes()),
    mutated(MATRIX_DOC, st.one_of(toml_values, raw_tokens), keys=st.text(max_size=12), root=False).map(
        lambda d: _encode(dump_toml(d))
    ),
)
RULES_CONTENT = st.one_of(
    text_mutated(_encode(dump_toml({"rule": RULES_DOC["rule"][:3]}))),
    mutated(
        {"rule": RULES_DOC["rule"][:3]}, st.one_of(toml_values, raw_tokens), keys=st.text(max_size=12), root=False
    ).map(lambda d: _encode(dump_toml(d))),
)
LOG_LINES = ["error C2065: 'x': undeclared identifier", "LINK : fatal error LNK1104: cannot open file 'x.lib'",
             "nvcc fatal : Host compiler targets unsupported OS.", "unsupported Microsoft Visual Studio version!",
             "ImportError: DLL load failed", "Traceback (most recent call last):",
             "BrokenPipeError: [Errno 32] Broken pipe", "\x1b[31mred\x1b[0m"]  # fmt: skip
LOG_CONTENT = st.one_of(
    st.binary(max_size=2048),
    st.tuples(
        st.lists(st.one_of(st.sampled_from(LOG_LINES), st.text(max_size=80)), max_size=30),
        st.sampled_from(["utf-8", "utf-16", "cp1252", "utf-8-sig"]),
    ).map(lambda parts: "\n".join(parts[0]).encode(parts[1], "replace")),
)
YAML_CONTENT = st.tuples(mutated(CONFIG_DOC, CONFIG_VALUES), st.booleans()).map(
    lambda d: _encode(dump_yaml(d[0], d[1]))
)


def _python_value(draw: st.DrawFn, spec: Spec) -> str:
    kind = draw(st.sampled_from(["missing", "folder", "file", "fake", "fake", "name"]))
    if kind == "fake":  # hostile input, not a double: an executable that is not Python, prints junk, any exit code
        body = draw(st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00'"), max_size=200))
        spec.files["in/fake-python"] = _encode(f"#!/bin/sh\nprintf '%s' '{body}'\nexit {draw(st.integers(0, 255))}\n")
        spec.executables.add("in/fake-python")
        return f"{SB}/in/fake-python"
    if kind == "name":
        return draw(plain_text.filter(lambda s: shutil.which(s) is None))
    return {"missing": f"{SB}/in/missing", "folder": f"{SB}/in", "file": f"{SB}/in/file.txt"}[kind]


VALID = {
    "cuda": ["auto", "cpu", "9.0", "10.0", "12.4", "12.8", "8.0", "13.0"],
    "vs": ["auto", "2015", "2017", "2019", "2022"],
    "toolset": ["14.0", "14.11", "14.16", "14.29", "14.44"],
    "generator": ["ninja", "vs", "auto"],
    "compiler-cache": ["clcache", "sccache", "ccache", "none", "auto"],
    "arch-list": ["6.1", "7.5;8.6+PTX", "Ampere;Hopper", "9.0a", "8.6"],
    "jobs": ["1", "4", "16"],
    "jobs-fetch": ["0", "1", "4"],
    "pytorch-version": ["0.4.1", "1.0.1", "1.13", "2.13.0", "latest", "2.6.0a0+git1234"],
    "mkl-version": ["2018.2.185", "2019.4.245", "2020.0.166", "2020.2.254"],
    "magma-version": ["2.4.0", "2.5.4", "2.5.4,2.5.2"],
    "format": ["table", "json", "bat", "ps1", "sh"],
    "mode": ["install", "develop", "wheel", "inplace"],
    "keep-days": ["1", "14"],
    "ref": ["main", "v2.6.0"],
    "repo": [
        "https://github.com/pytorch/pytorch.git",
        "file:///nonexistent/repo",
        "https://user:secret@example.invalid/pytorch.git",
    ],
    "only": ["cpu-py311", "cu124-py311"],
    "mirror": ["https://example.invalid/ossci-windows/", "file:///nonexistent/"],
}
GOOD_OUTPUTS = st.sampled_from([f"{SB}/out/x", f"{SB}/out/new/deeper/x", f"{SB}/cache", f"{SB}/out/ünï cødé", "rel"])
VERSION_TEXT = st.one_of(st.sampled_from(["2.6.0a0", "1.0.1", "0.4.0"]).flatmap(tweaked), st.text(max_size=20)).map(
    _encode
)


def _pytorch_source(draw: st.DrawFn, spec: Spec) -> str:
    """A folder that looks like a PyTorch checkout, with a drawn version (version.txt or setup.py's line)."""
    if draw(st.booleans()):
        spec.files["src/setup.py"] = b"# pytorch\nfrom setuptools import setup\nsetup(name='torch')\n"
        spec.files["src/version.txt"] = draw(VERSION_TEXT)
    else:
        spec.files["src/setup.py"] = (
            b"# pytorch\nversion = '" + draw(VERSION_TEXT).replace(b"'", b"") + b"'\nsetup(name='torch')\n"
        )
        spec.files["src/torch/__init__.py"] = b""
    return f"{SB}/src"


def _value(draw: st.DrawFn, spec: Spec, flag: str, junk: bool) -> str:
    """A value for --flag of spec.task: a usable one (so the run gets past the flag checks, to the
    hostile files), or with `junk` anything; writer flags only ever name places inside the sandbox."""
    if flag in WRITER_FLAGS:
        value = draw(WRITER_VALUES if junk else GOOD_OUTPUTS)
        spec.outputs.append(value)
        return value
    if junk and flag not in ("host", "matrix", "rules", "python"):
        domain = DOMAIN.get("jobs-fetch" if (flag, spec.task) == ("jobs", "fetch-deps") else flag)
        if flag in ("source", "from-dir", "path", "logfile"):
            return draw(READER_VALUES)
        return draw(st.one_of(st.sampled_from(domain), generic) if domain else generic)
    if flag == "host":
        if draw(st.integers(0, 2)) == 0:
            return str(draw(st.sampled_from(HOST_FILES)))
        return _file_value(draw, spec, "facts.json", FACTS_CONTENT, junk)
    if flag == "matrix":
        return _file_value(draw, spec, "nightly.toml", MATRIX_CONTENT, junk)
    if flag == "rules":
        return _file_value(draw, spec, "rules.toml", RULES_CONTENT, junk)
    if flag == "source":
        return _pytorch_source(draw, spec) if draw(st.integers(0, 2)) else f"{SB}/in"
    if flag in ("from-dir", "path", "logfile"):
        return f"{SB}/in"
    if flag == "python":
        return _python_value(draw, spec)
    return draw(
        st.sampled_from(VALID.get("jobs-fetch" if (flag, spec.task) == ("jobs", "fetch-deps") else flag, ["x"]))
    )


def _invoke_reads(content: bytes, suffix: str) -> bool:
    """Whether Invoke itself loads and merges the file as ~/.invoke.*. Under `python -m invoke` it
    does so before it imports tasks.py, so a file it trips over ends in Invoke's own traceback (exit
    1) before any pytorch-winbuild code runs (the `pytorch-winbuild` script checks it first). Such
    content is given with `-f FILE` instead, which pytorch-winbuild checks."""
    from invoke import Config

    with tempfile.TemporaryDirectory(prefix="pwb-property-config-") as folder:
        (Path(folder) / f".invoke{suffix}").write_bytes(content)
        try:
            Config(system_prefix=f"{folder}/nothing-here/", user_prefix=f"{folder}/.")
        except Exception:
            return False
    return True


def _config_input(draw: st.DrawFn, spec: Spec) -> None:
    """Sometimes a hostile configuration: ~/.invoke.yaml (or .json), `-f FILE`, INVOKE_RUNTIME_CONFIG or
    INVOKE_WINBUILD_*."""
    kind = draw(st.sampled_from(["none", "none", "none", "none", "home", "dash-f", "runtime-env", "env"]))
    if kind == "home":
        suffix = draw(st.sampled_from([".yaml", ".yml", ".json"]))
        content = draw(st.one_of(YAML_CONTENT, YAML_CONTENT.flatmap(text_mutated)))
        if _invoke_reads(content, suffix):
            spec.files[f"home/.invoke{suffix}"] = content
            return
        spec.files[f"in/config{suffix}"] = content
        spec.core += ["-f", f"{SB}/in/config{suffix}"]
    elif kind in ("dash-f", "runtime-env"):
        if draw(st.integers(0, 4)) == 0:
            where = draw(READER_VALUES)
        else:
            where = f"{SB}/in/config{draw(st.sampled_from(['.yaml', '.json', '.yml']))}"
            spec.files[where.removeprefix(f"{SB}/")] = draw(st.one_of(YAML_CONTENT, YAML_CONTENT.flatmap(text_mutated)))
        if kind == "dash-f":
            spec.core += ["-f", where]
        else:
            spec.env["INVOKE_RUNTIME_CONFIG"] = where
    elif kind == "env":
        for name in draw(
            st.lists(st.sampled_from([*WINBUILD_DEFAULTS, "nonsense"]), min_size=1, max_size=3, unique=True)
        ):
            if name == "cache_dir":
                spec.env["INVOKE_WINBUILD_CACHE_DIR"] = draw(WRITER_VALUES)
                spec.outputs.append(spec.env["INVOKE_WINBUILD_CACHE_DIR"])
            else:
                spec.env[f"INVOKE_WINBUILD_{name.upper()}"] = draw(
                    st.one_of(generic, st.sampled_from(DOMAIN.get(name.replace("_", "-"), ["x"])))
                )


# How each task is made safe: (fixed leading arguments, flags never drawn). See the module docstring.
def _fixed_arguments(draw: st.DrawFn, spec: Spec, names: set[str]) -> tuple[list[str], set[str]]:
    task = spec.task
    fixed: list[str] = []
    excluded: set[str] = set()
    if task == "build":
        fixed, excluded = ["--dry-run"], {"dry-run"}
    elif task == "build-ext":
        fixed, excluded = [draw(NOT_A_FOLDER)], {"path"}
    elif task == "verify":
        fixed, excluded = ["--python", _python_value(draw, spec)], {"python"}
    elif task == "diagnose":
        fixed, excluded = (
            [_file_value(draw, spec, "build.log", LOG_CONTENT, junk=draw(st.integers(0, 4)) == 0)],
            {"logfile"},
        )
    elif task == "nightly":
        output = draw(st.one_of(GOOD_OUTPUTS, GOOD_OUTPUTS, GOOD_OUTPUTS, WRITER_VALUES))
        spec.outputs.append(output)
        fixed = [
            "--output-dir",
            output,
            "--min-free-gb",
            draw(
                st.one_of(
                    st.sampled_from(["1e12", "1000000000000", "1e12 "]),
                    st.sampled_from(["1e12", "-1", "nan", "inf", "", "abc", "1e309"]),
                )
            ),
        ]
        excluded = {"output-dir", "min-free-gb"}
    elif task == "nightly-merge":  # writes only its --output-dir (a folder of the test), reads its parts
        output = draw(st.one_of(GOOD_OUTPUTS, GOOD_OUTPUTS, GOOD_OUTPUTS, WRITER_VALUES))
        spec.outputs.append(output)
        fixed, excluded = ["--output-dir", output], {"output-dir"}
    elif task == "nightly-site":  # writes only its OUTPUT_DIR and --stage (folders of the test)
        output = draw(st.one_of(GOOD_OUTPUTS, GOOD_OUTPUTS, GOOD_OUTPUTS, WRITER_VALUES))
        spec.outputs.append(output)
        fixed, excluded = ["--output-dir", output], {"output-dir", "stage"}
        if draw(st.booleans()):
            stage = draw(st.one_of(GOOD_OUTPUTS, WRITER_VALUES))
            spec.outputs.append(stage)
            fixed += ["--stage", stage]
    elif task == "fetch-deps":
        mode = draw(st.sampled_from(["dry-run", "dry-run", "mirror", "from-dir"]))
        if mode == "dry-run":
            fixed, excluded = ["--dry-run"], {"dry-run"}
        else:
            for name in draw(st.lists(st.sampled_from(ARCHIVE_NAMES), max_size=3, unique=True)):
                spec.files[f"mirror/{name}"] = draw(JUNK_ARCHIVE)
            spec.files.setdefault("mirror/README", b"junk archives for fetch-deps\n")
            if mode == "mirror":
                fixed, excluded = ["--mirror", f"file://{SB}/mirror/"], {"dry-run", "mirror", "from-dir"}
            else:
                fixed, excluded = ["--from-dir", f"{SB}/mirror"], {"dry-run", "mirror", "from-dir"}
    elif task not in ("doctor", "env", "clean"):
        pytest.fail(
            f"task {task!r} is new to tests/test_property_inputs.py: decide whether any flag keeps it from acting "
            "(building, downloading, changing this machine) and add it to _fixed_arguments."
        )
    if "cache-dir" in names and "cache-dir" not in excluded:
        planned = (
            [st.just("C:\\pwb\\cache")] * 3 if task in ("env", "build") else []
        )  # a --host plan for Windows needs a Windows folder
        cache = draw(st.one_of(*[st.just(f"{SB}/cache")] * 4, *planned, WRITER_VALUES))
        spec.outputs.append(cache)
        fixed += ["--cache-dir", cache]
        excluded.add("cache-dir")
    return fixed, excluded


@st.composite
def invocations(draw: st.DrawFn, task: str) -> Spec:
    spec = Spec(task)
    flags = {flag.name: flag for flag in task_flags(task)}
    iterable = set(namespace.tasks[task].iterable)
    _config_input(draw, spec)
    fixed, excluded = _fixed_arguments(draw, spec, set(flags))
    args = list(fixed)
    drawable = sorted(set(flags) - excluded)
    chosen = draw(st.lists(st.sampled_from(drawable), unique=True, max_size=min(6, len(drawable)))) if drawable else []
    junk = draw(
        st.sampled_from([0, 0, 0, 1, 1, 2])
    )  # how many flags get junk: each one alone usually ends the run at exit 2
    for name in chosen:
        if not flags[name].takes_value:
            args.append(f"--{name}=x" if junk and draw(st.integers(0, 9)) == 0 else f"--{name}")
            continue
        for _ in range(draw(st.integers(1, 3)) if name.replace("-", "_") in iterable else 1):
            value = _value(draw, spec, name, junk=junk > 0)
            junk -= 1
            args += [f"--{name}={value}"] if draw(st.booleans()) else [f"--{name}", value]
    missing_value = [name for name in drawable if name not in chosen and flags[name].takes_value]
    if missing_value and junk > 0 and draw(st.integers(0, 4)) == 0:
        args.append(f"--{draw(st.sampled_from(missing_value))}")  # a flag without its value, last
    spec.args = args
    return spec


# ------------------------------------------------------------------ running in a sandbox


def _base_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("INVOKE_", "GITHUB_", "RUNNER_"))
        and k.lower() not in ("no_proxy", "http_proxy", "https_proxy", "all_proxy")
    }
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens, any request fails at once
    env.update(
        {
            "http_proxy": dead,
            "https_proxy": dead,
            "HTTP_PROXY": dead,
            "HTTPS_PROXY": dead,
            "ALL_PROXY": dead,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONIOENCODING": "utf-8",
        }
    )
    return env


def _walk(root: Path, recursive: bool = True, skip: tuple[str, ...] = ()) -> dict[str, tuple]:
    """path → (kind, size, mtime) of everything under root (links not followed)."""
    found: dict[str, tuple] = {}
    if not root.exists():
        return found
    for directory, folders, files in os.walk(root):
        folders[:] = [f for f in folders if f not in skip]
        for name in folders + files:
            if name in skip:
                continue
            path = os.path.join(directory, name)
            info = os.lstat(path)
            kind = "link" if os.path.islink(path) else "dir" if os.path.isdir(path) else "file"
            found[path] = (kind, None, None) if kind == "dir" else (kind, info.st_size, info.st_mtime_ns)
        if not recursive:
            folders[:] = []
    return found


REPO_SKIP = (".git", "__pycache__", ".pytest_cache", ".hypothesis", ".benchmarks")


def repo_snapshot() -> dict[str, tuple]:
    found = _walk(REPO_ROOT, recursive=False, skip=REPO_SKIP)
    for folder in ("build_config", "cache"):
        found.update(_walk(REPO_ROOT / folder, skip=("__pycache__",)))
    return found


def _changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    return sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))


@dataclass
class Outcome:
    spec: Spec
    command: list[str]
    env: dict[str, str]
    returncode: int | None
    stdout: str
    stderr: str
    stray: list[str]

    def report(self) -> str:
        files = {name: content[:120] for name, content in self.spec.files.items()}
        return (
            f"command: {shlex.join(self.command)}\n"
            f"  extra environment: {self.env}\n"
            f"  input files (first bytes): {files}\n"
            f"  exit code: {self.returncode}\n"
            f"  written outside the cache and named outputs: {self.stray}\n"
            f"  stderr: {_head_and_tail(self.stderr)}\n"
            f"  stdout: {_head_and_tail(self.stdout)}"
        )


def _head_and_tail(text: str, size: int = 1500) -> str:
    return (
        text if len(text) <= 2 * size else f"{text[:size]}\n[... {len(text) - 2 * size} characters ...]\n{text[-size:]}"
    )


def _prepare(spec: Spec, sandbox: Path) -> tuple[list[str], dict[str, str], Path]:
    for folder in ("home", "tmp", "a/work", "in", "out", "cache/deps/mkl_2020.2.254/include", "cache/downloads"):
        (sandbox / folder).mkdir(parents=True, exist_ok=True)
    (sandbox / "in/file.txt").write_text("not what you think\n", encoding="utf-8")
    (sandbox / "in/empty.txt").write_bytes(b"")
    (sandbox / "in/binary.bin").write_bytes(bytes(range(256)))
    (sandbox / "cache/deps/mkl_2020.2.254/include/mkl.h").write_text("/* mkl */\n", encoding="utf-8")
    (sandbox / "cache/downloads/mkl_2020.2.254.7z.part").write_bytes(b"partial")
    for name, content in spec.files.items():
        path = sandbox / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        if name in spec.executables:
            path.chmod(0o755)
    put = lambda text: text.replace(SB, str(sandbox))  # noqa: E731
    command = [
        sys.executable,
        "-m",
        "invoke",
        "--search-root",
        str(REPO_ROOT),
        *map(put, spec.core),
        spec.task,
        *map(put, spec.args),
    ]
    extra = {name: put(value) for name, value in spec.env.items()}
    return command, extra, sandbox / "a" / "work"


def _allowed_roots(spec: Spec, sandbox: Path, cwd: Path) -> list[str]:
    roots = [str(sandbox / "cache")]
    for value in spec.outputs:
        value = value.replace(SB, str(sandbox))
        if value.strip():
            roots.append(os.path.normpath(os.path.join(cwd, value)))
    return roots


def _allowed(path: str, kind: str | None, roots: list[str]) -> bool:
    for root in roots:
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            return True
        if kind in ("dir", None) and root.startswith(path + os.sep):  # a parent folder the output needed
            return True
    return False


def _run(spec: Spec, sandbox: Path) -> Outcome:
    command, extra, cwd = _prepare(spec, sandbox)
    env = {
        **_base_env(),
        "HOME": str(sandbox / "home"),
        "TMPDIR": str(sandbox / "tmp"),
        "TEMP": str(sandbox / "tmp"),
        "TMP": str(sandbox / "tmp"),
        "XDG_CACHE_HOME": str(sandbox / "home/.cache"),
        **extra,
    }
    before = _walk(sandbox)
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=PROCESS_TIMEOUT)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        code, err = None, err + f"\n[test] no exit after {PROCESS_TIMEOUT} s".encode()
    after = _walk(sandbox)
    roots = _allowed_roots(spec, sandbox, cwd)
    stray = [
        path for path in _changes(before, after) if not _allowed(path, (after.get(path) or before.get(path))[0], roots)
    ]
    return Outcome(spec, command, extra, code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), stray)


def check_batch(specs: list[Spec]) -> None:
    with tempfile.TemporaryDirectory(prefix="pwb-property-", ignore_cleanup_errors=True) as root:
        repo_before = repo_snapshot()
        sandboxes = [Path(root) / f"s{index}" for index in range(len(specs))]
        with ThreadPoolExecutor(max_workers=len(specs)) as pool:
            outcomes = list(pool.map(_run, specs, sandboxes))
        repo_changes = _changes(repo_before, repo_snapshot())
        for outcome in outcomes:
            note(outcome.report())
        problems = []
        for outcome in outcomes:
            found = []
            if outcome.returncode not in ALLOWED_EXIT_CODES:
                found.append(
                    f"exit code {outcome.returncode} is not one of the documented {sorted(ALLOWED_EXIT_CODES)}"
                )
            if "Traceback (most recent call last)" in outcome.stderr + outcome.stdout:
                found.append("a traceback")
            if outcome.stray:
                found.append(f"files written outside the cache and the named outputs: {outcome.stray}")
            if found:
                problems.append("; ".join(found) + "\n  " + outcome.report())
        if repo_changes:
            problems.append(
                f"the repo changed (build_config/, cache/ or its top level): {repo_changes}; commands: "
                + " | ".join(shlex.join(o.command) for o in outcomes)
            )
        assert not problems, "\n\n".join(problems)


TASKS = _listed_tasks()


def test_every_listed_task_is_a_task_of_the_collection():
    assert TASKS and set(TASKS) == set(TASK_NAMES)


@pytest.mark.parametrize("task", TASKS)
def test_the_command_line_never_crashes_and_writes_only_its_outputs(task: str):
    @THROUGH_CLI
    @given(batch=st.lists(invocations(task), min_size=BATCH, max_size=BATCH))
    def prop(batch: list[Spec]) -> None:
        check_batch(batch)

    prop()


def test_the_sandbox_check_sees_a_file_written_outside_the_named_outputs():
    """The property is only as good as its eye: a file the command writes is reported unless the command
    line names it."""
    target = f"{SB}/out/env.bat"
    spec = Spec(
        "env",
        args=[
            "--host",
            str(HOSTS_DIR / "cpu-only.json"),
            "--cuda",
            "cpu",
            "--cache-dir",
            "C:\\pwb\\cache",
            "--format",
            "bat",
            "--output",
            target,
        ],
    )
    with tempfile.TemporaryDirectory(prefix="pwb-property-") as root:
        sandbox = Path(root) / "s0"
        outcome = _run(spec, sandbox)
        assert outcome.returncode == 0, outcome.report()
        written = str(sandbox / "out" / "env.bat")
        assert outcome.stray == [written], outcome.report()
        spec.outputs.append(target)
        assert _allowed(written, "file", _allowed_roots(spec, sandbox, sandbox / "a" / "work"))
