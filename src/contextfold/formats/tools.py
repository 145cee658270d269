"""Tool schemas in the shape each provider API takes.

A conversation's tool schemas arrive in whichever provider shape it used: Chat Completions
(``{"type": "function", "function": {...}}``), Responses (``{"type": "function", "name": ...}``)
or Anthropic Messages (``{"name", "description", "input_schema"}``). A cache-aligned summary
call replays them to another API, so they must be converted; a schema already in the target
shape is passed through untouched (byte-identical, so the provider's prefix cache still
matches), and a tool in no shape we know (a provider's server tool) is copied as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["tools_for_anthropic", "tools_for_openai_chat", "tools_for_openai_responses"]


def _function_fields(tool: Mapping[str, Any]) -> tuple[str, str | None, Any] | None:
    """``(name, description, json_schema)`` of a tool in any known shape, else None."""
    fn = tool.get("function")
    if tool.get("type") == "function" and isinstance(fn, Mapping) and "name" in fn:
        return str(fn["name"]), fn.get("description"), fn.get("parameters")
    if "input_schema" in tool and "name" in tool:
        return str(tool["name"]), tool.get("description"), tool.get("input_schema")
    if tool.get("type") == "function" and "name" in tool:
        return str(tool["name"]), tool.get("description"), tool.get("parameters")
    return None


def _convert_tools(
    tools: Iterable[Mapping[str, Any]],
    *,
    native: Callable[[Mapping[str, Any]], bool],
    build: Callable[[dict[str, Any]], dict[str, Any]],
    schema_key: str,
) -> list[dict[str, Any]]:
    """Tool schemas in one provider's shape.

    A tool that is ``native`` already, or in no shape we know, is copied as it is; any
    other is rebuilt: ``build`` wraps ``{"name", "description" (if any), schema_key}``.
    """
    out: list[dict[str, Any]] = []
    for tool in tools:
        found = None if native(tool) else _function_fields(tool)
        if found is None:
            out.append(dict(tool))
            continue
        name, description, schema = found
        fields: dict[str, Any] = {"name": name}
        if description is not None:
            fields["description"] = description
        fields[schema_key] = schema if schema is not None else {"type": "object", "properties": {}}
        out.append(build(fields))
    return out


def tools_for_openai_chat(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas in Chat Completions shape (``{"type": "function", "function": ...}``)."""
    return _convert_tools(
        tools,
        native=lambda t: t.get("type") == "function" and isinstance(t.get("function"), Mapping),
        build=lambda fields: {"type": "function", "function": fields},
        schema_key="parameters",
    )


def tools_for_openai_responses(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas in Responses shape (``{"type": "function", "name": ..., ...}``)."""
    return _convert_tools(
        tools,
        native=lambda t: t.get("type") == "function" and "name" in t,
        build=lambda fields: {"type": "function", **fields},
        schema_key="parameters",
    )


def tools_for_anthropic(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas in Anthropic shape (``{"name", "description", "input_schema"}``).

    A tool already in that shape, or a server tool (any other ``type``), is kept as it is.
    """
    return _convert_tools(
        tools,
        native=lambda t: "input_schema" in t or t.get("type") not in (None, "function"),
        build=lambda fields: fields,
        schema_key="input_schema",
    )
