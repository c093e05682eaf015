"""P/D-disaggregated serving (recipe/serve/engines/disagg.py): ``recipe serve`` with ``prefill=`` and
``decode=`` replicas, driven through the official openai and anthropic SDKs.

Why no real engine: disaggregation needs a KV connector that moves the prompt's KV cache from the
prefill engine to the decode engine — vLLM's NixlConnector (NIXL / UCX transfers between GPU
workers) or SGLang's Mooncake / NIXL backends — and none runs on this machine's CPU-only vLLM (SGLang
is not installed at all). So the engines are in-test HTTP servers on 127.0.0.1 (tests/fake_pd_engines.py)
that check each protocol's fields as the real engines need them and answer as they do: vLLM's
``kv_transfer_params`` round trip (prefill whole with ``max_tokens`` 1, decode with the prefill's
parameters, read once) and SGLang's bootstrap fields (the same host, port and room on both servers).
"""

from __future__ import annotations

import time
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from fake_pd_engines import (PREFILL_TRANSFER, Fake, Ledger, generate_decode_app, generate_prefill_app, sglang_decode_app,
                             sglang_prefill_app, vllm_decode_app, vllm_prefill_app)
from serve_support import free_port, running

import recipe.serve
from recipe.serve.config import ServeConfig
from recipe.serve.engines import build_engines

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

MODEL = "deepseek-v4-flash"
OFF = {"thinking": {"type": "disabled"}}
CONFIG = dict(warm=False, gc_freeze=False, probe_seconds=None)


@contextmanager
def pd_engines(protocol: str, prefill: list[Fake], decode: list[Fake], dead_prefill: int = 0,
               params: dict[str, str] | None = None):
    """The fake servers of a P/D pool: yields (the ``--engine`` specs naming them, ledger, {name: url});
    ``params``: more spec parameters per replica name (e.g. its KV-event publisher)."""
    ledger = Ledger()
    make_p = {"vllm": vllm_prefill_app, "generate": generate_prefill_app, "sglang": sglang_prefill_app}[protocol]
    make_d = {"vllm": vllm_decode_app, "generate": generate_decode_app, "sglang": sglang_decode_app}[protocol]
    params = params or {}
    with ExitStack() as stack:
        urls = {f.name: stack.enter_context(running(make_p(f, ledger), config_of=uvicorn.Config)).url for f in prefill}
        urls.update({f.name: stack.enter_context(running(make_d(f, ledger), config_of=uvicorn.Config)).url for f in decode})
        specs = [f"prefill={protocol}+http://127.0.0.1:{free_port()}?name=dead{k}" for k in range(dead_prefill)]
        for f in prefill:
            port = f"&bootstrap_port={f.bootstrap_port}" if protocol == "sglang" else ""
            more = f"&{params[f.name]}" if f.name in params else ""
            specs.append(f"prefill={protocol}+{urls[f.name]}?name={f.name}&model=tiny{port}{more}")
        specs += [f"decode={protocol}+{urls[f.name]}?name={f.name}&model=tiny" for f in decode]
        yield specs, ledger, urls


@contextmanager
def fleet(protocol: str, prefill: list[Fake], decode: list[Fake], dead_prefill: int = 0,
          params: dict[str, str] | None = None, **config: Any):
    """The fake servers and ``recipe serve`` over them: yields (recipe's URL, ledger, {name: url})."""
    with pd_engines(protocol, prefill, decode, dead_prefill, params) as (specs, ledger, urls):
        app = recipe.serve.app(engines=specs, config=ServeConfig(**{**CONFIG, **config}))
        with running(app) as srv:
            yield srv.url, ledger, urls


def oai(url: str) -> Any:
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=30)


def ask(url: str, text: str = "Hi", stream: bool = False) -> tuple[str, Any]:
    client = oai(url)
    msgs = [{"role": "user", "content": text}]
    if not stream:
        r = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=20, extra_body=OFF)
        return r.choices[0].message.content, r.usage
    chunks = list(client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=20, stream=True,
                                                 stream_options={"include_usage": True}, extra_body=OFF))
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks[-1].usage


