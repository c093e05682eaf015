"""Plumbing shared by the parts of the DeepSeek-V4 output parser (:mod:`.output`).

* The parser's states. Each has one handler ``(text, index, base) -> next index | None``
  (None: everything was consumed or held back); :data:`SWITCH` asks the driver to continue on
  the text the handler put in ``_resume``, from index ``_resume_at`` (0 unless set).
* :func:`coalesce`: a push's event list with adjacent deltas of one kind merged, so a push
  returns at most one delta per kind in a row.
"""

from __future__ import annotations

import operator
from itertools import islice

from recipe.output.events import (
    OutputEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallArgumentsDelta,
)

__all__ = ["BLOCK", "CONTENT", "DONE", "HOLD", "INVOKE", "RBLOCK", "REASONING", "RECOVER", "SWITCH", "VALUE", "coalesce"]

#: states: reasoning (before ``</think>``), content, inside a tool-call block, inside an invoke,
#: inside a parameter value, holding a possibly corrupted DSML call, holding exact markup until it
#: is known to be a valid call (:mod:`.output_hold`), holding a tool-call block written in the
#: reasoning (:mod:`.output_reasoning`), ended (Finish emitted).
REASONING, CONTENT, BLOCK, INVOKE, VALUE, RECOVER, HOLD, RBLOCK, DONE = range(9)
#: a handler's return value asking the driver to continue on ``_resume`` from ``_resume_at`` (with
#: ``_resume_base`` as the position of its first character when that is set).
SWITCH = -1


def coalesce(events: list[OutputEvent]) -> list[OutputEvent]:
    """Merge adjacent deltas of the same kind (and call index) into one event."""
    types = list(map(type, events))
    if not any(map(operator.is_, types, islice(types, 1, None))):
        return events  # no two neighbours of the same type: nothing to merge
    merged: list[OutputEvent] = []
    prev = None
    buf: list[str] = []
    for ev in events:
        t = type(ev)
        if t is TextDelta or t is ReasoningDelta or t is ToolCallArgumentsDelta:
            if prev is not None and type(prev) is t and (t is not ToolCallArgumentsDelta or prev.index == ev.index):
                buf.append(ev.text)
                continue
            _flush_merge(merged, prev, buf)
            prev = ev
            buf = [ev.text]
        else:
            _flush_merge(merged, prev, buf)
            prev = None
            buf = []
            merged.append(ev)
    _flush_merge(merged, prev, buf)
    return merged


def _flush_merge(merged: list[OutputEvent], prev: OutputEvent | None, buf: list[str]) -> None:
    if prev is None:
        return
    if len(buf) == 1:
        merged.append(prev)
    elif type(prev) is ToolCallArgumentsDelta:
        merged.append(ToolCallArgumentsDelta(prev.index, "".join(buf)))
    else:
        merged.append(type(prev)("".join(buf)))
