"""The extractive summarizer itself: budget, merge, render, result.

See :mod:`contextfold.summarizers.extractive` for what goes into a summary and why.
"""

from __future__ import annotations

from typing import Any

from contextfold.errors import ConfigError
from contextfold.paths import file_operations
from contextfold.summarizers.base import SummarizationResult, SummaryRequest, Usage, precheck
from contextfold.summarizers.extractive._collect import (
    collect_agent,
    collect_chat,
    demote_superseded_versions,
    plain_items,
    repeats_of,
)
from contextfold.summarizers.extractive._items import (
    AGENT_LAYOUT,
    CHAT_LAYOUT,
    Chooser,
    Item,
    is_agent_summary,
    merge_previous,
    render,
)
from contextfold.summarizers.extractive._paths import is_device_file, is_plausible
from contextfold.tokens.base import TokenCounter

__all__ = ["ExtractiveSummarizer"]

_FILL_ROUNDS = 6  # attempts at filling the room; each one rescales it by what it measured


class ExtractiveSummarizer:
    """A deterministic, model-free checkpoint summarizer (sync and async).

    Args:
        max_output_tokens: the summary's token budget when the request sets none; a request's
            ``max_output_tokens`` wins when given.
        counter: the counter that measures the budget; the approximate counter by default.
        model: the name reported in results and checkpoint records.

    The result's ``details`` carry ``files_read`` and ``files_modified`` (sorted lists,
    accumulated with those in ``request.details``), so a checkpoint strategy can carry them
    across compactions.
    """

    #: Fingerprint recorded in checkpoints in place of a prompt hash (no prompt is used);
    #: bumped when the extraction rules change what a summary contains.
    prompt_hash = "extractive-2"

    def __init__(
        self,
        *,
        max_output_tokens: int = 1024,
        counter: TokenCounter | None = None,
        model: str = "extractive",
    ) -> None:
        if isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int):
            raise ConfigError(
                f"max_output_tokens must be a positive integer, not {max_output_tokens!r}",
                argument="max_output_tokens",
            )
        if max_output_tokens <= 0:
            raise ConfigError(
                f"max_output_tokens must be positive, not {max_output_tokens!r}",
                argument="max_output_tokens",
            )
        if counter is None:
            from contextfold.tokens.approx import ApproxCounter

            counter = ApproxCounter()
        self.max_output_tokens = max_output_tokens
        self.counter = counter
        self.model = model

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_output_tokens={self.max_output_tokens})"

    # -- protocol ---------------------------------------------------------------------------

    def summarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Build the summary; fails only when cancelled, late, or nothing can be said."""
        early = precheck(request)
        if early is not None:
            return early
        try:
            return self._summarize(request)
        except Exception as exc:  # the contract: never raise
            return SummarizationResult.failure(
                f"extractive summarizer failed: {type(exc).__name__}: {exc}", model=self.model
            )

    async def asummarize(self, request: SummaryRequest, /) -> SummarizationResult:
        """Async form of :meth:`summarize` (the work is CPU-only and quick)."""
        return self.summarize(request)

    # -- work -------------------------------------------------------------------------------

    def _budget(self, request: SummaryRequest) -> int:
        """The room: the request's ``max_output_tokens`` when given (as documented above),
        else the summarizer's own. A strategy sizes the request to the room it has."""
        cap = request.max_output_tokens
        return cap if cap else self.max_output_tokens

    def _summarize(self, request: SummaryRequest) -> SummarizationResult:
        budget = self._budget(request)
        messages = request.messages
        read, modified = file_operations(messages)
        prior = request.details or {}
        read |= set(_str_list(prior.get("files_read")))
        modified |= set(_str_list(prior.get("files_modified")))
        # A heredoc or a pipe misread as a file name ("EOF\n)") is no file to carry forward.
        # Nor is a device file (a command reading /dev/null).
        read = {f for f in read - modified if is_plausible(f) and not is_device_file(f)}
        modified = {f for f in modified if is_plausible(f) and not is_device_file(f)}
        previous = (request.previous_summary or "").strip()
        agent = any(m.tool_calls for m in messages) or is_agent_summary(previous)
        layout = AGENT_LAYOUT if agent else CHAT_LAYOUT
        if agent:
            items = collect_agent(messages, read, modified)
        else:
            items = collect_chat(messages, opening=not previous)
        if not items:
            items = plain_items(messages)
        if previous:
            items = merge_previous(items, previous, layout)
        demote_superseded_versions(items)
        if not items:
            return SummarizationResult.failure(
                "nothing to summarize: the span has no text", "empty", model=self.model
            )
        text = self._render_within(items, layout, budget)
        details: dict[str, Any] = {
            "files_read": sorted(read),
            "files_modified": sorted(modified),
        }
        if text is None:
            return SummarizationResult.failure(
                f"budget of {budget} tokens is too small for a structured summary",
                "truncated",
                model=self.model,
            )
        # No model was called: the summary cost no tokens, and reporting an estimate of
        # what a model would have read would bill the memory for a call never made.
        return SummarizationResult.success(text, usage=Usage(), model=self.model, details=details)

    def _render_within(self, items: list[Item], layout: tuple[int, ...], budget: int) -> str | None:
        """The most valuable text that fits ``budget`` tokens; None when no item fits.

        The selection works in characters; the counter has the last word. The room starts
        at the counter's own characters-per-token ratio and is then rescaled by what each
        attempt measured (code and paths have fewer characters per token than prose), a few
        times, so the summary fills what it is given without exceeding it. A greedy choice
        is not monotone in the room, so of the texts that fit, the one carrying the most
        weight wins.
        """
        count = self.counter.count_text
        chooser = Chooser(items, repeats_of(items))
        best: tuple[float, str] | None = None
        probe = "the quick brown fox jumps over the lazy dog 0123456789 src/app/main.py " * 4
        room = budget * len(probe) / max(1, count(probe))
        fitted = 0.0  # the largest room known to fit
        for _ in range(_FILL_ROUNDS):
            chosen, value = chooser.select(room)
            text = render(chosen, layout)
            if not text:
                break
            used = count(text)
            if used <= budget:
                if best is None or value > best[0]:
                    best = (value, text)
                fitted = max(fitted, room)
                if used >= budget * 0.97 or len(chosen) == len(items):
                    break  # full, or nothing left to add
                room = room * budget / max(1, used)
            else:  # too long: shrink, but stay above a room known to fit
                shrunk = room * 0.97 * budget / used
                room = max(shrunk, fitted * 1.01) if fitted else shrunk
        return best[1] if best is not None else None


def _str_list(value: Any) -> list[str]:
    if isinstance(value, (list, tuple, set, frozenset)):
        return [v for v in value if isinstance(v, str)]
    return []