@pytest.mark.parametrize("stream", [False, True])
def test_vllm_pd_prefills_on_one_replica_and_decodes_with_its_kv_transfer_params(stream):
    with fleet("vllm", [Fake("P1")], [Fake("D1")]) as (url, ledger, _):
        text, usage = ask(url, "Hello there", stream)
        assert text == "Hello from decode."
        (pre,), (dec,) = ledger.by("P1"), ledger.by("D1")
        assert pre["kv_transfer_params"] == PREFILL_TRANSFER and pre["max_tokens"] == 1 and pre["stream"] is False
        assert dec["kv_transfer_params"]["do_remote_prefill"] is True and dec["stream"] is True
        assert dec["prompt"] == pre["prompt"] == recipe.prepare(
            {"model": MODEL, "messages": [{"role": "user", "content": "Hello there"}], **OFF}).token_ids
        assert dec["max_tokens"] == 20 and pre["model"] == dec["model"] == "tiny"
        assert usage.prompt_tokens == len(pre["prompt"])
        assert usage.prompt_tokens_details.cached_tokens == 0  # the prefill replica's count, not the decode's


def test_generate_pd_carries_kv_transfer_params_in_generate_requests():
    with fleet("generate", [Fake("P1")], [Fake("D1")]) as (url, ledger, _):
        text, usage = ask(url, "Hello there", stream=True)
        assert text == "Hello from decode."
        (pre,), (dec,) = ledger.by("P1"), ledger.by("D1")
        assert pre["kv_transfer_params"] == PREFILL_TRANSFER and pre["sampling_params"]["max_tokens"] == 1
        assert dec["kv_transfer_params"]["remote_engine_id"] == "engine-P1" and dec["sampling_params"]["max_tokens"] == 20
        assert pre["token_ids"] == dec["token_ids"] and usage.prompt_tokens == len(pre["token_ids"])


def test_messages_through_the_anthropic_sdk_and_the_prefill_replicas_cached_count():
    long = "Tell me about the weather. " * 40
    with fleet("vllm", [Fake("P1")], [Fake("D1")]) as (url, ledger, _):
        client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
        for _ in range(2):
            m = client.messages.create(model=MODEL, max_tokens=30, messages=[{"role": "user", "content": long}],
                                       thinking={"type": "disabled"})
        assert m.content[0].text == "Hello from decode."
        assert len(ledger.by("P1")) == len(ledger.by("D1")) == 2
        assert m.usage.cache_read_input_tokens >= 64  # the second prefill found the first's blocks


def test_the_prefill_replica_is_chosen_by_cached_prefix_the_decode_replica_by_load():
    shared = "A long shared system prompt about the fleet. " * 30
    with fleet("vllm", [Fake("P1"), Fake("P2")], [Fake("D1", running=40), Fake("D2")], metrics_interval=0.1) as (url, ledger, _):
        ask(url, shared + "first")
        time.sleep(0.5)  # the decode replicas' /metrics are scraped from the first request on
        first = "P1" if ledger.by("P1") else "P2"
        other = {"P1": "P2", "P2": "P1"}[first]
        ask(url, shared + "second")
        assert len(ledger.by(first)) == 2 and not ledger.by(other)  # the replica holding the prefix
        ask(url, "Something else entirely")
        assert len(ledger.by(other)) == 1  # a cold replica takes the new session
        assert len(ledger.by("D2")) >= 2 and len(ledger.by("D1")) <= 1  # D1 reports 40 requests running


def test_an_unreachable_prefill_replica_is_routed_around_and_health_names_it():
    with fleet("vllm", [Fake("P1")], [Fake("D1")], dead_prefill=1, probe_seconds=0.2) as (url, ledger, _):
        for k in range(3):
            assert ask(url, f"Hi {k}")[0] == "Hello from decode."
        assert len(ledger.by("P1")) == 3
        time.sleep(0.5)
        health = httpx.get(url + "/health", timeout=10).json()
    assert health["status"] == "ok"
    (pd,) = health["replicas"]
    assert [(r["name"], r["reachable"]) for r in pd["prefill"]] == [("dead0", False), ("P1", True)]
    assert [(r["name"], r["reachable"]) for r in pd["decode"]] == [("D1", True)]


@pytest.mark.parametrize(("prefill", "decode", "status", "words"), [
    (Fake("P1", fail=500), Fake("D1"), 502, "P1 failed"),
    (Fake("P1", no_params=True), Fake("D1"), 502, "kv_transfer_params"),
    (Fake("P1"), Fake("D1", fail=500), 502, "D1 failed"),
    (Fake("P1"), Fake("D1", fail=400), 400, "D1 failed"),
])
def test_an_error_at_either_stage_is_the_apis_own_error(prefill, decode, status, words):
    with fleet("vllm", [prefill], [decode]) as (url, ledger, _):
        with pytest.raises(openai.APIStatusError) as info:
            ask(url)
        assert info.value.status_code == status and words in info.value.message
        with pytest.raises(anthropic.APIStatusError) as ainfo:
            anthropic.Anthropic(base_url=url, api_key="x", max_retries=0).messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "Hi"}])
        assert ainfo.value.status_code == status and ainfo.value.body["type"] == "error"
        if prefill.fail or prefill.no_params:
            assert not ledger.by("D1")  # nothing decoded without the prefill's KV cache


