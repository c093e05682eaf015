"""DeepSeek-V4.1 conformance vectors (deepseek-recipe 0.2.0's V4.1 path, fixtures/deepseek_v41/):
same prompt, special ranges, image sources, conversion and rejections; token ids equal to
deepseek-recipe's with the synthetic V4.1-shaped vocabulary; with the embedded DeepSeek-V4
vocabulary no ids, and a clear error naming the missing special token."""

from __future__ import annotations

import pytest

from fixtures import CONVERSION_KEYS, jsonl
from recipe.errors import RequestError
from recipe.options import PARITY_OPTIONS, Options
from recipe.pipeline import prepare
from recipe.tokenizer import MissingSpecialTokenError, TokenizerError
from v41_support import sources, synthetic_v41_tokenizer

ROWS = [r for api in ("chat", "responses", "messages") for r in jsonl(f"deepseek_v41/{api}_v41.jsonl")]
ACCEPTED = [r for r in ROWS if "error" not in r]
REJECTED = [r for r in ROWS if "error" in r]
MODEL_ROW = "v41-model_name_v4_flash_default"


def test_vectors_present():
    assert len(ACCEPTED) >= 80 and len(REJECTED) >= 20
    assert {r["api"] for r in ACCEPTED} == {"chat", "responses", "messages"}
    assert sum(bool(r["image_sources"]) for r in ACCEPTED) >= 5


@pytest.mark.parametrize("row", ACCEPTED, ids=lambda r: r["id"])
def test_accepted_row(row):
    prep = prepare(row["request"], row["api"], options=PARITY_OPTIONS, tokenizer=synthetic_v41_tokenizer())
    assert prep.encoding == row["conversion"]["encoding"] == "deepseek_v41"
    assert prep.prompt.text == row["prompt"]
    assert [list(r) for r in prep.prompt.special_ranges] == row["special_ranges"]
    assert sources(prep) == row["image_sources"]
    assert prep.token_ids == row["token_ids_synth_v41"]
    got = prep.conversion()
    want = {**row["conversion"], "thinking_stage": row["conversion"]["thinking_initial_stage"]}
    for key in CONVERSION_KEYS:
        assert got[key] == want[key], key
    # the default options answer every request deepseek-recipe accepts the same way
    assert prepare(row["request"], row["api"], tokenizer=synthetic_v41_tokenizer()).token_ids == row["token_ids_synth_v41"]


@pytest.mark.parametrize("row", ACCEPTED, ids=lambda r: r["id"])
def test_embedded_vocabulary_gives_the_prompt_but_no_ids(row):
    """With the embedded (DeepSeek-V4) vocabulary: the prompt and its segments, no ids; asking for
    them raises the error naming ``<｜System｜>`` and how to supply a V4.1 vocabulary."""
    prep = prepare(row["request"], row["api"])
    assert prep.prompt.text == row["prompt"]
    assert prep.ids is None and prep.missing_special == "<｜System｜>"
    with pytest.raises(MissingSpecialTokenError) as info:
        prep.token_ids
    err = info.value
    assert isinstance(err, TokenizerError) and isinstance(err, ValueError)
    assert err.token == "<｜System｜>" and err.encoding == "deepseek_v41"
    assert "'<｜System｜>'" in str(err) and "tokenizer.json" in str(err) and "--tokenizer" in str(err)
    assert prep.token_ids_note == str(err)


@pytest.mark.parametrize("row", [r for r in REJECTED if r["id"] != MODEL_ROW], ids=lambda r: r["id"])
def test_rejected_row(row):
    with pytest.raises(RequestError) as info:
        prepare(row["request"], row["api"], options=PARITY_OPTIONS)
    err, want = info.value, row["error"]
    assert err.status == want["status"] == 400
    assert err.stage == want["stage"]
    if want["stage"] == "convert":
        assert err.message == want["body"]["error"]["message"]
        assert err.type == want["body"]["error"]["type"]


def test_model_table_of_the_oracle_row():
    """The row was recorded with deepseek-recipe's defaults plus recipe's lowercase aliases, without
    ``DeepSeek-V4-Flash`` (which recipe's default table adds): the same table gives its message."""
    row = next(r for r in REJECTED if r["id"] == MODEL_ROW)
    table = {"DeepSeek-V4-Pro": "deepseek_v4", "deepseek-v4-pro": "deepseek_v4", "deepseek-v4-flash": "deepseek_v4",
             "DeepSeek-V4.1-Flash": "deepseek_v41", "deepseek-v4.1-flash": "deepseek_v41"}
    with pytest.raises(RequestError) as info:
        prepare(row["request"], row["api"], options=Options(models=table).parity())
    assert info.value.message == row["error"]["body"]["error"]["message"]
    # recipe's default table maps the name to the V4 encoding
    assert prepare(row["request"], row["api"]).encoding == "deepseek_v4"
