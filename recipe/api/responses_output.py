"""OpenAI Responses output: output events → ``response.*`` stream events and the ``response`` object.

Shapes follow deepseek-recipe 0.2.0 (the parity target, behaviour map §3.4/§3.9) and what the
official ``openai`` SDK's ``ResponseStreamState`` accepts (api-wire-formats §3.2–3.4, §7); the rules
are tabled in docs/streaming.md, "OpenAI Responses":

* lifecycle: ``response.created`` and ``response.in_progress`` (status ``in_progress``, ``output: []``,
  ``usage: null``), then the output items, then ``response.completed`` (backend ``stop``) or
  ``response.incomplete`` (``length`` → ``incomplete_details.reason = "max_output_tokens"``,
  ``content_filter`` → ``"content_filter"``, another backend reason → ``null`` and the note
  ``incomplete_reason: …``) carrying the full ``output`` and ``usage``
  (``input_tokens_details.cache_write_tokens`` 0, as the SDK's strict model requires);
* one output item per run of the same kind, opened when its first event arrives and closed when the
  next item opens or the output ends (so the last item's status follows the finish):

  - reasoning ``rs_<respid>_<idx>``: ``content_part.added`` (``reasoning_text``),
    ``reasoning_text.delta``…, then ``reasoning_text.done``, ``content_part.done``; ``summary`` is
    always ``[]`` (no summaries are generated: ``reasoning.summary`` is echoed and ignored),
    ``encrypted_content`` is the opaque ``<respid>-<idx>``;
  - message ``msg_<respid>_<idx>``: ``phase`` ``final_answer`` when added, ``commentary`` at its
    ``output_item.done`` when a tool call follows; ``output_text.delta``… (with ``logprobs``);
  - function call ``fc_<respid>_<idx>``: ``function_call_arguments.delta``…, ``.done``; a call to a
    namespace tool is reported as ``name`` + ``namespace`` (``fs__read`` → ``read`` in ``fs``);
  - the custom ``apply_patch`` tool: ``custom_tool_call`` ``ctc_<respid>_<idx>`` with ``input`` (the
    ``input`` argument's string; other argument shapes are sent as their JSON text);
* ``sequence_number`` counts every event from 0; SSE frames carry an ``event:`` line; no ``[DONE]``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from recipe.jsonfmt import copy_json, dumps_wire

from recipe.api.apply_patch import APPLY_PATCH_NAME
from recipe.api.chat_output import _lp  # the same log-probability entry shape as Chat
from recipe.api.responses import namespace_tool_map
from recipe.encodings.table import get_encoding
from recipe.api.responses_wire import (
    CustomTool,
    FormatJsonObject,
    FormatJsonSchema,
    FunctionTool,
    IgnoredTool,
    NamedChoice,
    NamespaceTool,
    WebSearchChoice,
    WebSearchTool,
)
from recipe.cache.usage import PromptUsage
from recipe.output import events as evt

from recipe.api.encoder import HOLE, frame_template

if TYPE_CHECKING:
    from recipe.api.encoder import ChannelLogprobs, ResponseMeta, TokenLogprob
    from recipe.api.prepared import PreparedRequest

__all__ = ["FINISH_STATUS", "ResponsesEncoder", "custom_tool_input", "response_echo", "response_status"]

#: backend finish reason -> (response status, ``incomplete_details.reason``). Other reasons give
#: ``("incomplete", None)`` and the note ``incomplete_reason: <reason>`` (the SDK's model allows only
#: its own reasons there).
FINISH_STATUS: dict[str, tuple[str, str | None]] = {
    "stop": ("completed", None),
    "length": ("incomplete", "max_output_tokens"),
    "content_filter": ("incomplete", "content_filter"),
}

#: Hosted tools echoed with these fields (as null when the request model does not keep them);
#: other ignored hosted tools (file_search, mcp, web_search_preview, …) are not echoed.
_ECHOED_HOSTED = {"tool_search": ("execution", "description", "parameters")}
_LOCATION_KEYS = ("city", "country", "region", "timezone")


def response_status(reason: str) -> tuple[str, str | None]:
    """(status, incomplete reason) for a backend finish ``reason`` (table :data:`FINISH_STATUS`;
    another reason: incomplete, reason None)."""
    return FINISH_STATUS.get(reason, ("incomplete", None))


def custom_tool_input(arguments: str) -> str:
    """The ``input`` of a ``custom_tool_call`` from the call's argument JSON text: the string value
    when the arguments are exactly ``{"input": "<string>"}``, else the JSON text unchanged."""
    try:
        obj = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(obj, dict) and len(obj) == 1 and isinstance(obj.get("input"), str):
        return obj["input"]
    return arguments


# --------------------------------------------------------------------------- request echo


def _function_echo(t: FunctionTool) -> dict[str, Any]:
    return {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": t.strict}


def _tool_echo(t: Any) -> dict[str, Any] | None:
    if isinstance(t, FunctionTool):
        return _function_echo(t)
    if isinstance(t, CustomTool):
        return {"type": "custom", "name": t.name}
    if isinstance(t, NamespaceTool):
        inner = [_function_echo(x) if isinstance(x, FunctionTool) else {"type": "custom", "name": x.name} for x in t.tools]
        # (the SDK's NamespaceTool requires a string description: "" when the request gave none)
        return {"type": "namespace", "name": t.name, "description": t.description or "", "tools": inner}
    if isinstance(t, WebSearchTool):
        loc = t.user_location
        if isinstance(loc, dict):
            loc = {k: loc.get(k) for k in _LOCATION_KEYS}
        return {"type": t.type, "search_context_size": t.search_context_size, "user_location": loc}
    if isinstance(t, IgnoredTool) and t.type in _ECHOED_HOSTED:
        return {"type": t.type, **{k: None for k in _ECHOED_HOSTED[t.type]}}
    return None


def _format_echo(fmt: Any) -> dict[str, Any]:
    if isinstance(fmt, FormatJsonSchema):
        return {"type": "json_schema", "name": fmt.name, "schema": fmt.schema_, "description": fmt.description, "strict": fmt.strict}
    if isinstance(fmt, FormatJsonObject):
        return {"type": "json_object"}
    return {"type": "text"}


def _choice_echo(choice: Any) -> Any:
    if choice is None:
        return "auto"
    if isinstance(choice, NamedChoice):
        return {"type": choice.type, "name": choice.name}
    if isinstance(choice, WebSearchChoice):
        return "auto"  # what it does; the SDK's models have no web_search tool choice
    return choice


def response_echo(req: Any) -> dict[str, Any]:
    """The request settings a ``response`` object repeats (behaviour map §3.4 "Response object").

    Taken from the request: ``instructions``, ``max_output_tokens``, ``reasoning`` (``effort``,
    ``summary`` or else ``generate_summary``), ``temperature`` (default 1.0), ``text`` (``format``
    with json_schema's ``description``/``strict``, ``verbosity``), ``tool_choice`` (default
    ``auto``), ``tools`` as declared (namespace tools nested; web search with its
    ``search_context_size`` and ``user_location`` city/country/region/timezone; file_search, mcp and
    other dropped hosted tools omitted), ``top_logprobs`` (default 0), ``top_p`` (default 1.0),
    ``user``. Returns a fresh JSON-ready dict keyed by those names.
    """
    r = req.reasoning
    text = req.text
    return {
        "instructions": req.instructions,
        "max_output_tokens": req.max_output_tokens,
        "reasoning": {
            "effort": r.effort if r is not None else None,
            "summary": (r.summary if r.summary is not None else r.generate_summary) if r is not None else None,
        },
        "temperature": 1.0 if req.temperature is None else float(req.temperature),
        "text": {
            "format": _format_echo(text.format if text is not None else None),
            "verbosity": text.verbosity if text is not None else None,
        },
        "tool_choice": _choice_echo(req.tool_choice),
        "tools": [e for e in (_tool_echo(t) for t in req.tools or ()) if e is not None],
        "top_logprobs": req.top_logprobs or 0,
        "top_p": 1.0 if req.top_p is None else float(req.top_p),
        "user": req.user,
    }


# --------------------------------------------------------------------------- items

#: event type -> ``event: <type>\ndata: `` (the frame's head; the types are few)
_EVENT_HEADS: dict[str, bytes] = {}


#: item kind -> id prefix (``<prefix><response id>_<output index>``, deepseek-recipe's ids).
_PREFIX = {"reasoning": "rs_", "message": "msg_", "function_call": "fc_", "custom_tool_call": "ctc_"}


class _Item:
    """One output item being built (mutable; the encoder's private state)."""

    __slots__ = (
        "args",
        "call",
        "call_id",
        "final",
        "id",
        "index",
        "kind",
        "lps",
        "name",
        "namespace",
        "resp_id",
        "shape_done",
        "texts",
        "tpl",
    )

    def __init__(self, kind: str, index: int, resp_id: str) -> None:
        self.kind = kind  # "reasoning" | "message" | "function_call" | "custom_tool_call"
        self.index = index
        self.resp_id = resp_id
        self.id = f"{_PREFIX[kind]}{resp_id}_{index}"
        self.texts: list[str] = []
        self.lps: list[dict[str, Any]] = []
        self.call = -1  # parser call index
        self.call_id = ""
        self.name = ""
        self.namespace: str | None = None
        self.args: list[str] = []
        self.final: str | None = None  # ToolCallEnd arguments / custom input
        self.shape_done: dict[str, Any] | None = None  # the item object once closed
        self.tpl: tuple[bytes, ...] | None = None  # its delta frame template (delta_sse); () ambiguous

    def arguments(self) -> str:
        return self.final if self.final is not None else "".join(self.args)

    def shape(self, status: str, phase: str = "final_answer", done: bool = True) -> dict[str, Any]:
        """The item object (``done=False``: as in ``output_item.added``)."""
        kind = self.kind
        if kind == "message":
            content = [{"type": "output_text", "annotations": [], "logprobs": list(self.lps), "text": "".join(self.texts)}] if done else []
            return {"type": "message", "id": self.id, "status": status, "role": "assistant", "phase": phase, "content": content}
        if kind == "reasoning":
            content = [{"type": "reasoning_text", "text": "".join(self.texts)}] if done else []
            return {"type": "reasoning", "id": self.id, "status": status, "content": content, "summary": [],
                    "encrypted_content": f"{self.resp_id}-{self.index}"}
        if kind == "custom_tool_call":
            return {"type": "custom_tool_call", "id": self.id, "status": status, "call_id": self.call_id, "name": self.name,
                    "input": self.arguments() if done else ""}
        item = {"type": "function_call", "id": self.id, "status": status, "call_id": self.call_id, "name": self.name}
        if self.namespace is not None:
            item["namespace"] = self.namespace
        item["arguments"] = self.arguments() if done else ""
        return item



class ResponsesEncoder:
    """The OpenAI Responses :class:`~recipe.api.encoder.StreamEncoder`.

    Args:
        prep: the prepared Responses request (its settings are echoed; namespace tools and the
            custom ``apply_patch`` tool decide how calls are reported).
        meta: id (``resp_…``), model, created (``created_at``), prompt token counts.

    Payloads are event dicts with ``type`` and ``sequence_number`` (0, 1, …); :meth:`frame` gives
    ``event: <type>\\ndata: <json>\\n\\n``. Never raises on model output.
    """

    id_prefix: ClassVar[str] = "resp_"

    __slots__ = ("_cur", "_custom", "_echo", "_final", "_frag", "_held", "_items", "_meta", "_ns", "_prep", "_resp_id", "_seq",
                 "_t0")

    def __init__(self, prep: PreparedRequest, meta: ResponseMeta) -> None:
        req = prep.request
        self._prep = prep
        self._meta = meta
        self._resp_id = meta.id
        self._seq = 0
        self._ns = namespace_tool_map(req, get_encoding(prep.encoding).request)
        self._custom = frozenset(
            APPLY_PATCH_NAME for t in req.tools or () if isinstance(t, CustomTool) and t.name == APPLY_PATCH_NAME
        )
        echo = response_echo(req)
        extra = prep.conversation.sampling.extra
        if extra is not None:  # penalties that reach the engine are repeated as sent (else 0.0)
            for key in ("frequency_penalty", "presence_penalty"):
                if getattr(extra, key) is not None:
                    echo[key] = getattr(extra, key)
        self._echo = dumps_wire(echo)
        self._items: list[_Item] = []
        self._cur: _Item | None = None
        self._t0 = time.monotonic()
        self._final: dict[str, Any] | None = None
        # text / reasoning deltas that arrived inside an unfinished call (parser note
        # text_in_tool_block): sent as the next message once the call is complete
        self._held: list[evt.OutputEvent] = []
        self._frag: tuple[Any, ...] | None = None  # fragment_sse's state (the item it is for first)

    # ------------------------------------------------------------------ response object

    def _response(self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None,
                  completed_at: int | None = None, incomplete: str | None = None) -> dict[str, Any]:
        m = self._meta
        echo = orjson.loads(self._echo)
        return {
            "id": m.id,
            "object": "response",
            "created_at": m.created,
            "status": status,
            "background": False,
            "completed_at": completed_at,
            "content_filters": None,
            "error": None,
            "frequency_penalty": echo.get("frequency_penalty", 0.0),
            "incomplete_details": None if incomplete is None else {"reason": incomplete},
            "instructions": echo["instructions"],
            "max_output_tokens": echo["max_output_tokens"],
            "max_tool_calls": None,
            "model": m.model,
            "moderation": None,
            "output": output,
            "parallel_tool_calls": True,
            "presence_penalty": echo.get("presence_penalty", 0.0),
            "previous_response_id": None,
            "prompt_cache_key": None,
            "prompt_cache_retention": None,
            "reasoning": echo["reasoning"],
            "safety_identifier": None,
            "service_tier": "default",
            "store": False,
            "temperature": echo["temperature"],
            "text": echo["text"],
            "tool_choice": echo["tool_choice"],
            "tools": echo["tools"],
            "top_logprobs": echo["top_logprobs"],
            "top_p": echo["top_p"],
            "truncation": "disabled",
            "usage": usage,
            "user": echo["user"],
            "metadata": {},
        }

    def _usage(self, completion: int, reasoning: int) -> dict[str, Any]:
        pu = PromptUsage(self._meta.prompt_tokens, self._meta.cached_tokens)
        return {
            "input_tokens": pu.prompt_tokens,
            # cache_write_tokens: required by the openai SDK's strict model (3.57); cache writes are not known here
            "input_tokens_details": {"cached_tokens": pu.cached_tokens, "cache_write_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": pu.prompt_tokens + completion,
        }

    def _next(self) -> int:
        s = self._seq
        self._seq = s + 1
        return s

    # ------------------------------------------------------------------ stream

    def open(self) -> list[dict[str, Any]]:
        """``response.created`` and ``response.in_progress``."""
        return [
            {"type": "response.created", "response": self._response("in_progress", [], None), "sequence_number": self._next()},
            {"type": "response.in_progress", "response": self._response("in_progress", [], None), "sequence_number": self._next()},
        ]

    def _start(self, kind: str, out: list[dict[str, Any]]) -> _Item:
        """Close the open item (a call follows → a message's phase is commentary), open a new one."""
        if self._cur is not None:
            self._close_item(self._cur, "completed", "commentary" if kind in ("function_call", "custom_tool_call") else "final_answer", out)
        index = len(self._items)
        item = _Item(kind, index, self._resp_id)
        self._items.append(item)
        self._cur = item
        return item

    def _added(self, item: _Item, out: list[dict[str, Any]]) -> None:
        out.append({"type": "response.output_item.added", "item": item.shape("in_progress", done=False),
                    "output_index": item.index, "sequence_number": self._next()})
        if item.kind == "message":
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        elif item.kind == "reasoning":
            part = {"type": "reasoning_text", "text": ""}
        else:
            return
        out.append({"type": "response.content_part.added", "content_index": 0, "item_id": item.id,
                    "output_index": item.index, "part": part, "sequence_number": self._next()})

    def _close_item(self, item: _Item, status: str, phase: str, out: list[dict[str, Any]]) -> None:
        i, iid, nxt = item.index, item.id, self._next
        kind = item.kind
        if kind == "message" or kind == "reasoning":
            text = "".join(item.texts)
            if kind == "message":
                out.append({"type": "response.output_text.done", "content_index": 0, "item_id": iid, "logprobs": list(item.lps),
                            "output_index": i, "sequence_number": nxt(), "text": text})
                part = {"type": "output_text", "annotations": [], "logprobs": list(item.lps), "text": text}
            else:
                out.append({"type": "response.reasoning_text.done", "content_index": 0, "item_id": iid,
                            "output_index": i, "sequence_number": nxt(), "text": text})
                part = {"type": "reasoning_text", "text": text}
            out.append({"type": "response.content_part.done", "content_index": 0, "item_id": iid, "output_index": i,
                        "part": part, "sequence_number": nxt()})
        elif kind == "function_call":
            out.append({"type": "response.function_call_arguments.done", "arguments": item.arguments(), "item_id": iid,
                        "output_index": i, "sequence_number": nxt()})
        else:
            if item.final is None:  # no ToolCallEnd seen (cannot happen with the parser's guarantees)
                self._custom_input(item, custom_tool_input("".join(item.args)), out)
            out.append({"type": "response.custom_tool_call_input.done", "input": item.arguments(), "item_id": iid,
                        "output_index": i, "sequence_number": nxt()})
        shape = item.shape(status, phase)
        out.append({"type": "response.output_item.done", "item": shape, "output_index": i, "sequence_number": nxt()})
        item.shape_done = shape
        self._cur = None

    def _custom_input(self, item: _Item, value: str, out: list[dict[str, Any]]) -> None:
        item.final = value
        if value:
            out.append({"type": "response.custom_tool_call_input.delta", "delta": value, "item_id": item.id,
                        "output_index": item.index, "sequence_number": self._next()})

    def _delta(self, cur: _Item, text: str, seq: Any, lp: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The delta event of the open item ``cur`` (message, reasoning or function call)."""
        kind = cur.kind
        if kind == "message":
            return {"type": "response.output_text.delta", "content_index": 0, "delta": text, "item_id": cur.id,
                    "logprobs": [] if lp is None else lp, "output_index": cur.index, "sequence_number": seq}
        if kind == "reasoning":
            return {"type": "response.reasoning_text.delta", "content_index": 0, "delta": text, "item_id": cur.id,
                    "output_index": cur.index, "sequence_number": seq}
        return {"type": "response.function_call_arguments.delta", "delta": text, "item_id": cur.id,
                "output_index": cur.index, "sequence_number": seq}

    def on_events(self, events: Sequence[evt.OutputEvent], logprobs: Sequence[TokenLogprob] | None = None) -> list[dict[str, Any]]:
        """Events for parser output: items opened/closed as the kind changes, one delta event per
        text / reasoning / argument delta. ``logprobs`` go on the first ``output_text.delta``
        (reasoning deltas carry none, as in deepseek-recipe)."""
        out: list[dict[str, Any]] = []
        self._feed(events, logprobs, out)
        return out

    def delta_sse(self, event: evt.OutputEvent) -> bytes | None:
        """The frame of one delta the open item takes as it is (text in a message, reasoning in a
        reasoning item, the open call's arguments), from the item's template
        (:func:`~recipe.api.encoder.frame_template`: constant bytes around the text's JSON and the
        sequence number); byte for byte ``frame(on_events([event])[0])``. None otherwise."""
        cur = self._cur
        if cur is None:
            return None
        t = type(event)
        kind = cur.kind
        if t is evt.TextDelta:
            if kind != "message":
                return None
            acc = cur.texts
        elif t is evt.ReasoningDelta:
            if kind != "reasoning":
                return None
            acc = cur.texts
        elif t is evt.ToolCallArgumentsDelta:
            if kind != "function_call" or cur.call != event.index:
                return None
            acc = cur.args
        else:
            return None
        tpl = cur.tpl
        if tpl is None:
            tpl = cur.tpl = frame_template(self.frame(self._delta(cur, HOLE, HOLE)), 2) or ()
        if not tpl:
            return None
        text = event.text
        try:
            js = orjson.dumps(text)
        except TypeError:  # a lone surrogate: the general path's fallback printer
            return None
        acc.append(text)
        seq = self._seq
        self._seq = seq + 1
        return b"".join((tpl[0], js, tpl[1], b"%d" % seq, tpl[2]))

    def fragment_sse(self, text: str, js: bytes) -> bytes | None:
        """The frame of an arguments delta of the open function call carrying ``text``, whose
        compact JSON string literal is ``js``; byte for byte ``delta_sse`` of that call's
        ``ToolCallArgumentsDelta`` (the text is recorded, a sequence number taken). None when the
        open item is not a function call or its template is ambiguous."""
        f = self._frag
        if f is None or f[0] is not self._cur:
            f = self._frag = self._fragment_state()
            if f is None:
                return None
        f[1].append(text)
        seq = self._seq
        self._seq = seq + 1
        return b"".join((f[2], js, f[3], b"%d" % seq, f[4]))

    def _fragment_state(self) -> tuple[Any, ...] | None:
        """(open item, its argument list, its template's three parts) for :meth:`fragment_sse`, or
        None when the open item is not a function call or its template is ambiguous."""
        cur = self._cur
        if cur is None or cur.kind != "function_call":
            return None
        tpl = cur.tpl
        if tpl is None:
            tpl = cur.tpl = frame_template(self.frame(self._delta(cur, HOLE, HOLE)), 2) or ()
        return (cur, cur.args, *tpl) if tpl else None

    def _feed(self, events: Sequence[evt.OutputEvent], logprobs: Sequence[TokenLogprob] | None, out: list[dict[str, Any]]) -> None:
        pending = logprobs
        for ev in events:
            t = type(ev)
            cur = self._cur
            if (t is evt.TextDelta or t is evt.ReasoningDelta) and cur is not None and cur.call >= 0 and cur.final is None:
                self._held.append(ev)  # inside an unfinished call: keep the call's item whole
                continue
            if t is evt.TextDelta:
                if cur is None or cur.kind != "message":
                    cur = self._start("message", out)
                    self._added(cur, out)
                lp: list[dict[str, Any]] = []
                if pending:
                    lp, pending = [_lp(e) for e in pending], None
                    cur.lps.extend(lp)
                cur.texts.append(ev.text)
                out.append(self._delta(cur, ev.text, self._next(), lp))
            elif t is evt.ReasoningDelta:
                if cur is None or cur.kind != "reasoning":
                    cur = self._start("reasoning", out)
                    self._added(cur, out)
                pending = None
                cur.texts.append(ev.text)
                out.append(self._delta(cur, ev.text, self._next()))
            elif t is evt.ToolCallArgumentsDelta:
                if cur is None or cur.call != ev.index:
                    continue  # not the open call (cannot happen: the parser orders call events)
                cur.args.append(ev.text)
                if cur.kind == "function_call":
                    out.append(self._delta(cur, ev.text, self._next()))
            elif t is evt.ToolCallStart:
                kind = "custom_tool_call" if ev.name in self._custom else "function_call"
                cur = self._start(kind, out)
                cur.call, cur.call_id = ev.index, ev.id
                ns = self._ns.get(ev.name) if kind == "function_call" else None
                if ns is not None:
                    cur.namespace, cur.name = ns
                else:
                    cur.name = ev.name
                self._added(cur, out)
            elif t is evt.ToolCallEnd:
                if cur is None or cur.call != ev.index:
                    continue
                if cur.kind == "custom_tool_call":
                    self._custom_input(cur, custom_tool_input(ev.arguments), out)
                else:
                    cur.final = ev.arguments
                if self._held:
                    held, self._held = self._held, []
                    self._feed(held, None, out)

    def close(self, finish: evt.Finish) -> list[dict[str, Any]]:
        """Close the open item (status ``incomplete`` unless the backend said ``stop``), then
        ``response.completed`` / ``response.incomplete`` with the full output and usage (+ notes)."""
        status, reason = response_status(finish.reason)
        out: list[dict[str, Any]] = []
        if self._held:  # a call left without its end (the parser always ends calls first)
            held, self._held = self._held, []
            if self._cur is not None:
                self._close_item(self._cur, "completed", "final_answer", out)
            self._feed(held, None, out)
        if self._cur is not None:
            self._close_item(self._cur, status, "final_answer", out)
        output = [copy_json(it.shape_done) for it in self._items]
        completed_at = self._meta.created + int(time.monotonic() - self._t0)
        resp = self._response(status, output, self._usage(finish.completion_tokens, finish.reasoning_tokens), completed_at, reason)
        if status == "incomplete":
            resp["incomplete_details"] = {"reason": reason}
        notes = list(finish.notes)
        if finish.reason not in FINISH_STATUS:
            notes.append(f"incomplete_reason: {finish.reason}")
        if notes:
            resp["recipe"] = {"notes": notes}
        self._final = resp
        out.append({"type": "response.completed" if status == "completed" else "response.incomplete",
                    "response": resp, "sequence_number": self._next()})
        return out

    # ------------------------------------------------------------------ whole response

    def _matches(self, parsed: evt.ParsedOutput) -> bool:
        texts: dict[str, list[str]] = {"message": [], "reasoning": []}
        calls: list[str] = []
        for it in self._items:
            if it.kind in texts:
                texts[it.kind].append("".join(it.texts))
            else:
                calls.append(it.call_id)
        return ("".join(texts["message"]) == parsed.content and "".join(texts["reasoning"]) == parsed.reasoning_content
                and calls == [c.id for c in parsed.tool_calls])

    def response(self, parsed: evt.ParsedOutput, logprobs: ChannelLogprobs | None = None) -> dict[str, Any]:
        """The non-streamed ``response`` object: exactly the ``response`` of the final stream event
        when this encoder was driven with the same output (what :func:`recipe.response` does), else
        built by replaying ``parsed`` (reasoning, answer, calls) through a fresh encoder."""
        if self._final is not None and self._matches(parsed):
            return copy_json(self._final)
        enc = ResponsesEncoder(self._prep, self._meta)
        events: list[evt.OutputEvent] = []
        if parsed.reasoning_content:
            events.append(evt.ReasoningDelta(parsed.reasoning_content))
        if parsed.content:
            events.append(evt.TextDelta(parsed.content))
        for c in parsed.tool_calls:
            events += [evt.ToolCallStart(c.index, c.id, c.name), evt.ToolCallArgumentsDelta(c.index, c.arguments),
                       evt.ToolCallEnd(c.index, c.arguments)]
        lps = logprobs.content if logprobs is not None else None
        if parsed.reasoning_content and lps:
            enc.on_events(events[:1])
            enc.on_events(events[1:], lps)
        else:
            enc.on_events(events, lps)
        enc.close(evt.Finish(parsed.backend_reason or "stop", parsed.completion_tokens, parsed.reasoning_tokens,
                         parsed.matched_stop, len(parsed.tool_calls), parsed.notes))
        assert enc._final is not None
        return enc._final

    # ------------------------------------------------------------------ framing

    def frame(self, payload: dict[str, Any]) -> bytes:
        """``event: <type>\\ndata: <json>\\n\\n`` (compact orjson never contains a newline)."""
        try:
            body = orjson.dumps(payload)
        except TypeError:  # a huge integer or a lone surrogate: the fallback printer
            body = dumps_wire(payload)
        kind = payload["type"]
        head = _EVENT_HEADS.get(kind)
        if head is None:
            head = b"event: " + kind.encode() + b"\ndata: "
            if len(_EVENT_HEADS) < 64:
                _EVENT_HEADS[kind] = head
        return b"".join((head, body, b"\n\n"))

    def done(self) -> None:
        """None: a Responses stream ends after ``response.completed`` / ``response.incomplete``."""
        return