@pytest.mark.parametrize("stream", [False, True])
def test_sglang_pd_sends_the_same_bootstrap_fields_to_both(stream):
    with fleet("sglang", [Fake("P1", bootstrap_port=9123)], [Fake("D1")]) as (url, ledger, _):
        text, usage = ask(url, "Hello there", stream)
        assert text == "Hello from decode."
        (pre,), (dec,) = ledger.by("P1"), ledger.by("D1")
        for key in ("bootstrap_host", "bootstrap_port", "bootstrap_room", "input_ids"):
            assert pre[key] == dec[key], key
        assert (pre["bootstrap_host"], pre["bootstrap_port"]) == ("127.0.0.1", 9123)
        assert pre["stream"] is False and dec["stream"] is True
        ask(url, "Hello there")
        rooms = [b["bootstrap_room"] for b in ledger.by("P1")]
        assert len(set(rooms)) == 2  # one room per request


def test_sglang_prefill_failure_ends_the_request_with_the_apis_error():
    with fleet("sglang", [Fake("P1", fail=500)], [Fake("D1")]) as (url, ledger, _):
        t0 = time.monotonic()
        with pytest.raises(openai.APIStatusError) as info:
            ask(url, stream=True)
        assert info.value.status_code == 502 and "P1 failed" in info.value.message
        assert time.monotonic() - t0 < 2.5  # not after the decode server's 3 s wait for the KV cache


def test_a_client_that_goes_away_ends_the_decode_request():
    with fleet("sglang", [Fake("P1")], [Fake("D1", text="word " * 60, delay=0.05)]) as (url, ledger, _):
        stream = oai(url).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                                  max_tokens=100, stream=True, extra_body=OFF)
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                break
        stream.close()
        deadline = time.monotonic() + 5
        while not ledger.by("D1:abort") and time.monotonic() < deadline:
            time.sleep(0.05)
        (dec,) = ledger.by("D1")
        assert ledger.by("D1:abort") == [{"rid": dec["rid"]}]


@pytest.mark.parametrize(("specs", "words"), [
    (["prefill=vllm+http://a:1", "vllm+http://b:1"], "either every"),
    (["prefill=vllm+http://a:1"], "at least one prefill"),
    (["prefill=vllm+http://a:1", "decode=sglang+http://b:1"], "all be vllm"),
    (["prefill=vllm+http://a:1", "decode=generate+http://b:1"], "all generate"),
    (["prefill=replay:x.jsonl", "decode=vllm+http://b:1"], "replay"),
    (["prefill=vllm+http://a:1?bootstrap_port=1", "decode=vllm+http://b:1"], "bootstrap_port"),
    # a decode replica's KV events would be accepted and never read (the decode choice is by load): refused
    (["prefill=generate+http://a:1", "decode=generate+http://b:1?kv_events=tcp://b:5557&kv_hash_seed=0"],
     "decode replica's KV events"),
    (["prefill=vllm+http://a:1", "decode=vllm+http://a:1"], "both prefill"),
])
def test_bad_pd_specs_are_refused(specs, words):
    with pytest.raises(ValueError, match=words):
        build_engines(specs)


def test_a_pd_pool_refuses_the_prefix_routing_rule_it_would_not_apply():
    from recipe.cli.main import main

    specs = ["prefill=vllm+http://127.0.0.1:1", "decode=vllm+http://127.0.0.1:2"]
    with pytest.raises(ValueError, match="routing 'prefix' is not served for a P/D pool"):
        recipe.serve.app(engines=specs, config=ServeConfig(routing="prefix", warm=False, gc_freeze=False))
    assert main(["serve", "--store", "memory", "--routing", "prefix", *(a for s in specs for a in ("--engine", s))]) == 2


def test_recipe_serve_help_documents_pd():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "recipe", "serve", "--help"], capture_output=True, text=True, check=True)
    flat = " ".join(out.stdout.split())
    assert "prefill=SPEC" in flat and "decode=SPEC" in flat and "kv_transfer_params" in flat


# --------------------------------------------------------------------------- a P/D pool in a fleet


def _metric(url: str, line_start: str) -> float | None:
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def _wait(cond: Any, within: float = 30.0, every: float = 0.05, state: Any = None) -> None:
    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, f"condition not reached in time: {state() if state else ''}"
        time.sleep(every)


