"""``replay:FILE``: deterministic scripted outputs, for tests, demos and load tests.

The file is JSONL, one turn per line, played in order and cycling (each request takes the next
turn). A turn is ``{"text": "…"}`` (special tokens spelled as in the prompt, e.g.
``"Let me think.</think>Hello!<｜end▁of▁sentence｜>"``) or ``{"ids": [...]}``, with optional fields:

``finish``  ``stop`` (default) | ``length`` | ``error`` (the engine fails after the ids)
``cached_tokens``  the prompt tokens the engine reports as cached (default: from the replica's own
            simulated prefix cache, below)
``chunk``   ids per delta (default 1)
``delay_ms``  pause between deltas (default 0: the engine still yields to the event loop)
``stall_ms``  pause before the first delta (default 0)
``message``  the error message for ``finish: error``

Like an engine, a turn stops after the request's first stop token id (finish ``stop``) and at
``max_tokens`` ids (finish ``length``). Each replay engine keeps a simulated prefix cache of the
prompts it served (block keys under the request's cache salt), so a replica pool of replays reports
the cached tokens a real pool would: hits only where routing sent a request to the replica that
holds its prefix.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recipe.cache.index import MemoryPrefixIndex
from recipe.cache.keys import DEFAULT_BLOCK_SIZE, KeySpec, block_keys, cached_prompt_tokens
from recipe.jsonfmt import jsonl_values
from recipe.serve.engines.base import EngineDelta, EngineError, EngineRequest, new_delta
from recipe.tokenizer import Tokenizer, load_tokenizer

__all__ = ["ReplayTurn", "ReplayEngine", "parse_turn", "load_turns"]

_FINISHES = ("stop", "length", "error")
_DEFAULT_MESSAGE = "replay: scripted engine failure"
_FIELDS = frozenset({"text", "ids", "finish", "cached_tokens", "chunk", "delay_ms", "stall_ms", "message"})


@dataclass(frozen=True, slots=True)
class ReplayTurn:
    """One scripted output: completion ids and how to play them (see the module docstring)."""

    ids: tuple[int, ...]
    finish: str = "stop"
    cached_tokens: int | None = None
    chunk: int = 1
    delay_ms: float = 0.0
    stall_ms: float = 0.0
    message: str = _DEFAULT_MESSAGE


def _number(obj: dict[str, Any], key: str, where: str, *, integer: bool, minimum: float) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or value < minimum:
        raise ValueError(f"{where}: {key} must be {'an integer' if integer else 'a number'} >= {minimum}")
    return value


def parse_turn(obj: Any, tokenizer: Tokenizer, where: str = "turn") -> ReplayTurn:
    """A :class:`ReplayTurn` from one JSON object.

    Raises:
        ValueError: not an object, unknown fields, neither or both of ``text`` / ``ids``, bad values
            (the message starts with ``where``).
    """
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: each line must be a JSON object")
    unknown = sorted(set(obj) - _FIELDS)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")
    if ("text" in obj) == ("ids" in obj):
        raise ValueError(f"{where}: give exactly one of \"text\" and \"ids\"")
    if "text" in obj:
        if not isinstance(obj["text"], str):
            raise ValueError(f"{where}: text must be a string")
        ids = tokenizer.encode_with_special_tokens(obj["text"])
    else:
        ids = obj["ids"]
        if not isinstance(ids, list) or not all(type(i) is int and 0 <= i < tokenizer.n_vocab for i in ids):
            raise ValueError(f"{where}: ids must be a list of token ids in [0, {tokenizer.n_vocab})")
    finish = obj.get("finish", "stop")
    if finish not in _FINISHES:
        raise ValueError(f"{where}: finish must be one of {', '.join(_FINISHES)}")
    message = obj.get("message", _DEFAULT_MESSAGE)
    if not isinstance(message, str):
        raise ValueError(f"{where}: message must be a string")
    cached = _number(obj, "cached_tokens", where, integer=True, minimum=0)
    chunk = _number(obj, "chunk", where, integer=True, minimum=1) or 1
    delay = _number(obj, "delay_ms", where, integer=False, minimum=0) or 0.0
    stall = _number(obj, "stall_ms", where, integer=False, minimum=0) or 0.0
    return ReplayTurn(tuple(ids), finish, cached, chunk, float(delay), float(stall), message)


def load_turns(source: str | Path | Iterable[Any], tokenizer: Tokenizer | None = None) -> list[ReplayTurn]:
    """Turns from a JSONL file (path) or an iterable of JSON objects.

    Raises:
        ValueError: an unreadable file, a bad line (``FILE:LINE: …``) or no turn at all.
    """
    tok = tokenizer or load_tokenizer()
    turns: list[ReplayTurn] = []
    if isinstance(source, (str, Path)):
        try:
            values = jsonl_values(source)
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"replay file {source}: {exc}") from None
        turns = [parse_turn(obj, tok, f"{source}:{n}") for n, obj in values]
    else:
        turns = [parse_turn(obj, tok, f"turn {i}") for i, obj in enumerate(source)]
    if not turns:
        raise ValueError(f"replay {source}: no turns")
    return turns


class ReplayEngine:
    """An engine that plays :class:`ReplayTurn` s in order, cycling (see the module docstring).

    Args:
        turns: the script (:func:`load_turns`).
        name: the replica name in logs, metrics and the ``x-recipe-replica`` header.
        block_size: block size of the simulated prefix cache (DeepSeek's 64 by default).
    """

    def __init__(self, turns: Sequence[ReplayTurn], name: str = "replay", block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if not turns:
            raise ValueError("a replay engine needs at least one turn")
        self.name = name
        self.turns = list(turns)
        self.block_size = block_size
        self.cache = MemoryPrefixIndex()
        self.played = 0
        self.active = 0  # requests being generated now
        self.aborted = 0  # requests closed before their turn ended

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None, tokenizer: Tokenizer | None = None) -> ReplayEngine:
        """A replay of the JSONL file at ``path`` (raises ValueError for a bad file)."""
        return cls(load_turns(path, tokenizer), name or f"replay:{path}")

    def cached_tokens(self, token_ids: Sequence[int], salt: str | None) -> int:
        """Prompt tokens this replica's simulated cache holds for ``token_ids``; records the prompt."""
        keys = block_keys(token_ids, KeySpec(block_size=self.block_size, salt=salt)).keys
        matched = self.cache.longest_prefix("replay", keys)
        self.cache.put("replay", keys)
        return cached_prompt_tokens(len(token_ids), matched, self.block_size)

    def generate(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        """Play the next turn for ``request``."""
        turn = self.turns[self.played % len(self.turns)]
        self.played += 1
        return self._play(turn, request)

    async def _play(self, turn: ReplayTurn, req: EngineRequest) -> AsyncIterator[EngineDelta]:
        self.active += 1
        done = False
        try:
            if turn.stall_ms:
                await asyncio.sleep(turn.stall_ms / 1000)
            prompt = len(req.token_ids)
            cached = turn.cached_tokens if turn.cached_tokens is not None else self.cached_tokens(req.token_ids, req.cache_salt)
            cached = min(cached, prompt)
            ids, finish = _cut(turn, req)
            delay = turn.delay_ms / 1000
            n, step = len(ids), turn.chunk
            if n == 0 and finish != "error":
                done = True
                yield EngineDelta((), None, finish, prompt, cached)
                return
            for start in range(0, n, step):
                if start:
                    await asyncio.sleep(delay)
                last = start + step >= n
                fin = finish if last and finish != "error" else None
                done = done or fin is not None
                yield new_delta(ids[start:start + step], None, fin, prompt if start == 0 else None,
                                cached if start == 0 else None, None)
            if finish == "error":
                done = True
                raise EngineError("failed", turn.message)
        finally:
            self.active -= 1
            if not done:
                self.aborted += 1

    async def aclose(self) -> None:
        """Nothing to release."""


def _cut(turn: ReplayTurn, req: EngineRequest) -> tuple[tuple[int, ...], str]:
    """The ids an engine would emit: up to and including the first stop id, at most max_tokens."""
    ids, finish = turn.ids, turn.finish
    cut = min((ids.index(s) for s in req.stop_token_ids if s in ids), default=-1)  # C-speed scans
    if cut >= 0:
        ids, finish = ids[: cut + 1], "stop" if finish != "error" else finish
    if len(ids) > req.max_tokens:
        ids, finish = ids[: req.max_tokens], "length"
    return ids, finish
