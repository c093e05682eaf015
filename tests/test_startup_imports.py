"""What a short command imports (issue 10, start-up): structural checks on ``sys.modules`` in a
fresh process, not timings. ``recipe render`` of a Chat request for DeepSeek-V4 loads its own
API's wire models, its own family and its own subcommand — nothing of the other APIs, families,
subcommands, the output path, the schema rules it does not need, or rich for ``--json`` output.
The encoding table knows every model without importing a family."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from recipe.encodings import table

FAMILIES = [f.package for f in table.FAMILIES]
SHARED = ["recipe.encodings.v3_shared", "recipe.encodings.chat_template"]
WIRE = {"chat": "recipe.api.chat_wire", "responses": "recipe.api.responses_wire", "messages": "recipe.api.messages_wire"}
ADAPTER = {"chat": "recipe.api.chat", "responses": "recipe.api.responses", "messages": "recipe.api.messages"}
NOT_FOR_A_RENDER = [
    "recipe.output.driver", "recipe.api.chat_output", "recipe.api.responses_output", "recipe.api.messages_output",
    "recipe.encodings.deepseek_v4.output", "recipe.encodings.deepseek_v4.reference", "recipe.encodings.deepseek_v4.grammar",
    "recipe.schema.strict", "recipe.schema.constrain", "recipe.schema.validation", "recipe.schema.turn",
    "recipe.cache", "recipe.store", "recipe.serve",
    "recipe.cli.tokenize", "recipe.cli.complete", "recipe.cli.grammar", "recipe.cli.cache", "recipe.cli.serve",
    "jsonschema",
]

# runs the command in this process as the console script would, then reports what was imported
_RUN = """
import contextlib, io, json, sys
from recipe.cli.main import main
sys.stdout = io.TextIOWrapper(io.BytesIO())  # a pipe, not a terminal
with contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[1:])
sys.__stdout__.write(json.dumps([code, sorted(sys.modules)]) + chr(10))
"""


def _modules(*argv: str, code: str = _RUN) -> tuple[int, set[str]]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    status, modules = json.loads(proc.stdout.splitlines()[-1])
    return status, set(modules)


def _loaded(modules: set[str], names: list[str]) -> list[str]:
    """The names in ``names`` that are loaded, a package counting when any module of it is."""
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


def test_render_of_a_chat_request_loads_only_its_api_family_and_command():
    status, modules = _modules("render", "--example", "hello")
    assert status == 0
    # what it needs is there (the check itself sees imports) ...
    assert {"recipe.cli.render", "recipe.api.chat_wire", "recipe.encodings.deepseek_v4", "pydantic"} <= modules
    # ... and nothing else
    others = [p for p in FAMILIES if p != "recipe.encodings.deepseek_v4"] + SHARED
    assert _loaded(modules, others) == []
    assert _loaded(modules, [WIRE["responses"], WIRE["messages"], ADAPTER["responses"], ADAPTER["messages"]]) == []
    assert _loaded(modules, NOT_FOR_A_RENDER) == []


@pytest.mark.parametrize("api, body", [
    ("responses", {"model": "deepseek-v4-pro", "input": "Hi"}),
    ("messages", {"model": "deepseek-v4-pro", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}),
])
def test_each_api_loads_only_its_own_wire_models(tmp_path, api, body):
    path = tmp_path / "req.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    status, modules = _modules("render", str(path), "--api", api, "--json")
    assert status == 0 and WIRE[api] in modules and ADAPTER[api] in modules
    assert _loaded(modules, ["rich"]) == []  # JSON output is not a styled view
    assert _loaded(modules, [w for a, w in WIRE.items() if a != api]) == []


@pytest.mark.parametrize("model, family, uses", [
    ("deepseek-v3", "deepseek_v3", []),
    ("deepseek-v3.1", "deepseek_v3_1", ["deepseek_v3"]),  # so is V3.1's (its header and thinking cut)
    ("deepseek-r1", "deepseek_r1", ["deepseek_v3"]),  # R1's template is built on V3's
    ("deepseek-v4.1-flash", "deepseek_v41", ["deepseek_v4"]),  # V4.1 reuses V4's parser factory and constants
])
def test_a_request_imports_the_family_its_model_names(tmp_path, model, family, uses):
    path = tmp_path / "req.json"
    path.write_text(json.dumps({"model": model, "messages": [{"role": "user", "content": "Hi"}]}), encoding="utf-8")
    status, modules = _modules("render", str(path), "--api", "chat", "--json")
    assert status == 0 and f"recipe.encodings.{family}" in modules
    allowed = {f"recipe.encodings.{name}" for name in [family, *uses]}
    assert _loaded(modules, [p for p in FAMILIES if p not in allowed]) == []


_TABLE = """
import json, sys
from recipe.encodings.table import ENCODINGS, MODELS, get_encoding
from recipe.options import DEFAULT_OPTIONS
before = sorted(m for m in sys.modules if m.startswith("recipe.encodings."))
names = list(ENCODINGS)
model_count = len(MODELS), len(DEFAULT_OPTIONS.models)
record = get_encoding("deepseek_v3_1")
after = sorted(m for m in sys.modules if m.startswith("recipe.encodings."))
print(json.dumps([before, names, model_count, record.name, after]))
"""


def test_the_table_knows_every_model_without_importing_a_family():
    proc = subprocess.run([sys.executable, "-c", _TABLE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    before, names, (n_models, n_default), name, after = json.loads(proc.stdout)
    assert before == ["recipe.encodings.base", "recipe.encodings.table"] or before == ["recipe.encodings.table"]
    assert names == [f.name for f in table.FAMILIES] and n_models == n_default == len(table.MODELS) > 30
    assert name == "deepseek_v3_1"
    assert "recipe.encodings.deepseek_v3_1" in after
    # V3.1's template reuses pieces of V3's
    uses = {"recipe.encodings.deepseek_v3_1", "recipe.encodings.deepseek_v3"}
    assert _loaded(set(after), [p for p in FAMILIES if p not in uses]) == []


def test_each_row_matches_its_family_record():
    import importlib

    for row in table.FAMILIES:
        record = importlib.import_module(row.package).ENCODING
        assert (record.name, record.models) == (row.name, row.models)
        assert table.get_encoding(row.name) is record and table.ENCODINGS[row.name] is record
    assert dict(table.MODELS) == {m: e.name for e in table.ENCODINGS.values() for m in e.models}


def test_every_family_package_has_a_row():
    from pathlib import Path

    root = Path(table.__file__).parent
    packages = {p.parent.name for p in root.glob("*/__init__.py")} - {"v3_shared"}
    assert packages == {row.name for row in table.FAMILIES}


def test_an_unknown_encoding_is_a_key_error_naming_the_known_ones():
    with pytest.raises(KeyError, match="unknown encoding 'gpt'; known: deepseek_v4, deepseek_v41"):
        table.get_encoding("gpt")
    assert "gpt" not in table.ENCODINGS and table.ENCODINGS.get("gpt") is None


def test_the_parser_adds_the_named_command_or_all_of_them(capsys):
    from recipe.cli.main import COMMANDS, build_parser, main

    def commands(parser):
        sub = next(a for a in parser._actions if a.dest == "command")
        return list(sub.choices)

    assert commands(build_parser(["render", "--example", "hello"])) == ["render"]
    assert commands(build_parser(["--tokenizer", "t.json", "cache", "keys", "f.json"])) == ["cache"]
    assert commands(build_parser([])) == commands(build_parser()) == list(COMMANDS)  # help lists every command
    assert main(["rendr"]) == 2
    assert "invalid choice: 'rendr' (choose from 'render', 'tokenize', 'complete', 'grammar', 'cache', 'serve', 'models')" in capsys.readouterr().err
