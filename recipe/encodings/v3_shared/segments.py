"""The segment accumulator the pre-V4 template emulations write into, and their error type.

A template emulation calls :meth:`Out.special` for a special token the template writes,
:meth:`Out.lit` for fixed template text, and :meth:`Out.text` for anything taken from the
messages (content, reasoning, names, arguments, results, schemas), which is always a
:class:`~recipe.prompt.Text` segment: a user who types ``<｜User｜>`` cannot forge a turn.
:meth:`Out.content` additionally remembers where a message's content ends, which is where
transformers' ``continue_final_message`` cuts the prompt (:meth:`Out.prompt`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recipe.prompt import Prompt, Segment, Special, Text

__all__ = ["ChatTemplateError", "Out", "require_str"]


class ChatTemplateError(ValueError):
    """The template (or reference encoder) refuses these messages: the published template would raise
    here too (a ``None`` it concatenates, a missing key, arguments that are not a string …), or the
    call is inconsistent (``continue_final_message`` with nothing to continue)."""


def require_str(value: Any, what: str, template: str) -> str:
    """``value`` if it is a ``str``; else :class:`ChatTemplateError` (jinja's ``+`` raises on it)."""
    if type(value) is str or isinstance(value, str):
        return value
    kind = "missing" if value is _MISSING else f"{type(value).__name__}, not a string"
    raise ChatTemplateError(f"{template} template: {what} is {kind} (the template concatenates it and raises)")


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


#: A key the message does not have (jinja's Undefined: ``is none`` is false, ``+`` raises).
_MISSING: Any = _Missing()


class Out:
    """Segments of one rendering, with message starts and content ends.

    Attributes:
        segs: the segments so far.
        starts: ``(message index, segment index)`` where each message's rendering begins.
        content_ends: message index -> segment count right after that message's content.
    """

    __slots__ = ("segs", "starts", "content_ends")

    MISSING = _MISSING

    def __init__(self) -> None:
        self.segs: list[Segment] = []
        self.starts: list[tuple[int, int]] = []
        self.content_ends: dict[int, int] = {}

    def special(self, spelling: str) -> None:
        """A special token the template writes."""
        self.segs.append(Special(spelling))

    def lit(self, literal: str) -> None:
        """Fixed template text (no special-token spelling inside)."""
        if literal:
            self.segs.append(Text(literal))

    def text(self, value: str) -> None:
        """Text taken from the messages (never special)."""
        if value:
            self.segs.append(Text(value))

    def content(self, index: int, value: str) -> None:
        """Message ``index``'s content text; remembers where it ends."""
        if value:
            self.segs.append(Text(value))
        self.content_ends[index] = len(self.segs)

    def mark(self, index: int) -> None:
        """Message ``index`` begins here."""
        self.starts.append((index, len(self.segs)))

    def prompt(self, continue_final: int | None = None, final_content: Any = None) -> Prompt:
        """The :class:`~recipe.prompt.Prompt`; with ``continue_final`` (a message index) cut right after
        that message's content, as transformers' ``continue_final_message`` does: the final message
        must have a string ``final_content`` whose stripped text appears in the rendered prompt, and
        the template must have written it (its content end is the cut).

        Raises:
            ChatTemplateError: ``continue_final`` is set and one of those conditions fails.
        """
        segs = self.segs
        starts = self.starts
        if continue_final is not None:
            if final_content is None or final_content is _MISSING:
                raise ChatTemplateError('continue_final_message is set but the final message has no "content" to continue')
            if not isinstance(final_content, str):
                raise ChatTemplateError("continue_final_message is set but the final message's content is not a string")
            end = self.content_ends.get(continue_final)
            if end is None or final_content.strip() not in "".join(seg.text for seg in segs):
                raise ChatTemplateError(
                    "continue_final_message is set but the final message does not appear in the prompt")
            segs = segs[:end]
            starts = [(m, s) for m, s in starts if s < end or (m == continue_final and s <= end)]
        return Prompt(tuple(segs), tuple(starts))

    def finish(self, messages: Sequence[Any], continue_final_message: bool, offset: int = 0) -> Prompt:
        """:meth:`prompt` for a rendering of ``messages`` (indices shifted by ``offset``), cut after the
        last message's content when ``continue_final_message``."""
        if not continue_final_message:
            return self.prompt()
        if not messages:
            raise ChatTemplateError("continue_final_message is set but the conversation is empty")
        last = messages[-1]
        return self.prompt(offset + len(messages) - 1, last.get("content") if isinstance(last, Mapping) else None)
