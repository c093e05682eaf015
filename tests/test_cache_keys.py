"""Block keys: vLLM sha256_cbor parity against cbor2 + hashlib, native layout, isolation, accounting."""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import struct

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recipe.cache import keys as cache_keys
from recipe.cache.keys import (
    BlockExtras,
    KeyChain,
    KeySpec,
    MultimodalItem,
    PromptUsage,
    block_keys,
    cached_prompt_tokens,
    cbor_encode,
    event_hash,
)
from recipe.cache.diff import first_divergence, normalize_boundaries

SEED0_ROOT = "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e"  # published vLLM constant


# ---------------------------------------------------------------- independent vLLM reference (cbor2)


def vllm_reference(ids, block_size, seed, lora=None, mm=(), salt=None, embeds=(), tagged=False, lora_path=None):
    """vLLM v1 request_block_hasher + generate_block_hash_extra_keys, with cbor2 + hashlib; ``tagged``:
    vLLM 0.32's extra keys, each a tuple led by its source (``("cache_salt", salt)`` …)."""
    h = hashlib.sha256(cbor2.dumps(seed, canonical=True)).digest()
    out, mm_idx = [], 0
    for start in range(0, len(ids) - block_size + 1, block_size):
        end = start + block_size
        mm_keys = []
        while mm_idx < len(mm):  # vLLM's walk over sorted multimodal items
            ident, off, length = mm[mm_idx]
            if end > off:
                if start >= off + length:
                    mm_idx += 1
                    continue
                mm_keys.append(("mm", ident, off - start) if tagged else (ident, off - start))
                if end >= off + length:
                    mm_idx += 1
                else:
                    break
            else:
                break
        lora_key = ("lora", lora, lora_path) if tagged else lora
        extra = ([lora_key] if lora is not None else []) + mm_keys
        extra += [("cache_salt", salt) if tagged else salt] if start == 0 and salt else []
        index = start // block_size
        extra += [("prompt_embeds", embeds[index]) if tagged else embeds[index]] if index < len(embeds) else []
        h = hashlib.sha256(cbor2.dumps((h, tuple(ids[start:end]), tuple(extra) or None), canonical=True)).digest()
        out.append(h)
    return out


token_ids = st.lists(
    st.one_of(st.integers(0, 23), st.integers(0, 255), st.integers(0, 129_279), st.integers(0, 2**32 - 1)),
    max_size=300,
)


@st.composite
def mm_items(draw):
    cuts = sorted(draw(st.lists(st.integers(0, 320), max_size=6, unique=True)))
    items = []
    for a, b in zip(cuts[::2], cuts[1::2]):
        items.append((draw(st.text(max_size=8)), a, b - a))
    return tuple(items)


def test_seed_zero_root_is_the_published_constant():
    assert KeySpec("vllm", hash_seed="0").root().hex() == SEED0_ROOT
    assert hashlib.sha256(cbor2.dumps("0", canonical=True)).hexdigest() == SEED0_ROOT


# The implementations of the SHA-256 chains: "c" (recipe.cache._chainhash, the default when it was
# compiled), and the Python fallbacks, "pure" (vllm: table-driven encoder) and "numpy" (vllm:
# vectorised encoder; for the native scheme both are the one Python chain).
try:
    import numpy  # noqa: F401

    ENCODERS = ["pure", "numpy"]
except ImportError:  # the numpy encoder is optional; test_numpy_encoder_* skip visibly
    ENCODERS = ["pure"]
if cache_keys.ACCELERATED:
    ENCODERS.insert(0, "c")
CHAINS = ["c", "pure"] if cache_keys.ACCELERATED else ["pure"]


@contextlib.contextmanager
def chain_impl(name):
    """Force a chain implementation: the C extension, or the pure-Python / numpy id encoder."""
    saved = cache_keys.NUMPY_MIN_TOKENS, cache_keys._chainhash
    cache_keys.NUMPY_MIN_TOKENS = 0 if name == "numpy" else 1 << 62
    if name != "c":
        cache_keys._chainhash = None
    try:
        yield
    finally:
        cache_keys.NUMPY_MIN_TOKENS, cache_keys._chainhash = saved


