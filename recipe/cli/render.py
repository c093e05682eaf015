"""``recipe render``: a request's prompt with special tokens highlighted and its token count, or
with ``--json`` one object (``api``, ``model``, ``encoding``, ``prompt``, ``special_ranges``,
``image_sources``, ``token_ids``, ``num_tokens``, ``conversion``). When the vocabulary lacks a
special token the model's template emits (DeepSeek-V4.1 with the embedded DeepSeek-V4 vocabulary),
the prompt is shown without ids: ``token_ids`` and ``num_tokens`` are null and ``note`` says why.
"""

from __future__ import annotations

import argparse
from typing import Any

from recipe.cli.common import API_HELP, TOKENIZER_HELP, EXAMPLES, Rejected, Usage, dump, prepare_request, print_rejection, read_input, tokenizer_from

__all__ = ["register"]


def _cmd_render(ns: argparse.Namespace) -> int:
    if ns.file is not None and ns.example is not None:
        raise Usage("give either FILE or --example, not both")
    raw = read_input(ns.file, ns.example)
    api = "chat" if ns.example is not None and ns.api == "auto" else ns.api  # the examples are Chat requests
    try:
        prep = prepare_request(raw, api, tokenizer_from(ns.tokenizer) if ns.tokenizer else None, model=ns.model)
    except Rejected as rej:
        return print_rejection(rej, body=ns.json)
    if ns.json:
        out = {
            "api": prep.api,
            "model": prep.model,
            "encoding": prep.encoding,
            "prompt": prep.prompt.text,
            "special_ranges": prep.prompt.special_ranges,
            "image_sources": [{"kind": s.kind, "url": s.url, "detail": s.detail, "path": s.path} for s in prep.image_sources],
            "token_ids": prep.ids,
            "num_tokens": None if prep.ids is None else len(prep.ids),
            "conversion": prep.conversion(),
        }
        if prep.ids is None:
            out["note"] = prep.token_ids_note
        dump(out)
        return 0
    from recipe.cli.view import print_prompt

    print_prompt(prep)
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``render`` command to the ``recipe`` command's subparsers; returns its parser."""
    r = subparsers.add_parser("render", help="a request's prompt and token ids")
    r.add_argument("file", nargs="?", metavar="FILE|-", help="request JSON file, or - for standard input")
    r.add_argument("--example", choices=EXAMPLES, help="render a shipped example request instead of FILE: %(choices)s")
    r.add_argument("--api", choices=("auto", "chat", "responses", "messages"), default="auto", help=API_HELP)
    r.add_argument("--model", help="override the request's model name")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--tokenizer", metavar="PATH", default=argparse.SUPPRESS, help=TOKENIZER_HELP)
    r.set_defaults(run=_cmd_render)
    return r
