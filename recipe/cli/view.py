"""Terminal views for the CLI: a prompt with its special tokens highlighted, and token pieces.

Output goes through rich (imported on first use): styled on a terminal, the bare text to a pipe or a
file (rich's own rules, ``FORCE_COLOR`` / ``TTY_COMPATIBLE`` / ``NO_COLOR`` included).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from recipe.prompt import Special

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["print_prompt", "print_tokens"]


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def _summary(prep: Any, n_special: int) -> str:
    """The summary line in rich markup: labels dim, the token count bold, values escaped."""
    from rich.markup import escape

    fields = [("api", prep.api), ("model", prep.model), ("encoding", prep.encoding),
              ("thinking", prep.conversation.thinking), ("special tokens", n_special)]
    tokens = "no token ids" if prep.ids is None else f"tokens {len(prep.ids)}"
    return "  ".join(f"[dim]{k}[/] {escape(str(v))}" for k, v in fields) + f"  [bold]{tokens}[/]"


def print_prompt(prep: Any, console: Console | None = None) -> None:
    """Print ``prep.prompt`` with special tokens highlighted, then a summary line with the token count
    (or, when the vocabulary lacks one of the template's special tokens, why there is none).

    Args:
        prep: a :class:`~recipe.api.prepared.PreparedRequest` (or anything with its ``prompt``,
            ``api``, ``model``, ``encoding``, ``conversation.thinking``, ``ids``, ``token_ids_note``).
        console: where to print; a new rich console on standard output when None.
    """
    from rich.text import Text as RichText

    segments = prep.prompt.segments
    console = console or _console()
    out_text = RichText()
    for seg in segments:
        out_text.append(seg.text, style="bold magenta" if type(seg) is Special else None)
    console.print(out_text)
    console.print("\n" + _summary(prep, sum(1 for s in segments if type(s) is Special)))
    if prep.ids is None:
        console.print(RichText(f"no token ids: {prep.token_ids_note}", style="yellow"))


def print_tokens(ids: Sequence[int], pieces: Sequence[str], console: Console | None = None) -> None:
    """Print each token as ``piece[id]`` with alternating colours, then the token count.

    Args:
        ids: the token ids.
        pieces: their display forms (:func:`recipe.cli.tokenize.piece_view`), printed as given.
        console: where to print; a new rich console on standard output when None.
    """
    from rich.text import Text as RichText

    console = console or _console()
    out = RichText()
    for k, (i, piece) in enumerate(zip(ids, pieces)):
        out.append(piece, style="cyan" if k % 2 else "green")
        out.append(f"[{i}] ", style="dim")
    console.print(out)
    console.print(f"[bold]tokens {len(ids)}[/]")
