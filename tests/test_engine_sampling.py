"""The engines' sampling fields (``top_k``, ``min_p``, the penalties, ``logit_bias``, ``min_tokens``,
``stop_token_ids``, ``n``) as ``prepare`` resolves them: a request that sets none of them skips their
checks (``values_of`` reads pydantic's ``model_fields_set``), so for any subset of them, set to a
value or to null, in all three APIs, ``prepare`` must give the engine exactly what the checks give for
the request's values read field by field, and refuse exactly what they refuse."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import recipe
from recipe.api.engine_sampling import FIELDS, extra_sampling
from recipe.errors import RequestError

#: per field: values the checks accept and values they refuse (and null, which is "not set")
VALUES: dict[str, list[Any]] = {
    "top_k": [None, -1, 0, 1, 40, -2, 1.5, "5", True],
    "min_p": [None, 0, 0.05, 1, 1.5, -0.1, "x"],
    "presence_penalty": [None, -2, 0.5, 2, 2.5],
    "frequency_penalty": [None, -2, -0.25, 2, -3],
    "repetition_penalty": [None, 0.5, 1.1, 2, 0, 2.5],
    "logit_bias": [None, {}, {"100": -5.5}, {"7": 100}, {"x": 1}, {"5": 101}, [1]],
    "min_tokens": [None, 0, 2, -1],
    "stop_token_ids": [None, [], [1, 2, 1], [-1], "1"],
    "n": [None, 1, 2, 0],
}
SETS = st.fixed_dictionaries({}, optional={k: st.sampled_from(v) for k, v in VALUES.items()})
USER = [{"role": "user", "content": "Hi"}]
BASES = {
    "chat": ({"model": "deepseek-v4-pro", "messages": USER}, True),
    "responses": ({"model": "deepseek-v4-pro", "input": "Hi"}, False),
    "messages": ({"model": "deepseek-v4-pro", "max_tokens": 64, "messages": USER}, False),
}


def _outcome(fn: Any) -> Any:
    try:
        return ("ok", fn())
    except RequestError as err:
        return ("error", err.param, str(err))


@settings(max_examples=150, deadline=None)
@given(api=st.sampled_from(sorted(BASES)), fields=SETS)
def test_prepare_resolves_the_sampling_fields_as_the_checks_do_field_by_field(api: str, fields: dict[str, Any]) -> None:
    base, n_field = BASES[api]
    body = {**base, **fields}
    # the oracle: every field read from the body (absent = null), checked in full
    want = _outcome(lambda: extra_sampling({k: fields.get(k) for k in FIELDS}, n_field=n_field))
    got = _outcome(lambda: recipe.prepare(body, api).engine.extra)
    if want[0] == "error":
        # Chat's wire model types some of these fields itself (n, the penalties): a parse-stage
        # refusal naming the same field is the same answer
        assert got[0] == "error" and got[1] == want[1], (got, want)
    else:
        assert got == want, (got, want)


def test_a_request_without_sampling_fields_gives_the_engine_no_extra_sampling() -> None:
    for api, (body, _) in BASES.items():
        assert recipe.prepare(body, api).engine.extra is None
        assert recipe.prepare({**body, "top_k": None}, api).engine.extra is None
        assert recipe.prepare({**body, "top_k": 5}, api).engine.extra.top_k == 5
