"""The package's own import graph, read with ``ast`` (nothing is imported), and the layer rules.

Every import is an edge: module level, inside a function, under ``TYPE_CHECKING``, and a string
constant that names a recipe module exactly (an ``importlib`` target), so a lazy import can defer
cost but never hide a cycle or a reverse dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

#: Layers, top first. A module may import modules of its own layer (without a cycle) or of a layer
#: below; never one above. ``pkg.*`` names a package and everything in it, a plain name one module;
#: a module belongs to the most specific entry that names it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("recipe", "recipe.__main__", "recipe.cli.*", "recipe.serve.*"),           # entry points, facade
    ("recipe.pipeline", "recipe.prompt_cache", "recipe.output.driver"),       # request flow, prompt reuse, output driver
    ("recipe.api.*",),                                                         # wire models, adapters, API encoders
    ("recipe.options", "recipe.encodings.*", "recipe.schema.*", "recipe.cache.*", "recipe.store.*"),
    ("recipe.conversation", "recipe.prompt", "recipe.tokenizer", "recipe.output",
     "recipe.output.events", "recipe.output.parsing"),                        # hub, segments, vocabulary, events
    ("recipe.jsonfmt", "recipe.errors", "recipe.ranks"),                       # JSON rules, the error family, merged ranks
)


def module_names(root: Path, package: str = "recipe") -> dict[str, Path]:
    """Dotted module name -> file for every ``.py`` file under ``root`` (the package directory)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([package, *parts])] = path
    return out


def _resolve(current: str, is_package: bool, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imports_of(name: str, path: Path, modules: Iterable[str]) -> set[str]:
    """The recipe modules ``name`` (defined in ``path``) imports, by any of the routes above."""
    known = set(modules)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(target: str) -> None:
        # the longest known module that the dotted target names (``recipe.x.y`` may be an attribute)
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "recipe":
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_package, node.level, node.module)
            if base.split(".")[0] != "recipe":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in known else base)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value and node.value in known:
            add(node.value)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the recipe modules it imports, for the package at ``root``."""
    modules = module_names(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def layer_of(module: str, layers: Sequence[Sequence[str]] = LAYERS) -> int | None:
    """Index of the layer holding ``module`` (its most specific entry), or None if none declares it."""
    best: tuple[int, int] | None = None
    for index, entries in enumerate(layers):
        for entry in entries:
            if entry.endswith(".*"):
                package = entry[:-2]
                hit = module == package or module.startswith(package + ".")
                weight = len(package)
            else:
                hit, weight = module == entry, len(entry) + 1  # an exact entry beats its package's
            if hit and (best is None or weight > best[0]):
                best = (weight, index)
    return None if best is None else best[1]


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (or a self-loop), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:  # Tarjan's algorithm (graphs here are small: recursion is fine)
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def layer_violations(graph: Mapping[str, Iterable[str]], layers: Sequence[Sequence[str]] = LAYERS) -> list[str]:
    """One line per module no layer declares and per import that points up the layer order."""
    problems = []
    for module in sorted(graph):
        mine = layer_of(module, layers)
        if mine is None:
            problems.append(f"{module}: in no declared layer")
            continue
        for target in sorted(graph[module]):
            theirs = layer_of(target, layers)
            if theirs is not None and theirs < mine:
                problems.append(f"{module} (layer {mine}) imports {target} (layer {theirs}, above it)")
    return problems
