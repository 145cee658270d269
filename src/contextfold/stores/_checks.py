"""Argument checks and the checkpoint commit rule shared by every store backend.

Each backend calls these before it touches its database, so a bad argument fails the same
way everywhere and nothing is written. The commit rule is applied by every backend inside its
own write transaction (or Lua script), so it is stated once here.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from typing import Any

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import ConflictError, StoreError
from contextfold.stores.base import StoreConfigError

__all__ = [
    "as_text",
    "check_checkpoint_commit",
    "check_conversation_id",
    "check_positive",
    "check_read_args",
    "check_ttl",
    "redact_url",
    "same_event_loop",
    "url_password",
]

_MAX_SEQ = 2**62


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


def check_positive(
    value: object, argument: str, *, integer: bool = False, zero: bool = False
) -> Any:
    """``value`` when it is a positive number, else a misuse error.

    Args:
        value: what the caller passed.
        argument: its name, for the error.
        integer: only an ``int`` will do.
        zero: 0 is allowed too.

    Raises:
        StoreConfigError: naming ``argument`` and the value given.
    """
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    number: Any = value
    if (
        isinstance(value, bool)
        or not isinstance(value, kinds)
        or not (number >= 0 if zero else number > 0)
    ):
        what = ("an integer" if integer else "a number") + (" >= 0" if zero else " > 0")
        raise StoreConfigError(f"{argument} must be {what}, got {value!r}", argument=argument)
    return value


def check_ttl(ttl: object) -> float:
    """The lock time-to-live as a positive float (a misuse error otherwise)."""
    return float(check_positive(ttl, "ttl"))


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


# The password runs to the last ``@`` of the URL, not the first ``/``: users paste passwords
# with ``/`` (or ``@``, spaces of any kind, line breaks) in them unescaped, and a leaked
# password is worse than a redacted host.
_URL_PASSWORD = re.compile(r"(://[^:/@]*:)(.*)@", re.DOTALL)
#: A ``password`` query parameter of a URL runs to the next parameter.
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*")
_CONNINFO_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.DOTALL)


def redact_url(url: str) -> str:
    """The URL or libpq conninfo with any password replaced, for error messages.

    Works for every scheme (``postgresql://``, ``redis://``, ``rediss://``, ``unix://`` ...):
    whatever sits between the user name's ``:`` and the last ``@`` is replaced, and so is a
    ``password`` query parameter (up to the next ``&``). In a conninfo string (no ``://``),
    ``password=`` is followed by a quoted value or one word.
    """
    if "://" in url:
        return _QUERY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", url))
    return _CONNINFO_PASSWORD.sub(r"\1***", url)


def url_password(url: str) -> str | None:
    """The raw text :func:`redact_url` hides as a URL's password (None when there is none)."""
    match = _URL_PASSWORD.search(url) if "://" in url else None
    return None if match is None else match.group(2)


def as_text(value: Any) -> str:
    """A Redis or database value as ``str`` (clients may return bytes)."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode()
    return str(value)


LoopRef = weakref.ref[asyncio.AbstractEventLoop]


def same_event_loop(bound: LoopRef | None, where: str) -> LoopRef:
    """A reference to the running loop, after checking it is the one ``bound`` names.

    An asyncio client or pool holds connections, locks and futures of the loop that first
    used it; from another loop the driver fails with a bare ``RuntimeError`` (or hangs), so
    the async stores call this first and name the rule instead. The reference is weak so a
    finished loop is not kept alive.

    Raises:
        StoreError: ``bound`` names another event loop (or one that is gone).
    """
    loop = asyncio.get_running_loop()
    if bound is None:
        return weakref.ref(loop)
    if bound() is not loop:
        raise StoreError(
            f"{where}: an async store belongs to the event loop that first used it, and this "
            "is another one; create one store per event loop (for example inside the "
            "coroutine that asyncio.run runs)"
        )
    return bound