def test_c_chains_are_built_where_ci_runs():
    # CI installs a compiler and OpenSSL's headers: there the optional extension must exist, so the
    # tests below exercise it (elsewhere a missing build only costs speed, never different keys).
    if not os.environ.get("CI") and not cache_keys.ACCELERATED:
        pytest.skip("recipe.cache._chainhash not compiled here (optional); the Python chains are tested")
    assert cache_keys.ACCELERATED and "c" in ENCODERS


@settings(max_examples=250, deadline=None)
@given(
    ids=token_ids,
    block_size=st.integers(1, 70) | st.sampled_from([16, 64, 256]),
    seed=st.text(max_size=12),
    lora=st.none() | st.text(max_size=10) | st.integers(0, 2**40),
    salt=st.none() | st.text(max_size=10),
    mm=mm_items(),
    embeds=st.lists(st.binary(min_size=32, max_size=32), max_size=4).map(tuple),
    encoder=st.sampled_from(ENCODERS),
)
def test_vllm_mode_is_byte_identical_to_cbor2(ids, block_size, seed, lora, mm, salt, embeds, encoder):
    spec = KeySpec("vllm", block_size, salt=salt, hash_seed=seed)
    extras = BlockExtras(lora=lora, mm=tuple(MultimodalItem(*m) for m in mm), prompt_embeds=embeds)
    with chain_impl(encoder):
        got = block_keys(ids, spec, extras)
    assert list(got.keys) == vllm_reference(ids, block_size, seed, lora, mm, salt, embeds)
    assert got.scheme == "vllm-sha256-cbor/1" and got.block_size == block_size


@given(
    ids=token_ids,
    block_size=st.integers(1, 70) | st.sampled_from([16, 128]),
    seed=st.text(max_size=12),
    lora=st.none() | st.text(max_size=10),
    lora_path=st.none() | st.text(max_size=10),
    salt=st.none() | st.text(max_size=10),
    mm=mm_items(),
    embeds=st.lists(st.binary(min_size=32, max_size=32), max_size=4).map(tuple),
    encoder=st.sampled_from(ENCODERS),
)
def test_vllm_tagged_extras_are_vllm_032s(ids, block_size, seed, lora, lora_path, mm, salt, embeds, encoder):
    spec = KeySpec("vllm", block_size, salt=salt, hash_seed=seed, tagged_extras=True)
    extras = BlockExtras(lora=lora, mm=tuple(MultimodalItem(*m) for m in mm), prompt_embeds=embeds, lora_path=lora_path)
    with chain_impl(encoder):
        got = block_keys(ids, spec, extras)
    assert list(got.keys) == vllm_reference(ids, block_size, seed, lora, mm, salt, embeds, True, lora_path)
    if lora is None and not mm and not salt and not embeds:  # no extras: the same keys either way
        assert got.keys == block_keys(ids, KeySpec("vllm", block_size, hash_seed=seed)).keys


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize(
    "ids, block_size, mm",
    [
        ([0, 0], 1, (("", 1, 1),)),  # the last block carries extras, an earlier one does not
        (list(range(1000, 1000 + 4096)), 16, (("img-hash", 4080, 16),)),
        (list(range(5000)), 64, (("a", 0, 3), ("b", 4000, 900))),
    ],
)
def test_vllm_mode_blocks_with_differing_extras(ids, block_size, mm, encoder):
    # regression: the numpy encoder wrote the last block's extras at the end of every block
    extras = BlockExtras(mm=tuple(MultimodalItem(*m) for m in mm))
    with chain_impl(encoder):
        got = block_keys(ids, KeySpec("vllm", block_size, hash_seed="0"), extras)
    assert list(got.keys) == vllm_reference(ids, block_size, "0", None, mm, None, ())


