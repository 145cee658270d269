"""Reading a summary's Markdown sections back, for the summarizer tests."""

from __future__ import annotations


def sections(text: str) -> dict[str, list[str]]:
    """``## Heading`` -> the lines under it, in order."""
    out: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:]
            out[current] = []
        else:
            out.setdefault(current, []).append(line)
    return out
