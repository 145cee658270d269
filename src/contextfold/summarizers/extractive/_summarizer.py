"""The extractive summarizer itself: budget, merge, render, result.

See :mod:`contextfold.summarizers.extractive` for what goes into a summary and why.
"""

from __future__ import annotations

from typing import Any

from contextfold.errors import ConfigError
from contextfold.paths import file_operations
from contextfold.summarizers.base import SummarizationResult, SummaryRequest, Usage, precheck
from contextfold.summarizers.extractive._collect import collect
from contextfold.summarizers.extractive._items import (
    Item,
    drop_contained,
    greedy,
    merge_previous,
    rank,
    render,
)
from contextfold.tokens.base import TokenCounter

__all__ = ["ExtractiveSummarizer"]


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
    prompt_hash = "extractive-1"

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
        cap = request.max_output_tokens
        return min(cap, self.max_output_tokens) if cap else self.max_output_tokens

    def _summarize(self, request: SummaryRequest) -> SummarizationResult:
        budget = self._budget(request)
        messages = request.messages
        read, modified = file_operations(messages)
        prior = request.details or {}
        read |= set(_str_list(prior.get("files_read")))
        modified |= set(_str_list(prior.get("files_modified")))
        read -= modified
        items = collect(messages, read, modified)
        if request.previous_summary and request.previous_summary.strip():
            items = merge_previous(items, request.previous_summary)
        if not items:
            return SummarizationResult.failure(
                "nothing to summarize: the span has no text", "empty", model=self.model
            )
        text = self._render_within(items, budget)
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
        source_chars = sum(len(m.text) for m in messages)
        usage = Usage(
            input_tokens=source_chars // 4,
            output_tokens=self.counter.count_text(text),
        )
        return SummarizationResult.success(text, usage=usage, model=self.model, details=details)

    def _render_within(self, items: list[Item], budget: int) -> str | None:
        """Greedy fill by salience per character, then trim until the count fits."""
        skeleton = render([])
        if self.counter.count_text(skeleton) > budget:
            return None
        # Approximate characters per token from the counter itself, for the greedy phase.
        probe = "the quick brown fox jumps over the lazy dog 0123456789 src/app/main.py " * 4
        cpt = len(probe) / max(1, self.counter.count_text(probe))
        room = (budget - self.counter.count_text(skeleton)) * cpt
        ranked = sorted(items, key=rank)
        chosen: list[Item] = []
        seen: set[str] = set()
        for _ in range(2):  # the second pass refills the room freed by dropping duplicates
            chosen = greedy(ranked, chosen, seen, room)
            before = len(chosen)
            chosen = drop_contained(chosen)
            if len(chosen) == before:
                break
        text = render(chosen)
        # The greedy phase estimated; the counter decides. Drop the weakest until it fits.
        if self.counter.count_text(text) > budget:
            chosen.sort(key=rank)
            lo, hi = 0, len(chosen)
            while lo < hi:  # the largest prefix of the ranking that fits
                mid = (lo + hi + 1) // 2
                if self.counter.count_text(render(chosen[:mid])) <= budget:
                    lo = mid
                else:
                    hi = mid - 1
            text = render(chosen[:lo])
        return text


def _str_list(value: Any) -> list[str]:
    if isinstance(value, (list, tuple, set, frozenset)):
        return [v for v in value if isinstance(v, str)]
    return []
