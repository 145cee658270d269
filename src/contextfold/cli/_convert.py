"""``convert``: the same conversation in another provider format."""

from __future__ import annotations

import argparse
from typing import Any

from contextfold.cli._io import (
    EXIT_OK,
    FORMATS,
    UsageError,
    dump_conversation,
    load_conversation,
    write_json,
)
from contextfold.cli._options import add_command, add_input, add_output
from contextfold.errors import FormatError


def add_convert_parser(sub: Any) -> None:
    """The ``convert`` sub-parser."""
    p = add_command(
        sub,
        "convert",
        "translate a conversation between provider formats",
        "Read a conversation and write it in another provider format.",
    )
    add_input(p)
    p.add_argument("--to", choices=FORMATS, required=True, help="target format")
    add_output(p, "write here (default stdout)")
    p.set_defaults(func=cmd_convert)


def cmd_convert(args: argparse.Namespace) -> int:
    """``convert``: the same conversation in another provider format.

    A request body keeps its other fields only when the format stays the same: the fields
    of one provider's request mean nothing to another's.
    """
    loaded = load_conversation(args.file, fmt=args.format)
    envelope = loaded.envelope if args.to == loaded.format else None
    try:
        payload = dump_conversation(loaded.messages, args.to, envelope)
    except FormatError as exc:
        raise UsageError(f"cannot express this conversation as {args.to}: {exc}") from exc
    write_json(payload, args.output)
    return EXIT_OK
