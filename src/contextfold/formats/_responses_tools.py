"""The Responses API's built-in tool calls (computer, shell, local shell, apply patch).

These items pair a call with an output by ``call_id`` just like ``function_call`` and
``function_call_output``, but carry an ``action`` (or ``operation``) object instead of a name
and argument text. They are loaded as a :class:`~contextfold.messages.ToolCallPart` and a
``tool`` message holding a :class:`~contextfold.messages.ToolResultPart`, so the pairing rules
of :mod:`contextfold.turns` apply to them: a window never cuts one from its output, and
:func:`~contextfold.turns.repair` drops an orphan (the API rejects a call without its output).

The call's name is the tool's (``computer``, ``shell``, ``local_shell``, ``apply_patch``) and
its arguments are the JSON text of the action; an output that is not a string (a screenshot,
a list of command results) is kept as JSON text too. The item's other fields stay in its
envelope, so a payload dumps back unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from contextfold.formats._common import copy_json, fail, require_str, type_name
from contextfold.messages import Part, ToolCallPart, ToolResultPart

__all__ = [
    "HOSTED_CALLS",
    "HOSTED_OUTPUTS",
    "fill_hosted",
    "hosted_fits",
    "load_hosted_call",
    "load_hosted_output",
]

# item type -> (the field holding what the model asked for, the tool's name)
HOSTED_CALLS: dict[str, tuple[str, str]] = {
    "computer_call": ("action", "computer"),
    "shell_call": ("action", "shell"),
    "local_shell_call": ("action", "local_shell"),
    "apply_patch_call": ("operation", "apply_patch"),
}
HOSTED_OUTPUTS = frozenset(
    {
        "computer_call_output",
        "shell_call_output",
        "local_shell_call_output",
        "apply_patch_call_output",
    }
)

_JSON = "json"  # envelope key: the output was not a string and is kept as JSON text
_ABSENT = "absent"  # envelope key: the item had no ``output`` field


def _call_id(raw: dict[str, Any], i: int, kind: str) -> str:
    # A local shell output names its call by ``id`` in the API reference and by ``call_id``
    # in what the Agents SDK sends; either pairs it.
    if kind == "local_shell_call_output" and "call_id" not in raw:
        return require_str(raw, "id", index=i, field="id")
    return require_str(raw, "call_id", index=i, field="call_id")


def load_hosted_call(raw: dict[str, Any], i: int, kind: str) -> tuple[ToolCallPart, dict[str, Any]]:
    """The call part of a built-in tool call item and its envelope."""
    key, name = HOSTED_CALLS[kind]
    call_id = _call_id(raw, i, kind)
    if key not in raw:
        fail(f"a {kind} item needs an {key!r} field", index=i, field=key)
    arguments = json.dumps(raw[key], ensure_ascii=False)
    item = {k: copy_json(v) for k, v in raw.items() if k not in ("call_id", key)}
    return ToolCallPart(call_id, name, arguments), {"n": 1, "item": item}


def load_hosted_output(
    raw: dict[str, Any], i: int, kind: str
) -> tuple[ToolResultPart, dict[str, Any]]:
    """The result part of a built-in tool output item and its envelope."""
    call_id = _call_id(raw, i, kind)
    keep_id = "call_id" not in raw  # the id field is the call id: written back from the part
    item = {
        k: copy_json(v)
        for k, v in raw.items()
        if k not in ("call_id", "output") and not (keep_id and k == "id")
    }
    env: dict[str, Any] = {"n": 1, "item": item}
    if keep_id:
        env["id_is_call"] = True
    output = raw.get("output")
    if "output" not in raw:
        env[_ABSENT] = True
        text = ""
    elif isinstance(output, str):
        text = output
    elif output is None or isinstance(output, (dict, list)):
        env[_JSON] = True
        text = json.dumps(output, ensure_ascii=False)
    else:
        fail(f"output must be a string, an object or a list, not {type_name(output)}", index=i)
    return ToolResultPart(call_id, text), env


def hosted_fits(kind: str, part: Part) -> bool:
    """True when ``part`` can still be written as an item of type ``kind``."""
    if kind in HOSTED_CALLS:
        if not isinstance(part, ToolCallPart) or part.name != HOSTED_CALLS[kind][1]:
            return False
        try:
            json.loads(part.arguments)
        except ValueError:
            return False
        return True
    return isinstance(part, ToolResultPart) and isinstance(part.content, str)


def fill_hosted(item: dict[str, Any], env: dict[str, Any], part: Part) -> None:
    """Write ``part`` back into the item copied from its envelope (see :func:`hosted_fits`)."""
    kind = item["type"]
    if isinstance(part, ToolCallPart):
        item["call_id"] = part.id
        item[HOSTED_CALLS[kind][0]] = json.loads(part.arguments)
        return
    assert isinstance(part, ToolResultPart)
    item["id" if env.get("id_is_call") else "call_id"] = part.call_id
    if env.get(_ABSENT) and not part.text:
        return
    if env.get(_JSON):
        try:
            item["output"] = json.loads(part.text)
            return
        except ValueError:
            pass  # edited into plain text: sent as such
    item["output"] = part.text
