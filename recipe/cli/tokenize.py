"""``recipe tokenize``: token ids and pieces of plain text (special-token spellings stay text).

Each piece is shown as text when its bytes are whole UTF-8, else as its escaped bytes (``b'\\xf0\\x9f'``:
a byte-level BPE piece may hold part of a character); ``--json`` adds each piece's bytes in hex.
The text (an argument, or ``-`` for standard input) must be UTF-8: invalid bytes are refused with
their offset, never replaced (the rule ``complete --text`` follows too).
"""

from __future__ import annotations

import argparse
from typing import Any

from recipe.cli.common import TOKENIZER_HELP, Usage, dump, read_text, tokenizer_from

__all__ = ["register", "piece_view"]


def piece_view(data: bytes) -> str:
    """How the terminal shows one token's bytes: ``'hé'`` (Python string repr) when they are whole
    UTF-8, ``b' \\xf0\\x9f\\x98'`` (bytes repr) when they are a fragment of a character."""
    try:
        return repr(data.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(data)


def _cmd_tokenize(ns: argparse.Namespace) -> int:
    if ns.text is None:
        raise Usage("give TEXT, or - to read it from standard input")
    text = read_text("-") if ns.text == "-" else ns.text
    tok = tokenizer_from(ns.tokenizer, ns.model)
    ids = tok.encode_ordinary(text)
    raw = [tok.token_bytes(i) for i in ids]
    if ns.json:
        dump({
            "token_ids": ids,
            "pieces": [b.decode("utf-8", "replace") for b in raw],
            "bytes": [b.hex() for b in raw],
            "num_tokens": len(ids),
        })
        return 0
    from recipe.cli.view import print_tokens

    print_tokens(ids, [piece_view(b) for b in raw])
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``tokenize`` command to the ``recipe`` command's subparsers; returns its parser."""
    t = subparsers.add_parser("tokenize", help="ids and pieces of plain text (special spellings stay text)")
    t.add_argument("text", nargs="?", metavar="TEXT|-", help="the text (UTF-8), or - to read standard input")
    t.add_argument("--json", action="store_true",
                   help="one JSON object: token_ids, pieces (text; U+FFFD for part of a character), bytes (hex), num_tokens")
    t.add_argument("--tokenizer", metavar="PATH", default=argparse.SUPPRESS, help=TOKENIZER_HELP)
    t.add_argument("--model", metavar="NAME", help="use the vocabulary of this model's family (default: DeepSeek-V4's)")
    t.set_defaults(run=_cmd_tokenize)
    return t
