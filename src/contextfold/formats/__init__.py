"""Provider payload formats: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages.

Each format module has ``load(payload, *, strict=False) -> list[Message]`` and
``dump(messages) -> payload``. A payload loaded and dumped in the same format comes back equal
to the original; loading in one format and dumping in another converts it, keeping every tool
call paired with its result. This package adds :func:`detect`, and :func:`load` / :func:`dump`
that take the format by name::

    from contextfold import formats

    messages = formats.load(payload)               # format detected
    body = formats.dump(messages, "anthropic")     # {"system": ..., "messages": [...]}

What a format needs for an exact round trip but the message model does not carry lives in
``extra``, namespaced so other formats ignore it: ``"<format>.<key>"`` is a provider field we
do not model (``anthropic.cache_control``, ``openai_chat.refusal`` ...), ``"<format>:<hint>"``
a shape detail (content sent as a list, a key that was absent ...). Message ids are
deterministic: the provider's item id when there is one, else a hash of position and content.
They are distinct within one payload; an app that loads each turn on its own must give its
messages ids of its own (``m.replace(id=...)``), since ids are unique per stored conversation
(see ``docs/messages-and-formats.md``).

Files that wrap a payload or are not one (request bodies, tau-bench runs, SWE-agent
trajectories, Claude Code session logs) are read by :mod:`~contextfold.formats.trajectories`.
A malformed payload raises :class:`~contextfold.errors.FormatError`; misuse (an unknown format
name, a ``strict`` that is not a boolean, ``dump`` given something other than messages)
raises :class:`~contextfold.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeAlias

from contextfold.errors import FormatError
from contextfold.formats import anthropic, claude_code, openai_chat, openai_responses, trajectories
from contextfold.formats._common import check_format_name
from contextfold.formats._responses_tools import HOSTED_CALLS, HOSTED_OUTPUTS
from contextfold.messages import Message

__all__ = [
    "FORMAT_NAMES",
    "FormatName",
    "anthropic",
    "claude_code",
    "detect",
    "dump",
    "load",
    "openai_chat",
    "openai_responses",
    "trajectories",
]

FormatName: TypeAlias = Literal["openai_chat", "openai_responses", "anthropic"]
FORMAT_NAMES: tuple[FormatName, ...] = ("openai_chat", "openai_responses", "anthropic")

_LOADERS: dict[str, Callable[..., list[Message]]] = {
    "openai_chat": openai_chat.load,
    "openai_responses": openai_responses.load,
    "anthropic": anthropic.load,
}
_DUMPERS: dict[str, Callable[[Sequence[Message]], Any]] = {
    "openai_chat": openai_chat.dump,
    "openai_responses": openai_responses.dump,
    "anthropic": anthropic.dump,
}

# Item types that exist only in the Responses API.
_RESPONSES_ITEMS = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "reasoning",
        "item_reference",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "image_generation_call",
        "code_interpreter_call",
        "local_shell_call",
        "local_shell_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "compaction",
        *HOSTED_CALLS,  # every hosted tool the loader models, and its output
        *HOSTED_OUTPUTS,
    }
)
_RESPONSES_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file"})
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}
)
_CHAT_PARTS = frozenset({"image_url", "input_audio", "file"})
_CHAT_ROLES = frozenset({"system", "developer", "tool"})
#: Keys only a Chat message has: tool calls, a participant's name, a refusal, audio.
_CHAT_KEYS = ("tool_calls", "tool_call_id", "name", "refusal", "audio", "function_call")


def _signals(item: Any, *, listed: bool = False) -> set[str]:
    """The formats an item (message) can only belong to.

    ``listed``: the item is one of a bare list, where a system or developer message without
    a ``type`` may be a Responses input message too (its ``type`` is optional), so only
    ``role: "tool"`` tells Chat; in an object's ``messages`` (Chat or Anthropic) a system
    message is Chat's.
    """
    found: set[str] = set()
    if not isinstance(item, dict):
        return found
    kind = item.get("type")
    if isinstance(kind, str) and kind in _RESPONSES_ITEMS:
        found.add("openai_responses")
    role = item.get("role")
    chat_roles = ("tool",) if listed else _CHAT_ROLES
    if isinstance(role, str) and role in chat_roles and "type" not in item:
        found.add("openai_chat")
    if "type" not in item and any(k in item for k in _CHAT_KEYS):
        found.add("openai_chat")  # on a message: a Responses item has its own "name"
    content = item.get("content")
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            block_type = block.get("type")
            if not isinstance(block_type, str):
                continue
            if block_type in _RESPONSES_PARTS:
                found.add("openai_responses")
            elif block_type in _ANTHROPIC_BLOCKS:
                found.add("anthropic")
            elif block_type in _CHAT_PARTS or (block_type == "refusal" and kind != "message"):
                found.add("openai_chat")  # a refusal part is Chat's, or a Responses output's
    return found


def detect(payload: Any) -> FormatName:
    """Tell which provider format a payload is in.

    A dict with ``system`` and ``messages`` is Anthropic; a dict with ``messages`` alone is
    Anthropic unless its messages show Chat features (``tool_calls``, ``role: "tool"``, system
    messages ...). A list is read item by item: Responses item types and content types, Anthropic
    blocks, or Chat features decide; a list of plain ``role``/``content`` messages (or an empty
    list) is taken as OpenAI Chat, which every provider accepts in that simple form.

    Raises:
        FormatError: the payload fits no format, or mixes features of two.
    """
    if isinstance(payload, dict):
        messages = payload.get("messages")
        if not isinstance(messages, list):
            raise FormatError("cannot detect the format: an object needs a 'messages' list")
        if "system" in payload:
            return "anthropic"
        found = set().union(*(_signals(m) for m in messages))
        if found == {"openai_chat"}:
            return "openai_chat"
        if found <= {"anthropic"}:
            return "anthropic"
        if len(found) > 1:
            raise FormatError(f"cannot detect the format: messages mix {sorted(found)}")
        raise FormatError("cannot detect the format: Responses items in a 'messages' list")
    if not isinstance(payload, list):
        raise FormatError(f"cannot detect the format of a {type(payload).__name__}")
    found = set()
    for i, item in enumerate(payload):
        if not isinstance(item, dict):
            raise FormatError("cannot detect the format: items must be objects", index=i)
        if "role" not in item and "type" not in item:
            raise FormatError("cannot detect the format: item has no role or type", index=i)
        found |= _signals(item, listed=True)
    if len(found) > 1:
        raise FormatError(f"cannot detect the format: items mix {sorted(found)}")
    if found:
        return found.pop()  # type: ignore[return-value]
    return "openai_chat"


def load(payload: Any, format: str = "auto", *, strict: bool = False) -> list[Message]:
    """Load a provider payload into messages.

    Args:
        payload: the provider payload (see each format module).
        format: ``"auto"`` (see :func:`detect`) or one of :data:`FORMAT_NAMES`.
        strict: reject what the format module would otherwise keep opaque or unchecked.

    Raises:
        FormatError: the payload is undetectable or malformed.
        ConfigError: unknown format name, or ``strict`` is not a boolean.
    """
    if format == "auto":
        format = detect(payload)
    check_format_name(format)
    return _LOADERS[format](payload, strict=strict)


def dump(messages: Sequence[Message], format: str) -> Any:
    """Dump messages in a provider format (converting when they came from another one).

    Raises:
        ConfigError: unknown format name, or ``messages`` is not a sequence of messages.
    """
    check_format_name(format)
    return _DUMPERS[format](messages)
