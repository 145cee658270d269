"""The provider-neutral message model.

A :class:`Message` is frozen and slotted: strategies can share messages freely, and a token
count computed once for a message stays valid for its whole life. Content is a tuple of
parts, each a small frozen dataclass with a literal ``kind`` discriminator. Fields that a
provider sends and we do not model are kept in ``extra`` so that a round trip through
:mod:`contextfold.formats` loses nothing.

Serialization (:meth:`Message.to_dict` / :meth:`Message.from_dict`) is the one path used by
stores and the CLI; it carries a format version so stored logs stay readable.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, Union

from contextfold.errors import FormatError

__all__ = [
    "MESSAGE_FORMAT_VERSION",
    "ROLES",
    "ImagePart",
    "Message",
    "Part",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolResultPart",
    "new_id",
]

MESSAGE_FORMAT_VERSION = 1

Role: TypeAlias = Literal["system", "developer", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "developer", "user", "assistant", "tool"})


class _EmptyMapping(Mapping[str, Any]):
    """An immutable, hashable empty mapping: the shared default for ``extra``."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "{}"


_EMPTY: Mapping[str, Any] = _EmptyMapping()


def new_id() -> str:
    """Return a fresh random message id."""
    return "msg_" + uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text."""

    text: str
    extra: Mapping[str, Any] = field(default=_EMPTY, hash=False)
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image, by URL or inline base64 ``data`` with its ``mime`` type."""

    url: str | None = None
    data: str | None = None
    mime: str | None = None
    detail: str | None = None
    extra: Mapping[str, Any] = field(default=_EMPTY, hash=False)
    kind: Literal["image"] = "image"


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A tool (function) call made by the assistant.

    ``arguments`` is the JSON text exactly as the provider sent it, so that odd spacing or
    invalid JSON survives a round trip; :meth:`parsed_arguments` decodes it.
    """

    id: str
    name: str
    arguments: str = "{}"
    extra: Mapping[str, Any] = field(default=_EMPTY, hash=False)
    kind: Literal["tool_call"] = "tool_call"

    def parsed_arguments(self) -> Any:
        """Decode ``arguments``; raises :class:`FormatError` when it is not JSON.

        Arguments nested too deeply to decode (thousands of levels) count as not JSON: they
        are data a caller cannot use either way, and a :class:`RecursionError` escaping from
        here would crash whatever was reading the conversation.
        """
        import json

        try:
            return json.loads(self.arguments) if self.arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            raise FormatError(
                f"tool call {self.id!r} ({self.name}) has arguments that are not JSON: {exc}",
                field="arguments",
            ) from exc


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    """The result of a tool call, matched to the call by ``call_id``.

    ``content`` is either a string or a tuple of parts (text and images), as providers allow.
    """

    call_id: str
    content: str | tuple[Part, ...] = ""
    is_error: bool = False
    name: str | None = None
    extra: Mapping[str, Any] = field(default=_EMPTY, hash=False)
    kind: Literal["tool_result"] = "tool_result"

    @property
    def text(self) -> str:
        """The textual content, with non-text parts left out."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True)
class ThinkingPart:
    """Model reasoning. ``redacted`` thinking carries opaque ``data`` instead of text."""

    text: str = ""
    signature: str | None = None
    redacted: bool = False
    data: str | None = None
    extra: Mapping[str, Any] = field(default=_EMPTY, hash=False)
    kind: Literal["thinking"] = "thinking"


