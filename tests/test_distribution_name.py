"""The distribution is not called ``recipe``: that PyPI name belongs to an unrelated project (which also
installs a top-level ``recipe`` module), so every install hint names this project's distribution and one
of its extras (README, "The name")."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
#: ``pip install 'NAME[EXTRA]'`` (quoted or not) as written in a hint
HINT = re.compile(r"pip install -?e? ?['\"]?([A-Za-z0-9_.-]+)\[([a-z,]+)\]")


def _sources() -> list[Path]:
    return [*ROOT.joinpath("recipe").rglob("*.py"), ROOT / "README.md", *ROOT.joinpath("docs").glob("*.md"),
            *ROOT.joinpath("bench").glob("*.py"), *ROOT.joinpath("tests").glob("*.py")]


def test_the_distribution_is_not_pypis_recipe():
    assert PROJECT["name"] == "dsrecipe"
    assert (ROOT / "recipe" / "__init__.py").is_file()  # the import name stays recipe
    assert PROJECT["scripts"]["recipe"].startswith("recipe.")


def test_every_install_hint_names_this_distribution_and_a_real_extra():
    hints = []
    for path in _sources():
        for m in HINT.finditer(path.read_text(encoding="utf-8")):
            name, extras = m.groups()
            hints.append((path.name, name))
            assert name in (PROJECT["name"], "."), f"{path}: {m.group(0)}"
            assert set(extras.split(",")) <= set(PROJECT["optional-dependencies"]), f"{path}: {m.group(0)}"
    assert ("constrain.py", PROJECT["name"]) in hints and ("README.md", PROJECT["name"]) in hints


def test_the_error_hints_name_the_extras_package_too():
    """A hint must work before the distribution is on an index: it also names the one package the extra adds."""
    deps = {k: v[0] for k, v in PROJECT["optional-dependencies"].items()}
    for rel, extra in [("recipe/schema/constrain.py", "constrain"), ("recipe/cache/index.py", "redis"),
                       ("recipe/store/redis_store.py", "redis")]:
        text = (ROOT / rel).read_text(encoding="utf-8")
        assert f"pip install '{PROJECT['name']}[{extra}]' (or '{deps[extra]}')" in text, rel
