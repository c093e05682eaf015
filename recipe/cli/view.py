"""Terminal views for the CLI: a prompt with its special tokens highlighted, and token pieces (rich)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.text import Text as RichText

from recipe.prompt import Special

__all__ = ["print_prompt", "print_tokens"]


def print_prompt(prep: Any, console: Console | None = None) -> None:
    """Print ``prep.prompt`` with special tokens highlighted, then a summary line with the token count
    (or, when the vocabulary lacks one of the template's special tokens, why there is none)."""
    console = console or Console(highlight=False, soft_wrap=True)
    out = RichText()
    for seg in prep.prompt.segments:
        out.append(seg.text, style="bold magenta" if type(seg) is Special else None)
    console.print(out)
    n_special = sum(1 for s in prep.prompt.segments if type(s) is Special)
    tokens = "[bold]no token ids[/]" if prep.ids is None else f"[bold]tokens {len(prep.ids)}[/]"
    console.print(
        f"\n[dim]api[/] {prep.api}  [dim]model[/] {prep.model}  [dim]encoding[/] {prep.encoding}  "
        f"[dim]thinking[/] {prep.conversation.thinking}  [dim]special tokens[/] {n_special}  {tokens}"
    )
    if prep.ids is None:
        console.print(RichText(f"no token ids: {prep.token_ids_note}", style="yellow"))


def print_tokens(ids: Sequence[int], pieces: Sequence[str], console: Console | None = None) -> None:
    """Print each token as ``piece[id]`` with alternating colours, then the token count; ``pieces``
    are the display forms (:func:`recipe.cli.tokenize.piece_view`), printed as given."""
    console = console or Console(highlight=False, soft_wrap=True)
    out = RichText()
    for k, (i, piece) in enumerate(zip(ids, pieces)):
        out.append(piece, style="cyan" if k % 2 else "green")
        out.append(f"[{i}] ", style="dim")
    console.print(out)
    console.print(f"[bold]tokens {len(ids)}[/]")
