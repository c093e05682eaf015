"""Prompt segments, exact encoding, and the bounded segment cache."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from recipe.prompt import Prompt, SegmentCache, Special, Text, encode_prompt
from recipe.tokenizer import load_tokenizer

TOK = load_tokenizer()

segments = st.lists(
    st.one_of(
        st.builds(Text, st.text(max_size=40)),
        st.builds(Special, st.sampled_from(["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜"])),
    ),
    max_size=12,
)


@given(segments)
def test_encode_prompt_equals_encoding_whole_prompt_with_specials(segs):
    prompt = Prompt(tuple(segs))
    # Texts without special spellings: encoding the whole string with specials allowed is the oracle.
    if any(type(s) is Text and any(sp in s.text for sp in TOK.special_tokens) for s in segs):
        return
    expected = TOK.encode_with_special_tokens(prompt.text)
    assert encode_prompt(TOK, prompt) == expected
    assert list(encode_prompt(TOK, prompt, SegmentCache())) == expected


def test_adjacent_texts_are_joined_before_encoding():
    prompt = Prompt((Text("hel"), Text("lo wor"), Text("ld"), Special("<｜User｜>")))
    assert encode_prompt(TOK, prompt) == TOK.encode_ordinary("hello world") + [128803]


def test_special_ranges_are_code_point_offsets():
    prompt = Prompt((Special("<｜User｜>"), Text("中文"), Special("</think>")))
    assert prompt.special_ranges == [(0, 8), (10, 18)]


def test_cache_hits_are_exact_and_bounded():
    cache = SegmentCache(max_chars=1000, min_chars=1)
    text = "repeat me " * 20
    first = cache.encode(TOK, text)
    assert list(first) == TOK.encode_ordinary(text) and cache.misses == 1
    assert cache.encode(TOK, text) == first and cache.hits == 1
    for k in range(50):
        cache.encode(TOK, f"filler {k} " * 10)
    assert cache._chars <= 1000
    assert len(cache) < 50
