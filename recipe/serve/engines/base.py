"""The engine contract: one neutral request in, a stream of deltas out, closing the stream aborts.

An engine is anything that turns prompt token ids into completion token ids: a vLLM or SGLang
server (:mod:`recipe.serve.engines.vllm`, :mod:`recipe.serve.engines.sglang`), a scripted replay
(:mod:`recipe.serve.engines.replay`), the demo (:mod:`recipe.serve.engines.demo`) or a Python
callable (:mod:`recipe.serve.engines.inprocess`). The server never sees more than this module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from recipe.api.prepared import PreparedRequest
from recipe.conversation import ExtraSampling, OutputConstraint

if TYPE_CHECKING:
    from recipe.schema.turn import OutputGrammar

__all__ = ["VOCABULARY_PROBE", "EngineRequest", "EngineDelta", "new_delta", "EngineError", "EngineInfo", "Engine", "ErrorKind", "FINISH_REASONS", "ConstrainLevel",
           "CONSTRAIN_LEVELS", "constraint_at"]

#: The text an engine is asked to tokenize to tell which vocabulary it serves (vLLM ``POST /tokenize``,
#: which encodes the special tokens written in the text): ``<think>`` is a different id in the
#: DeepSeek-V3 and DeepSeek-V4 vocabularies, and ``｜DSML｜`` is a special token of V4's only.
VOCABULARY_PROBE = "<think>｜DSML｜</think>"

#: Finish reasons an engine reports; ``abort`` and ``error`` end the request as a failure.
FINISH_REASONS = ("stop", "length", "abort", "error")

#: What went wrong with an engine; the server maps each to an HTTP status (recipe.serve.errors).
ErrorKind = Literal["unavailable", "overloaded", "timeout", "bad_request", "context_length", "failed", "protocol"]

#: How much of the request's output constraint the server hands to engines (``recipe serve
#: --constrain``): ``off`` nothing; ``format`` the ``response_format`` only (JSON / regex; tool calls
#: unconstrained); ``full`` the whole turn (reasoning, DSML tool calls per ``tool_choice``, formats).
ConstrainLevel = Literal["off", "format", "full"]
CONSTRAIN_LEVELS: tuple[str, ...] = ("off", "format", "full")
_FORMAT_KINDS = frozenset({"json", "regex"})


def constraint_at(constraint: OutputConstraint | None, level: str) -> OutputConstraint | None:
    """``constraint`` as the server hands it to engines at ``level`` (see :data:`ConstrainLevel`):
    the same object, or None (``off``; ``format`` and a tool-call constraint).

    Raises:
        ValueError: an unknown level.
    """
    if level == "full":
        return constraint
    if level == "format":
        return constraint if constraint is not None and constraint.kind in _FORMAT_KINDS else None
    if level == "off":
        return None
    raise ValueError(f"unknown constrain level {level!r}; expected off, format or full")


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """One generation request, engine-neutral (NVIDIA Dynamo's ``PreprocessedRequest`` is the model).

    Attributes:
        request_id: unique per request (vLLM ``request_id``, SGLang ``rid``).
        token_ids: the prompt token ids.
        max_tokens: completion-token limit, always set.
        temperature, top_p, seed: sampling.
        stop_token_ids: ids that end the output (EOS); text stop sequences stay in recipe.
        logprobs: alternatives per token to report (0: the sampled token's only), None: off.
        constraint: recipe's output constraint after the server's ``constrain`` level (None: nothing
            to enforce); its :attr:`grammar` covers the whole turn. Each connector sends what its
            engine accepts; an in-process engine can enforce it with ``recipe.OutputMatcher``.
        cache_salt: the tenant's prefix-cache salt (vLLM / SGLang ``cache_salt``), or None.
        prepared: the prepared request, for in-process engines that answer by its content (the demo);
            remote connectors ignore it.
        constrain: the server's constrain level (:data:`ConstrainLevel`): ``full`` lets a connector
            send the turn grammar; ``format`` only the engine's plain JSON / regex fields.
        extra: the further sampling fields the request set (``top_k``, ``min_p``, penalties,
            ``logit_bias``, ``min_tokens``, ``n``: :class:`~recipe.conversation.ExtraSampling`), or
            None; the vLLM and SGLang connectors send each under the engine's name.
        dp_rank: the engine's data-parallel rank to run it on (the vLLM and generate connectors send
            vLLM's ``X-data-parallel-rank`` header), or None: the engine picks.
    """

    request_id: str
    token_ids: Sequence[int]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    logprobs: int | None = None
    constraint: OutputConstraint | None = None
    cache_salt: str | None = None
    prepared: PreparedRequest | None = None
    constrain: str = "full"
    extra: ExtraSampling | None = None
    dp_rank: int | None = None

    @classmethod
    def from_prepared(cls, prep: PreparedRequest, request_id: str, cache_salt: str | None = None,
                      constrain: str = "full", dp_rank: int | None = None) -> EngineRequest:
        """The engine request for ``prep`` (its :class:`~recipe.api.prepared.EngineParams` bundle), its
        constraint kept per ``constrain`` (:func:`constraint_at`).

        Raises:
            ValueError: ``prep`` has no engine bundle (a hand-built PreparedRequest); an unknown level.
        """
        e = prep.engine
        if e is None:
            raise ValueError("the prepared request has no engine parameters (use recipe.prepare)")
        c = e.constraint if constrain == "full" else constraint_at(e.constraint, constrain)
        return cls(
            request_id, prep.token_ids, e.max_tokens, e.temperature, e.top_p, e.seed, e.stop_token_ids, e.logprobs, c,
            cache_salt, prep, constrain, e.extra, dp_rank)

    @property
    def grammar(self) -> OutputGrammar | None:
        """The grammar of the whole assistant turn to enforce (``constraint.grammar``: Lark,
        structural tag, engine fields; built on first access and cached), or None (no constraint, or
        a model family without a grammar builder). ``recipe.OutputMatcher(request.prepared,
        grammar=request.grammar)`` masks a model's logits with it.

        Raises:
            ValueError: the grammar cannot be built (never for a request ``prepare`` accepted).
        """
        c = self.constraint
        return None if c is None else c.grammar


@dataclass(frozen=True, slots=True)
class EngineDelta:
    """What an engine reports, any number of times per request.

    Attributes:
        token_ids: new completion ids (never repeated ones).
        logprobs: None, or one ``(logprob, [(token_id, logprob), ...])`` pair per new id.
        finish: None while generating; ``stop`` / ``length`` ends the output, ``abort`` / ``error``
            ends it as a failure (``message`` says why).
        prompt_tokens, cached_tokens: the engine's prompt and prefix-cache counts when it reports them
            (first delta or last), else None.
        message: the engine's reason for ``abort`` / ``error``.
        index: the choice the delta belongs to (0 … ``n - 1`` for a request with
            ``extra.n`` choices, each ending with its own finish; always 0 otherwise).
    """

    token_ids: Sequence[int] = ()
    logprobs: Sequence[Any] | None = None
    finish: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    message: str | None = None
    index: int = 0


#: ``EngineDelta`` itself, by the name engines build their deltas with (fields in order).
new_delta = EngineDelta


class EngineError(Exception):
    """An engine failure, before or during a stream.

    Attributes:
        kind: ``unavailable`` (refused / unreachable / closed the stream), ``overloaded`` (the
            engine said 429 / 503), ``timeout`` (connect, first token, idle gap or total),
            ``bad_request`` (the engine refused the request: an invalid grammar, a salt it does not
            take …), ``context_length`` (the engine refused the prompt plus ``max_tokens`` as longer
            than its context window),
            ``failed`` (the engine answered an error), ``protocol`` (malformed or out-of-order output).
        message: what happened, for the API error's message.
        engine_status: the engine's HTTP status when it answered one.
        connect_failed: the connection was never made (refused, unreachable, connect timeout):
            nothing reached the engine, so the request may be sent to another replica.
    """

    def __init__(self, kind: ErrorKind, message: str, engine_status: int | None = None, *,
                 connect_failed: bool = False) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.engine_status = engine_status
        self.connect_failed = connect_failed


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """What a replica serves, as the engine itself reports it (read at the server's start and again
    when the replica answers after a refused or broken connection).

    Attributes:
        models: the engine's served model names, in its order (vLLM ``--served-model-name``, or the
            model path; SGLang the same): the ``id`` of each entry of its ``GET /v1/models``.
        max_model_len: the engine's context window in tokens (prompt plus completion; vLLM
            ``--max-model-len``, SGLang ``--context-length``), or None when the engine does not say.
        probe_ids: the engine's token ids for :data:`VOCABULARY_PROBE` (no BOS), which tell the
            vocabulary it serves; None when the engine does not tokenize on request (SGLang).
    """

    models: tuple[str, ...] = ()
    max_model_len: int | None = None
    probe_ids: tuple[int, ...] | None = None


@runtime_checkable
class Engine(Protocol):
    """A token-in/token-out engine.

    ``generate`` returns an async iterator of :class:`EngineDelta`; closing it (``aclose()``, or
    cancelling the task iterating it) must abort the request upstream. It raises
    :class:`EngineError` for failures. ``aclose`` releases connections at server shutdown.

    An engine that samples several choices of one prompt (``request.extra.n`` > 1, Chat
    Completions ``n``) says so with a true ``serves_n`` attribute and tags each delta with its
    choice's ``index``; the server refuses ``n`` > 1 (a 400 on ``n``) for an engine without it.
    """

    name: str

    def generate(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        """Start generating ``request``; see the class docstring."""
        ...

    async def aclose(self) -> None:
        """Release the engine's resources (idempotent)."""
        ...
