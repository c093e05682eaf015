"""Imports run one way (docs/architecture.md): no cycles, nothing imports a layer above its own.

The check reads the package with ``ast`` (tests/import_graph.py); the tests at the end run it on a
copy of the package with a reverse import planted, to show it fails when it should.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import recipe
from import_graph import LAYERS, find_cycles, import_graph, layer_of, layer_violations

ROOT = Path(recipe.__file__).parent


@pytest.fixture(scope="module")
def graph():
    return import_graph(ROOT)


def test_the_package_has_no_import_cycle(graph):
    assert find_cycles(graph) == []


def test_no_module_imports_a_layer_above_its_own(graph):
    assert layer_violations(graph) == []


def test_the_graph_sees_the_imports_that_matter(graph):
    # a module-level, a function-level and an importlib-string edge, one each
    assert "recipe.api.prepared" in graph["recipe.pipeline"]
    assert "recipe.api.chat" in graph["recipe.pipeline"]  # imported inside the adapter loader
    assert "recipe.pipeline" in graph["recipe"]  # the facade's lazy name table
    assert "recipe.encodings.deepseek_v4.output" in graph["recipe.encodings.deepseek_v4"]  # parser factory


def test_every_layer_prefix_names_real_modules(graph):
    for entries in LAYERS:
        for entry in entries:
            name = entry.removesuffix(".*")
            assert any(m == name or m.startswith(name + ".") for m in graph), entry


@pytest.fixture
def copy(tmp_path):
    dst = tmp_path / "recipe"
    shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.c", "examples"))
    return dst


def _plant(path: Path, line: str, *, in_function: bool = False) -> None:
    text = path.read_text(encoding="utf-8")
    if in_function:
        text += f"\n\ndef _planted():\n    {line}\n"
    else:
        text += f"\n{line}\n"
    path.write_text(text, encoding="utf-8")


def test_the_check_fails_on_a_reverse_import(copy):
    _plant(copy / "tokenizer.py", "from recipe.pipeline import prepare")
    problems = layer_violations(import_graph(copy))
    assert problems == [f"recipe.tokenizer (layer {layer_of('recipe.tokenizer')}) imports recipe.pipeline "
                        f"(layer {layer_of('recipe.pipeline')}, above it)"]


def test_the_check_fails_on_a_lazy_cycle(copy):
    # api encoders -> driver, hidden inside a function: both a reverse import and a cycle
    _plant(copy / "api" / "chat_output.py", "from recipe.output.driver import CompletionStream", in_function=True)
    graph = import_graph(copy)
    assert any("recipe.api.chat_output" in c and "recipe.output.driver" in c for c in find_cycles(graph))
    assert any(p.startswith("recipe.api.chat_output (layer") for p in layer_violations(graph))


def test_the_check_fails_on_a_cycle_within_a_layer(copy):
    _plant(copy / "errors.py", "import recipe.jsonfmt as _j")  # jsonfmt already imports errors
    assert ["recipe.errors", "recipe.jsonfmt"] in find_cycles(import_graph(copy))


def test_the_check_sees_an_importlib_string(copy):
    _plant(copy / "prompt.py", 'import importlib\n_M = importlib.import_module("recipe.api.chat")')
    assert any(p.startswith("recipe.prompt (layer") for p in layer_violations(import_graph(copy)))


def test_an_undeclared_module_is_reported(copy):
    (copy / "stray.py").write_text("x = 1\n", encoding="utf-8")
    assert "recipe.stray: in no declared layer" in layer_violations(import_graph(copy))
