"""Content parts of the OpenAI Responses API, both ways.

Message items and tool outputs carry the same content parts (``input_text``, ``output_text``,
``refusal``, ``input_image``), so loading and dumping them lives apart from the items that hold
them (:mod:`contextfold.formats.openai_responses`). The text type is not kept when it is the
default for the role (``output_text`` for the assistant, ``input_text`` otherwise): a message
converted from another format gets the type the API expects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextfold.formats._common import (
    NO_EXTRA,
    UNCARRIED_RESULT,
    data_url,
    fail,
    hint,
    keep_unknown,
    load_refusal,
    load_text,
    opaque_raw,
    put_unknown,
    split_data_url,
    type_name,
    unmodeled_part,
)
from contextfold.messages import ImagePart, Part, TextPart, ToolResultPart

NS = "openai_responses"

_K_IMAGE = frozenset({"type", "image_url", "detail"})


def default_text_type(role: str) -> str:
    """The content type the API uses for text of ``role`` when nothing says otherwise."""
    return "output_text" if role == "assistant" else "input_text"


def load_part(raw: Any, i: int, where: str, role: str, strict: bool) -> Part:
    """One content part of item ``i`` (``where`` names it in errors, e.g. ``content[2]``)."""
    if not isinstance(raw, dict):
        fail(f"a content part must be an object, got {type_name(raw)}", index=i, field=where)
    kind = raw.get("type")
    if kind in ("input_text", "output_text"):
        extra: dict[str, Any] = {}
        if kind != default_text_type(role):
            extra[f"{NS}:type"] = kind
        return load_text(raw, i, where, NS, extra)
    if kind == "refusal":
        return load_refusal(raw, i, where, NS)
    if kind == "input_image":
        return _load_image(raw, i, where)
    return unmodeled_part(raw, i, where, NS, strict)


def _load_image(raw: dict[str, Any], i: int, where: str) -> ImagePart:
    url = raw.get("image_url")
    detail = raw.get("detail")
    if url is not None and not isinstance(url, str):
        fail("image_url must be a string", index=i, field=f"{where}.image_url")
    if detail is not None and not isinstance(detail, str):
        fail("detail must be a string", index=i, field=f"{where}.detail")
    extra: dict[str, Any] = {}
    if "detail" not in raw:
        extra[f"{NS}:detail"] = "absent"
    for key, value in (("image_url", url), ("detail", detail)):
        if value is None and key in raw:
            extra[f"{NS}.{key}"] = None
    keep_unknown(raw, _K_IMAGE, NS, extra)
    inline = split_data_url(url) if url is not None else None
    if inline is not None:
        return ImagePart(data=inline[1], mime=inline[0], detail=detail, extra=extra or NO_EXTRA)
    return ImagePart(url=url, detail=detail, extra=extra or NO_EXTRA)


def dump_parts(parts: Sequence[Part], role: str) -> list[dict[str, Any]]:
    """Content parts for ``parts``; parts kept opaque for another format are left out."""
    out: list[dict[str, Any]] = []
    for p in parts:
        is_opaque, raw = opaque_raw(p, NS)
        if is_opaque:
            if raw is not None:
                out.append(raw)
        elif isinstance(p, TextPart):
            kind = hint(p.extra, NS, "type") or default_text_type(role)
            key = "refusal" if kind == "refusal" else "text"
            out.append(put_unknown({"type": kind, key: p.text}, p.extra, NS))
        elif isinstance(p, ImagePart):
            image = _dump_image(p)
            if image is not None:
                out.append(image)
        elif isinstance(p, ToolResultPart):
            out.append({"type": default_text_type(role), "text": p.text})
    return out


def _dump_image(p: ImagePart) -> dict[str, Any] | None:
    item: dict[str, Any] = {"type": "input_image"}
    if p.url is not None:
        item["image_url"] = p.url
    elif p.data is not None:
        item["image_url"] = data_url(p.mime, p.data)
    elif f"{NS}.image_url" not in p.extra and f"{NS}.file_id" not in p.extra:
        return None
    if p.detail is not None:
        item["detail"] = p.detail
    elif hint(p.extra, NS, "detail") != "absent":
        item["detail"] = "auto"
    return put_unknown(item, p.extra, NS)


def dump_output(result: ToolResultPart) -> Any:
    """The ``output`` of a tool-output item: the text as is, or content parts."""
    if isinstance(result.content, str):
        return result.content
    parts = dump_parts(result.content, "tool")
    # Content this format cannot carry (a document, say) is named rather than sent as [].
    return parts if parts or not result.content else UNCARRIED_RESULT
