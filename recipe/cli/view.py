"""Terminal views for the CLI: a prompt with its special tokens highlighted, and token pieces.

Styled output goes through rich. When standard output is not a terminal (a pipe, a file) and
nothing asks for colour (``FORCE_COLOR``, ``TTY_COMPATIBLE``), rich would write the bare text: the
views then write that same text themselves without importing rich (most of a short command's
start-up otherwise). A prompt with a tab keeps the rich path (rich expands tabs by cell width).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from recipe.prompt import Special

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["print_prompt", "print_tokens", "plain_output"]

#: What rich's ``Text`` drops from the text it prints: BEL, BS, VT, FF, CR (``rich.control``).
_RICH_STRIPS = dict.fromkeys((7, 8, 11, 12, 13))


def plain_output() -> bool:
    """True when rich would print standard output unstyled: not a terminal, and neither
    ``FORCE_COLOR`` nor ``TTY_COMPATIBLE`` set (rich's own switches; any value defers to rich)."""
    if "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ:
        return False
    try:
        return not sys.stdout.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream: rich says "not a terminal"
        return True


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def _summary(prep: Any, n_special: int, markup: bool) -> str:
    """The summary line: plain text, or rich markup (labels dim, the count bold, values escaped)."""
    fields = [("api", prep.api), ("model", prep.model), ("encoding", prep.encoding),
              ("thinking", prep.conversation.thinking), ("special tokens", n_special)]
    tokens = "no token ids" if prep.ids is None else f"tokens {len(prep.ids)}"
    if not markup:
        return "  ".join(f"{k} {v}" for k, v in fields) + f"  {tokens}"
    from rich.markup import escape

    return "  ".join(f"[dim]{k}[/] {escape(str(v))}" for k, v in fields) + f"  [bold]{tokens}[/]"


def print_prompt(prep: Any, console: Console | None = None) -> None:
    """Print ``prep.prompt`` with special tokens highlighted, then a summary line with the token count
    (or, when the vocabulary lacks one of the template's special tokens, why there is none)."""
    segments = prep.prompt.segments
    n_special = sum(1 for s in segments if type(s) is Special)
    note = f"no token ids: {prep.token_ids_note}" if prep.ids is None else None
    if console is None and plain_output() and not any("\t" in s.text for s in segments):
        summary = _summary(prep, n_special, markup=False)
        text = "".join(s.text for s in segments).translate(_RICH_STRIPS)
        out = f"{text}\n\n{summary}\n" + (f"{note.translate(_RICH_STRIPS)}\n" if note else "")
        sys.stdout.write(out)
        return
    from rich.text import Text as RichText

    console = console or _console()
    out_text = RichText()
    for seg in segments:
        out_text.append(seg.text, style="bold magenta" if type(seg) is Special else None)
    console.print(out_text)
    console.print("\n" + _summary(prep, n_special, markup=True))
    if note:
        console.print(RichText(note, style="yellow"))


def print_tokens(ids: Sequence[int], pieces: Sequence[str], console: Console | None = None) -> None:
    """Print each token as ``piece[id]`` with alternating colours, then the token count; ``pieces``
    are the display forms (:func:`recipe.cli.tokenize.piece_view`), printed as given."""
    if console is None and plain_output() and not any("\t" in p for p in pieces):
        line = "".join(f"{piece}[{i}] " for i, piece in zip(ids, pieces)).translate(_RICH_STRIPS)
        sys.stdout.write(f"{line}\ntokens {len(ids)}\n")
        return
    from rich.text import Text as RichText

    console = console or _console()
    out = RichText()
    for k, (i, piece) in enumerate(zip(ids, pieces)):
        out.append(piece, style="cyan" if k % 2 else "green")
        out.append(f"[{i}] ", style="dim")
    console.print(out)
    console.print(f"[bold]tokens {len(ids)}[/]")
