"""The structural-tag export checked with xgrammar against the Lark export (llguidance).

Opt-in: xgrammar pulls in torch and CUDA wheels, so it is not in the ``test`` extra. Run with
``pip install -e '.[test,xgrammar]' && python -m pytest tests/test_grammar_xgrammar.py``; without
xgrammar every test here is skipped. The xgrammar tokenizer info is built the way an engine builds it
from DeepSeek's ``tokenizer.json`` (whose added tokens are not marked special): every id's bytes,
special tokens as their spellings, EOS as the stop token.

Known differences (docs/constrained-decoding.md): inside JSON strings the structural tag excludes the
character ``｜`` instead of the special-token spellings; special tokens outside the template's set
(placeholders) are kept out of free text by the Lark only. The mutants below that hold such a token
are checked on the Lark side only.
"""

from __future__ import annotations

import random

import pytest

xgr = pytest.importorskip("xgrammar")
pytest.importorskip("llguidance")

import recipe  # noqa: E402
from fixtures import jsonl  # noqa: E402
from grammar_support import EOS_ID, TOK, mutate, out_ids  # noqa: E402
from test_grammar_matcher import (  # noqa: E402
    _CITY, _CLOSE, _DAYS, _INV, _MUTATION_BODIES, _OPEN, NEGATIVES, _recorded, _reference_request, _spell,
)


_TEMPLATE_IDS = frozenset(recipe.get_encoding("deepseek_v4").special_tokens.values())


@pytest.fixture(scope="module")
def compiler():
    vocab = [TOK.token_bytes(i) for i in range(TOK.n_vocab)]
    info = xgr.TokenizerInfo(vocab, xgr.VocabType.RAW, vocab_size=TOK.n_vocab, stop_token_ids=[EOS_ID])
    return xgr.GrammarCompiler(info, max_threads=1)


def _xgr_accepts(compiler, grammar, ids):
    """(index of the first rejected id or None, terminated) on xgrammar."""
    m = xgr.GrammarMatcher(compiler.compile_structural_tag(grammar.structural_tag))
    for k, t in enumerate(ids):
        if not m.accept_token(t):
            return k, False
    return None, m.is_terminated()


def _lark_accepts(prep, ids):
    m = recipe.OutputMatcher(prep)
    n = m.accept_many(ids)
    return (None if n == len(ids) else n), m.finished


def _corpus():
    out = []
    for p in _recorded():
        r = p.values[0]
        out.append((r["request"], r["api"], r["completion_token_ids"] + [EOS_ID]))
    for r in jsonl("completions/deepseek_v4_completions.jsonl"):
        out.append((_reference_request(r), "chat", r["completion_token_ids"]))
    for r in jsonl("completions/raw_outputs.jsonl"):
        out.append((r["request"], "chat", out_ids(r["raw_output"]) + [EOS_ID]))
    return out


@pytest.mark.parametrize("case", range(len(_corpus())))
def test_exports_agree_on_goldens_and_real_outputs(compiler, case):
    body, api, ids = _corpus()[case]
    prep = recipe.prepare(body, api)
    g = recipe.output_grammar(prep)
    assert _xgr_accepts(compiler, g, ids) == _lark_accepts(prep, ids)


@pytest.mark.parametrize("case", NEGATIVES, ids=[n[0] for n in NEGATIVES])
def test_exports_agree_on_the_negative_corpus(compiler, case):
    name, body, prefix, rest, _, ordinary = case
    options = recipe.Options(forced_tool_choice_thinking="constrain") if name == "content_before_required_block" else recipe.DEFAULT_OPTIONS
    prep = recipe.prepare(body, options=options)
    ids = out_ids(prefix) + _spell(rest, ordinary)
    lark_at, _ = _lark_accepts(prep, ids)
    xgr_at, _ = _xgr_accepts(compiler, recipe.output_grammar(prep), ids)
    assert lark_at is not None and xgr_at == lark_at


_CALL = _OPEN + _INV + _CITY + _DAYS.format(3) + _CLOSE
_MUTATION_GOLDENS = [_CALL, "Let me think.</think>Sure." + _CALL, _CALL, '{"temp": 21}', '{"temp": -4}']


@pytest.mark.parametrize("k", range(len(_MUTATION_BODIES)))
def test_exports_agree_on_mutants(compiler, k):
    prep = recipe.prepare(_MUTATION_BODIES[k])
    golden = out_ids(_MUTATION_GOLDENS[k]) + [EOS_ID]
    g = recipe.output_grammar(prep)
    assert _xgr_accepts(compiler, g, golden) == _lark_accepts(prep, golden) == (None, True)
    rng = random.Random(k)
    for _ in range(60):
        ids = mutate(golden, rng)
        lark = _lark_accepts(prep, ids)[0]
        other = [i for i in ids if TOK.is_special(i) and i not in _TEMPLATE_IDS]
        if other:  # known difference: only the Lark keeps non-template special tokens out of free text
            assert lark is not None and lark <= ids.index(other[0])
            continue
        assert _xgr_accepts(compiler, g, ids)[0] == lark, TOK.decode(ids)
