"""Serialization and argument checks shared by every store backend.

Stores keep messages and checkpoints as compact JSON text produced by
:meth:`Message.to_dict` / :meth:`CheckpointRecord.to_dict`. Encoding is the hot path of an
append, so it does nothing beyond one ``to_dict`` and one ``json.dumps`` per record.

A backend may opt into *compact rows* (:func:`encode_row`; the SQLite store does): the
commonest message, one plain text part with no name or extras, is stored without JSON as

    ``\x1e`` + role letter + text length + ``:`` + id + ``\x1f`` + text

Nothing is escaped, so writing and reading such a row costs a fraction of the JSON round
trip. The leading ``\x1e`` can never start a JSON row, and the text length makes a truncated
or extended row detectable. Every other message is stored as JSON, and :func:`decode_message`
reads both forms.

Decoding never skips a record: a row that cannot be read raises :class:`StoreError` naming the
conversation and the sequence number, so the caller learns exactly where the damage is and
nothing is silently dropped.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from json.encoder import encode_basestring
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConflictError, FormatError, StoreError
from contextfold.messages import (
    _EMPTY,
    MESSAGE_FORMAT_VERSION,
    ROLES,
    Message,
    TextPart,
    _text_message,
)
from contextfold.stores.base import StoredMessage

__all__ = [
    "check_checkpoint_commit",
    "check_conversation_id",
    "check_read_args",
    "check_ttl",
    "collector_paused",
    "decode_checkpoint",
    "decode_message",
    "decode_rows",
    "encode_checkpoint",
    "encode_message",
    "encode_messages",
    "encode_row",
    "redact_url",
]

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_dumps_ascii = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode
_loads = json.loads
# The C string scanner behind json.loads (public in the module, absent from the stubs).
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_MAX_SEQ = 2**62
_TEXT_HEAD = f'{{"v":{MESSAGE_FORMAT_VERSION},"id":'
_COMPACT = "\x1e"
_ID_END = "\x1f"
_ROLE_CODES = {"system": "s", "developer": "d", "user": "u", "assistant": "a", "tool": "t"}
_CODE_ROLES = {code: role for role, code in _ROLE_CODES.items()}


def encode_message(message: Message) -> str:
    """Compact JSON of ``message.to_dict()``, byte for byte.

    Most chat messages are one plain text part; for those the JSON is assembled directly
    (same keys, same order, same escaping as ``json.dumps``), which is several times cheaper
    than building the dict first. Text that is not valid UTF-8 (lone surrogates) is written
    with ASCII escapes so every backend can store it.
    """
    parts = message.parts
    text = None
    if len(parts) == 1 and message.name is None and not message.extra:
        part = parts[0]
        if type(part) is TextPart and not part.extra and type(message.id) is str:
            text = (
                f'{_TEXT_HEAD}{encode_basestring(message.id)},"role":"{message.role}",'
                f'"parts":[{{"kind":"text","text":{encode_basestring(part.text)}}}]}}'
            )
    if text is None:
        text = _dumps(message.to_dict())
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            text = _dumps_ascii(message.to_dict())
    return text


def encode_row(message: Message) -> str:
    """A compact row for a one-text-part message, else the JSON of :func:`encode_message`.

    The compact form (see the module docs) applies when the message has exactly one
    :class:`TextPart` without extras, no name and no extras, and its id has no ``\x1f``.
    Text that is not valid UTF-8 (lone surrogates) goes the JSON way, escaped.
    """
    parts = message.parts
    extra = message.extra
    if len(parts) == 1 and message.name is None and (extra is _EMPTY or not extra):
        part = parts[0]
        msg_id = message.id
        if (
            type(part) is TextPart
            and (part.extra is _EMPTY or not part.extra)
            and type(msg_id) is str
            and _ID_END not in msg_id
            and type(part.text) is str
        ):
            code = _ROLE_CODES.get(message.role)
            if code is not None:
                text = part.text
                row = f"{_COMPACT}{code}{len(text)}:{msg_id}{_ID_END}{text}"
                if row.isascii():
                    return row
                try:
                    row.encode()
                except UnicodeEncodeError:
                    pass
                else:
                    return row
    return encode_message(message)


def check_conversation_id(conversation_id: object) -> str:
    """Return the id, or raise :class:`StoreError` when it is not a non-empty string."""
    if not isinstance(conversation_id, str) or not conversation_id:
        raise StoreError(f"conversation id must be a non-empty string, got {conversation_id!r}")
    if "\x00" in conversation_id:
        raise StoreError(f"conversation id must not contain NUL characters: {conversation_id!r}")
    if not conversation_id.isascii():
        try:
            conversation_id.encode()
        except UnicodeEncodeError as exc:
            raise StoreError(
                f"conversation id must be valid Unicode text: {conversation_id!r}"
            ) from exc
    return conversation_id


def check_read_args(after_seq: object, limit: object) -> None:
    """Reject negative or non-integer ``after_seq`` / ``limit`` with :class:`StoreError`."""
    if isinstance(after_seq, bool) or not isinstance(after_seq, int) or after_seq < 0:
        raise StoreError(f"after_seq must be an integer >= 0, got {after_seq!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise StoreError(f"limit must be None or an integer >= 0, got {limit!r}")
    if after_seq >= _MAX_SEQ or (limit is not None and limit >= _MAX_SEQ):
        raise StoreError(f"after_seq and limit must be below 2**62, got {after_seq}, {limit}")


def check_ttl(ttl: object) -> float:
    """The lock time-to-live as a positive float."""
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
        raise StoreError(f"ttl must be a positive number of seconds, got {ttl!r}")
    return float(ttl)


def encode_messages(
    conversation_id: str, messages: Sequence[Message], *, compact: bool = False
) -> list[str]:
    """The stored text of each message, in order; :class:`StoreError` for anything else.

    Args:
        conversation_id: named in errors.
        messages: what to append.
        compact: write compact rows (:func:`encode_row`) where possible instead of JSON;
            only for a backend whose readers all understand them.
    """
    if isinstance(messages, (str, bytes, Message)) or not isinstance(messages, Sequence):
        raise StoreError(
            f"append to {conversation_id!r} expects a sequence of Message, "
            f"got {type(messages).__name__}"
        )
    encode = encode_row if compact else encode_message
    out: list[str] = []
    add = out.append
    codes = _ROLE_CODES if compact else {}
    for index, message in enumerate(messages):
        if type(message) is Message and message.extra is _EMPTY and message.name is None:
            # encode_row's commonest case, inline (a batch spends most of its Python time
            # here); anything it does not cover takes the full path below.
            parts = message.parts
            if len(parts) == 1:
                part = parts[0]
                text = part.text if type(part) is TextPart and part.extra is _EMPTY else None
                msg_id = message.id
                code = codes.get(message.role)
                if (
                    code is not None
                    and type(text) is str
                    and type(msg_id) is str
                    and _ID_END not in msg_id
                ):
                    row = f"{_COMPACT}{code}{len(text)}:{msg_id}{_ID_END}{text}"
                    if row.isascii():
                        add(row)
                        continue
        if type(message) is not Message and not isinstance(message, Message):
            raise StoreError(
                f"append to {conversation_id!r}: item {index} is a {type(message).__name__}, "
                "not a Message; nothing was stored"
            )
        try:
            add(encode(message))
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"append to {conversation_id!r}: message {index} ({message.id}) cannot be "
                f"serialized to JSON ({exc}); nothing was stored"
            ) from exc
    return out


_ROLE_KEY = ',"role":"'
_TEXT_KEY = '","parts":[{"kind":"text","text":"'
_TAIL = "}]}"


def _decode_plain_text(data: str) -> Message | None:
    """Read the exact text :func:`encode_message` writes for a one-text-part message.

    Only the two JSON strings are unescaped (by the C string scanner); the fixed parts around
    them must match byte for byte, otherwise ``None`` sends the row down the general path.
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
    text, end = _scanstring(data, role_end + len(_TEXT_KEY))
    if len(data) != end + len(_TAIL) or not data.endswith(_TAIL):
        return None
    return _text_message(role, text, msg_id)