@settings(max_examples=60, deadline=None)
@given(
    ids=st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 23) | st.integers(2**16, 2**32 + 5), max_size=120),
    block_size=st.integers(1, 9),
    encoder=st.sampled_from(ENCODERS),
)
def test_vllm_mode_every_cbor_integer_width(ids, block_size, encoder):
    # ids of every CBOR width (1/2/3/5/9 bytes), around each boundary, in both encoders
    edges = [0, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1]
    ids = ids + edges + ids[::-1]
    with chain_impl(encoder):
        got = block_keys(ids, KeySpec("vllm", block_size, hash_seed="0"))
    assert list(got.keys) == vllm_reference(ids, block_size, "0")


def _long_prompt(n, seed=5):
    rng = random.Random(seed)
    pick = [lambda: rng.randrange(24), lambda: rng.randrange(24, 256), lambda: rng.randrange(256, 2**16),
            lambda: rng.randrange(2**16, 129_280)]
    return [rng.choice(pick)() for _ in range(n)]


@pytest.mark.parametrize("encoder", [e for e in ENCODERS if e != "pure"])
@pytest.mark.parametrize("block_size", [16, 64, 256])
def test_long_prompts_match_cbor2(block_size, encoder):
    ids = _long_prompt(3 * cache_keys.NUMPY_MIN_TOKENS + 37)  # long enough for the numpy encoder
    spec = KeySpec("vllm", block_size, salt="tenant-7", hash_seed="0")
    extras = BlockExtras(lora="adapter", mm=(MultimodalItem("img-1", 100, 900), MultimodalItem("img-2", 5000, 40)))
    mm = tuple((m.identifier, m.offset, m.length) for m in extras.mm)
    expected = vllm_reference(ids, block_size, "0", lora="adapter", mm=mm, salt="tenant-7")
    with chain_impl(encoder):
        assert list(block_keys(ids, spec, extras).keys) == expected
        assert list(block_keys(ids + [2**40] * block_size, spec, extras).keys[:-1]) == expected  # uint64 ids
        plain = list(block_keys(ids, KeySpec("vllm", block_size, hash_seed="0")).keys)
        native = list(block_keys(ids, KeySpec("native", block_size, "m", "fp", "t", None), BlockExtras(lora="a")).keys)
    assert plain == vllm_reference(ids, block_size, "0")
    assert native == native_reference(ids, block_size, "m", "fp", "t", lora="a")


def test_vllm_mode_without_numpy_gives_the_same_keys(monkeypatch):
    ids = _long_prompt(2 * cache_keys.NUMPY_MIN_TOKENS)
    spec = KeySpec("vllm", 64, salt="s", hash_seed="3")
    expected = vllm_reference(ids, 64, "3", salt="s")
    monkeypatch.setattr(cache_keys, "_numpy", lambda: None)
    monkeypatch.setattr(cache_keys, "_chainhash", None)
    assert list(block_keys(ids, spec).keys) == expected


@settings(max_examples=150)
@given(ids=token_ids, block_size=st.integers(1, 40), cuts=st.lists(st.integers(0, 300), max_size=8),
       scheme=st.sampled_from(["native", "native-xxh3", "vllm"]), salt=st.none() | st.text(max_size=4),
       impl=st.sampled_from(CHAINS))
def test_incremental_equals_whole_prompt(ids, block_size, cuts, scheme, salt, impl):
    spec = KeySpec(scheme, block_size, model="m", salt=salt, hash_seed="7")
    extras = BlockExtras(lora="ad", mm=(MultimodalItem("img", 3, 20),))
    with chain_impl(impl):
        chain, got, prev = KeyChain(spec, extras), [], 0
        for c in sorted(set(cuts)) + [len(ids)]:
            c = min(c, len(ids))
            new = chain.extend(ids[prev:c])
            assert len(new) == (c // block_size) - (prev // block_size)
            got += new
            prev = max(prev, c)
    assert got == list(block_keys(ids, spec, extras).keys) == chain.keys
    assert chain.num_tokens == len(ids)


values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64 - 1) | st.text(max_size=30) | st.binary(max_size=300),
    lambda inner: st.lists(inner, max_size=30).map(tuple) | st.lists(inner, max_size=5),
    max_leaves=40,
)


@settings(max_examples=300)
@given(values)
def test_cbor_encoder_matches_cbor2_canonical(value):
    assert cbor_encode(value) == cbor2.dumps(value, canonical=True)


