"""``recipe.jsonfmt.jsonl_values``: the JSON Lines reader of ``recipe cache simulate`` traces and
replay-engine scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from recipe.jsonfmt import jsonl_values


def test_values_in_order_with_line_numbers_blank_lines_skipped(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"a": 1}\n\n   \n[2, 3]\n"x"\n', encoding="utf-8")
    assert list(jsonl_values(p)) == [(1, {"a": 1}), (4, [2, 3]), (5, "x")]
    assert list(jsonl_values(str(p))) == [(1, {"a": 1}), (4, [2, 3]), (5, "x")]


def test_lines_end_at_newline_only(tmp_path: Path) -> None:
    # U+2028, U+2029 and U+0085 inside a JSON string are text, not line ends
    # (str.splitlines would cut the line there); CRLF files read as LF ones.
    text = 'line\u2028sep\u2029para\x85nel'
    p = tmp_path / "t.jsonl"
    p.write_bytes(('{"s": "' + text + '"}\r\n{"n": 2}\r\n').encode())
    assert list(jsonl_values(p)) == [(1, {"s": text}), (2, {"n": 2})]


def test_a_line_that_is_not_json_is_named(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"a": 1}\n\n{"a": \n', encoding="utf-8")
    values = jsonl_values(p)
    assert next(values) == (1, {"a": 1})
    with pytest.raises(ValueError, match=rf"^{p}:3: Expecting value"):
        next(values)


def test_read_errors_come_from_the_call(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        jsonl_values(tmp_path / "missing.jsonl")
    with pytest.raises(IsADirectoryError):
        jsonl_values(tmp_path)
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"s": "\xe9"}\n')
    with pytest.raises(UnicodeDecodeError):
        jsonl_values(bad)
