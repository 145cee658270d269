"""Helpers shared by the provider formats.

Conventions for ``extra`` (on messages and on parts), so that a round trip is exact and a
conversion to another format ignores what does not belong to it:

* ``"<format>.<key>"`` holds a provider field we do not model, copied as is (``cache_control``,
  ``annotations`` ...). A modeled field whose value was ``null`` is kept the same way, so the
  null comes back on dump. The dumper of ``<format>`` writes these keys back without
  overriding anything it computed itself; other dumpers ignore them.
* ``"<format>:<hint>"`` records a shape detail that is not a field (content given as a list
  rather than a string, a key that was absent ...). Only the dumper of ``<format>`` reads it.
* ``"<format>:raw"`` on an empty :class:`TextPart` keeps a block or content part of a type we
  do not model (audio, documents, server tool blocks ...), so it survives a round trip in its
  own format; other formats leave it out.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

from contextfold.errors import ConfigError, FormatError
from contextfold.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

FORMATS = ("openai_chat", "openai_responses", "anthropic")

_KNOWN_TEXT = frozenset({"type", "text"})
_KNOWN_REFUSAL = frozenset({"type", "refusal"})
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
# Falls back on this MIME type when an inline image has none (OpenAI data URLs need one).
DEFAULT_IMAGE_MIME = "image/png"


def fail(message: str, *, index: int | None = None, field: str | None = None) -> NoReturn:
    """Raise a :class:`FormatError` naming where the payload is wrong."""
    raise FormatError(message, index=index, field=field)


@contextmanager
def depth_guard() -> Iterator[None]:
    """Turn the ``RecursionError`` of a pathologically nested payload into a :class:`FormatError`.

    Loading walks nested content recursively; a hostile payload must still fail with the one
    error type ``load`` promises.
    """
    try:
        yield
    except RecursionError:
        fail("payload is nested too deeply")


def check_format_name(format: Any) -> None:
    """Raise :class:`ConfigError` unless ``format`` names one of :data:`FORMATS`.

    The name is the caller's argument, not part of the payload: misuse, not ``FormatError``.
    """
    if not isinstance(format, str) or format not in FORMATS:
        raise ConfigError(
            f"unknown format {format!r}; expected one of {list(FORMATS)}", argument="format"
        )


def check_strict(strict: Any) -> None:
    """Raise :class:`ConfigError` unless ``strict`` is a boolean (misuse, not a bad payload)."""
    if not isinstance(strict, bool):
        raise ConfigError(f"strict must be True or False, not {strict!r}", argument="strict")


def check_messages(messages: Any) -> None:
    """Raise :class:`ConfigError` unless ``messages`` is a sequence of :class:`Message`.

    ``dump`` takes what ``load`` returned; a payload or a list of dicts passed by mistake would
    otherwise fail deep inside with an ``AttributeError``.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise ConfigError(
            f"messages must be a sequence of Message, not {type(messages).__name__}",
            argument="messages",
        )
    for i, m in enumerate(messages):
        if not isinstance(m, Message):
            raise ConfigError(
                f"messages[{i}] is a {type(m).__name__}, not a Message "
                "(load a provider payload with load() first)",
                argument="messages",
            )


