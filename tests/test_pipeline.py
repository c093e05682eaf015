"""prepare(): every API through one entry point; API detection."""

from __future__ import annotations

import pytest

from fixtures import jsonl
from recipe.errors import RequestError
from real_clients_support import reads_differently
from recipe.options import DEFAULT_OPTIONS, PARITY_OPTIONS
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
    # Messages `any` / output_config.format: recipe honours what deepseek-recipe drops (docs/clients.md)
    options = PARITY_OPTIONS if reads_differently(row["api"], row["request"]) else DEFAULT_OPTIONS
    prep = prepare(row["request"], row["api"], options=options)
    assert (prep.prompt.text, prep.token_ids) == (row["prompt"], row["token_ids"])


@pytest.mark.parametrize("row", [r for r in ROWS if r["id"] not in AMBIGUOUS], ids=lambda r: r["id"])
def test_detect_api(row):
    assert detect_api(row["request"]) == row["api"]


def test_ambiguous_bodies_read_as_chat():
    assert all(detect_api(r["request"]) == "chat" for r in ROWS if r["id"] in AMBIGUOUS)
