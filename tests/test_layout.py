"""The package's layout is its architecture (README "Architecture"): facts and knowledge feed the
plan, the plan feeds the acting packages, and the faces sit on top. This test reads every import,
the ones inside functions too, and fails on an import cycle or on a layer reaching upward.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pytorch_winbuild"

# What each layer may import besides itself (README "Architecture"). `errors`, `paths`,
# `atomic_file` (files written whole or not at all), `json_file` (every JSON document read, bounded),
# `text` (quoting, redaction, terminal-safe output) and `child_processes` (every long-running child in the tool's
# tree, stopped with it on Ctrl-C and the other stop signals) are the base every layer uses.
BASE = {"errors", "paths", "atomic_file", "json_file", "text", "child_processes", "__init__"}
ALLOWED = {
    "errors": {"text"},
    "paths": set(),
    "atomic_file": set(),
    "json_file": set(),
    "child_processes": set(),
    "text": {"errors"},
    "knowledge": set(),
    "facts": {"knowledge"},
    "diagnosis": {"knowledge"},
    "planning": {"facts", "knowledge"},
    "deps": {"knowledge"},
    "builder": {"facts", "knowledge", "planning", "deps", "diagnosis"},
    "nightly": {"facts", "knowledge", "planning", "deps", "diagnosis", "builder"},
    "faces": {"facts", "knowledge", "planning", "deps", "diagnosis", "builder", "nightly"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"
        found[name] = path
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `path` imports, anywhere in it."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pytorch_winbuild"):
            base = node.module.removeprefix("pytorch_winbuild").lstrip(".") or "__init__"
            for alias in node.names:
                child = f"{base}.{alias.name}" if base != "__init__" else alias.name
                names.add(child if child in modules else base)
        elif isinstance(node, ast.Import):
            names.update(
                a.name.removeprefix("pytorch_winbuild.") for a in node.names if a.name.startswith("pytorch_winbuild.")
            )
    return {name for name in names if name in modules}


def _layer(module: str) -> str:
    return module.split(".")[0]


def test_no_import_cycle() -> None:
    modules = _modules()
    graph = {name: _imports(path, modules) - {name} for name, path in modules.items()}
    state: dict[str, str] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                cycles.append([*trail[trail.index(target) :], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def test_each_layer_imports_only_the_layers_below_it() -> None:
    modules = _modules()
    upward = []
    for name, path in sorted(modules.items()):
        layer = _layer(name)
        allowed = ALLOWED.get(layer)
        if allowed is None:
            continue  # the package's __init__
        for target in sorted(_imports(path, modules)):
            target_layer = _layer(target)
            if target_layer in (layer, *BASE) or target_layer in allowed or target in allowed:
                continue
            upward.append(f"{name} imports {target}")
    assert not upward, "imports that reach past their layer: " + "; ".join(upward)


def test_every_module_is_in_a_layer() -> None:
    """A new top-level module must say where it belongs (a subpackage, or the base)."""
    top_level = {name for name in _modules() if "." not in name}
    assert top_level <= set(ALLOWED) | BASE, sorted(top_level - set(ALLOWED) - BASE)
