"""The small-text path of ``Tokenizer.encode_ordinary`` (recipe/tokenizer.py): before the full tiktoken
encoding exists, short texts are encoded with an encoding of only the ranks found inside the text.

Oracle: the full encoding of the same vocabulary (itself checked against HF ``tokenizers`` in
tests/test_tokenizer.py). Texts stress the one assumption the path makes about the pre-tokenizer
pattern (a space after a non-whitespace character starts a new piece): every Unicode White_Space
character, the characters Python calls space but Unicode does not (U+001C..U+001F), zero-width and
combining marks, punctuation before newlines, digit runs, CJK, emoji sequences, lone surrogates.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recipe import tokenizer as tokmod
from recipe.pipeline import prepare
from recipe.tokenizer import Tokenizer, load_tokenizer

FULL = load_tokenizer().warm()
CORPUS = [json.loads(line)["text"] for line in
          (Path(__file__).resolve().parent.parent / "fixtures" / "tokenizer" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
          if line.strip()]

_WHITE_SPACE = list("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") + [chr(c) for c in range(0x2000, 0x200B)]
_TRICKY = _WHITE_SPACE + list("\x1c\x1d\x1e\x1f\u200b\u200c\u200d\ufeff\u0301\u0300\x00\x7f") + list(
    "aZzé9٣½.,!?'\"-_()[]{}<>#@`~中文日本語カナかな한국어。，！😀👍🏽🇯🇵") + ["\ud800", "\udfff"]


def small(text: str) -> list[int]:
    """The small-text path on a fresh, unbuilt tokenizer over the same ranks (asserting it ran)."""
    tok = Tokenizer(FULL._ranks, FULL.special_tokens, FULL.fingerprint, FULL.n_vocab, "t")
    ids = tok._encode_small(text)
    assert ids is not None and tok._encoding is None
    return ids


@settings(max_examples=400, deadline=None)
@given(st.text(st.sampled_from(_TRICKY), max_size=60))
def test_tricky_texts_match_the_full_encoding(text):
    assert small(text) == FULL.encode_ordinary(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_any_text_matches_the_full_encoding(text):
    assert small(text) == FULL.encode_ordinary(text)


@pytest.mark.parametrize("text", [
    "Hello!", "a\u3000b", "x \u3000 y", ".\n\n  foo", "\x01\x1c z", "\x1c \x1d a", "  \t a", "a  b", "1 234 5678",
    "中文 English 日本語", "👨\u200d👩\u200d👧 hi", "<｜User｜> x", "def f(x):\n    return x  # ok\n", "a\ud800b c",
    "\xa0 \xa0x", " " * 40 + "x", "a" + " " * 17 + "\n\n b", "x.\n y", "", " ", "\n",
])
def test_edge_texts_match_the_full_encoding(text):
    assert small(text) == FULL.encode_ordinary(text)


def test_corpus_matches_the_full_encoding():
    for text in CORPUS:
        assert small(text) == FULL.encode_ordinary(text)


def test_in_place_rank_table_lookups_match(tmp_path):
    """A tokenizer read from the cache file looks short texts up in the file's table (no dict)."""
    from recipe import ranks

    table = ranks.decode(ranks.encode("f" * 64, FULL._ranks, FULL.special_tokens), "f" * 64)
    for text in ["Hello!", "中文 English", "x.\n y  z", "👨\u200d👩\u200d👧", CORPUS[0][:300]]:
        tok = Tokenizer(table, FULL.special_tokens, FULL.fingerprint, FULL.n_vocab, "t")
        assert tok.encode_ordinary(text) == FULL.encode_ordinary(text)
        assert tok._encoding is None and tok._ranks is None  # a few lookups: no dict built
    longer = " ".join(f"w{i}x" for i in range(3000))  # more lookups than pay in place: the dict is built
    tok = Tokenizer(table, FULL.special_tokens, FULL.fingerprint, FULL.n_vocab, "t")
    assert tok.encode_ordinary(longer) == FULL.encode_ordinary(longer)
    assert tok._encoding is None and tok._ranks is not None
    assert tok.decode(FULL.encode_ordinary("abc")) == "abc" and tok._encoding is not None


