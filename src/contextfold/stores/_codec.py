"""The one stored form of messages and checkpoints, shared by every store backend.

Every backend stores a message as the compact JSON of :meth:`Message.to_dict` and a
checkpoint as that of :meth:`CheckpointRecord.to_dict`. Encoding is the hot path of an append
and decoding that of a full load (one message per row), so the commonest message, one plain
text part, is written and read by dedicated code that produces and accepts exactly the bytes
``json.dumps`` would, and builds the message with :meth:`Message.trusted` once the row's shape
is verified. Everything else takes the general ``to_dict`` / ``from_dict`` path.

Older SQLite files may still hold *compact rows* (``\\x1e`` + role letter + text length + ``:``
+ id + ``\\x1f`` + text), written by contextfold before JSON became the only format; they are
read, never written.

Decoding never skips a record: a row that cannot be read raises :class:`StoreError` naming the
conversation and the sequence number, so the caller learns exactly where the damage is and
nothing is silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from json.encoder import encode_basestring
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import FormatError, StoreError
from contextfold.messages import MESSAGE_FORMAT_VERSION, ROLES, Message, TextPart
from contextfold.stores.base import StoredMessage

__all__ = [
    "decode_checkpoint",
    "decode_message",
    "decode_rows",
    "decode_state",
    "encode_checkpoint",
    "encode_message",
    "encode_messages",
    "encode_state",
]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_dumps_ascii = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode
_loads = json.loads
# The C string scanner behind json.loads (public in the module, absent from the stubs).
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_trusted = Message.trusted
# The ``extra`` a message or part has when none is given (one shared empty mapping): an
# identity test against it is the cheap way to see that a message carries no extras.
_NO_EXTRA = next(f.default for f in fields(Message) if f.name == "extra")

_TEXT_HEAD = f'{{"v":{MESSAGE_FORMAT_VERSION},"id":'
_ROLE_KEY = ',"role":"'
_TEXT_KEY = '","parts":[{"kind":"text","text":'
_TAIL = "}]}"
_LEGACY = "\x1e"
_LEGACY_ID_END = "\x1f"
_LEGACY_ROLES = {"s": "system", "d": "developer", "u": "user", "a": "assistant", "t": "tool"}


def _plain_text(message: Message) -> str | None:
    """The JSON of a one-plain-text-part message, assembled directly; ``None`` otherwise.

    Same keys, order and escaping as ``json.dumps(message.to_dict())``, several times cheaper
    than building the dict first.
    """
    if message.name is not None or (message.extra is not _NO_EXTRA and message.extra):
        return None
    parts = message.parts
    if len(parts) != 1:
        return None
    part = parts[0]
    if type(part) is not TextPart or (part.extra is not _NO_EXTRA and part.extra):
        return None
    if type(message.id) is not str or type(part.text) is not str:
        return None
    return (
        f"{_TEXT_HEAD}{encode_basestring(message.id)}{_ROLE_KEY}{message.role}"
        f"{_TEXT_KEY}{encode_basestring(part.text)}{_TAIL}"
    )


def encode_message(message: Message) -> str:
    """Compact JSON of ``message.to_dict()``, byte for byte.

    Text that is not valid UTF-8 (lone surrogates) is written with ASCII escapes so every
    backend can store it.
    """
    text = _plain_text(message)
    if text is None:
        text = _dumps(message.to_dict())
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            text = _dumps_ascii(message.to_dict())
    return text


def encode_messages(conversation_id: str, messages: Sequence[Message]) -> list[str]:
    """The stored text of each message, in order; :class:`StoreError` for anything else.

    Args:
        conversation_id: named in errors.
        messages: what to append; nothing is returned unless every item encodes.
    """
    if isinstance(messages, (str, bytes, Message)) or not isinstance(messages, Sequence):
        raise StoreError(
            f"append to {conversation_id!r} expects a sequence of Message, "
            f"got {type(messages).__name__}"
        )
    out: list[str] = []
    add = out.append
    escape = encode_basestring
    no_extra = _NO_EXTRA
    for index, message in enumerate(messages):
        if type(message) is Message:
            # _plain_text inline: a batch spends most of its Python time here, and anything
            # this does not cover takes the full path below.
            parts = message.parts
            if message.extra is no_extra and message.name is None and len(parts) == 1:
                part = parts[0]
                msg_id = message.id
                if (
                    type(part) is TextPart
                    and part.extra is no_extra
                    and type(msg_id) is str
                    and type(part.text) is str
                ):
                    text = (
                        f"{_TEXT_HEAD}{escape(msg_id)}{_ROLE_KEY}{message.role}"
                        f"{_TEXT_KEY}{escape(part.text)}{_TAIL}"
                    )
                    if text.isascii():
                        add(text)
                        continue
        elif not isinstance(message, Message):
            raise StoreError(
                f"append to {conversation_id!r}: item {index} is a {type(message).__name__}, "
                "not a Message; nothing was stored"
            )
        try:
            add(encode_message(message))
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"append to {conversation_id!r}: message {index} ({message.id}) cannot be "
                f"serialized to JSON ({exc}); nothing was stored"
            ) from exc
    return out


def _decode_plain_text(data: str) -> Message | None:
    """Read the exact text :func:`_plain_text` writes; ``None`` for any other row.

    Only the two JSON strings are unescaped (by the C string scanner); the fixed parts around
    them must match byte for byte, otherwise the row goes down the general path.
    """
    if not data.startswith(_TEXT_HEAD + '"'):
        return None
    msg_id, end = _scanstring(data, len(_TEXT_HEAD) + 1)
    if not data.startswith(_ROLE_KEY, end):
        return None
    start = end + len(_ROLE_KEY)
    role_end = data.find('"', start)
    role = data[start:role_end]
    if role_end < 0 or role not in ROLES or not data.startswith(_TEXT_KEY, role_end):
        return None
    if data[role_end + len(_TEXT_KEY) : role_end + len(_TEXT_KEY) + 1] != '"':
        return None
    text, end = _scanstring(data, role_end + len(_TEXT_KEY) + 1)
    if len(data) != end + len(_TAIL) or not data.endswith(_TAIL):
        return None
    return _trusted(role, text, id=msg_id)


def _decode_legacy(data: str) -> Message:
    """Read a compact row of an older SQLite file; ``ValueError`` when it is damaged."""
    role = _LEGACY_ROLES.get(data[1:2])
    colon = data.find(":", 2)
    digits = data[2:colon]
    if role is None or colon < 0 or not (digits.isascii() and digits.isdigit()):
        raise ValueError("damaged compact row header")
    id_end = data.find(_LEGACY_ID_END, colon + 1)
    if id_end < 0 or len(data) - id_end - 1 != int(digits):
        raise ValueError("damaged compact row: text length does not match")
    return _trusted(role, data[id_end + 1 :], id=data[colon + 1 : id_end])


def _decode(text: str) -> Message:
    if text[:1] == _LEGACY:
        return _decode_legacy(text)
    return _decode_plain_text(text) or Message.from_dict(_loads(text))


def decode_message(data: str | bytes | bytearray, conversation_id: str, seq: int) -> StoredMessage:
    """One stored row back into a :class:`StoredMessage`; raises with its location."""
    try:
        return StoredMessage(seq, _decode(data if isinstance(data, str) else bytes(data).decode()))
    except (ValueError, TypeError, FormatError) as exc:
        raise StoreError(
            f"corrupted message in conversation {conversation_id!r} at seq {seq}: {exc}"
        ) from exc


def decode_rows(rows: Iterable[Sequence[Any]], conversation_id: str) -> list[StoredMessage]:
    """``(seq, data)`` rows into stored messages, oldest first; raises at the first damage.

    The same as :func:`decode_message` row by row, with the commonest row read inline: a
    full load decodes one row per message, so per-row overhead shows.
    """
    out: list[StoredMessage] = []
    add = out.append
    scan = _scanstring
    trusted = _trusted
    roles = ROLES
    head, start = _TEXT_HEAD + '"', len(_TEXT_HEAD) + 1
    role_key, text_key = _ROLE_KEY, _TEXT_KEY + '"'
    for seq, data in rows:
        if type(data) is bytes:  # Redis replies are bytes unless the client decodes them
            try:  # noqa: SIM105  (cheaper per row than a suppress() block)
                data = data.decode()
            except UnicodeDecodeError:
                pass  # decode_message below reports it with its location
        if type(data) is str and data.startswith(head):
            # _decode_plain_text inline; anything unusual takes the checked path below.
            try:
                msg_id, end = scan(data, start)
                role_start = end + len(role_key)
                role_end = data.find('"', role_start)
                role = data[role_start:role_end]
                if (
                    data.startswith(role_key, end)
                    and role in roles
                    and data.startswith(text_key, role_end)
                ):
                    text, end = scan(data, role_end + len(text_key))
                    if len(data) == end + len(_TAIL) and data.endswith(_TAIL):
                        add(StoredMessage(int(seq), trusted(role, text, id=msg_id)))
                        continue
            except ValueError:
                pass
        add(decode_message(data, conversation_id, int(seq)))
    return out


def encode_checkpoint(checkpoint: CheckpointRecord) -> str:
    """JSON text of a checkpoint; :class:`StoreError` when it is not one or not serializable."""
    if not isinstance(checkpoint, CheckpointRecord):
        raise StoreError(f"expected a CheckpointRecord, got {type(checkpoint).__name__}")
    if not isinstance(checkpoint.id, str) or not checkpoint.id:
        raise StoreError("a checkpoint needs a non-empty string id")
    try:
        text = _dumps(checkpoint.to_dict())
        if not text.isascii():
            try:
                text.encode()
            except UnicodeEncodeError:
                text = _dumps_ascii(checkpoint.to_dict())
        return text
    except (TypeError, ValueError) as exc:
        raise StoreError(f"checkpoint {checkpoint.id} cannot be serialized to JSON: {exc}") from exc


def decode_checkpoint(
    data: str | bytes | bytearray, conversation_id: str, position: int
) -> CheckpointRecord:
    """One stored checkpoint row back into a record; raises with its location."""
    try:
        return CheckpointRecord.from_dict(_loads(data))
    except (ValueError, TypeError, FormatError) as exc:
        raise StoreError(
            f"corrupted checkpoint #{position} in conversation {conversation_id!r}: {exc}"
        ) from exc


def encode_state(state: Mapping[str, Any]) -> str:
    """JSON text of a strategy state (sorted keys: the same state is the same bytes)."""
    if not isinstance(state, Mapping):
        raise StoreError(f"expected a strategy state mapping, got {type(state).__name__}")
    try:
        return json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"strategy state cannot be serialized to JSON: {exc}") from exc


def decode_state(data: str | bytes | bytearray) -> dict[str, Any] | None:
    """A stored strategy state back into a dict; None when it is unreadable.

    A state only makes builds cheaper (it is where a cache-stable window begins), so a
    damaged one is dropped and the next build starts afresh instead of failing.
    """
    try:
        value = _loads(data)
    except (ValueError, TypeError):
        return None
    return value if isinstance(value, dict) else None