def _decode_compact(data: str) -> Message:
    """Read a compact row; ``ValueError`` when it is damaged in any way."""
    role = _CODE_ROLES.get(data[1:2])
    colon = data.find(":", 2)
    digits = data[2:colon]
    if role is None or colon < 0 or not (digits.isascii() and digits.isdigit()):
        raise ValueError("damaged compact row header")
    id_end = data.find(_ID_END, colon + 1)
    if id_end < 0 or len(data) - id_end - 1 != int(digits):
        raise ValueError("damaged compact row: text length does not match")
    return _text_message(role, data[id_end + 1 :], data[colon + 1 : id_end])


def decode_message(data: str | bytes | bytearray, conversation_id: str, seq: int) -> StoredMessage:
    """One stored row back into a :class:`StoredMessage`; raises with its location."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode()
        if text[:1] == _COMPACT:
            return StoredMessage(seq, _decode_compact(text))
        plain = _decode_plain_text(text)
        if plain is not None:
            return StoredMessage(seq, plain)
        return StoredMessage(seq, Message.from_dict(_loads(text)))
    except (ValueError, TypeError, FormatError) as exc:
        raise StoreError(
            f"corrupted message in conversation {conversation_id!r} at seq {seq}: {exc}"
        ) from exc


# Slot setters of StoredMessage: one is built per row of a full load.
_new_object = object.__new__
_set_seq = StoredMessage.__dict__["seq"].__set__
_set_message = StoredMessage.__dict__["message"].__set__

#: From this many rows on, :func:`decode_rows` pauses the cyclic garbage collector.
PAUSE_GC_ROWS = 2000


def decode_rows(rows: Sequence[Sequence[Any]], conversation_id: str) -> list[StoredMessage]:
    """``(seq, data)`` rows into stored messages, oldest first; raises at the first damage.

    The same as :func:`decode_message` row by row, with the compact rows read inline: a
    full load decodes one row per message, so per-row overhead shows.

    A large batch is decoded with the cyclic garbage collector paused. Decoding creates
    several container objects per row and no reference cycles, yet every allocation counts
    towards the collector's thresholds, so on a big heap full collections would otherwise
    traverse everything again and again while the list grows (that more than doubled the
    time of loading 100k messages). The collector is resumed afterwards, if it was running,
    and then examines the new objects once.
    """
    with collector_paused(len(rows) >= PAUSE_GC_ROWS):
        return _decode_rows(rows, conversation_id)


@contextmanager
def collector_paused(pause: bool = True) -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk read (see :func:`decode_rows`).

    Does nothing when ``pause`` is false or the collector is already off; otherwise the
    collector is resumed on the way out, even on error. A caller that switches the
    collector off from another thread meanwhile would find it on again afterwards.
    """
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _decode_rows(rows: Sequence[Sequence[Any]], conversation_id: str) -> list[StoredMessage]:
    out: list[StoredMessage] = []
    add = out.append
    find = str.find
    roles = _CODE_ROLES
    new = _new_object
    for seq, data in rows:
        if type(data) is str and data[:1] == _COMPACT:
            # Inline _decode_compact; anything unusual takes the checked path below.
            role = roles.get(data[1:2])
            colon = find(data, ":", 2)
            digits = data[2:colon]
            id_end = find(data, _ID_END, colon + 1)
            if (
                role is not None
                and colon > 0
                and id_end > 0
                and digits.isascii()
                and digits.isdigit()
                and len(data) - id_end - 1 == int(digits)
            ):
                stored = new(StoredMessage)
                _set_seq(stored, int(seq))
                _set_message(
                    stored, _text_message(role, data[id_end + 1 :], data[colon + 1 : id_end])
                )
                add(stored)
                continue
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


