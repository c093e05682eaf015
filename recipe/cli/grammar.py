"""``recipe grammar``: the output grammar of a request's next assistant turn.

    recipe grammar [FILE|-] [--example NAME] [--format lark|structural-tag|json] [--args auto|schema|syntax]
                   [--api auto|chat|responses|messages]

``lark`` (default) prints the llguidance Lark text, ``structural-tag`` the xgrammar structural-tag
JSON (vLLM ``structured_outputs.structural_tag``, SGLang ``structural_tag``), ``json`` one object
with every field of the grammar record (mode, starts_in, key, tool_names, stop_token_ids,
unenforced, lark, structural_tag). Exit status: 0 ok; 1 a rejected request (the API's error JSON on
stdout, a one-line reason on stderr) or unreadable input; 2 usage errors.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from recipe.cli.common import API_HELP, EXAMPLES, TOKENIZER_HELP, Failure, Rejected, dump, prepare_request, print_rejection, read_input, tokenizer_from

__all__ = ["register"]

FORMATS = ("lark", "structural-tag", "json")


def _cmd_grammar(ns: argparse.Namespace) -> int:
    from recipe.schema.constrain import output_grammar

    tok = tokenizer_from(getattr(ns, "tokenizer", None))
    raw = read_input(ns.file, ns.example)
    try:
        prep = prepare_request(raw, ns.api, tok)
    except Rejected as rej:
        return print_rejection(rej)
    try:
        g = output_grammar(prep, ns.args, tokenizer=tok)
    except ValueError as exc:
        raise Failure(str(exc)) from None
    if ns.format == "lark":
        sys.stdout.write(g.lark)
    elif ns.format == "structural-tag":
        sys.stdout.buffer.write(orjson.dumps(g.structural_tag_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        dump({
            "encoding": g.encoding, "mode": g.mode, "starts_in": g.starts_in, "args": g.args, "key": g.key,
            "tool_names": list(g.tool_names), "stop_token_ids": list(g.stop_token_ids),
            "unenforced": list(g.unenforced), "lark": g.lark, "structural_tag": g.structural_tag_dict(),
        })
    sys.stdout.flush()
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``grammar`` command to the ``recipe`` command's subparsers; returns its parser."""
    g = subparsers.add_parser("grammar", help="the output grammar of a request's next turn (Lark, structural tag)")
    g.add_argument("file", nargs="?", metavar="FILE", help="the request JSON (- for standard input)")
    g.add_argument("--example", choices=EXAMPLES, help="a shipped example request instead of FILE: %(choices)s")
    g.add_argument("--format", choices=FORMATS, default="lark", help="what to print (default: lark)")
    g.add_argument("--args", choices=("auto", "schema", "syntax"), default="auto",
                   help="tool arguments per JSON Schema, any well-formed ones, or schema for strict tools (auto)")
    g.add_argument("--api", choices=("auto", "chat", "responses", "messages"), default="auto", help=API_HELP)
    g.add_argument("--tokenizer", metavar="PATH", default=argparse.SUPPRESS, help=TOKENIZER_HELP)
    g.set_defaults(run=_cmd_grammar)
    return g