def test_cbor_encoder_rejects_unsupported_values():
    with pytest.raises(TypeError):
        cbor_encode(1.5)
    with pytest.raises(ValueError):
        cbor_encode(2**64)


def test_event_hash_is_low_64_bits_big_endian():
    key = block_keys(list(range(16)), KeySpec("vllm", 16, hash_seed="0")).keys[0]
    assert event_hash(key) == int.from_bytes(key, "big") & (2**64 - 1)
    assert event_hash(key).to_bytes(8, "big") == key[-8:]


# ---------------------------------------------------------------- native layout, from the documented bytes


def native_reference(ids, block_size, model, tokenizer, salt, lora=None, xxh=False):
    def lp(s):
        raw = (s or "").encode()
        return struct.pack("<I", len(raw)) + raw

    version = "native-xxh3-128/1" if xxh else "native-sha256/1"
    root = hashlib.sha256(b"recipe/prefix-cache\x00" + lp(version) + lp(model) + lp(tokenizer)
                          + struct.pack("<I", block_size) + lp(salt)).digest()
    h = root[:16] if xxh else root
    extras = b"" if lora is None else cbor2.dumps((lora,), canonical=True)
    out = []
    for start in range(0, len(ids) - block_size + 1, block_size):
        msg = h + struct.pack(f"<{block_size}I", *ids[start : start + block_size]) + struct.pack("<I", len(extras)) + extras
        if xxh:
            import xxhash

            h = xxhash.xxh3_128_digest(msg)
        else:
            h = hashlib.sha256(msg).digest()
        out.append(h)
    return out


@settings(max_examples=100)
@given(ids=st.lists(st.integers(0, 2**32 - 1), max_size=200), block_size=st.integers(1, 33),
       model=st.text(max_size=6), salt=st.none() | st.text(max_size=6), lora=st.none() | st.text(max_size=4),
       xxh=st.booleans(), impl=st.sampled_from(CHAINS))
def test_native_layout_matches_documented_bytes(ids, block_size, model, salt, lora, xxh, impl):
    spec = KeySpec("native-xxh3" if xxh else "native", block_size, model, "fp", salt)
    with chain_impl(impl):
        got = block_keys(ids, spec, BlockExtras(lora=lora))
    assert list(got.keys) == native_reference(ids, block_size, model, "fp", salt, lora, xxh)
    assert all(len(k) == (16 if xxh else 32) for k in got.keys)


# ---------------------------------------------------------------- isolation


@settings(max_examples=100)
@given(ids=st.lists(st.integers(0, 129_279), min_size=64, max_size=200),
       a=st.tuples(st.sampled_from(["m1", "m2"]), st.sampled_from(["t1", "t2"]), st.sampled_from([None, "x", "y"]),
                   st.sampled_from([8, 16])),
       b=st.tuples(st.sampled_from(["m1", "m2"]), st.sampled_from(["t1", "t2"]), st.sampled_from([None, "x", "y"]),
                   st.sampled_from([8, 16])),
       scheme=st.sampled_from(["native", "native-xxh3"]))
def test_native_key_spaces_never_share_a_key(ids, a, b, scheme):
    ka = set(block_keys(ids, KeySpec(scheme, a[3], a[0], a[1], a[2])).keys)
    kb = set(block_keys(ids, KeySpec(scheme, b[3], b[0], b[1], b[2])).keys)
    assert (ka == kb) if a == b else not (ka & kb)


@settings(max_examples=100)
@given(ids=st.lists(st.integers(0, 129_279), min_size=16, max_size=200), s1=st.text(min_size=1, max_size=5),
       s2=st.none() | st.text(min_size=1, max_size=5), block_size=st.integers(1, 16))
def test_vllm_salt_reaches_every_key(ids, s1, s2, block_size):
    k1 = block_keys(ids, KeySpec("vllm", block_size, salt=s1, hash_seed="0")).keys
    k2 = block_keys(ids, KeySpec("vllm", block_size, salt=s2, hash_seed="0")).keys
    assert len(k1) == len(ids) // block_size > 0
    if s1 != s2:
        assert not set(k1) & set(k2)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("bad", [[-1], [2**32], [1.5], ["a"]])