def test_prefill_replicas_are_routed_by_their_kv_events():
    pytest.importorskip("zmq")
    pytest.importorskip("cbor2")
    from kv_publisher import Publisher, removed, stored, vllm_hashes

    pubs = {"P1": Publisher(), "P2": Publisher()}
    try:
        with fleet("vllm", [Fake("P1"), Fake("P2")], [Fake("D1")], metrics_interval=0,
                   params={n: p.spec for n, p in pubs.items()}) as (url, ledger, _):
            def views() -> list[str]:
                (pd,) = httpx.get(url + "/health", timeout=10).json()["replicas"]
                return [r.get("view") for r in pd["prefill"]]

            _wait(lambda: views() == ["events", "events"])
            text = "A long shared prompt for the prefill pool. " * 20
            ids = list(recipe.prepare({"model": MODEL, "messages": [{"role": "user", "content": text}], **OFF}).token_ids)
            n = len(ids) // 16
            hashes = vllm_hashes(ids, 16)

            def hold(name: str, *events: dict[str, Any], blocks: int) -> None:
                pubs[name].publish(*events)
                gauge = f'recipe_kv_event_blocks{{replica="{name}"}}'
                _wait(lambda: (pubs[name].publish(), _metric(url, gauge))[1] == blocks)  # (a probe batch each try)

            # P2's events say it holds the prompt, though nothing was routed to it: it prefills the prompt
            hold("P2", stored(ids[:n * 16], hashes), blocks=n)
            assert ask(url, text)[0] == "Hello from decode."
            assert len(ledger.by("P2")) == 1 and not ledger.by("P1")
            # P2 evicts it, P1 stores it: the next request goes to P1, whatever was routed before
            hold("P2", removed(hashes), blocks=0)
            hold("P1", stored(ids[:n * 16], hashes), blocks=n)
            ask(url, text)
            assert len(ledger.by("P1")) == 1 and len(ledger.by("P2")) == 1
            assert views() == ["events", "events"]
            assert _metric(url, 'recipe_replica_cache_view{replica="P1",view="events"}') == 1.0
    finally:
        for p in pubs.values():
            p.close()


def test_a_prefill_replica_with_data_parallel_ranks_prefills_on_the_rank_holding_the_prompt():
    pytest.importorskip("zmq")
    pytest.importorskip("cbor2")
    from kv_publisher import DPPublishers, stored, vllm_hashes

    dp = DPPublishers(2)
    try:
        with fleet("vllm", [Fake("P1"), Fake("P2")], [Fake("D1")], metrics_interval=0,
                   params={"P2": dp.spec}) as (url, ledger, _):
            gauge = 'recipe_kv_event_blocks{replica="P2@dp1"}'
            _wait(lambda: _metric(url, gauge) == 0.0
                  and _metric(url, 'recipe_replica_cache_view{replica="P2",view="events"}') == 1.0)
            text = "A long shared prompt for a data-parallel prefill replica. " * 20
            ids = list(recipe.prepare({"model": MODEL, "messages": [{"role": "user", "content": text}], **OFF}).token_ids)
            n = len(ids) // 16
            dp.pubs[1].publish(stored(ids[:n * 16], vllm_hashes(ids, 16)))
            _wait(lambda: (dp.pubs[1].publish(), _metric(url, gauge))[1] == n)
            assert ask(url, text)[0] == "Hello from decode."
            assert ledger.ranks[:2] == [("P2", "1"), ("D1", None)]  # the prefill on rank 1; the decode anywhere
            assert ask(url, "Something else")[0] == "Hello from decode."
            assert ledger.ranks[2][1] is None  # a prompt no rank holds: the engine picks
    finally:
        dp.close()


