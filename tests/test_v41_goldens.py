"""Every V4 API golden in fixtures and the real-client corpus, re-run with the DeepSeek-V4.1 model
name against deepseek-recipe 0.2.0's V4.1 path (live, as the oracle).

- request goldens (fixtures/api/requests.jsonl, responses_requests.jsonl and the requests of the
  output goldens): the same prompt, special ranges, image sources, conversion and token ids (the
  synthetic V4.1-shaped vocabulary), or the same rejection; for Responses the namespace tool map;
- the real-client corpus (fixtures/real_clients/): every body converts with the default options
  (Responses chains through a store rebuilt from the recorded responses); where deepseek-recipe
  accepts a body its ids are recipe's, with the default and the parity options; where it refuses,
  the parity options refuse with its message and the default options give the prompt it gives the
  body's equivalent (docs/clients.md; on V4.1 a Chat ``developer`` message is a system message).
"""

from __future__ import annotations

import json

import pytest

import oracle
from fixtures import jsonl
from real_clients_support import equivalent_prompt, fixture_files, read_fixture, reads_differently
from recipe.api.responses import namespace_tool_map, parse_responses_request
from recipe.encodings.deepseek_v41 import ENCODING
from recipe.errors import RequestError
from recipe.options import PARITY_OPTIONS
from recipe.pipeline import prepare
from recipe.store.conversations import MemoryStore, expand_request, remember
from v41_support import MODEL, compare, synthetic_v41_tokenizer

V4_NAMES = {"deepseek-v4-pro", "deepseek-v4-flash", "DeepSeek-V4-Pro", "DeepSeek-V4-Flash"}


def _v41(body):
    """The body with a V4 model name swapped for V4.1's (other names kept: they test the table)."""
    if isinstance(body, dict) and body.get("model") in V4_NAMES:
        return {**body, "model": MODEL}
    return body


GOLDENS = [
    *jsonl("api/requests.jsonl"),
    *jsonl("api/responses_requests.jsonl"),
    *({"id": f"completions-{r['scenario']}-{r['api']}", **r} for r in jsonl("api/completions.jsonl")),
    *({"id": f"chat-completions-{r['scenario']}", **r} for r in jsonl("completions/chat_completions.jsonl")),
]


def test_goldens_present():
    assert len(GOLDENS) >= 250
    assert sum(r["request"].get("model") in V4_NAMES for r in GOLDENS if isinstance(r["request"], dict)) >= 200


@pytest.mark.parametrize("row", GOLDENS, ids=lambda r: r["id"])
def test_v4_golden_with_the_v41_name(row):
    body = _v41(row["request"])
    mine = compare(row["api"], body)
    if mine["ok"] and row["api"] == "responses":
        wire = json.dumps(body, ensure_ascii=False)
        theirs = oracle.dr.ResponsesRequest(wire).namespace_tool_map(oracle.options())
        assert namespace_tool_map(parse_responses_request(wire), ENCODING.request) == dict(theirs)


FIXTURE_FILES = fixture_files()


def test_real_client_corpus_present():
    assert len(FIXTURE_FILES) >= 50 and sum(len(read_fixture(p)) for p in FIXTURE_FILES) >= 148


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[p.stem for p in FIXTURE_FILES])
def test_real_client_bodies_with_the_v41_name(path):
    tok = synthetic_v41_tokenizer()
    store = MemoryStore()
    for n, rec in enumerate(read_fixture(path)):
        api, where = rec["api"], f"{path.name} line {n + 1} ({rec['api']})"
        body = _v41(rec["body"])
        try:
            expanded = expand_request(body, store) if api == "responses" else body
            prep = prepare(body, api, store=store, tokenizer=tok)
        except RequestError as err:
            pytest.fail(f"{where}: {err}")
        assert prep.encoding == "deepseek_v41"
        if "response" in rec:
            remember(store, body, rec["response"])
        plain = {k: v for k, v in expanded.items() if k != "previous_response_id"}
        theirs = oracle.convert(api, plain)
        if theirs["ok"] and reads_differently(api, plain):
            assert prepare(plain, api, options=PARITY_OPTIONS, tokenizer=tok).token_ids == theirs["token_ids"], where
            continue
        if theirs["ok"]:
            assert prep.token_ids == theirs["token_ids"], f"{where}: prompt differs from deepseek-recipe"
            assert prepare(plain, api, options=PARITY_OPTIONS, tokenizer=tok).token_ids == theirs["token_ids"], where
            continue
        with pytest.raises(RequestError) as refused:
            prepare(plain, api, options=PARITY_OPTIONS, tokenizer=tok)
        assert theirs["message"] in str(refused.value), where
        want = equivalent_prompt(api, expanded, oracle.convert, developer="system")
        assert want is not None, f"{where}: no equivalent body for {theirs['message']!r}"
        got = prep.token_ids if want[0] == "ids" else prep.prompt.text
        assert got == want[1], f"{where}: prompt differs from deepseek-recipe's for the equivalent body"


def test_chat_developer_is_the_v41_responses_developer_item():
    """docs/clients.md class 1 on V4.1: a Chat ``developer`` message is read as V4.1 reads a Responses
    ``developer`` item — a system message in place — so both APIs give deepseek-recipe's ids."""
    tok = synthetic_v41_tokenizer()
    history = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"},
               {"role": "assistant", "content": "Hello!"}, {"role": "developer", "content": "Answer in French."},
               {"role": "user", "content": "Again"}]
    chat = prepare({"model": MODEL, "messages": history, "reasoning_effort": "high"}, "chat", tokenizer=tok)
    resp_body = {"model": MODEL, "input": [{"role": m["role"], "content": m["content"]} for m in history], "reasoning": {"effort": "high"}}
    theirs = oracle.convert("responses", resp_body)
    assert theirs["ok"] and chat.token_ids == theirs["token_ids"] == prepare(resp_body, "responses", tokenizer=tok).token_ids
    assert "<｜System｜>Answer in French.<｜User｜>Again" in chat.prompt.text
    with pytest.raises(RequestError, match="unknown variant `developer`"):
        prepare({"model": MODEL, "messages": history}, "chat", options=PARITY_OPTIONS)