def test_one_small_encoding_then_the_full_one():
    tok = Tokenizer(FULL._ranks, FULL.special_tokens, FULL.fingerprint, FULL.n_vocab, "t")
    assert tok.encode_ordinary("Hello there") == FULL.encode_ordinary("Hello there") and tok._encoding is None
    assert tok.encode_ordinary("Hello again") == FULL.encode_ordinary("Hello again")
    assert tok._encoding is not None  # the second text builds it; no per-call setup from here on
    long_text = " ".join(f"w{i}" for i in range(60000))  # more lookups than the one small encoding may take
    fresh = Tokenizer(FULL._ranks, FULL.special_tokens, FULL.fingerprint, FULL.n_vocab, "t")
    assert fresh.encode_ordinary(long_text) == FULL.encode_ordinary(long_text) and fresh._encoding is not None


def test_a_text_without_spaces_goes_to_the_full_encoding():
    tok = Tokenizer(FULL._ranks, FULL.special_tokens, FULL.fingerprint, FULL.n_vocab, "t")
    blob = "QUJD" * 4000  # base64-like: one 16 KB chunk, 16k x 128 lookups: over the limit
    assert tok.encode_ordinary(blob) == FULL.encode_ordinary(blob) and tok._encoding is not None


def test_prepare_of_a_short_request_never_builds_the_full_encoding(monkeypatch):
    monkeypatch.setattr(tokmod, "_by_digest", OrderedDict())
    tokmod.default_tokenizer.cache_clear()
    try:
        tok = load_tokenizer()
        assert tok is not FULL and tok._encoding is None
        body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": "Hi, what's 2 + 2?"}]}
        prep = prepare(body, tokenizer=tok, cache=None)
        assert prep.token_ids == prepare(body, tokenizer=FULL, cache=None).token_ids
        assert tok._encoding is None
        assert tok.decode(prep.token_ids) == prep.prompt.text and tok._encoding is not None  # decoding builds it
    finally:
        tokmod.default_tokenizer.cache_clear()


@pytest.mark.parametrize("example", ["hello", "weather"])
def test_a_prompt_is_prefetched_as_one_small_encoding(example, monkeypatch):
    from recipe.cli.common import read_input

    tok = Tokenizer(FULL._ranks, FULL.special_tokens, FULL.fingerprint, FULL.n_vocab, "t")
    builds = []
    real = Tokenizer._small_encoding

    def counting(self, texts):
        builds.append(self)
        return real(self, texts)

    monkeypatch.setattr(Tokenizer, "_small_encoding", counting)
    body = read_input(None, example)
    assert prepare(body, tokenizer=tok, cache=None).token_ids == prepare(body, tokenizer=FULL, cache=None).token_ids
    assert tok._encoding is None and len(builds) == 1  # one small encoding for all the prompt's texts


def test_prefetched_texts_with_surrogates_and_repeats():
    tok = Tokenizer(FULL._ranks, FULL.special_tokens, FULL.fingerprint, FULL.n_vocab, "t")
    texts = ["a\ud800b c", "x \u3000 y", "a\ud800b c", "日本語 text"]
    tok.prefetch(texts)
    assert [tok.encode_ordinary(t) for t in texts] == [FULL.encode_ordinary(t) for t in texts]
    assert tok._encoding is None
    assert tok.encode_ordinary("not prefetched!") == FULL.encode_ordinary("not prefetched!") and tok._encoding is not None


def test_warm_builds_once():
    tok = Tokenizer(FULL._ranks, FULL.special_tokens, FULL.fingerprint, FULL.n_vocab, "t")
    enc = tok.warm().encoding
    assert tok.encoding is enc and tok.warm().encoding is enc and enc.n_vocab == FULL.n_vocab


def test_after_the_second_prompt_no_per_call_setup(monkeypatch):
    tok = Tokenizer(FULL._ranks, FULL.special_tokens, FULL.fingerprint, FULL.n_vocab, "t")
    calls = []
    for name in ("_small_encoding", "_build"):
        real = getattr(Tokenizer, name)
        monkeypatch.setattr(Tokenizer, name, lambda self, *a, _real=real, _name=name: calls.append(_name) or _real(self, *a))
    seen = []
    for k in range(6):
        body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": f"question {k}: why?"}]}
        assert prepare(body, tokenizer=tok, cache=None).token_ids == prepare(body, tokenizer=FULL, cache=None).token_ids
        seen.append(list(calls))
        calls.clear()
    assert seen[0] == ["_small_encoding"] and "_build" in seen[1] and seen[2:] == [[]] * 4
