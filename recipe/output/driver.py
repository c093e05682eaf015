"""Model output → API responses and SSE streams, for any API: the driver a serving stack calls.

Data flow::

    token ids ──► OutputParser (encoding) ──► output events ──► StreamEncoder (per API) ──► payloads
                                                                                   └─► frame() ──► SSE bytes

:class:`CompletionStream` owns one parser and one API encoder for one request::

    prep = recipe.prepare(body)
    cs = recipe.CompletionStream(prep, cached_tokens=hits)
    for ids in engine:                      # any chunking; one id per push is fine
        send(cs.sse(cs.push(ids)))
        if cs.finished: break               # EOS or a stop sequence ended the output
    send(cs.sse(cs.finish("length" if out_of_budget else "stop")))

and :func:`response` builds the non-streamed response for a whole output. The encoder is picked by
``prep.api`` from :data:`ENCODERS`; every encoder implements the :class:`StreamEncoder` protocol, so
adding an API means adding one class and one table row.

Log probabilities: when the request asked for them (Chat ``logprobs: true``) and the engine passes
``logprobs`` to :meth:`CompletionStream.push` (one ``(logprob, [(token_id, logprob), …])`` pair per
token id, deepseek-recipe's ``InferenceChunk.tokens`` shape), each token's entry is attached to the
channel (content or reasoning) its text lands in — see docs/streaming.md "Log probabilities".
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from recipe.api.chat_output import ChatEncoder
from recipe.api.encoder import (
    ChannelLogprobs,
    ResponseMeta,
    StreamEncoder,
    TokenLogprob,
    new_response_id,
)
from recipe.api.messages_output import MessagesEncoder
from recipe.api.prepared import PreparedRequest
from recipe.api.responses_output import ResponsesEncoder
from recipe.encodings.table import get_encoding
from recipe.jsonfmt import parse_json_value
from recipe.schema.validation import validate_instance
from recipe.output import events as evt
from recipe.tokenizer import Tokenizer

__all__ = [
    "ResponseMeta",
    "TokenLogprob",
    "ChannelLogprobs",
    "StreamEncoder",
    "ENCODERS",  # the first five re-exported from recipe.api.encoder for the driver's users
    "CompletionStream",
    "response",
    "response_from_text",
    "new_response_id",
]

#: API name -> encoder class (``Encoder(prep, meta)`` implementing :class:`StreamEncoder`).
ENCODERS: Mapping[str, type] = MappingProxyType(
    {"chat": ChatEncoder, "messages": MessagesEncoder, "responses": ResponsesEncoder})

_TEXT = (evt.TextDelta, evt.ReasoningDelta)
_TOOL = (evt.ToolCallStart, evt.ToolCallArgumentsDelta, evt.ToolCallEnd)
_BATCH = 64  # push_sse frames the payloads of this many events at a time


def _token_text(b: bytes) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(f"\\x{c:02x}" for c in b)


class CompletionStream:
    """Turns one request's model output into that API's stream payloads, incrementally.

    Args:
        prep: the prepared request (``prepare(body)``); ``prep.api`` picks the encoder.
        prompt_tokens: prompt length for usage (default ``len(prep.token_ids)``).
        cached_tokens: prompt tokens served from cache (``0 <= cached_tokens <= prompt_tokens``).
        response_id: the response id (default: generated, ``chatcmpl-…``; reproducible with ``seed``).
        created: Unix seconds (default: now).
        seed: makes generated ids (response id, tool-call ids) reproducible.
        system_fingerprint: echoed in Chat chunks (default null).
        tokenizer: the vocabulary (default: the embedded DeepSeek-V4 one).
        model: the model name to echo (default ``prep.model``).
        eos_token_ids: ids that end the output (default: the encoding's stop tokens in the
            vocabulary, EOS for every DeepSeek family, and the request's ``stop_token_ids``).
        encoder_options: extra keyword arguments for the API encoder's constructor (Messages:
            ``signature``, ``thinking_tokens``); unknown keys raise ``TypeError``.
        choice: the choice's ``index`` in the chunks and the response (Chat Completions, whose
            ``n`` > 1 asks for several: one stream per choice, each fed that choice's output;
            ``recipe.api.chat_output.merge_choices`` joins their response objects).

    Raises:
        ValueError: negative counts, ``cached_tokens > prompt_tokens``, an API without an encoder,
            or a ``choice`` other than 0 outside Chat Completions.

    Every method returns payload dicts; :meth:`sse` frames them. Never raises on model output:
    degraded output is reported in the final payload (``"recipe": {"notes": [...]}``).
    """

    __slots__ = ("_prep", "_tok", "_parser", "_enc", "_opened", "_finish", "_done_sent", "_want_lp",
                 "_pending", "_lp_content", "_lp_reasoning", "_events", "_is_special", "_answer", "_direct",
                 "_ppush", "_frag_sse")

    def __init__(
        self,
        prep: PreparedRequest,
        *,
        prompt_tokens: int | None = None,
        cached_tokens: int = 0,
        response_id: str | None = None,
        created: int | None = None,
        seed: int | str | None = None,
        system_fingerprint: str | None = None,
        tokenizer: Tokenizer | None = None,
        model: str | None = None,
        eos_token_ids: Sequence[int] | None = None,
        encoder_options: Mapping[str, Any] | None = None,
        choice: int = 0,
    ) -> None:
        cls = ENCODERS.get(prep.api)
        if cls is None:
            raise ValueError(f"no output encoder for the {prep.api} API yet")
        if choice:
            if prep.api != "chat" or choice < 0:
                raise ValueError(f"choice {choice}: several choices exist on Chat Completions only")
            encoder_options = {**(encoder_options or {}), "choice": choice}
        prompt = len(prep.token_ids) if prompt_tokens is None else prompt_tokens
        if prompt < 0 or cached_tokens < 0 or cached_tokens > prompt:
            raise ValueError(f"need 0 <= cached_tokens ({cached_tokens}) <= prompt_tokens ({prompt})")
        self._prep = prep
        family = get_encoding(prep.encoding)
        self._tok = tok = tokenizer or family.tokenizer()
        if eos_token_ids is None:
            stops: Sequence[int] = family.stop_ids(tok)
            extra = prep.conversation.sampling.extra
            if extra is not None and extra.stop_token_ids:  # the request's own stop ids end it as EOS does
                stops = tuple(dict.fromkeys([*stops, *extra.stop_token_ids]))
        else:
            stops = eos_token_ids
        self._parser = family.new_parser(prep.parsing, tok, tool_call_id=seed, eos_token_ids=stops)
        meta = ResponseMeta(
            id=response_id if response_id is not None else new_response_id(cls.id_prefix, seed),
            model=prep.model if model is None else model,
            created=int(time.time()) if created is None else created,
            system_fingerprint=system_fingerprint,
            prompt_tokens=prompt,
            cached_tokens=cached_tokens,
        )
        self._enc: StreamEncoder = cls(prep, meta, **encoder_options) if encoder_options else cls(prep, meta)
        self._opened = False
        self._finish: evt.Finish | None = None
        self._done_sent = False
        self._want_lp = prep.conversation.sampling.logprobs  # Chat logprobs, Responses top_logprobs
        self._pending: list[TokenLogprob] = []
        self._lp_content: list[TokenLogprob] = []
        self._lp_reasoning: list[TokenLogprob] = []
        self._events: list[evt.OutputEvent] | None = None
        self._is_special = tok.is_special
        # the answer text, kept only when it must be validated against a json_schema response format
        self._answer: list[str] | None = [] if prep.parsing.response_schema is not None else None
        # push_sse may frame deltas straight from the parser's events: set once the stream is open,
        # unless something must see every event (log probabilities, a json_schema answer, response())
        self._direct = False
        # push_sse's parser call: ``push_fragments`` when the parser has it (a one-token push inside a
        # string argument then returns the token's plain entry, framed by the encoder's
        # ``fragment_sse`` without an event), else ``push``
        frag = getattr(self._parser, "push_fragments", None)
        self._frag_sse = getattr(self._enc, "fragment_sse", None) if frag is not None else None
        self._ppush = frag if self._frag_sse is not None else self._parser.push

    # ------------------------------------------------------------------ public

    @property
    def finished(self) -> bool:
        """True once the output has ended (finish, EOS, stop sequence); later pushes return ``[]``."""
        return self._finish is not None

    @property
    def encoder(self) -> StreamEncoder:
        """The API encoder in use."""
        return self._enc

    def start(self) -> list[dict[str, Any]]:
        """The opening payloads (Chat: the role chunk), for sending before the first token arrives.
        Optional: the first push / finish emits them otherwise. ``[]`` once they were emitted."""
        return self._open()

    def push(self, token_ids: Sequence[int], logprobs: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        """Feed completion token ids (any number); returns the payloads they complete.

        ``logprobs``: None, or one ``(logprob, [(token_id, logprob), …])`` pair per id; used only when
        the request asked for log probabilities. Raises ``ValueError`` if the count differs from the
        ids' and :class:`~recipe.tokenizer.TokenIdError` (a ``KeyError`` naming the id and the
        vocabulary size) for an id outside the vocabulary (caller errors, not model output).
        """
        if self._finish is not None:
            return []
        out = self._open() if not self._opened else []
        if logprobs is not None and self._want_lp:
            if len(logprobs) != len(token_ids):
                raise ValueError(f"{len(logprobs)} log probabilities for {len(token_ids)} token ids")
            push = self._parser.push
            for tid, lp in zip(token_ids, logprobs):
                try:
                    entry = None if self._is_special(tid) else self._entry(tid, lp)
                    events = push((tid,))
                except (KeyError, OverflowError, TypeError):
                    self._tok.check_ids((tid,))
                    raise
                self._handle(events, entry, out)
                if self._finish is not None:
                    break
            return out
        try:
            events = self._parser.push(token_ids)
        except (KeyError, OverflowError, TypeError):  # an id outside the vocabulary: say which
            self._tok.check_ids(token_ids)
            raise
        if events and not self._pending and self._events is None and self._answer is None and type(events[-1]) is not evt.Finish:
            out += self._enc.on_events(events)  # fast path: nothing to attribute, not the end
        elif events:
            self._handle(events, None, out)
        return out

    def push_sse(self, token_ids: Sequence[int], logprobs: Sequence[Any] | None = None) -> bytes:
        """``self.sse(self.push(token_ids, logprobs))``, byte for byte, without building the payload
        dicts on the common path: a push whose output is one delta that the open block (item, call)
        takes as it is gets its frame from the encoder's per-stream template
        (:meth:`~recipe.api.encoder.StreamEncoder.delta_sse`); a token inside a string argument (or
        completing a parameter's tag) comes from the parser as an argument fragment, framed by the
        encoder's ``fragment_sse`` (no event built); a push of many events is framed a batch at a
        time. For a server that sends the bytes and does not look at the payloads; raises as
        :meth:`push`."""
        if not self._direct:
            return self.sse(self.push(token_ids, logprobs))
        try:
            events = self._ppush(token_ids)
        except (KeyError, OverflowError, TypeError):  # an id outside the vocabulary: say which
            self._tok.check_ids(token_ids)
            raise
        if not events:
            return b""
        if type(events) is tuple:
            # one argument fragment of the open call (push_fragments: [1] its text, [4] that text's JSON)
            data = self._frag_sse(events[1], events[4])  # type: ignore[misc]
            if data is not None:
                return data
            events = [evt.ToolCallArgumentsDelta(self._parser.open_call, events[1])]  # type: ignore[attr-defined]
        enc = self._enc
        if len(events) == 1:
            data = enc.delta_sse(events[0])
            if data is not None:
                return data
        if type(events[-1]) is evt.Finish:
            out: list[dict[str, Any]] = []
            self._handle(events, None, out)
            return self.sse(out)
        if len(events) <= _BATCH:
            return self.sse(enc.on_events(events))
        # a push of many events (a whole output at once): payloads framed a batch of events at a time
        # (an encoder's on_events is a loop over its events), so they are not all alive at once
        on_events, frame = enc.on_events, enc.frame
        parts: list[bytes] = []
        for k in range(0, len(events), _BATCH):
            parts += map(frame, on_events(events[k:k + _BATCH]))
        return b"".join(parts)

    def push_text(self, text: str, token_count: int = 0) -> list[dict[str, Any]]:
        """Feed decoded text that accounts for ``token_count`` tokens (no log probabilities)."""
        if self._finish is not None:
            return []
        out = self._open()
        self._handle(self._parser.push_text(text, token_count), None, out)
        return out

    def finish(self, reason: str = "stop") -> list[dict[str, Any]]:
        """End of output (``stop`` | ``length`` | ``content_filter`` | another backend string).

        Returns the last payloads (held text, finish reason, usage); ``[]`` if already finished.
        """
        if self._finish is not None:
            return []
        out = self._open()
        self._handle(self._parser.finish(reason), None, out)
        return out

    def sse(self, payloads: Sequence[dict[str, Any]]) -> bytes:
        """SSE bytes for ``payloads``; once finished, the API's terminator (Chat ``data: [DONE]``) is
        appended the first time this is called."""
        if not payloads and (self._finish is None or self._done_sent):
            return b""  # most one-id pushes inside a tool call complete no payload
        frame = self._enc.frame
        if len(payloads) == 1:
            data = frame(payloads[0])
        else:
            data = b"".join([frame(p) for p in payloads])
        if self._finish is not None and not self._done_sent:
            self._done_sent = True
            done = self._enc.done()
            if done:
                data += done
        return data

    # ------------------------------------------------------------------ internals

    def _open(self) -> list[dict[str, Any]]:
        if self._opened:
            return []
        self._opened = True
        self._direct = not self._want_lp and self._events is None and self._answer is None
        return self._enc.open()

    def _entry(self, tid: int, lp: Any) -> TokenLogprob:
        tb = self._tok.token_bytes
        value, top = lp
        alts = tuple(TokenLogprob(int(i), _token_text(tb(i)), tb(i), float(v)) for i, v in (top or ()))
        b = tb(tid)
        return TokenLogprob(tid, _token_text(b), b, float(value), alts)

    def _handle(self, events: list[evt.OutputEvent], entry: TokenLogprob | None, out: list[dict[str, Any]]) -> None:
        """Encode one parser result; attribute pending log probabilities (docs/streaming.md)."""
        fin = events[-1] if events and type(events[-1]) is evt.Finish else None
        body = events[:-1] if fin is not None else events
        if fin is not None and self._prep.notes:  # what the request's model was not shown, first
            fin = replace(fin, notes=(*self._prep.notes, *fin.notes))
            events = [*body, fin]
        if self._answer is not None:
            self._answer.extend(e.text for e in body if type(e) is evt.TextDelta)
            if fin is not None:
                fin = _check_answer(fin, "".join(self._answer), self._prep.parsing.response_schema)
                events = [*body, fin]
        if self._events is not None:
            self._events.extend(events)
        lp: list[TokenLogprob] | None = None
        if entry is not None:
            self._pending.append(entry)
        if self._pending:
            first = next((e for e in body if isinstance(e, _TEXT)), None)
            if first is not None:
                lp, self._pending = self._pending, []
                (self._lp_content if type(first) is evt.TextDelta else self._lp_reasoning).extend(lp)
            elif any(isinstance(e, _TOOL) for e in body):
                self._pending = []  # markup and arguments of a tool call carry no log probabilities
        if body:
            out += self._enc.on_events(body, lp)
        if fin is not None:
            self._pending = []
            self._finish = fin
            self._direct = False
            out += self._enc.close(fin)

    def _logprobs(self) -> ChannelLogprobs | None:
        if not self._want_lp or not (self._lp_content or self._lp_reasoning):
            return None
        return ChannelLogprobs(tuple(self._lp_content), tuple(self._lp_reasoning))


#: At most this many schema errors are listed in the notes of a mismatching answer.
_MAX_SCHEMA_NOTES = 5


def _check_answer(fin: evt.Finish, answer: str, schema: Any) -> evt.Finish:
    """``fin`` with ``schema_mismatch`` notes when the final answer does not satisfy the json_schema
    response format (an answer that made tool calls instead is not checked). Never raises."""
    if fin.tool_calls:
        return fin
    try:
        value = parse_json_value(answer)
    except ValueError:
        return replace(fin, notes=(*fin.notes, "schema_mismatch", "schema_error: the answer is not JSON"))
    errors = validate_instance(value, schema)
    if not errors:
        return fin
    details = tuple(f"schema_error: {e}" for e in errors[:_MAX_SCHEMA_NOTES])
    return replace(fin, notes=(*fin.notes, "schema_mismatch", *details))


def response(
    prep: PreparedRequest,
    token_ids: Sequence[int],
    *,
    finish: str = "stop",
    logprobs: Sequence[Any] | None = None,
    **stream_options: Any,
) -> dict[str, Any]:
    """The non-streamed response (Chat: a ``chat.completion`` object) for a whole model output.

    ``stream_options``: the keyword arguments of :class:`CompletionStream` (``prompt_tokens``,
    ``cached_tokens``, ``response_id``, ``created``, ``seed``, ``system_fingerprint``, ``tokenizer``,
    ``model``, ``eos_token_ids``, ``encoder_options``; ``choice``: the one choice this output is),
    with its errors (an unknown name raises ``TypeError``); ``finish`` is the backend's finish reason
    (ignored when EOS or a stop sequence ended the output first); ``logprobs`` as for
    :meth:`CompletionStream.push`. Equals what an SDK accumulates from the stream of the same output
    in any chunking, except that ``completion_tokens`` stops at the id completing a stop sequence (a
    streamed push that contains the match counts all of its ids, as deepseek-recipe does).
    """
    cs = CompletionStream(prep, **stream_options)
    cs._events = []
    if prep.parsing.stop_sequences and logprobs is None:
        # count completion tokens up to the id that completes a stop match, as for EOS (a streamed
        # push counts all of its ids, deepseek-recipe's rule)
        for i in token_ids:
            if cs._finish is not None:
                break
            cs.push((i,))
    else:
        cs.push(token_ids, logprobs)
    cs.finish(finish)
    return cs._enc.response(evt.accumulate(cs._events), cs._logprobs())


def response_from_text(
    prep: PreparedRequest,
    text: str,
    *,
    token_count: int = 0,
    finish: str = "stop",
    **kwargs: Any,
) -> dict[str, Any]:
    """:func:`response` for decoded output text accounting for ``token_count`` tokens."""
    cs = CompletionStream(prep, **kwargs)
    cs._events = []
    cs.push_text(text, token_count)
    cs.finish(finish)
    return cs._enc.response(evt.accumulate(cs._events), None)