def check_checkpoint_commit(
    conversation_id: str,
    checkpoint: CheckpointRecord,
    *,
    expected_previous: str | None,
    latest_id: str | None,
    last_seq: int,
) -> None:
    """The commit rule every backend applies inside its write transaction.

    Raises:
        ConflictError: another checkpoint was committed since the caller read
            ``expected_previous``, or the covered span does not exist in the log.
    """
    if latest_id != expected_previous:
        raise ConflictError(
            f"checkpoint for {conversation_id!r} expected previous checkpoint "
            f"{expected_previous!r} but the latest is {latest_id!r}"
        )
    covered = checkpoint.last_covered_seq
    if covered is None or isinstance(covered, bool) or not isinstance(covered, int):
        raise ConflictError(
            f"checkpoint {checkpoint.id} for {conversation_id!r} has no last_covered_seq"
        )
    if covered < 1 or covered > last_seq:
        raise ConflictError(
            f"checkpoint {checkpoint.id} for {conversation_id!r} covers up to seq {covered}, "
            f"but the log holds seq 1..{last_seq}"
        )


_URL_PASSWORD = re.compile(r"(://[^:/@]*:)[^@/]*@")
_CONNINFO_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def redact_url(url: str) -> str:
    """The URL or libpq conninfo with any password replaced, for error messages."""
    return _CONNINFO_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", url))


def as_text(value: Any) -> str:
    """A Redis or database value as ``str`` (clients may return bytes)."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode()
    return str(value)
