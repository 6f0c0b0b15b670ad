"""The house's size and parsing rules (issue 30), read from the source, so a change that breaks one fails here.

- No module over 600 lines and no function over 80: a room that grows past them is split by concern.
- The words a user types for --cuda, --vs, --generator and --compiler-cache ("auto", "cpu") are compared only
  where text is parsed: knowledge/choices.py (the one parser of choices), planning/python_choice.py (--python's
  parser and its typed kind) and the faces, the edge that reads flags. Below them values are enum members.
- The StrEnums of knowledge/choices.py name what build_config names: every Visual Studio line of
  visual_studio.toml, every compiler cache of compiler_caches.toml, every --pytorch-version word.
"""

from __future__ import annotations

import ast
from pathlib import Path

from pytorch_winbuild.knowledge.choices import CompilerCacheChoice, NewestWord, VsLine
from pytorch_winbuild.knowledge.model import load_knowledge
from pytorch_winbuild.knowledge.versions import NEWEST_WORDS

PACKAGE = Path(__file__).resolve().parent.parent / "pytorch_winbuild"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
WORDS = {"auto", "cpu"}
PARSERS = {"knowledge/choices.py", "planning/python_choice.py"}


def _sources() -> dict[str, str]:
    return {path.relative_to(PACKAGE).as_posix(): path.read_text(encoding="utf-8") for path in PACKAGE.rglob("*.py")}


def test_no_module_is_over_600_lines() -> None:
    big = {name: text.count("\n") for name, text in _sources().items() if text.count("\n") > MAX_MODULE_LINES}
    assert not big, big


def test_no_function_is_over_80_lines() -> None:
    long = []
    for name, text in _sources().items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long


def _compared_words(node: ast.Compare) -> set[str]:
    """The choice words a comparison holds: `x == "auto"`, `x in ("auto", "cpu")`."""
    found = set()
    for operand in (node.left, *node.comparators):
        items = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
        found |= {item.value for item in items if isinstance(item, ast.Constant) and item.value in WORDS}
    return found


def test_choice_words_are_compared_only_where_text_is_parsed() -> None:
    found = []
    for name, text in _sources().items():
        if name in PARSERS or name.startswith("faces/"):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Compare) and _compared_words(node):
                found.append(f"{name}:{node.lineno} compares {sorted(_compared_words(node))}")
    assert not found, found


def test_the_choice_enums_name_what_build_config_names() -> None:
    knowledge = load_knowledge()
    assert {line.value for line in VsLine} - {"auto"} == set(knowledge.products)
    assert {cache.value for cache in CompilerCacheChoice} - {"auto", "none"} == set(knowledge.compiler_caches)
    assert tuple(NewestWord) == NEWEST_WORDS
