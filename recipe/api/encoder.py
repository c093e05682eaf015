"""The contract between the output driver and an API's output encoder, and the values they pass.

:class:`StreamEncoder` is what each API implements (Chat in :mod:`recipe.api.chat_output`, Responses
in :mod:`recipe.api.responses_output`, Messages in :mod:`recipe.api.messages_output`); the driver
(:mod:`recipe.output.driver`) builds one per request from its table. :class:`ResponseMeta`,
:class:`TokenLogprob` and :class:`ChannelLogprobs` are the plain values it hands them. Defined here,
in the api layer, so that the encoders never import the driver above them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from recipe.output.events import Finish, OutputEvent, ParsedOutput

__all__ = ["ResponseMeta", "TokenLogprob", "ChannelLogprobs", "StreamEncoder", "new_response_id", "HOLE", "frame_template"]

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


@dataclass(frozen=True, slots=True)
class ResponseMeta:
    """Per-response values every encoder needs (all fixed for the whole stream).

    Attributes:
        id: the response id (``chatcmpl-…`` for Chat).
        model: the model name echoed in every payload.
        created: Unix seconds.
        system_fingerprint: the backend's fingerprint, or None.
        prompt_tokens: prompt length in tokens, cached tokens included.
        cached_tokens: prompt tokens served from the prefix cache (``0 <= cached <= prompt``).
    """

    id: str
    model: str
    created: int
    system_fingerprint: str | None
    prompt_tokens: int
    cached_tokens: int


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One sampled token's log probability (or one alternative of it).

    Attributes:
        token_id: vocabulary id.
        token: the token's text; when its bytes are not whole UTF-8, every byte as ``\\xNN``
            (deepseek-recipe's spelling).
        token_bytes: the token's raw bytes.
        logprob: natural-log probability.
        top: the alternatives the engine reported (each with empty ``top``).
    """

    token_id: int
    token: str
    token_bytes: bytes
    logprob: float
    top: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True, slots=True)
class ChannelLogprobs:
    """All log-probability entries of one output, split by where their text landed."""

    content: tuple[TokenLogprob, ...] = ()
    reasoning: tuple[TokenLogprob, ...] = ()


@runtime_checkable
class StreamEncoder(Protocol):
    """What one API's output encoder does. Construct it as ``Encoder(prep, meta)``; an encoder may
    accept extra keyword-only options (``CompletionStream(encoder_options=…)`` passes them).

    Payloads are plain JSON-ready dicts (one per SSE event); :meth:`frame` turns one into bytes.
    Calls come in this order: :meth:`open` once, :meth:`on_events` any number of times,
    :meth:`close` once. :meth:`response` is independent (the non-streamed object).
    """

    #: prefix of generated response ids (``chatcmpl-`` for Chat).
    id_prefix: ClassVar[str]

    def open(self) -> list[dict[str, Any]]:
        """Payloads at stream start (Chat: the role chunk)."""
        ...

    def on_events(self, events: Sequence[OutputEvent], logprobs: Sequence[TokenLogprob] | None = None) -> list[dict[str, Any]]:
        """Payloads for parser events (never a :class:`Finish`: give that to :meth:`close`).
        ``logprobs`` belong to the first content/reasoning delta among ``events``."""
        ...

    def close(self, finish: Finish) -> list[dict[str, Any]]:
        """The final payload(s): finish reason and usage."""
        ...

    def response(self, parsed: ParsedOutput, logprobs: ChannelLogprobs | None = None) -> dict[str, Any]:
        """The non-streamed response object for a whole parsed output."""
        ...

    def frame(self, payload: dict[str, Any]) -> bytes:
        """One SSE frame for ``payload``."""
        ...

    def done(self) -> bytes | None:
        """The terminator frame sent after the last payload, or None if the API has none."""
        ...

    def delta_sse(self, event: OutputEvent) -> bytes | None:
        """The SSE bytes of one text, reasoning or argument delta that the open block / item / call
        takes as it is (the steady state of a stream), with the state updates of :meth:`on_events`;
        exactly ``b"".join(map(self.frame, self.on_events([event])))``. None, with nothing changed,
        when the event needs :meth:`on_events` (it opens or closes something, or is another kind)."""
        ...

    def fragment_sse(self, text: str, js: bytes) -> bytes | None:
        """:meth:`delta_sse` of an arguments delta of the last started call carrying ``text``, given
        ``js``, the compact JSON string literal of ``text`` (``orjson.dumps(text)``, from the parser's
        per-vocabulary tables): no event object, no JSON encoding per token. None, with nothing
        changed, when :meth:`on_events` must handle it (``CompletionStream.push_sse`` then builds
        the event)."""
        ...


def new_response_id(prefix: str, seed: int | str | None = None) -> str:
    """``prefix`` + 29 characters ``[A-Za-z0-9]``; the same seed gives the same id, None a fresh one."""
    rng: random.Random = random.SystemRandom() if seed is None else random.Random(f"response-id:{seed}")
    return prefix + "".join(rng.choices(_ALNUM, k=29))


#: Stands for a value in a payload template (:func:`frame_template`): private-use characters that
#: orjson writes as they are, so the template's frame holds it as ``"<HOLE>"``.
HOLE = "\ue000recipe:hole\ue001"
_HOLE_JSON = b'"' + HOLE.encode() + b'"'


def frame_template(frame: bytes, holes: int) -> tuple[bytes, ...] | None:
    """Split the SSE ``frame`` of a payload whose variable values were :data:`HOLE` into the
    ``holes + 1`` constant parts around them, so that a frame of the same payload with other values
    is ``parts[0] + json(v1) + parts[1] + …`` (the values' compact JSON: orjson writes a string or
    an integer the same way alone as inside an object). None when the split is ambiguous (a
    constant value such as the model name contains :data:`HOLE`)."""
    parts = tuple(frame.split(_HOLE_JSON))
    return parts if len(parts) == holes + 1 else None
