"""Images in requests for encodings with an image token (DeepSeek-V4.1): validation, sources, and
message text with image placeholders.

deepseek-recipe 0.2.0's V4.1 rules (reference/deepseek-v41-format.md §3, observed):

- an ``http:`` / ``https:`` URL (any case, nothing else checked, never fetched) is a ``url`` source;
- a ``data:`` URL must be ``data:<mime>[;params];base64,<data>``: the mime type (trimmed, any case)
  one of png, jpeg, jpg, gif, webp, and the data valid *forgiving* base64 (ASCII whitespace
  ignored, padding optional); it is kept as sent;
- Messages ``base64`` sources are decoded strictly (padding required, no whitespace, no stray
  bits) and re-encoded canonically (``image/jpg`` becomes ``image/jpeg``); Messages URLs follow the
  same scheme rule with their own error text.

Each check raises :class:`~recipe.errors.RequestError` (convert stage, 400) with deepseek-recipe's
message, prefixed by the part's location as deepseek-recipe words it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Union

from recipe.conversation import ImagePlaceholder, ImageSource
from recipe.errors import RequestError, rust_debug

__all__ = [
    "IMAGE_MIME_TYPES",
    "image_from_url",
    "file_data_url",
    "image_from_base64",
    "image_from_messages_url",
    "join_with_images",
    "Piece",
]

IMAGE_MIME_TYPES = frozenset({"image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp"})
_UNSUPPORTED = "You have uploaded an unsupported {what}. Please make sure your {what} is valid and has one of the following formats: webp, png, jpeg, and gif."
_ASCII_WS = " \t\n\f\r"
_B64_CHARS = re.compile(r"[A-Za-z0-9+/]*")

#: A message part: text, or an image at that place.
Piece = Union[str, ImageSource]


def _error(where: str, message: str) -> RequestError:
    return RequestError(f"{where}: {message}" if where else message, param=where.lstrip(".") or None)


def _is_http(url: str) -> bool:
    head = url[:6].lower()
    return head.startswith("http:") or head == "https:"


def _forgiving_base64_ok(data: str) -> bool:
    """WHATWG forgiving-base64: ASCII whitespace removed, up to two ``=`` dropped when the length is
    a multiple of 4, then only the standard alphabet and a length not ``1 (mod 4)``."""
    s = "".join(c for c in data if c not in _ASCII_WS)
    if len(s) % 4 == 0:
        s = s[:-2] if s.endswith("==") else s[:-1] if s.endswith("=") else s
    return len(s) % 4 != 1 and _B64_CHARS.fullmatch(s) is not None


def _mime(header: str) -> str:
    return header.split(";", 1)[0].strip(_ASCII_WS).lower()


def image_from_url(url: str, detail: str | None, path: str, where: str) -> ImageSource:
    """A Chat ``image_url`` / Responses ``input_image`` URL as an :class:`ImageSource`.

    Args:
        path: the source's ``path`` (``.messages[0]``, ``input[2]``).
        where: the error-message prefix.

    Raises:
        RequestError: ``Unsupported image_url format`` (not http(s) or a base64 data URL), the
            unsupported-image message (mime type), ``Invalid base64 data``.
    """
    if _is_http(url):
        return ImageSource("url", url, detail or "high", path)  # type: ignore[arg-type]
    if url[:5].lower() == "data:" and "," in url:
        header, data = url[5:].split(",", 1)
        if header.endswith("base64"):
            if _mime(header) not in IMAGE_MIME_TYPES:
                raise _error(where, _UNSUPPORTED.format(what="image"))
            if not _forgiving_base64_ok(data):
                raise _error(where, "Invalid base64 data")
            return ImageSource("data_url", url, detail or "high", path)  # type: ignore[arg-type]
    raise _error(where, "Unsupported image_url format")


def file_data_url(file_data: str | None, file_id: str | None, where: str) -> str:
    """A Chat ``file`` part's image URL: its top-level ``file_data``, checked (deepseek-recipe reads
    every file part of a message this way before it reads any image of it; the URL then follows the
    ``image_url`` rules).

    Raises:
        RequestError: both or neither given, a ``file_id``, ``file_data`` that is not a base64
            data URL, the unsupported-file message.
    """
    if file_id is not None and file_data is not None:
        raise _error(where, "file cannot have both file_id and file_data")
    if file_id is not None:
        raise _error(where, "file_id is not supported. Pass the image as a base64 data url instead.")
    if file_data is None:
        raise _error(where, "file must have a file_id or file_data")
    if file_data[:5].lower() != "data:" or "," not in file_data:
        raise _error(where, "file_data is not a valid base64 data url")
    header, data = file_data[5:].split(",", 1)
    if _mime(header) not in IMAGE_MIME_TYPES:
        raise _error(where, _UNSUPPORTED.format(what="file"))
    if header.endswith("base64") and not _forgiving_base64_ok(data):
        raise _error(where, "file_data is not a valid base64 data url")
    return file_data


def _strict_base64(data: str) -> bytes | None:
    """Decoded bytes, or None: standard alphabet, no whitespace, padding required when the length
    is not a multiple of 4 (extra ``=`` tolerated), zero trailing bits."""
    body = data.rstrip("=")
    padded = len(body) != len(data)
    if len(body) % 4 == 1 or (len(body) % 4 and not padded) or _B64_CHARS.fullmatch(body) is None:
        return None
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw).decode().rstrip("=") == body else None


def image_from_base64(media_type: str, data: str, path: str, where: str) -> ImageSource:
    """A Messages ``base64`` image source as a canonical data URL (``image/jpg`` -> ``image/jpeg``).

    Raises:
        RequestError: ``base64 decode error``.
    """
    raw = _strict_base64(data)
    if raw is None:
        raise _error(where, "base64 decode error")
    mime = "image/jpeg" if media_type == "image/jpg" else media_type
    return ImageSource("data_url", f"data:{mime};base64,{base64.b64encode(raw).decode()}", "high", path)


def image_from_messages_url(url: str, path: str, where: str) -> ImageSource:
    """A Messages ``url`` image source. Raises RequestError ``invalid url: "…"`` unless http(s)."""
    if not _is_http(url):
        raise _error(where, f"invalid url: {rust_debug(url)}")
    return ImageSource("url", url, "high", path)


def join_with_images(pieces: Sequence[Piece], token: str, sep: str = "\n\n") -> tuple[str, tuple[ImagePlaceholder, ...]]:
    """Pieces joined by ``sep``, each image written as ``token``; returns the text and where each
    image token starts (code points)."""
    out: list[str] = []
    images: list[ImagePlaceholder] = []
    pos = 0
    for k, p in enumerate(pieces):
        if k:
            out.append(sep)
            pos += len(sep)
        if isinstance(p, str):
            out.append(p)
            pos += len(p)
        else:
            images.append(ImagePlaceholder(pos, p))
            out.append(token)
            pos += len(token)
    return "".join(out), tuple(images)
