"""``recipe.serve.choices``: each choice's bookkeeping, the same for one choice and ``n`` (the
server drives both through one loop, :mod:`recipe.serve.generation`), and the HTTP connectors'
``token_ids`` check."""

from __future__ import annotations

import pytest

from recipe import prepare
from recipe.serve.choices import Collected, Usage, choice_index
from recipe.serve.engines.base import EngineDelta, EngineError
from recipe.serve.engines.http import token_ids
from recipe.tokenizer import default_tokenizer

EOS = 1
STOPS = frozenset({EOS})


def _prep(**extra):  # type: ignore[no-untyped-def]
    return prepare({"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}],
                    "thinking": {"type": "disabled"}, **extra})


def test_eos_ends_the_choice_as_stop_whatever_the_same_delta_says() -> None:
    c = Collected(_prep(), False, "chatcmpl-1", None)
    c.take(EngineDelta((19923,)), STOPS)
    assert c.finish is None
    c.take(EngineDelta((31152, EOS), finish="error", message="boom"), STOPS)  # the turn was complete
    assert (c.finish, c.ids) == ("stop", [19923, 31152, EOS])


def test_the_engines_finish_ends_the_choice_and_a_failure_raises() -> None:
    c = Collected(_prep(), False, "chatcmpl-1", None)
    c.take(EngineDelta((19923,), finish="length"), STOPS)
    assert c.finish == "length"
    c = Collected(_prep(), False, "chatcmpl-1", None)
    with pytest.raises(EngineError) as exc:
        c.take(EngineDelta((19923,), finish="abort", message="engine stopped"), STOPS)
    assert (exc.value.kind, exc.value.message) == ("failed", "engine stopped")


def test_a_stop_sequence_ends_the_choice_the_engines_length_in_that_delta_wins() -> None:
    tok = default_tokenizer()
    ids = tok.encode_ordinary("Hello END more")
    c = Collected(_prep(stop=["END"]), False, "chatcmpl-1", None)
    c.take(EngineDelta(tuple(ids[:1])), STOPS)
    assert c.finish is None
    c.take(EngineDelta(tuple(ids[1:2])), STOPS)
    assert c.finish == "stop"
    c = Collected(_prep(stop=["END"]), False, "chatcmpl-1", None)
    c.take(EngineDelta(tuple(ids[:2]), finish="length"), STOPS)
    assert c.finish == "length"


def test_logprobs_are_kept_only_while_every_delta_has_them() -> None:
    lp = (-0.5, [(19923, -0.5)])
    c = Collected(_prep(logprobs=True), True, "chatcmpl-1", None)
    c.take(EngineDelta((19923,), [lp]), STOPS)
    assert c.logprobs == [lp]
    c.take(EngineDelta((31152, 850)), STOPS)  # an engine that stopped reporting them: none at all
    assert c.logprobs is None
    c.take(EngineDelta((850,), [lp]), STOPS)
    assert c.logprobs is None and c.ids == [19923, 31152, 850, 850]
    assert Collected(_prep(), False, "chatcmpl-1", None).logprobs is None


@pytest.mark.parametrize(("index", "n", "ok"), [(0, 1, True), (2, 3, True), (3, 3, False), (-1, 3, False),
                                                (None, 2, False), (True, 2, False), ("1", 2, False)])
def test_choice_index(index, n, ok) -> None:  # type: ignore[no-untyped-def]
    d = EngineDelta((5,), index=index)
    if ok:
        assert choice_index(d, n) == index
    else:
        with pytest.raises(EngineError) as exc:
            choice_index(d, n)
        assert exc.value.kind == "protocol" and f"0..{n - 1}" in exc.value.message


def test_usage_cached_count_is_clamped_to_the_prompt() -> None:
    u = Usage(10, 0)
    for seen, kept in ((4, 4), (-3, 0), (11, 10), (10, 10)):
        u.see_cached(seen)
        assert u.cached == kept


@pytest.mark.parametrize(("value", "ids"), [(None, []), ([], []), ([0, 5, 128000], [0, 5, 128000])])
def test_token_ids_accepts_a_list_of_ids(value, ids) -> None:  # type: ignore[no-untyped-def]
    assert token_ids(value, "vLLM") == ids


@pytest.mark.parametrize("value", [[1, -1], [1, True], [1.0], "1,2", {"0": 1}, 7, [[1]]])
def test_token_ids_refuses_anything_else_naming_the_engine(value) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(EngineError) as exc:
        token_ids(value, "generate")
    assert exc.value.kind == "protocol"
    assert exc.value.message.startswith("generate token_ids is not a list of token ids: ")