def test_two_frontends_share_a_pd_pools_requests_in_flight_through_redis():
    import threading

    from serve_support import redis_server

    from recipe.serve.shared_load import SharedLoad

    prefilled, decoded = threading.Event(), threading.Event()
    prefill = [Fake("P1", hold=prefilled), Fake("P2")]
    decode = [Fake("D1"), Fake("D2", running=0.5)]
    with redis_server() as redis_url, pd_engines("vllm", prefill, decode) as (specs, ledger, _), ExitStack() as stack:
        urls = []
        for _ in range(2):
            shared = SharedLoad.from_url(redis_url, interval=0.05)
            app = recipe.serve.app(engines=specs, shared_load=shared, config=ServeConfig(**CONFIG, metrics_interval=0.1))
            urls.append(stack.enter_context(running(app)).url)
        a, b = urls

        def pd_health(url: str) -> dict[str, dict[str, Any]]:
            (pd,) = httpx.get(url + "/health", timeout=10).json()["replicas"]
            return {r["name"]: r for role in ("prefill", "decode") for r in pd[role]}

        worker = threading.Thread(target=ask, args=(a, "A's request", True))
        worker.start()
        try:
            # A's request is held prefilling on P1: B sees it there and prefills on P2 (alone, B would pick P1)
            _wait(lambda: pd_health(b)["P1"]["in_flight_others"] == 1)
            ask(b, "B's first request")
            assert [x["prompt"] for x in ledger.by("P2")] == [recipe.prepare(
                {"model": MODEL, "messages": [{"role": "user", "content": "B's first request"}], **OFF}).token_ids]
            assert len(ledger.by("D1")) == 1  # (D2's engine reports half a request running)
            # A's request is held decoding on D1: B decodes on D2, whose half a request costs less than A's one
            decode[0].hold = decoded
            prefilled.set()
            _wait(lambda: pd_health(b)["D1"]["in_flight_others"] == 1,
                  state=lambda: (pd_health(a), pd_health(b), ledger.seen))
            assert pd_health(a)["D1"]["in_flight"] == 1 and pd_health(b)["D1"]["in_flight"] == 0
            ask(b, "B's second request")
            assert len(ledger.by("D2")) == 1 and len(ledger.by("D1")) == 2  # B's first and A's
            assert httpx.get(b + "/health", timeout=10).json()["shared_load"]["other_frontends"] == 1
        finally:
            prefilled.set()
            decoded.set()
            worker.join(30)
        _wait(lambda: pd_health(b)["D1"]["in_flight_others"] == 0)


@pytest.mark.parametrize("protocol", ["vllm", "sglang"])
@pytest.mark.parametrize("stream", [False, True])
def test_n_choices_are_n_pd_requests_seeded_as_vllm_seeds_its_samples(protocol, stream):
    with fleet(protocol, [Fake("P1"), Fake("P2")], [Fake("D1"), Fake("D2")]) as (url, ledger, _):
        args = dict(model=MODEL, messages=[{"role": "user", "content": "Hello there"}], max_tokens=20, n=3, seed=7,
                    extra_body=OFF)
        client = oai(url)
        if stream:
            texts = ["", "", ""]
            finishes: dict[int, str] = {}
            for chunk in client.chat.completions.create(**args, stream=True, stream_options={"include_usage": True}):
                for c in chunk.choices:
                    texts[c.index] += c.delta.content or ""
                    if c.finish_reason:
                        finishes[c.index] = c.finish_reason
            usage = chunk.usage
            assert finishes == {0: "stop", 1: "stop", 2: "stop"}
        else:
            r = client.chat.completions.create(**args)
            assert [c.index for c in r.choices] == [0, 1, 2]
            texts = [c.message.content for c in r.choices]
            usage = r.usage
        assert texts == ["Hello from decode."] * 3
        prefills = ledger.by("P1") + ledger.by("P2")
        decodes = ledger.by("D1") + ledger.by("D2")
        assert len(prefills) == len(decodes) == 3
        ids = recipe.prepare({"model": MODEL, "messages": [{"role": "user", "content": "Hello there"}], **OFF}).token_ids
        assert usage.prompt_tokens == len(ids)  # the prompt once, not three times
        assert usage.completion_tokens == 3 * (len(recipe.load_tokenizer().encode_ordinary("Hello from decode.")) + 1)
        if protocol == "vllm":
            assert sorted(b["seed"] for b in prefills) == sorted(b["seed"] for b in decodes) == [7, 8, 9]
            assert all(b["prompt"] == ids and b.get("n", 1) == 1 for b in prefills + decodes)
            assert len({b["kv_transfer_params"]["remote_request_id"] for b in decodes}) == 3  # each read its own prefill
        else:
            assert sorted(b["sampling_params"]["sampling_seed"] for b in prefills) == [7, 8, 9]
            assert len({b["bootstrap_room"] for b in prefills}) == 3
            assert sorted(b["bootstrap_room"] for b in prefills) == sorted(b["bootstrap_room"] for b in decodes)


def test_a_failing_choice_fails_the_n_choice_request():
    with fleet("vllm", [Fake("P1")], [Fake("D1", fail=500)]) as (url, ledger, _):
        with pytest.raises(openai.APIStatusError) as info:
            oai(url).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], n=2,
                                             max_tokens=10, extra_body=OFF)
        assert info.value.status_code == 502 and "D1 failed" in info.value.message
