"""prepare(): every API through one entry point; API detection."""

from __future__ import annotations

import pytest

from fixtures import jsonl
from recipe.errors import RequestError
from recipe.options import PARITY_OPTIONS
from recipe.pipeline import detect_api, prepare

ROWS = jsonl("api/requests.jsonl")
AMBIGUOUS = {"M09", "M17", "M18", "M24", "M29", "M30"}  # plain user strings: valid Chat and Messages bodies


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["id"])
def test_every_vector_through_prepare(row):
    if "error" in row:
        with pytest.raises(RequestError) as info:
            prepare(row["request"], row["api"], options=PARITY_OPTIONS)
        assert info.value.stage == row["error"]["stage"]
        return
    prep = prepare(row["request"], row["api"])
    assert (prep.prompt.text, prep.token_ids) == (row["prompt"], row["token_ids"])


@pytest.mark.parametrize("row", [r for r in ROWS if r["id"] not in AMBIGUOUS], ids=lambda r: r["id"])
def test_detect_api(row):
    assert detect_api(row["request"]) == row["api"]


def test_ambiguous_bodies_read_as_chat():
    assert all(detect_api(r["request"]) == "chat" for r in ROWS if r["id"] in AMBIGUOUS)
