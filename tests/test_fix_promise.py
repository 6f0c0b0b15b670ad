"""A fix is a promise (issue 38): every change of flags a refusal suggests, and everything it says to install, plans
when it is followed, on the machine the plan was made for (once installed: planning/installs.py), with every other
choice kept.

A wide matrix of requests (every shipped facts file x CUDA x Python x release x arch list x --vs) is planned; for
every refusal, each way its fix offers is applied to the same request and planned again. The ways are the
refusal's own (planning/fixes.py), so what is checked is what the user is told to pass, not a parse of the text;
a fix that names a flag value any other way, or a refusal with no fix at all, fails the test.
"""

from __future__ import annotations

import itertools
import re

import pytest
from support import HOSTS_DIR, plan_options

from pytorch_winbuild.errors import WinbuildError
from pytorch_winbuild.facts.model import Facts, load_facts
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.planning.fixes import FixableError
from pytorch_winbuild.planning.installs import installed_after
from pytorch_winbuild.planning.options import Options
from pytorch_winbuild.planning.plan import make_plan
from pytorch_winbuild.planning.python_choice import PythonRequest
from pytorch_winbuild.planning.request import PlanRequest

KNOWLEDGE = load_knowledge()
HOSTS = sorted(HOSTS_DIR.glob("*.json"))
CUDAS = (None, "cpu", "8.0", "9.0", "10.0", "11.8", "12.4", "12.8", "13.0")
RELEASES = (None, "0.4.1", "1.6.0", "1.13.1", "2.4.1", "2.13.0")
PYTHONS = (None, "3.6", "3.9", "3.12")
EXTRAS: tuple[dict[str, str], ...] = ({}, {"arch_list": "6.1;7.5+PTX"}, {"vs": "2017"}, {"cmake": "3.10"})
# A fix that names a concrete flag value is a way the user can follow as written.
SUGGESTED_FLAG = re.compile(r"--(cuda|python|pytorch-version|arch-list|vs|toolset|generator|compiler-cache|cmake) \w")


def _requests() -> list[tuple[str, dict[str, str]]]:
    return [
        (host.name, {k: v for k, v in (("cuda", c), ("pytorch_version", r), ("python", p)) if v is not None} | extra)
        for host, c, r, p, extra in itertools.product(HOSTS, CUDAS, RELEASES, PYTHONS, EXTRAS)
    ]


def _plan(facts: Facts, options: Options) -> None:
    make_plan(PlanRequest(options), facts, KNOWLEDGE)


@pytest.mark.xdist_group("fix-promise")
def test_every_suggested_change_of_flags_plans_when_followed() -> None:
    facts = {host.name: load_facts(host) for host in HOSTS}
    refused = followed = installs = 0
    broken: list[str] = []
    unchecked: list[str] = []
    for host, raw in _requests():
        python = {"python": PythonRequest.parse(raw["python"])} if "python" in raw else {}
        options = plan_options(cache_dir="C:\\cache", **{k: v for k, v in raw.items() if k != "python"}, **python)
        try:
            _plan(facts[host], options)
            continue
        except FixableError as error:
            ways, fix, shown = error.fix_ways.ways(), error.fix, error.paragraph()
        except WinbuildError as error:
            if error.fix and SUGGESTED_FLAG.search(error.fix):
                unchecked.append(f"{host} {raw}: {error.paragraph()}")
            continue
        assert fix, f"{host} {raw}: a refusal without a fix: {shown}"
        refused += bool(ways)
        for way in ways:
            followed += 1
            installs += bool(way.installs)
            try:
                _plan(installed_after(way.installs, facts[host]), way.applied(options))
            except WinbuildError as after:
                broken.append(f"{host} {raw} + {way.text}: {after.paragraph()}")
    assert not broken, f"{len(broken)} suggested changes do not plan, e.g. " + "\n".join(broken[:5])
    assert not unchecked, f"{len(unchecked)} fixes name flags that were not planned, e.g. " + "\n".join(unchecked[:5])
    assert refused >= 1000 and followed >= refused, (refused, followed)  # refusals with ways, and ways planned
    assert installs >= 300, installs  # ways that install something, planned on the machine once installed


@pytest.mark.parametrize(
    ("flags", "tool"),
    [
        ({"generator": "ninja", "build_venv": False, "extension": True}, "ninja"),
        ({"compiler_cache": "sccache"}, "sccache"),
    ],
)
def test_a_tool_to_install_is_planned_with_it_on_path(flags: dict[str, object], tool: str) -> None:
    """`pip install ninja` (build-ext, which builds in the Python it extends, not a venv that carries ninja) and a
    compiler cache asked for by name: each install way plans on the machine once the tool is on PATH."""
    from dataclasses import replace

    facts = load_facts(HOSTS_DIR / "cpu-only.json")
    without = replace(facts, tools={name: found for name, found in facts.tools.items() if name != tool})
    options = plan_options(cuda="cpu", cache_dir="C:\\cache", **flags)
    with pytest.raises(FixableError) as raised:
        _plan(without, options)
    (way,) = raised.value.fix_ways.ways()
    assert way.installs and f"pip install {tool}" in way.text
    _plan(installed_after(way.installs, without), way.applied(options))
