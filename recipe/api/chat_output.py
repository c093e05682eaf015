"""Chat Completions output: output events → ``chat.completion.chunk`` payloads and ``chat.completion``.

Shapes follow deepseek-recipe 0.2.0 (the parity target) and what the official ``openai`` SDK
accumulates (api-wire-formats §2.2–2.4, §7); the rules are tabled in docs/streaming.md:

* every chunk: ``{"id","object":"chat.completion.chunk","created","model","system_fingerprint",
  "choices":[{"index":0,"delta":…,"logprobs":…,"finish_reason":…}]}`` plus ``"usage"`` (see below);
* first chunk: the role delta — ``{"role":"assistant","content":""}``; in thinking mode
  ``{"role":"assistant","content":null,"reasoning_content":""}``, or
  ``{"role":"assistant","content":"","reasoning_content":null}`` for a prefix continuation of
  the answer (``content_continuation``);
* text: ``{"content":t}``; thinking mode ``{"content":null,"reasoning_content":t}`` /
  ``{"content":t,"reasoning_content":null}``;
* tool call ``i``: first ``{"tool_calls":[{"index":i,"id","type":"function","function":{"name","arguments":""}}]}``,
  then ``{"tool_calls":[{"index":i,"function":{"arguments":fragment}}]}`` (id/type/name only once);
* final chunk: ``{"content":""}`` (thinking: ``+ "reasoning_content": null``) with the mapped
  ``finish_reason`` and the ``usage`` object, plus ``"recipe": {"notes": [...]}`` when the parser
  flagged degraded output;
* ``usage`` on non-final chunks: ``null`` unless the request streams without
  ``stream_options.include_usage``, in which case the key is absent.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from orjson import dumps as _orjson_dumps

from recipe.jsonfmt import dumps_wire

from recipe.output import events as evt

from recipe.api.encoder import HOLE, frame_template

if TYPE_CHECKING:
    from recipe.api.encoder import ChannelLogprobs, ResponseMeta, TokenLogprob
    from recipe.api.prepared import PreparedRequest

__all__ = ["ChatEncoder", "FINISH_REASONS", "chat_finish_reason", "merge_choices", "total_usage"]

#: (backend finish reason, tool calls made and no stop sequence matched) -> Chat ``finish_reason``.
#: Backend reasons not listed pass through unchanged (the SDK accepts any string).
FINISH_REASONS: dict[tuple[str, bool], str] = {
    ("stop", False): "stop",
    ("stop", True): "tool_calls",
    ("length", False): "length",
    ("length", True): "length",
    ("content_filter", False): "content_filter",
    ("content_filter", True): "content_filter",
}


def chat_finish_reason(reason: str, tool_calls: int, matched_stop: str | None) -> str:
    """Chat ``finish_reason`` for a backend ``reason`` (table :data:`FINISH_REASONS`)."""
    return FINISH_REASONS.get((reason, bool(tool_calls) and matched_stop is None), reason)


def _lp(e: TokenLogprob) -> dict[str, Any]:
    return {
        "token": e.token,
        "logprob": e.logprob,
        "bytes": list(e.token_bytes),
        "top_logprobs": [{"token": a.token, "logprob": a.logprob, "bytes": list(a.token_bytes)} for a in e.top],
    }


class ChatEncoder:
    """The Chat Completions :class:`~recipe.api.encoder.StreamEncoder`.

    Args:
        prep: the prepared Chat request (``request.stream``, ``request.stream_options`` and
            the thinking stage decide the chunk shapes).
        meta: id, model, created, fingerprint and prompt token counts.
        choice: the ``index`` of the choice this encoder writes (a request with ``n`` > 1 has one
            encoder per choice; :func:`merge_choices` joins their response objects).
    """

    id_prefix: ClassVar[str] = "chatcmpl-"

    __slots__ = ("_meta", "_thinking", "_reasoning_first", "_usage_null", "_head", "_tpl", "_call", "_ftpl", "_choice")

    def __init__(self, prep: PreparedRequest, meta: ResponseMeta, choice: int = 0) -> None:
        req = prep.request
        self._meta = meta
        self._choice = choice
        stage = prep.parsing.thinking_stage
        self._thinking = stage is not None
        # a prefix continuation of the answer (thinking mode) opens with content, not reasoning
        self._reasoning_first = self._thinking and stage != "content_continuation"
        opts = getattr(req, "stream_options", None)
        include_usage = bool(opts is not None and opts.include_usage)
        self._usage_null = not getattr(req, "stream", False) or include_usage
        self._head: dict[str, Any] = {
            "id": meta.id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "system_fingerprint": meta.system_fingerprint,
            "choices": None,
        }
        if self._usage_null:
            self._head["usage"] = None
        # delta frame templates (delta_sse): -1 reasoning, -2 content, i >= 0 call i's arguments;
        # () when the template is ambiguous
        self._tpl: dict[int, tuple[bytes, ...]] = {}
        self._call = -1  # index of the last call started (fragment_sse's call)
        self._ftpl: tuple[bytes, ...] | None = None  # its arguments template, once built

    # ------------------------------------------------------------------ chunks

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
        c = self._head.copy()  # the fixed keys, in order ("choices" replaced in place)
        c["choices"] = [{"index": self._choice, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]
        return c

    def open(self) -> list[dict[str, Any]]:
        """The role chunk."""
        if self._reasoning_first:
            return [self._chunk({"role": "assistant", "content": None, "reasoning_content": ""})]
        if self._thinking:
            return [self._chunk({"role": "assistant", "content": "", "reasoning_content": None})]
        return [self._chunk({"role": "assistant", "content": ""})]

    def _reasoning(self, text: str) -> dict[str, Any]:
        return {"content": None, "reasoning_content": text}

    def _text(self, text: str) -> dict[str, Any]:
        return {"content": text, "reasoning_content": None} if self._thinking else {"content": text}

    @staticmethod
    def _arguments(index: int, text: str) -> dict[str, Any]:
        return {"tool_calls": [{"index": index, "function": {"arguments": text}}]}

    def on_events(self, events: Sequence[evt.OutputEvent], logprobs: Sequence[TokenLogprob] | None = None) -> list[dict[str, Any]]:
        """One chunk per delta / tool-call start; ``ToolCallEnd`` and ``Finish`` produce nothing here.
        ``logprobs`` go on the first content or reasoning chunk."""
        chunk = self._chunk
        out: list[dict[str, Any]] = []
        pending = logprobs
        for ev in events:
            t = type(ev)
            if t is evt.TextDelta or t is evt.ReasoningDelta:
                content = t is evt.TextDelta
                lp = None
                if pending:
                    lp, pending = {"content" if content else "reasoning_content": [_lp(e) for e in pending]}, None
                out.append(chunk(self._text(ev.text) if content else self._reasoning(ev.text), None, lp))
            elif t is evt.ToolCallArgumentsDelta:
                out.append(chunk(self._arguments(ev.index, ev.text)))
            elif t is evt.ToolCallStart:
                call = {"index": ev.index, "id": ev.id, "type": "function", "function": {"name": ev.name, "arguments": ""}}
                out.append(chunk({"tool_calls": [call]}))
                self._call = ev.index
                self._ftpl = None
        return out

    def delta_sse(self, event: evt.OutputEvent) -> bytes | None:
        """The frame of one reasoning, content or argument delta, from a per-stream template
        (:func:`~recipe.api.encoder.frame_template`: the chunk's constant bytes around the JSON of
        the text); byte for byte ``frame(on_events([event])[0])``. None for other events."""
        t = type(event)
        if t is evt.ReasoningDelta:
            key = -1
        elif t is evt.TextDelta:
            key = -2
        elif t is evt.ToolCallArgumentsDelta:
            key = event.index
        else:
            return None
        tpl = self._tpl.get(key)
        if tpl is None:
            tpl = self._template(key)
        if not tpl:
            return None
        try:
            return tpl[0] + _orjson_dumps(event.text) + tpl[1]
        except TypeError:  # a lone surrogate: the general path's fallback printer
            return None

    def _template(self, key: int) -> tuple[bytes, ...]:
        """The delta frame template of ``key`` (-1 reasoning, -2 content, i >= 0 call i's
        arguments), built once per stream; () when ambiguous."""
        delta = self._reasoning(HOLE) if key == -1 else self._text(HOLE) if key == -2 else self._arguments(key, HOLE)
        tpl = self._tpl[key] = frame_template(self.frame(self._chunk(delta)), 1) or ()
        return tpl

    def fragment_sse(self, text: str, js: bytes) -> bytes | None:
        """The frame of an arguments delta of the last started call carrying ``text``, whose compact
        JSON string literal is ``js``; byte for byte ``delta_sse(ToolCallArgumentsDelta(call, text))``.
        None when there is no template (no call started, or an ambiguous one)."""
        tpl = self._ftpl
        if tpl is None:
            if self._call < 0:
                return None
            tpl = self._ftpl = self._tpl.get(self._call) or self._template(self._call)
        if not tpl:
            return None
        return tpl[0] + js + tpl[1]

    def _usage(self, completion: int, reasoning: int) -> dict[str, Any]:
        m = self._meta
        u: dict[str, Any] = {
            "prompt_tokens": m.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": m.prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": m.cached_tokens},
        }
        if self._thinking:
            u["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        u["prompt_cache_hit_tokens"] = m.cached_tokens
        u["prompt_cache_miss_tokens"] = m.prompt_tokens - m.cached_tokens
        return u

    def close(self, finish: evt.Finish) -> list[dict[str, Any]]:
        """The final chunk: empty content delta, mapped ``finish_reason``, ``usage`` (+ notes)."""
        delta: dict[str, Any] = {"content": "", "reasoning_content": None} if self._thinking else {"content": ""}
        c = self._chunk(delta, chat_finish_reason(finish.reason, finish.tool_calls, finish.matched_stop))
        c["usage"] = self._usage(finish.completion_tokens, finish.reasoning_tokens)
        if finish.notes:
            c["recipe"] = {"notes": list(finish.notes)}
        return [c]

    def usage_chunk(self, usage: dict[str, Any]) -> dict[str, Any]:
        """The chunk ``{…, "choices": [], "usage": usage}`` that ends a stream of several choices
        (OpenAI's usage chunk), after each choice's finishing chunk."""
        c = self._head.copy()
        c["choices"] = []
        c["usage"] = usage
        return c

    def drop_usage(self, chunk: dict[str, Any]) -> dict[str, Any] | None:
        """Take the ``usage`` off a finishing chunk of :meth:`close` (a stream of several choices
        reports the request's usage once, in :meth:`usage_chunk`): null when the request's chunks
        carry the key, else removed. Returns the usage it took."""
        usage = chunk.get("usage")
        if self._usage_null:
            chunk["usage"] = None
        else:
            chunk.pop("usage", None)
        return usage

    # ------------------------------------------------------------------ whole response

    def response(self, parsed: evt.ParsedOutput, logprobs: ChannelLogprobs | None = None) -> dict[str, Any]:
        """The ``chat.completion`` object; equals what ``ChatCompletionStreamState`` accumulates from
        this encoder's chunks (same id, created, model, fingerprint)."""
        m = self._meta
        message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
        if self._reasoning_first or parsed.reasoning_content:
            message["reasoning_content"] = parsed.reasoning_content
        if parsed.tool_calls:
            message["tool_calls"] = [
                {"index": c.index, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in parsed.tool_calls
            ]
        lp = None
        if logprobs is not None:
            lp = {"content": [_lp(e) for e in logprobs.content]}
            if logprobs.reasoning:
                lp["reasoning_content"] = [_lp(e) for e in logprobs.reasoning]
        reason = parsed.backend_reason or "stop"
        body: dict[str, Any] = {
            "id": m.id,
            "object": "chat.completion",
            "created": m.created,
            "model": m.model,
            "choices": [
                {
                    "index": self._choice,
                    "message": message,
                    "logprobs": lp,
                    "finish_reason": chat_finish_reason(reason, len(parsed.tool_calls), parsed.matched_stop),
                }
            ],
            "usage": self._usage(parsed.completion_tokens, parsed.reasoning_tokens),
            "system_fingerprint": m.system_fingerprint,
        }
        if parsed.notes:
            body["recipe"] = {"notes": list(parsed.notes)}
        return body

    # ------------------------------------------------------------------ framing

    def frame(self, payload: dict[str, Any]) -> bytes:
        """``data: {json}\\n\\n`` (no ``event:`` line; compact orjson never contains a newline)."""
        try:
            body = _orjson_dumps(payload)
        except TypeError:  # a huge integer or a lone surrogate: the fallback printer
            body = dumps_wire(payload)
        return b"data: " + body + b"\n\n"

    def done(self) -> bytes:
        """``data: [DONE]\\n\\n``."""
        return evt.sse_done()


def total_usage(usages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The usage of a request with several choices: each choice's ``usage`` (as this encoder writes
    it: the same prompt counts in each) with the completion counts summed."""
    out = copy.deepcopy(dict(usages[0]))
    completion = sum(u["completion_tokens"] for u in usages)
    out["completion_tokens"] = completion
    out["total_tokens"] = out["prompt_tokens"] + completion
    if "completion_tokens_details" in out:
        out["completion_tokens_details"] = {
            "reasoning_tokens": sum(u["completion_tokens_details"]["reasoning_tokens"] for u in usages)}
    return out


def merge_choices(bodies: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One ``chat.completion`` for a request with ``n`` choices, from the response object of each
    choice (``response(prep, ids_k, choice=k)``, in index order): their ``choices`` in one list,
    :func:`total_usage`, and a choice's notes on that choice (``choices[k]["recipe"]["notes"]``)
    rather than on the body.

    Raises:
        ValueError: no bodies.
    """
    if not bodies:
        raise ValueError("merge_choices needs at least one response object")
    out = dict(bodies[0])
    out.pop("recipe", None)
    choices = []
    for b in bodies:
        choice = dict(b["choices"][0])
        if b.get("recipe"):
            choice["recipe"] = b["recipe"]
        choices.append(choice)
    out["choices"] = choices
    out["usage"] = total_usage([b["usage"] for b in bodies])
    # (the body's key order: usage and system_fingerprint after choices, as for one choice)
    out["system_fingerprint"] = out.pop("system_fingerprint")
    return out