Part: TypeAlias = Union[TextPart, ImagePart, ToolCallPart, ToolResultPart, ThinkingPart]  # noqa: UP007


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation.

    Attributes:
        role: ``system``, ``developer``, ``user``, ``assistant`` or ``tool``.
        parts: the content, in order.
        id: a stable identifier; generated when not given.
        name: the optional participant name (OpenAI ``name``).
        extra: provider fields we do not model, kept for lossless round trips.
    """

    role: Role
    parts: tuple[Part, ...] = ()
    id: str = field(default_factory=new_id)
    name: str | None = None
    extra: Mapping[str, Any] = field(default=_EMPTY, hash=False)
    # Per-counter token counts. Messages are immutable, so a count never goes stale.
    _token_cache: dict[Any, int] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise FormatError(f"unknown role {self.role!r}", field="role")
        if not isinstance(self.parts, tuple):
            object.__setattr__(self, "parts", tuple(self.parts))

    # -- constructors -------------------------------------------------------------------

    @classmethod
    def system(cls, text: str, **kwargs: Any) -> Message:
        """A system message."""
        return cls("system", (TextPart(text),), **kwargs)

    @classmethod
    def developer(cls, text: str, **kwargs: Any) -> Message:
        """A developer message (OpenAI's successor to system for reasoning models)."""
        return cls("developer", (TextPart(text),), **kwargs)

    @classmethod
    def user(cls, content: str | Iterable[Part], **kwargs: Any) -> Message:
        """A user message from text or parts."""
        return cls("user", _as_parts(content), **kwargs)

    @classmethod
    def assistant(
        cls,
        content: str | Iterable[Part] | None = None,
        *,
        tool_calls: Iterable[ToolCallPart] = (),
        **kwargs: Any,
    ) -> Message:
        """An assistant message with optional text and tool calls."""
        parts = _as_parts(content) if content is not None else ()
        return cls("assistant", parts + tuple(tool_calls), **kwargs)

    @classmethod
    def tool_result(
        cls,
        call_id: str,
        content: str | Iterable[Part],
        *,
        is_error: bool = False,
        name: str | None = None,
        **kwargs: Any,
    ) -> Message:
        """A ``tool`` message answering the call ``call_id``."""
        body: str | tuple[Part, ...] = content if isinstance(content, str) else tuple(content)
        part = ToolResultPart(call_id, body, is_error=is_error, name=name)
        return cls("tool", (part,), **kwargs)

    @classmethod
    def trusted(
        cls,
        role: str,
        parts: tuple[Part, ...] | str,
        *,
        id: str,
        name: str | None = None,
        extra: Mapping[str, Any] = _EMPTY,
    ) -> Message:
        """A message from already-validated fields; UNCHECKED, for decoders only.

        It sets the fields directly, skipping ``__init__`` and every check (a store reading
        back its own rows builds one message per row, and the checks are most of that cost).
        Use it only for data that was a valid :class:`Message` when written, in a decoder that
        verified the row's shape; anything else goes through ``Message(...)`` or
        :meth:`from_dict`. ``parts`` is a tuple of parts (not copied), or a ``str`` for one
        plain :class:`TextPart`. The result equals ``Message(role, parts, id=id, ...)``.
        """
        if type(parts) is str:
            part = _new_object(TextPart)
            _set_text(part, parts)
            _set_text_extra(part, _EMPTY)
            _set_text_kind(part, "text")
            parts = (part,)
        message = _new_object(cls)
        _set_role(message, role)
        _set_parts(message, parts)
        _set_id(message, id)
        _set_name(message, name)
        _set_extra(message, extra)
        _set_token_cache(message, {})
        return message

    # -- views --------------------------------------------------------------------------

    @property
    def text(self) -> str:
        """Concatenated text parts (tool results and thinking left out)."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls this message makes."""
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))

    @property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        """The tool results this message carries (``tool`` role or Anthropic-style user)."""
        return tuple(p for p in self.parts if isinstance(p, ToolResultPart))

    @property
    def is_tool_result_only(self) -> bool:
        """True when every part is a tool result (and there is at least one)."""
        return bool(self.parts) and all(isinstance(p, ToolResultPart) for p in self.parts)

    def replace(self, **changes: Any) -> Message:
        """A copy with some fields changed (a new object; the original is untouched)."""
        values: dict[str, Any] = {
            "role": self.role,
            "parts": self.parts,
            "id": self.id,
            "name": self.name,
            "extra": self.extra,
        }
        values.update(changes)
        return Message(**values)

    # -- serialization ------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a format version (``"v"``)."""
        out: dict[str, Any] = {
            "v": MESSAGE_FORMAT_VERSION,
            "id": self.id,
            "role": self.role,
            "parts": [_part_to_dict(p) for p in self.parts],
        }
        if self.name is not None:
            out["name"] = self.name
        if self.extra:
            out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Inverse of :meth:`to_dict`; raises :class:`FormatError` on malformed data."""
        if not isinstance(data, Mapping):
            raise FormatError(f"a message must be an object, got {type(data).__name__}")
        version = data.get("v", MESSAGE_FORMAT_VERSION)
        if version != MESSAGE_FORMAT_VERSION:
            raise FormatError(f"unsupported message format version {version!r}", field="v")
        role = data.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise FormatError(f"unknown role {role!r}", field="role")
        msg_id = data.get("id")
        if not isinstance(msg_id, str):
            raise FormatError("message id must be a string", field="id")
        raw_parts = data.get("parts", [])
        if not isinstance(raw_parts, list):
            raise FormatError("parts must be a list", field="parts")
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            raise FormatError("name must be a string", field="name")
        extra = data.get("extra", {})
        if not isinstance(extra, Mapping):
            raise FormatError("extra must be an object", field="extra")
        parts = tuple(_part_from_dict(p, f"parts[{i}]") for i, p in enumerate(raw_parts))
        return cls(role, parts, id=msg_id, name=name, extra=dict(extra))  # type: ignore[arg-type]


# Slot setters for Message.trusted, beside the classes so no other module reaches into them.
_new_object = object.__new__
_set_text = TextPart.__dict__["text"].__set__
_set_text_extra = TextPart.__dict__["extra"].__set__
_set_text_kind = TextPart.__dict__["kind"].__set__
_set_role = Message.__dict__["role"].__set__
_set_parts = Message.__dict__["parts"].__set__
_set_id = Message.__dict__["id"].__set__
_set_name = Message.__dict__["name"].__set__
_set_extra = Message.__dict__["extra"].__set__
_set_token_cache = Message.__dict__["_token_cache"].__set__


def _as_parts(content: str | Iterable[Part]) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(content),)
    return tuple(content)


def _part_to_dict(part: Part) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": part.kind}
    if isinstance(part, TextPart):
        out["text"] = part.text
    elif isinstance(part, ImagePart):
        for key in ("url", "data", "mime", "detail"):
            value = getattr(part, key)
            if value is not None:
                out[key] = value
    elif isinstance(part, ToolCallPart):
        out.update(id=part.id, name=part.name, arguments=part.arguments)
    elif isinstance(part, ToolResultPart):
        out["call_id"] = part.call_id
        if isinstance(part.content, str):
            out["content"] = part.content
        else:
            out["content"] = [_part_to_dict(p) for p in part.content]
        if part.is_error:
            out["is_error"] = True
        if part.name is not None:
            out["name"] = part.name
    else:
        out["text"] = part.text
        if part.signature is not None:
            out["signature"] = part.signature
        if part.redacted:
            out["redacted"] = True
        if part.data is not None:
            out["data"] = part.data
    if part.extra:
        out["extra"] = dict(part.extra)
    return out


def _str_field(data: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> Any:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise FormatError(f"{key} must be a string", field=f"{where}.{key}")
    return value


def _part_from_dict(data: Any, where: str) -> Part:
    if not isinstance(data, Mapping):
        raise FormatError("a part must be an object", field=where)
    kind = data.get("kind")
    extra = data.get("extra", {})
    if not isinstance(extra, Mapping):
        raise FormatError("extra must be an object", field=f"{where}.extra")
    extra = dict(extra)
    if kind == "text":
        return TextPart(_str_field(data, "text", where), extra=extra)
    if kind == "image":
        return ImagePart(
            url=_str_field(data, "url", where, optional=True),
            data=_str_field(data, "data", where, optional=True),
            mime=_str_field(data, "mime", where, optional=True),
            detail=_str_field(data, "detail", where, optional=True),
            extra=extra,
        )
    if kind == "tool_call":
        return ToolCallPart(
            _str_field(data, "id", where),
            _str_field(data, "name", where),
            _str_field(data, "arguments", where),
            extra=extra,
        )
    if kind == "tool_result":
        content = data.get("content", "")
        body: str | tuple[Part, ...]
        if isinstance(content, str):
            body = content
        elif isinstance(content, list):
            body = tuple(_part_from_dict(p, f"{where}.content[{i}]") for i, p in enumerate(content))
        else:
            raise FormatError("content must be a string or a list", field=f"{where}.content")
        return ToolResultPart(
            _str_field(data, "call_id", where),
            body,
            is_error=bool(data.get("is_error", False)),
            name=_str_field(data, "name", where, optional=True),
            extra=extra,
        )
    if kind == "thinking":
        return ThinkingPart(
            text=_str_field(data, "text", where),
            signature=_str_field(data, "signature", where, optional=True),
            redacted=bool(data.get("redacted", False)),
            data=_str_field(data, "data", where, optional=True),
            extra=extra,
        )
    raise FormatError(f"unknown part kind {kind!r}", field=f"{where}.kind")
