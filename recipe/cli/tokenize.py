"""``recipe tokenize``: token ids and pieces of plain text (special-token spellings stay text)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from recipe.cli.common import Usage, dump, tokenizer_from

__all__ = ["register"]


def _cmd_tokenize(ns: argparse.Namespace) -> int:
    if ns.text is None:
        raise Usage("give TEXT, or - to read it from standard input")
    text = sys.stdin.read() if ns.text == "-" else ns.text
    tok = tokenizer_from(ns.tokenizer)
    ids = tok.encode_ordinary(text)
    pieces = [tok.token_bytes(i).decode("utf-8", "replace") for i in ids]
    if ns.json:
        dump({"token_ids": ids, "pieces": pieces, "num_tokens": len(ids)})
        return 0
    from recipe.cli.view import print_tokens

    print_tokens(ids, pieces)
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``tokenize`` command to the ``recipe`` command's subparsers; returns its parser."""
    t = subparsers.add_parser("tokenize", help="ids and pieces of plain text (special spellings stay text)")
    t.add_argument("text", nargs="?", metavar="TEXT|-")
    t.add_argument("--json", action="store_true")
    t.add_argument("--tokenizer", metavar="PATH", default=argparse.SUPPRESS)
    t.set_defaults(run=_cmd_tokenize)
    return t
