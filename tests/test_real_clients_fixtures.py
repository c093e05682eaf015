"""Real-client request bodies without the SDKs: the recorded fixtures and the class 1 equivalence.

``fixtures/real_clients/*.jsonl`` hold every request the official SDKs sent in
``tests/test_real_clients.py`` (one ``{"api", "body", "status", "response"?}`` per line). Each body
must convert, and wherever deepseek-recipe 0.2.0 (the parity target, when installed) can answer the
body — or the equivalent body of its acceptance class — recipe's prompt must be its prompt.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from real_clients_support import MODEL, equivalent_prompt, fixture_files, read_fixture, reads_differently

from recipe.errors import RequestError
from recipe.options import PARITY_OPTIONS
from recipe.pipeline import prepare
from recipe.store.conversations import MemoryStore, expand_request, remember

HAVE_ORACLE = importlib.util.find_spec("deepseek_recipe") is not None
FIXTURE_FILES = fixture_files()


def test_fixtures_recorded():
    """The recorded loops are present (one file per SDK loop of test_real_clients.py)."""
    names = {p.stem for p in FIXTURE_FILES}
    assert len(names) >= 50
    for prefix in ("openai_chat_", "openai_responses_", "agents_", "anthropic_", "langchain_", "litellm_"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert all(r["status"] == 200 for p in FIXTURE_FILES for r in read_fixture(p))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[p.stem for p in FIXTURE_FILES])
def test_fixture_bodies_convert(path):
    """Every recorded client body converts (Responses chains through a store rebuilt from the recorded
    responses), without losing prompt parity with deepseek-recipe:

    - a body deepseek-recipe accepts (chains expanded first) gets its exact prompt ids, with the
      default and with the parity options;
    - a body it refuses is refused with its message under ``PARITY_OPTIONS``, and by default gets the
      prompt deepseek-recipe gives the class's equivalent body (``equivalent_prompt``).
    """
    store = MemoryStore()
    for n, rec in enumerate(read_fixture(path)):
        body, api, where = rec["body"], rec["api"], f"{path.name} line {n + 1} ({rec['api']})"
        try:
            expanded = expand_request(body, store) if api == "responses" else body
            prep = prepare(body, api, store=store)
        except RequestError as err:
            pytest.fail(f"{where}: {err}")
        if "response" in rec:
            remember(store, body, rec["response"])
        if not HAVE_ORACLE:
            continue
        from oracle import convert

        plain = {k: v for k, v in expanded.items() if k != "previous_response_id"}
        oracle = convert(api, plain)
        if oracle["ok"] and reads_differently(api, plain):
            # Messages `any` / `output_config.format`: deepseek-recipe drops what they ask for (a forced
            # call, a JSON format); recipe honours them by default (tests/test_messages_structured.py)
            assert prepare(plain, api, options=PARITY_OPTIONS).token_ids == oracle["token_ids"], where
            continue
        if oracle["ok"]:
            assert prep.token_ids == oracle["token_ids"], f"{where}: prompt differs from deepseek-recipe"
            assert prepare(plain, api, options=PARITY_OPTIONS).token_ids == oracle["token_ids"], where
            continue
        with pytest.raises(RequestError) as refused:
            prepare(plain, api, options=PARITY_OPTIONS)
        assert oracle["message"] in str(refused.value), where
        want = equivalent_prompt(api, expanded, convert)
        assert want is not None, f"{where}: no equivalent body for {oracle['message']!r}"
        got = prep.token_ids if want[0] == "ids" else prep.prompt.text
        assert got == want[1], f"{where}: prompt differs from deepseek-recipe's for the equivalent body"


# --------------------------------------------------------------------------- class 1: cross-API equivalence


DEV = {"role": "developer", "content": "Answer in French."}
HISTORIES = {
    "first": [DEV, {"role": "user", "content": "Hi"}],
    "parts": [{**DEV, "content": [{"type": "text", "text": "Answer in French."}]}, {"role": "user", "content": "Hi"}],
    "mid": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"}, DEV, {"role": "user", "content": "Again"}],
}
EFFORTS = {"default": ({}, {}), "high": ({"reasoning_effort": "high"}, {"reasoning": {"effort": "high"}}),
           "none": ({"reasoning_effort": "none"}, {"reasoning": {"effort": "none"}})}


def _as_user(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "role": "user"} if m["role"] == "developer" else m for m in history]


def _responses_input(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def part(m: dict[str, Any]) -> Any:
        kind = "output_text" if m["role"] == "assistant" else "input_text"
        return m["content"] if isinstance(m["content"], str) else [{"type": kind, "text": p["text"]} for p in m["content"]]

    return [{"role": m["role"], "content": part(m)} for m in history]


@pytest.mark.parametrize("effort", list(EFFORTS))
@pytest.mark.parametrize("history", list(HISTORIES))
def test_developer_role_cross_api_equivalence(history, effort):
    """Class 1: a Chat ``developer`` message is read as a Responses ``developer`` input item is (a
    user message): the same prompt ids as the Responses request — deepseek-recipe's own ids when it
    is installed — and as the Chat request with the role ``user``; the parity options keep
    deepseek-recipe's error."""
    chat_extra, resp_extra = EFFORTS[effort]
    msgs = HISTORIES[history]
    chat = prepare({"model": MODEL, "messages": msgs, **chat_extra}, "chat").token_ids
    resp_body = {"model": MODEL, "input": _responses_input(msgs), **resp_extra}
    assert chat == prepare(resp_body, "responses").token_ids
    assert chat == prepare({"model": MODEL, "messages": _as_user(msgs), **chat_extra}, "chat").token_ids
    if HAVE_ORACLE:
        from oracle import convert

        oracle = convert("responses", resp_body)
        assert oracle["ok"] and chat == oracle["token_ids"]
    with pytest.raises(RequestError, match="unknown variant `developer`"):
        prepare({"model": MODEL, "messages": msgs}, "chat", options=PARITY_OPTIONS)
