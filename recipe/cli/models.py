"""``recipe models``: the model names requests may use (the default model table and aliases), the
family each maps to and its thinking default; ``--json`` prints them as one object. The same names
``GET /v1/models`` lists on ``recipe serve`` (with its ``--alias`` names too)."""

from __future__ import annotations

import argparse
from typing import Any

from recipe.cli.common import dump

__all__ = ["register", "model_rows"]


def model_rows() -> list[dict[str, Any]]:
    """One row per accepted model name, in byte order: ``name``, ``family`` (the encoding's package
    name), ``alias_of`` (the target model, aliases only) and ``thinking`` (the alias's thinking default:
    true / false, None for the table's default)."""
    from recipe.options import DEFAULT_OPTIONS

    opts = DEFAULT_OPTIONS
    rows: list[dict[str, Any]] = []
    for name in sorted({*opts.models, *opts.aliases}):
        alias = opts.aliases.get(name)
        if name in opts.models or alias is None:
            rows.append({"name": name, "family": opts.models[name], "alias_of": None, "thinking": None})
        else:
            rows.append({"name": name, "family": opts.models.get(alias.target), "alias_of": alias.target,
                         "thinking": alias.thinking})
    return rows


def _cmd_models(ns: argparse.Namespace) -> int:
    rows = model_rows()
    if ns.json:
        dump({"models": rows})
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        extra = ""
        if r["alias_of"]:
            mode = {True: ", thinking", False: ", no thinking", None: ""}[r["thinking"]]
            extra = f"  (alias of {r['alias_of']}{mode})"
        print(f"{r['name']:<{width}}  {r['family']}{extra}")
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``models`` command to the ``recipe`` command's subparsers; returns its parser."""
    m = subparsers.add_parser("models", help="the model names a request may use, and their families")
    m.add_argument("--json", action="store_true", help="print one JSON object")
    m.set_defaults(run=_cmd_models)
    return m
