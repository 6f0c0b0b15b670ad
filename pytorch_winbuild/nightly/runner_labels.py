"""Runner labels, both ways: what an entry's job asks for (`runs-on`), and what a runner has.

Both come from one rules file, build_config/runner_labels.toml, so an entry that names CUDA 12.8
asks for `cuda-12.8` and a runner whose `invoke doctor` finds CUDA 12.8 registers `cuda-12.8`:
GitHub's label matching is then the scheduler, and there is none of our own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytorch_winbuild.errors import ConfigurationError
from pytorch_winbuild.facts.model import Facts
from pytorch_winbuild.knowledge.choices import VsLine, cuda_release_of
from pytorch_winbuild.knowledge.config_files import load_toml, require, string_list
from pytorch_winbuild.nightly.matrix import Entry

RULES_FILE = "runner_labels.toml"
ENTRY_OS = "windows"  # the matrix names no OS: its entries are built on Windows runners
_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class LabelRules:
    """build_config/runner_labels.toml, checked."""

    base: dict[str, tuple[str, ...]]  # OS → labels every self-hosted runner of it has
    visual_studio: str  # template with {line}
    cuda: str  # template with {version}

    def base_for(self, os_name: str) -> tuple[str, ...]:
        return self.base.get(os_name, ("self-hosted", os_name, "x64"))


def _template(table: dict[str, object], key: str, field: str, where: str) -> str:
    template = require(table, key, str, where)
    if _FIELD.findall(template) != [field]:
        raise ConfigurationError(
            f"{where}.{key}: {template!r} must hold {{{field}}} once, and no other field.",
            fix=f'e.g. {key} = "{"vs{line}" if field == "line" else "cuda-{version}"}".',
        )
    return template


def load_label_rules(path: str = RULES_FILE) -> LabelRules:
    data = load_toml(path)
    where = f"build_config/{path}" if path == RULES_FILE else path
    base = require(data, "base", dict, where)
    needs = require(data, "needs", dict, where)
    return LabelRules(
        base={name: tuple(string_list(base, name, f"{where}: base")) for name in base},
        visual_studio=_template(needs, "visual_studio", "line", f"{where}: needs"),
        cuda=_template(needs, "cuda", "version", f"{where}: needs"),
    )


def entry_labels(entry: Entry, rules: LabelRules) -> tuple[str, ...]:
    """The labels a runner needs to build `entry`: its `runs_on` when it has one, else the base labels, its
    Visual Studio when it names one, and its CUDA unless it is a CPU entry."""
    if entry.runs_on:
        return entry.runs_on
    labels = list(rules.base_for(ENTRY_OS))
    if entry.request.vs is not VsLine.AUTO:
        labels.append(rules.visual_studio.format(line=entry.request.vs))
    release = cuda_release_of(entry.request.cuda)
    if release is not None:
        labels.append(rules.cuda.format(version=release.version))
    return tuple(labels)


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1 for part in text.split("."))


def runner_labels(facts: Facts, rules: LabelRules) -> tuple[str, ...]:
    """Every label of a runner on the machine `facts` describes: the base labels, each Visual Studio with a C++
    toolset, each CUDA toolkit."""
    lines = sorted({vs.product_line for vs in facts.visual_studio if vs.toolsets}, key=_numbers)
    cudas = sorted({cuda.version for cuda in facts.cuda}, key=_numbers)
    return (
        *rules.base_for(facts.os),
        *(rules.visual_studio.format(line=line) for line in lines),
        *(rules.cuda.format(version=version) for version in cudas),
    )


def registration_labels(facts: Facts, rules: LabelRules) -> tuple[str, ...]:
    """The labels to pass to the runner's `config.cmd --labels`: all but the base ones, which GitHub adds."""
    base = {label.lower() for label in rules.base_for(facts.os)}
    return tuple(label for label in runner_labels(facts, rules) if label.lower() not in base)
