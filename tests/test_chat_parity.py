"""Chat rows of the deepseek-recipe 0.2.0 conformance vectors: same prompt, ranges, ids and conversion."""

from __future__ import annotations

import pytest

from fixtures import CONVERSION_KEYS, api_requests
from recipe.errors import RequestError
from recipe.options import PARITY_OPTIONS
from recipe.pipeline import prepare

ROWS = api_requests("chat")


def test_vectors_present():
    assert len(ROWS) >= 40


@pytest.mark.parametrize("row", [r for r in ROWS if "error" not in r], ids=lambda r: r["id"])
def test_accepted_row(row):
    prep = prepare(row["request"], "chat")
    assert prep.prompt.text == row["prompt"]
    assert [list(r) for r in prep.prompt.special_ranges] == row["special_ranges"]
    assert prep.token_ids == row["token_ids"]
    got = prep.conversion()
    assert got["encoding"] == row["conversion"]["encoding"]
    for key in CONVERSION_KEYS:
        assert got[key] == row["conversion"][key], key


@pytest.mark.parametrize("row", [r for r in ROWS if "error" in r], ids=lambda r: r["id"])
def test_rejected_row(row):
    with pytest.raises(RequestError) as info:
        prepare(row["request"], "chat", options=PARITY_OPTIONS)
    err = info.value
    assert err.status == row["error"]["status"] == 400
    assert err.stage == row["error"]["stage"]
    if row["error"]["stage"] == "convert":
        assert err.type == row["error"]["body"]["error"]["type"]