def test_invalid_token_ids_raise_value_error(bad):
    # every implementation, position and kind of bad id: tests/test_cache_keys_hostile.py
    with pytest.raises(ValueError):
        block_keys([0] * 10 + bad, KeySpec(block_size=4))
    with pytest.raises(ValueError):
        block_keys([0] * 10 + ([-1] if bad == [2**32] else bad), KeySpec("vllm", 4, hash_seed="0"))


def test_bad_specs_raise_value_error():
    with pytest.raises(ValueError, match="hash_seed"):
        KeySpec("vllm")
    with pytest.raises(ValueError, match="unknown"):
        KeySpec("md5")
    with pytest.raises(ValueError, match="block_size"):
        KeySpec(block_size=0)


def test_partial_block_has_no_key_and_key_set_json():
    ks = block_keys(list(range(130)), KeySpec(block_size=64))
    assert len(ks.keys) == 2
    assert ks.to_json() == {"scheme": "native-sha256/1", "block_size": 64, "keys": [k.hex() for k in ks.keys]}


# ---------------------------------------------------------------- accounting


@pytest.mark.parametrize(
    ("prompt_len", "matched", "block", "cached"),
    [(0, 0, 64, 0), (64, 1, 64, 0), (65, 1, 64, 64), (128, 2, 64, 64), (129, 2, 64, 128), (1000, 3, 64, 192),
     (1000, 99, 64, 960), (17, 5, 16, 16)],
)
def test_cached_prompt_tokens_recomputes_the_last_token(prompt_len, matched, block, cached):
    assert cached_prompt_tokens(prompt_len, matched, block) == cached


def test_cached_prompt_tokens_rejects_bad_input():
    with pytest.raises(ValueError):
        cached_prompt_tokens(10, -1, 64)
    with pytest.raises(ValueError):
        cached_prompt_tokens(10, 1, 0)


def test_prompt_usage_numbers_for_each_api():
    u = PromptUsage(prompt_tokens=20, cached_tokens=5)
    # deepseek-recipe's usage for prompt 20 / cached 5: hit 5, miss 15; Messages input 15, cache read 5.
    assert (u.prompt_cache_hit_tokens, u.prompt_cache_miss_tokens) == (5, 15)
    assert u.cached_tokens == 5
    assert (u.uncached_input_tokens, u.cache_read_input_tokens) == (15, 5)
    assert u.cost(0.14, 0.55) == pytest.approx((5 * 0.14 + 15 * 0.55) / 1e6)
    with pytest.raises(ValueError):
        PromptUsage(10, 11)


# ---------------------------------------------------------------- prefix stability


def test_first_divergence_names_the_message():
    a = list(range(10_000))
    b = a[:5000] + [7] + a[5001:]
    d = first_divergence(a, b, [(0, (0, 100)), (1, (100, 6000)), (2, (6000, 10_000))])
    assert (d.shared, d.token_a, d.token_b, d.message_index, d.extends) == (5000, 5000, 7, 1, False)
    assert d.shared_blocks(64) == 78


def test_first_divergence_when_b_extends_a():
    d = first_divergence([1, 2, 3], [1, 2, 3, 4, 5], [(0, 0, 2), (1, 2, 5)])
    assert (d.shared, d.extends, d.token_a, d.token_b, d.message_index) == (3, True, None, 4, 1)
    d = first_divergence([1, 2, 3], [1, 2])
    assert (d.shared, d.extends, d.token_a, d.token_b, d.message_index) == (2, False, 3, None, None)


@settings(max_examples=150)
@given(st.lists(st.integers(0, 3), max_size=9000), st.lists(st.integers(0, 3), max_size=50), st.integers(0, 9000))
def test_first_divergence_matches_a_plain_scan(base, tail, cut):
    a, b = base, base[:cut] + tail
    expect = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    assert first_divergence(a, b).shared == expect


def test_bad_boundaries_raise_value_error():
    with pytest.raises(ValueError):
        normalize_boundaries([(0, (5, 1))])
    with pytest.raises(ValueError):
        normalize_boundaries([(0, 1, 2, 3)])