def type_name(value: Any) -> str:
    """A JSON-ish name for the type of ``value``, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def copy_json(value: Any) -> Any:
    """Copy the dicts and lists of a JSON-like value (scalars are immutable and shared).

    Used on the way in and on the way out, so that neither the caller's payload nor a dumped
    payload shares a mutable object with a stored message.
    """
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def require_str(raw: Mapping[str, Any], key: str, *, index: int | None, field: str) -> str:
    """``raw[key]`` when it is a string; else a :class:`FormatError` naming ``field``."""
    value = raw.get(key)
    if not isinstance(value, str):
        fail(f"{key} must be a string, not {type_name(value)}", index=index, field=field)
    return value


def is_plain_text(part: Part, ns: str) -> bool:
    """True for a text part with no ``ns`` field or hint (it can be dumped as a bare string)."""
    return isinstance(part, TextPart) and not any(k.startswith(ns) for k in part.extra)


def load_text(
    raw: Mapping[str, Any], index: int, where: str, ns: str, extra: dict[str, Any]
) -> TextPart:
    """A ``{"type": ..., "text": ...}`` content part (OpenAI Chat and Responses).

    ``extra`` may already hold hints of the caller (the Responses text type).
    """
    text = raw.get("text")
    if not isinstance(text, str):
        fail("text must be a string", index=index, field=f"{where}.text")
    keep_unknown(raw, _KNOWN_TEXT, ns, extra)
    return TextPart(text, extra=extra or NO_EXTRA)


def load_refusal(raw: Mapping[str, Any], index: int, where: str, ns: str) -> TextPart:
    """A ``{"type": "refusal", "refusal": ...}`` content part (OpenAI Chat and Responses).

    A refusal is text for every other format; the ``ns:type`` hint brings the type back.
    """
    text = raw.get("refusal")
    if not isinstance(text, str):
        fail("refusal must be a string", index=index, field=f"{where}.refusal")
    extra: dict[str, Any] = {f"{ns}:type": "refusal"}
    keep_unknown(raw, _KNOWN_REFUSAL, ns, extra)
    return TextPart(text, extra=extra)


def unmodeled_part(
    raw: Mapping[str, Any], index: int, where: str, ns: str, strict: bool
) -> TextPart:
    """A content part of a type the format does not model (audio, files ...).

    Strict loading refuses it; otherwise it is kept opaque, so it survives a round trip in its
    own format and other formats leave it out.
    """
    if strict:
        kind = raw.get("type")
        fail(f"content part type {kind!r} is not supported", index=index, field=f"{where}.type")
    return opaque(raw, ns)


def keep_unknown(
    raw: Mapping[str, Any], known: frozenset[str], ns: str, extra: dict[str, Any]
) -> None:
    """Copy the fields of ``raw`` that are not in ``known`` into ``extra`` as ``ns.key``."""
    for key, value in raw.items():
        if key not in known:
            extra[f"{ns}.{key}"] = copy_json(value)


def put_unknown(out: dict[str, Any], extra: Mapping[str, Any], ns: str) -> dict[str, Any]:
    """Write back the ``ns.key`` fields of ``extra`` that ``out`` does not already have."""
    if extra:
        prefix = ns + "."
        n = len(prefix)
        for key, value in extra.items():
            if key.startswith(prefix) and key[n:] not in out:
                out[key[n:]] = copy_json(value)
    return out


def hint(extra: Mapping[str, Any], ns: str, name: str) -> Any:
    """The shape hint ``ns:name`` or ``None``."""
    return extra.get(f"{ns}:{name}") if extra else None


def is_foreign(extra: Mapping[str, Any], ns: str) -> bool:
    """True when ``extra`` carries fields or hints of a format other than ``ns``."""
    if not extra:
        return False
    for key in extra:
        for other in FORMATS:
            if other != ns and key.startswith(other) and key[len(other) : len(other) + 1] in ".:":
                return True
    return False


def opaque(raw: Mapping[str, Any], ns: str) -> TextPart:
    """An empty text part that carries a block we do not model, for round trips only."""
    return TextPart("", extra={f"{ns}:raw": copy_json(raw)})


def opaque_raw(part: Part, ns: str) -> tuple[bool, Any]:
    """``(is_opaque, own_raw)``: own_raw is the kept block when it belongs to ``ns``."""
    if not isinstance(part, TextPart) or part.text or not part.extra:
        return False, None
    own = part.extra.get(f"{ns}:raw")
    if own is not None:
        return True, copy_json(own)
    return any(f"{f}:raw" in part.extra for f in FORMATS), None


def thinking_is_foreign(part: ThinkingPart, message_extra: Mapping[str, Any], ns: str) -> bool:
    """Reasoning is bound to the provider that produced it (signatures, encryption)."""
    return is_foreign(part.extra, ns) or is_foreign(message_extra, ns)


def split_data_url(url: str) -> tuple[str, str] | None:
    """``(mime, base64 data)`` of a ``data:<mime>;base64,<data>`` URL, else ``None``."""
    match = _DATA_URL.fullmatch(url)
    if match is None:
        return None
    return match.group(1), match.group(2)


def data_url(mime: str | None, data: str) -> str:
    """Inverse of :func:`split_data_url`."""
    return f"data:{mime or DEFAULT_IMAGE_MIME};base64,{data}"


def check_json_text(text: str, *, index: int, field: str) -> None:
    """Raise :class:`FormatError` when ``text`` is not JSON (used in strict mode)."""
    if not text.strip():
        return
    try:
        json.loads(text)
    except ValueError as exc:
        fail(f"arguments are not valid JSON: {exc}", index=index, field=field)


class IdMaker:
    """Deterministic, unique message ids for one payload.

    A provider id is used when the item has one and it is not taken yet. Otherwise the id is a
    hash of the position, the role and the content (texts, ids, arguments ...) of the message:
    loading the same payload twice gives the same ids, a message keeps its id when the
    conversation grows after it, and two conversations share an id at a position only when
    they hold the same message there. Hashing the content we already extracted, rather than
    serializing the item, keeps loading cheap for long histories.
    """

    __slots__ = ("_used",)

    def __init__(self) -> None:
        self._used: set[str] = set()

    def make(
        self, index: int | str, role: str, parts: Sequence[Part], *, provider_id: Any = None
    ) -> str:
        """The id for the message at ``index`` made of ``role`` and ``parts``."""
        if isinstance(provider_id, str) and provider_id and provider_id not in self._used:
            self._used.add(provider_id)
            return provider_id
        fields: list[str] = [str(index), role]
        _collect(parts, fields)
        text = "\x00".join(fields).encode("utf-8", "surrogatepass")
        digest = hashlib.blake2b(text, digest_size=12)
        candidate = "msg_" + digest.hexdigest()
        base = candidate
        n = 1
        while candidate in self._used:
            n += 1
            candidate = f"{base}_{n}"
        self._used.add(candidate)
        return candidate


def _collect(parts: Sequence[Part], fields: list[str]) -> None:
    for p in parts:
        if isinstance(p, TextPart):
            fields += ("t", p.text)
        elif isinstance(p, ToolCallPart):
            fields += ("c", p.id, p.name, p.arguments)
        elif isinstance(p, ToolResultPart):
            fields += ("r", p.call_id, str(p.is_error), str(p.name))
            if isinstance(p.content, str):
                fields.append(p.content)
            else:
                _collect(p.content, fields)
        elif isinstance(p, ThinkingPart):
            fields += ("k", p.text, str(p.signature), str(p.data))
        else:
            fields += ("i", str(p.url), str(p.data), str(p.mime), str(p.detail))


# The shared empty ``extra`` of messages and parts: passing it keeps loaded objects as light as
# hand-built ones.
NO_EXTRA: Mapping[str, Any] = TextPart("").extra
#: The text of a converted tool result whose content the target format cannot carry at all
#: (only a document, say): an empty result would read as "the tool returned nothing".
UNCARRIED_RESULT = "[the tool result held content this format cannot carry, such as a document]"
