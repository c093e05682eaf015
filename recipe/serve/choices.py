"""The choices of one engine stream: what each delta adds to them, for one choice or ``n``.

A Chat Completions request with ``n`` > 1 is one engine request with ``n`` choices: the engine
samples them from one prompt (vLLM's and SGLang's ``n``) and tags each delta with its choice's
``index`` (:class:`~recipe.serve.engines.base.EngineDelta`); each choice has its own
:class:`~recipe.output.driver.CompletionStream` (``choice=k``), so its reasoning, tool calls, stop
sequences and notes are its own. A request with one choice is the case ``n`` = 1. The shapes are
OpenAI's:

- a stream's chunks carry one choice each (``choices[0].index`` = k); each choice ends with its
  own finishing chunk (``finish_reason``, and its notes in ``recipe.notes``) whose ``usage`` is
  null, and once every choice has finished one more chunk with ``choices: []`` carries the
  request's usage (completion tokens of all choices), then ``data: [DONE]`` (:class:`ChoiceFrames`);
- the response object lists the choices in index order, with the summed usage
  (:func:`~recipe.api.chat_output.merge_choices` of each :class:`Collected` choice's response).

The engine stream is closed once every choice has finished (EOS, a stop sequence or the engine's
finish); :mod:`recipe.serve.generation` drives the stream and handles errors, timeouts and
disconnects the same way for any ``n``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recipe.api.chat_output import ChatEncoder, total_usage
from recipe.output.driver import CompletionStream
from recipe.serve.engines.base import EngineDelta, EngineError
from recipe.serve.errors import ServeError, stream_error

if TYPE_CHECKING:
    from recipe.api.prepared import PreparedRequest
    from recipe.tokenizer import Tokenizer

__all__ = ["Usage", "delta_error", "choice_index", "Collected", "ChoiceFrames"]

#: The finish reasons that end a choice's output normally (``abort`` / ``error`` end the request).
_ENDS = ("stop", "length")


class Usage:
    """The engine's counts seen so far: ``prompt``, ``cached`` and ``completion`` tokens (all
    choices)."""

    __slots__ = ("prompt", "cached", "completion")

    def __init__(self, prompt: int, cached: int) -> None:
        self.prompt, self.cached, self.completion = prompt, cached, 0

    def see_cached(self, cached: int) -> None:
        """Take the engine's cached-token count, clamped to ``0 … prompt`` (anything but an int is
        not a count: ignored)."""
        if type(cached) is int:
            self.cached = min(max(cached, 0), self.prompt)


def delta_error(d: EngineDelta) -> EngineError:
    """The error for a delta whose finish is a failure (``abort`` / ``error``)."""
    return EngineError("failed", d.message or f"engine ended the request: {d.finish}")


def choice_index(d: EngineDelta, n: int) -> int:
    """The choice ``d`` belongs to, of ``n``.

    Raises:
        EngineError: ``protocol``, an index outside ``0 … n - 1``.
    """
    k = d.index
    if type(k) is not int or not 0 <= k < n:
        raise EngineError("protocol", f"the engine's delta names choice {k!r}; the request has choices 0..{n - 1}")
    return k


class Collected:
    """One choice's output as the engine reports it, for a whole (non-streamed) answer.

    Attributes:
        ids: the completion token ids so far.
        logprobs: one entry per id, or None (not asked for, or a delta came without them: none
            at all rather than made-up ones).
        finish: None while generating; ``stop`` once the model wrote a stop token (EOS) or a stop
            sequence, else the engine's ``stop`` / ``length``.
    """

    __slots__ = ("ids", "logprobs", "finish", "_watch")

    def __init__(self, prep: PreparedRequest, want_logprobs: bool, response_id: str | None,
                 tokenizer: Tokenizer | None, choice: int = 0) -> None:
        self.ids: list[int] = []
        self.logprobs: list[Any] | None = [] if want_logprobs else None
        self.finish: str | None = None
        # the stop sequences are watched as a stream would, so the engine is stopped where one ends
        self._watch = CompletionStream(prep, response_id=response_id, tokenizer=tokenizer, choice=choice) \
            if prep.parsing.stop_sequences else None

    def take(self, d: EngineDelta, stops: frozenset[int]) -> None:
        """Add delta ``d`` (of this choice, not yet finished); ``stops``: the stop token ids.

        Raises:
            EngineError: ``d`` ends the request as a failure.
        """
        if d.token_ids:
            self.ids.extend(d.token_ids)
            lps = self.logprobs
            if lps is not None:
                if d.logprobs is not None and len(d.logprobs) == len(d.token_ids):
                    lps.extend(d.logprobs)
                else:
                    self.logprobs = None
            if self._watch is not None:
                self._watch.push(d.token_ids)
            if not stops.isdisjoint(d.token_ids):  # the model ended its turn (EOS): the answer is complete,
                self.finish = "stop"  # as the streamed path stops there too; what the engine does next is moot
                return
        if d.finish is not None:
            if d.finish not in _ENDS:
                raise delta_error(d)
            self.finish = d.finish
        elif self._watch is not None and self._watch.finished:
            self.finish = "stop"


class ChoiceFrames:
    """The stream of a Chat request with ``n`` > 1 choices: each delta's frames (see the module
    docstring). Built from the engine's first delta ``d``; the generation driver calls
    :meth:`step` per delta until :attr:`done`, then :meth:`end` once the engine stream is closed.

    Attributes:
        usage: the request's counts so far.
        done: every choice has finished.
    """

    __slots__ = ("usage", "done", "_n", "_css", "_enc", "_finals", "_out")

    def __init__(self, prep: PreparedRequest, d: EngineDelta, n: int, cached_estimate: int, response_id: str | None,
                 tokenizer: Tokenizer | None) -> None:
        self.usage = usage = Usage(len(prep.token_ids), 0)
        usage.see_cached(d.cached_tokens if d.cached_tokens is not None else cached_estimate)
        self.done = False
        self._n = n
        self._css = [CompletionStream(prep, prompt_tokens=usage.prompt, cached_tokens=usage.cached,
                                      response_id=response_id, tokenizer=tokenizer, choice=k) for k in range(n)]
        self._enc: ChatEncoder = self._css[0].encoder  # type: ignore[assignment]  (n > 1: Chat Completions only)
        self._finals: list[dict[str, Any] | None] = [None] * n
        self._out: list[dict[str, Any]] = [p for cs in self._css for p in cs.start()]

    def step(self, d: EngineDelta) -> bytes:
        """The frames delta ``d`` adds (the first call: the streams' opening chunks too).

        Raises:
            EngineError: a delta for no choice of the request, or one that ends it as a failure.
        """
        k = choice_index(d, self._n)
        cs, usage, out = self._css[k], self.usage, self._out
        if d.cached_tokens is not None:
            usage.see_cached(d.cached_tokens)
        if not cs.finished:
            if d.token_ids:
                out += cs.push(d.token_ids, d.logprobs)
                usage.completion += len(d.token_ids)
            if d.finish is not None and not cs.finished:
                if d.finish not in _ENDS:
                    raise delta_error(d)
                out += cs.finish(d.finish)
            if cs.finished:  # its finishing chunk: the usage goes on the request's last chunk
                self._finals[k] = self._enc.drop_usage(out[-1])
                self.done = all(f is not None for f in self._finals)
        self._out = []
        return b"".join(map(self._enc.frame, out))

    async def end(self) -> bytes:
        """The frames after the last :meth:`step`: the request's usage chunk, then ``[DONE]``."""
        usage, enc = self.usage, self._enc
        total = total_usage(self._finals)  # type: ignore[arg-type]
        if usage.cached != total["prompt_tokens_details"]["cached_tokens"]:
            total["prompt_tokens_details"]["cached_tokens"] = usage.cached
            total["prompt_cache_hit_tokens"] = usage.cached
            total["prompt_cache_miss_tokens"] = usage.prompt - usage.cached
        return enc.frame(enc.usage_chunk(total)) + enc.done()

    def failure(self, err: ServeError) -> bytes:
        """The in-stream error frame that ends the stream with ``err``."""
        return stream_error("chat", err, None)
