"""``recipe.errors.rust_debug``: a string quoted as Rust's ``{:?}`` prints it (``impl Debug for str``:
``char::escape_debug_ext`` with grapheme extenders and double quotes escaped), the quoting
deepseek-recipe's messages use for an invalid url and serde's ``invalid value: string …``.

Expected values are Rust's documented output: the six backslash escapes, ``\\u{hex}`` (lower-case,
no padding) for what it does not print and for grapheme extenders, a space and printable
non-ASCII text as they are, the single quote unescaped inside a string."""

from __future__ import annotations

import pytest

from recipe.errors import rust_debug


@pytest.mark.parametrize(("text", "printed"), [
    ("", '""'),
    ("plain text", '"plain text"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("back\\slash", '"back\\\\slash"'),
    ("a\nb\rc\td", '"a\\nb\\rc\\td"'),
    ("nul\0", '"nul\\0"'),
    ("it's", '"it\'s"'),  # a single quote is escaped in a char's Debug only
    ("\x07bell\x7f", '"\\u{7}bell\\u{7f}"'),  # controls other than the named ones
    ("no\u00a0break", '"no\\u{a0}break"'),  # a space separator other than " "
    ("zw\u200cnj", '"zw\\u{200c}nj"'),  # a format character (Cf)
    ("e\u0301", '"e\\u{301}"'),  # a combining mark: a grapheme extender
    ("line\u2028sep", '"line\\u{2028}sep"'),
    ("héllo wörld 日本", '"héllo wörld 日本"'),
    ("\U0001f600", '"\U0001f600"'),  # printable outside the BMP
    ("\ue000", '"\\u{e000}"'),  # private use
    ("\ud800", '"\\u{d800}"'),  # a lone surrogate (a Python str can hold one; a Rust str cannot)
])
def test_rust_debug(text: str, printed: str) -> None:
    assert rust_debug(text) == printed


def test_messages_invalid_url_quotes_the_url_as_rust_does() -> None:
    from recipe.api.images import image_from_messages_url
    from recipe.errors import RequestError

    with pytest.raises(RequestError) as exc:
        image_from_messages_url("ftp://x\u200c\ty", "messages[0].content[0].source.url", "messages.0.content[0]")
    assert exc.value.message.endswith('invalid url: "ftp://x\\u{200c}\\ty"')
