"""Acceptance tests for ``recipe/tokenizer.py`` (the DeepSeek-V4 vocabulary on tiktoken).

Oracle: HF ``tokenizers`` loading the same ``tokenizer.json`` — with ``added_tokens`` emptied for
ordinary text (our ``encode_ordinary`` never produces special ids), and unmodified for
``encode_with_special_tokens``. Decoding is checked against Python's own
``bytes.decode("utf-8", errors="replace")``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recipe.tokenizer import (
    IncrementalDecoder,
    Tokenizer,
    TokenizerError,
    default_tokenizer_path,
    load_tokenizer,
)

tokenizers = pytest.importorskip("tokenizers")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CORPUS = [json.loads(line) for line in (FIXTURES / "tokenizer" / "corpus.jsonl").read_text(encoding="utf-8").split("\n") if line.strip()]
COMPLETIONS = [
    json.loads(line)
    for line in (FIXTURES / "deepseek_v4_encoder" / "deepseek_v4_completions.jsonl").read_text(encoding="utf-8").split("\n")
    if line.strip()
]

SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return load_tokenizer()


@pytest.fixture(scope="module")
def hf_plain():
    """HF oracle for ordinary text: the same file with no added tokens."""
    spec = json.loads(default_tokenizer_path().read_text(encoding="utf-8"))
    spec["added_tokens"] = []
    return tokenizers.Tokenizer.from_str(json.dumps(spec))


@pytest.fixture(scope="module")
def hf_full():
    """HF oracle with the added tokens (matches them inside raw text)."""
    return tokenizers.Tokenizer.from_file(str(default_tokenizer_path()))


def _incremental(tok: Tokenizer, ids: list[int]) -> str:
    dec = tok.incremental_decoder()
    return "".join(dec.push(i) for i in ids) + dec.flush()


# --------------------------------------------------------------------------------------------
# Encoding equals HF tokenizers
# --------------------------------------------------------------------------------------------


def test_corpus_is_diverse():
    text = "".join(c["text"] for c in CORPUS)
    for needle in ("\r\n", "\t", "\u200d", "\u0301", "\ue000", "\x00", "ー", "。", "👨", "1234567"):
        assert needle in text, needle


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus_ordinary_matches_hf(tok, hf_plain, case):
    text = case["text"]
    ids = tok.encode_ordinary(text)
    assert ids == hf_plain.encode(text, add_special_tokens=False).ids
    assert not any(tok.is_special(i) for i in ids)
    assert tok.decode(ids) == text


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus_with_special_tokens_matches_hf(tok, hf_full, case):
    text = case["text"]
    assert tok.encode_with_special_tokens(text) == hf_full.encode(text, add_special_tokens=False).ids


def test_special_spellings_in_corpus_parse_as_specials(tok):
    text = next(c["text"] for c in CORPUS if c["name"] == "special_spellings_as_text")
    specials = [i for i in tok.encode_with_special_tokens(text) if tok.is_special(i)]
    assert specials == [128803, 128804, 128821, 128822, 128825, 1, 0, 128828, 128829, 2]
    assert not any(tok.is_special(i) for i in tok.encode_ordinary(text))


def test_known_regex_pitfalls(tok, hf_plain):
    # Strings where a naive OR of the file's three Split patterns goes wrong.
    for text in ["  3", "a  3b", "\ue000x", "\x01\x02", "中  3", "x\u3000 1", " 。a", "ー1"]:
        assert tok.encode_ordinary(text) == hf_plain.encode(text, add_special_tokens=False).ids, repr(text)
    assert tok.encode_ordinary("  3") == [262, 21]


_no_surrogates = st.characters(exclude_categories=("Cs",))
_biased = st.sampled_from(
    list("aZ é 0123456789 \t\r\n.,!?'\"-_#@()[]{}<>|~")
    + ["\u3000", "\u00a0", "\u0301", "\u200d", "\ufe0f", "中", "龥", "龦", "ぁ", "ゟ", "゠", "ー", "・", "ア", "ヿ", "。", "、", "「", "！"]
    + ["\ue000", "\x00", "\x7f", "\x85", "\u2028", "😀", "👍", "🏽", "１", "٣", "²", "Ⅷ", "\U0010fffd", "\u0378"]
)


@SETTINGS
@given(st.text(_no_surrogates, max_size=40))
def test_random_unicode_matches_hf(tok, hf_plain, text):
    ids = tok.encode_ordinary(text)
    assert ids == hf_plain.encode(text, add_special_tokens=False).ids
    assert tok.decode(ids) == text


@SETTINGS
@given(st.lists(_biased, max_size=60).map("".join))
def test_biased_text_matches_hf(tok, hf_plain, text):
    ids = tok.encode_ordinary(text)
    assert ids == hf_plain.encode(text, add_special_tokens=False).ids
    assert tok.decode(ids) == text
    assert _incremental(tok, ids) == text


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.text(_no_surrogates, max_size=8), st.sampled_from(["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜", "<｜end▁of▁sentence｜>", "<｜action｜>"])), max_size=8).map("".join))
def test_special_aware_encoding_matches_hf(tok, hf_full, text):
    assert tok.encode_with_special_tokens(text) == hf_full.encode(text, add_special_tokens=False).ids


@SETTINGS
@given(st.text(st.characters(categories=("Cs",)) | _biased, min_size=1, max_size=30))
def test_lone_surrogates_become_replacement_char(tok, text):
    ids = tok.encode_ordinary(text)  # must not raise
    # tiktoken re-reads the string as UTF-16 with errors="replace": lone surrogates -> U+FFFD
    # (an adjacent high+low pair would form one astral character)
    assert tok.decode(ids) == text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def test_lone_surrogate_examples(tok):
    for text, expected in [("\ud800", "\ufffd"), ("a\udfffb", "a\ufffdb"), ("\udc00\ud800x", "\ufffd\ufffdx")]:
        assert tok.decode(tok.encode_ordinary(text)) == expected
        assert tok.encode_ordinary(text) == tok.encode_ordinary(expected)


# --------------------------------------------------------------------------------------------
# Decoding: full and incremental
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_incremental_decoder_matches_full_decode(tok, case):
    ids = tok.encode_ordinary(case["text"])
    assert _incremental(tok, ids) == tok.decode(ids) == case["text"]


def test_corpus_has_tokens_splitting_code_points(tok):
    split = 0
    for case in CORPUS:
        dec = tok.incremental_decoder()
        for i in tok.encode_ordinary(case["text"]):
            if dec.push(i) == "" and dec.pending:
                split += 1
        assert dec.flush() == ""
    assert split > 20


def test_split_code_point_is_held_back(tok):
    ids = tok.encode_ordinary("𓀀")  # rare astral char: several byte tokens
    assert len(ids) > 1
    dec = tok.incremental_decoder()
    assert [dec.push(i) for i in ids[:-1]] == [""] * (len(ids) - 1)
    assert dec.pending
    assert dec.push(ids[-1]) == "𓀀"
    assert not dec.pending


def _byte_id(tok: Tokenizer, b: int) -> int:
    return tok.encoding.encode_single_token(bytes([b]))


def test_byte_tokens_are_ids_3_to_258(tok):
    assert sorted(_byte_id(tok, b) for b in range(256)) == list(range(3, 259))


@pytest.mark.parametrize(
    "raw",
    [b"\xe4\xb8", b"\xe4\xb8a", b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80\x80", b"a\xf0\x9f\x98", b"\xf0\x9f\x98\x80\xf0"],
)
def test_invalid_utf8_matches_python_replace(tok, raw):
    ids = [_byte_id(tok, b) for b in raw]
    expected = raw.decode("utf-8", errors="replace")
    assert "\ufffd" in expected
    assert tok.decode(ids) == expected
    assert _incremental(tok, ids) == expected


@SETTINGS
@given(st.lists(st.one_of(st.integers(0, 255).map(lambda b: ("b", b)), st.integers(3, 127999).map(lambda i: ("i", i))), max_size=40))
def test_incremental_on_arbitrary_ids_matches_bytes_decode(tok, items):
    ids = [_byte_id(tok, v) if k == "b" else v for k, v in items]
    expected = tok.decode_bytes(ids).decode("utf-8", errors="replace")
    assert tok.decode(ids) == expected
    assert _incremental(tok, ids) == expected
    dec = tok.incremental_decoder()
    assert dec.push_many(ids[: len(ids) // 2]) + dec.push_many(ids[len(ids) // 2 :]) + dec.flush() == expected


def test_special_ids_decode_to_spelling(tok):
    ids = [0, 128803, *tok.encode_ordinary("hi"), 128804, 128821, 1]
    text = "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><think><｜end▁of▁sentence｜>"
    assert tok.decode(ids) == text
    assert _incremental(tok, ids) == text


@pytest.mark.parametrize("row", COMPLETIONS, ids=[r["name"] for r in COMPLETIONS])
def test_completion_vectors_decode(tok, row):
    ids = row["completion_token_ids"]
    assert tok.decode(ids) == row["completion"]
    assert _incremental(tok, ids) == row["completion"]
    assert tok.encode_with_special_tokens(row["completion"]) == ids


def test_unknown_id_raises_key_error(tok):
    with pytest.raises(KeyError):
        tok.decode([tok.n_vocab])
    with pytest.raises(KeyError):
        tok.incremental_decoder().push(tok.n_vocab + 5)


# --------------------------------------------------------------------------------------------
# Special-token table, vocabulary size
# --------------------------------------------------------------------------------------------

SPECIALS = {
    "<｜begin▁of▁sentence｜>": 0,
    "<｜end▁of▁sentence｜>": 1,
    "<｜User｜>": 128803,
    "<｜Assistant｜>": 128804,
    "<think>": 128821,
    "</think>": 128822,
    "｜DSML｜": 128825,
    "<｜latest_reminder｜>": 128828,
}


def test_special_token_table(tok, hf_full):
    for spelling, tid in SPECIALS.items():
        assert tok.special_id(spelling) == tid
        assert hf_full.token_to_id(spelling) == tid
        assert tok.is_special(tid)
        assert tok.special_name(tid) == spelling
        assert tok.token_bytes(tid) == spelling.encode()
    assert tok.n_vocab == 129280 == hf_full.get_vocab_size(with_added_tokens=True)
    assert len(tok.special_tokens) == 1283
    assert not tok.is_special(3) and tok.special_name(3) is None
    assert tok.special_tokens == {a.content: i for i, a in hf_full.get_added_tokens_decoder().items()}
    with pytest.raises(KeyError):
        tok.special_id("<｜System｜>")  # V4.1 only


def test_fingerprint_is_sha256_of_file(tok):
    import hashlib

    assert tok.fingerprint == hashlib.sha256(default_tokenizer_path().read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def test_load_tokenizer_is_cached():
    a = load_tokenizer()
    assert load_tokenizer() is a
    assert load_tokenizer(default_tokenizer_path()) is a
    assert load_tokenizer(str(default_tokenizer_path())) is a
    assert isinstance(a.incremental_decoder(), IncrementalDecoder)


def test_missing_file_raises(tmp_path):
    with pytest.raises(TokenizerError):
        load_tokenizer(tmp_path / "nope.json")


@pytest.mark.parametrize(
    "content",
    [
        b"not json at all",
        b"[]",
        b'{"model": {"type": "WordPiece", "vocab": {"a": 0}}}',
        b'{"model": {"type": "BPE", "vocab": {"\xe4\xb8\xad": 0}, "merges": []}}',  # not byte-level
        b'{"model": {"type": "BPE", "vocab": {"a": 0, "b": 5}, "merges": []}}',  # ids not contiguous
        b'{"added_tokens": []}',
    ],
)
def test_bad_tokenizer_json_raises(tmp_path, content):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(content)
    with pytest.raises(TokenizerError):
        load_tokenizer(path)
    assert issubclass(TokenizerError, ValueError)
