"""Texts on which tiktoken's regex engine overflows its stack (it panics: a ``BaseException`` that
went through the server's handlers as a plain-text 500): long runs of whitespace or format
characters. ``encode_ordinary`` falls back to another pre-tokenizer; the ids are HF ``tokenizers``'
(the independent oracle) and deepseek-recipe's."""

from __future__ import annotations

import httpx
import pytest
from serve_support import running

import recipe
import recipe.serve
from recipe.tokenizer import _encode_pieces, default_tokenizer_path, load_tokenizer

hf = pytest.importorskip("tokenizers")

TOK = load_tokenizer()
N = 1_050_000  # (the engine overflows at about a million)
OVERFLOWING = [" " * N + "a", "x" + "\x00" * N + "y", "\u00a0" * N]


@pytest.fixture(scope="module")
def hf_tokenizer():
    return hf.Tokenizer.from_file(str(default_tokenizer_path()))


@pytest.mark.parametrize("text", OVERFLOWING, ids=["spaces", "nul", "nbsp"])
def test_overflowing_texts_get_the_hf_ids(text, hf_tokenizer):
    expected = hf_tokenizer.encode(text, add_special_tokens=False).ids
    with pytest.raises(BaseException) as info:  # tiktoken itself cannot encode these
        TOK.encoding.encode_ordinary(text)
    assert type(info.value).__name__ == "PanicException"
    assert TOK.encode_ordinary(text) == expected


def test_the_v3_vocabulary_too():
    import lzma
    from importlib.resources import files

    v3 = hf.Tokenizer.from_str(lzma.decompress(files("recipe.data").joinpath("deepseek_v3_tokenizer.json.xz").read_bytes()).decode())
    text = "Hi" + " " * N + "!"
    assert recipe.load_v3_tokenizer().encode_ordinary(text) == v3.encode(text, add_special_tokens=False).ids


def test_the_fallback_pre_tokenizer_equals_tiktokens_on_mixed_text():
    import random

    rng = random.Random(7)
    alphabet = [*"ab Z9 \n\r\t.,!?'\"-_/()[]{}中文日本語カタカナひらがな한국어éüßØ😀\u00a0\u2028\u3000١٢٣½ⅧＡ０\u200b\x00", "  ", "\n\n", "123456", "can't"]
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
        assert _encode_pieces(TOK.encoding, text) == TOK.encoding.encode_ordinary(text), text


def test_a_request_of_a_million_spaces_is_answered_as_deepseek_recipe():
    import oracle

    body = {"model": "deepseek-v4-pro", "messages": [{"role": "user", "content": " " * 1_000_000}]}
    ids = recipe.prepare(body).token_ids
    assert ids == oracle.convert("chat", body)["token_ids"]
    with running(recipe.serve.app()) as s:
        r = httpx.post(f"{s.url}/v1/messages/count_tokens", json=body, timeout=60)
        assert r.status_code == 200 and r.json() == {"input_tokens": len(recipe.prepare(body, "messages").token_ids)}
        r = httpx.post(f"{s.url}/v1/chat/completions", json=body, timeout=60)
        assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == len(ids)
