"""Pure request transforms: map the stored conversation to the list that is sent.

These are plain functions of a message list, for callers that keep their own history and
only want to trim it before each request. They never modify their input and return the
*same list object* when nothing changes, so a caller can cheaply tell whether anything was
done (``out is messages``).

Shared rules:

* The leading system and developer messages are always kept, in order. Only *leading* ones
  are: a system message later in the conversation stays where it is and counts as an
  ordinary message.
* Tool pairs are never split. The window moves forward past a leading tool result (and past
  the rest of a tool-call unit it lands in), so it never starts on a result whose call was
  left out; an orphaned result inside the kept part, or a call left without its results,
  raises :class:`~contextfold.errors.PairingError` naming the message. Results carried in a
  user message (Anthropic's shape) are handled like ``tool`` messages.
* The user's request is never dropped: when the kept part would hold no user request but the
  history has one after the prefix, the newest request is kept in front of it (the window then
  has two dropped ranges: before the request and between it and the kept tail). A transform
  never turns a conversation with a user request into a request without one; only
  ``count=0`` (asking for the prefix alone) leaves it out.
* A summary is injected only when a real message was dropped (not merely an orphaned tool
  result at the start) and its stripped text is not empty.

The cost of each function is proportional to what is kept, not to the length of the history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from contextfold.errors import ConfigError, PairingError
from contextfold.framing import SummaryPlacement, place_summary, summary_id
from contextfold.messages import Message
from contextfold.strategies.sliding import fit_window
from contextfold.tokens.base import TokenCounter
from contextfold.turns import is_turn_start, newest_request, prefix_length, validate

__all__ = [
    "DEFAULT_SUMMARY_LABEL",
    "keep_last_messages",
    "keep_last_with_summary",
    "trim_to_token_budget",
]

DEFAULT_SUMMARY_LABEL = "Summary of earlier conversation:"


def keep_last_messages(messages: Sequence[Message], count: int) -> list[Message]:
    """Keep the leading system messages and the last ``count`` other messages.

    The window is moved forward to the next point where no tool pair is split, so fewer
    than ``count`` messages may be kept. An orphaned tool result right after the system
    messages is dropped too. When the last ``count`` messages hold no user request (an agent
    loop deep in tool calls), the newest request is kept and counts as one of them.

    Args:
        messages: the conversation (not modified).
        count: how many messages after the leading system/developer messages to keep.

    Returns:
        ``messages`` itself when nothing is dropped (a list is returned as is; any other
        sequence is copied into a list), otherwise a new list.

    Raises:
        ConfigError: ``count`` is not an integer of at least 0.
        PairingError: the kept part has an orphaned tool result or an unanswered call.
    """
    prefix_end, start, _, request = _last_window(messages, count)
    if start == prefix_end:
        return _same(messages)
    return _keep(messages, prefix_end, request, start)


def keep_last_with_summary(
    messages: Sequence[Message],
    summary: str | Callable[[], str | None] | None,
    count: int,
    *,
    label: str = DEFAULT_SUMMARY_LABEL,
    role: Literal["system", "user", "assistant"] = "system",
) -> list[Message]:
    """Keep the system messages and the last ``count`` messages, with a summary of the rest.

    The summary message is ``label`` on its own line followed by the summary text, placed
    right after the leading system messages. It is injected only when a real message was
    dropped and the stripped text is not empty; a callable ``summary`` is called only then,
    so an expensive summary is never produced for nothing. Its id is derived from the span it
    stands for, so the same input always gives the same output.

    Args:
        messages: the conversation (not modified).
        summary: the summary text, or a zero-argument callable returning it.
        count: how many messages after the leading system/developer messages to keep.
        label: the first line of the summary message (empty for none).
        role: the summary message's role. ``system`` follows the original design; use
            ``user`` for providers that accept a single leading system message only.

    Returns:
        ``messages`` itself when nothing is dropped, otherwise a new list.

    Raises:
        ConfigError: ``count`` is not an integer of at least 0.
        PairingError: the kept part has an orphaned tool result or an unanswered call.
    """
    prefix_end, start, real_start, request = _last_window(messages, count)
    if start == prefix_end:
        return _same(messages)
    prefix = messages[:prefix_end]
    kept = _keep(messages, 0, request, start)
    if start > real_start:
        text = summary() if callable(summary) else summary
        if text is not None and text.strip():
            placement = SummaryPlacement(role=role, style="label", label=label)
            covered = (messages[real_start], messages[start - 1])
            return place_summary(
                prefix,
                text,
                kept,
                placement=placement,
                message_id=summary_id(covered, salt=f"keep_last:{start - real_start}"),
            )
    return [*prefix, *kept]


def trim_to_token_budget(
    messages: Sequence[Message],
    max_tokens: int,
    *,
    counter: TokenCounter | None = None,
) -> list[Message]:
    """Keep the leading system messages and the newest messages that fit ``max_tokens``.

    System messages count against the budget. The cut falls at message granularity (whole
    tool-call units), so the result may start on an assistant message of the newest turn
    whose request fits; use :class:`~contextfold.strategies.sliding.SlidingWindow` to keep
    whole turns. When the newest turn's request does not fit with its newest units, it is
    kept and the middle of the turn dropped. Unlike the original design, nothing over budget
    is ever returned: when the system messages, the request and the newest unit cannot fit,
    :class:`~contextfold.errors.BudgetError` says so, with a ``required`` budget that works.

    Args:
        messages: the conversation (not modified).
        max_tokens: the token budget.
        counter: the counter to use (default: :class:`~contextfold.tokens.ApproxCounter`,
            four characters per token).

    Returns:
        ``messages`` itself when everything fits, otherwise a new list.

    Raises:
        BudgetError: the budget cannot be met (the error says why, with ``required``).
        PairingError: the kept part has an orphaned tool result or an unanswered call.
    """
    if counter is None:
        from contextfold.tokens.approx import ApproxCounter

        counter = ApproxCounter()
    prefix_end = prefix_length(messages)
    lead = _leading_results(messages, prefix_end, len(messages))
    fit = fit_window(messages, max_tokens, counter, min_start=prefix_end + lead, whole_turns=False)
    if fit.start == prefix_end:
        return _same(messages)
    return fit.messages(messages)


# -- helpers --------------------------------------------------------------------------------


def _keep(
    messages: Sequence[Message], prefix_end: int, request: int | None, start: int
) -> list[Message]:
    """``messages[:prefix_end]``, the kept request (if any), then ``messages[start:]``."""
    head = [messages[request]] if request is not None else []
    return [*messages[:prefix_end], *head, *messages[start:]]


def _same(messages: Sequence[Message]) -> list[Message]:
    return messages if isinstance(messages, list) else list(messages)


def _leading_results(messages: Sequence[Message], begin: int, end: int) -> int:
    """How many tool-result-only messages follow ``begin`` (orphans: no call precedes them)."""
    n = 0
    while begin + n < end and _carries_results_only(messages[begin + n]):
        n += 1
    return n


def _carries_results_only(message: Message) -> bool:
    return message.is_tool_result_only


def _last_window(messages: Sequence[Message], count: int) -> tuple[int, int, int, int | None]:
    """``(prefix_end, start, real_start, request)`` for keeping the last ``count`` messages.

    ``start`` is the first kept message of the tail; ``real_start`` the first message after
    the leading orphaned tool results, so ``start > real_start`` means something real was
    dropped. ``request`` is the newest user request, kept in front of the tail when the tail
    has none (it counts as one of the ``count``); None otherwise.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ConfigError(
            f"count must be an integer of at least 0, got {count!r}", argument="count"
        )
    n = len(messages)
    prefix_end = prefix_length(messages)
    lead = _leading_results(messages, prefix_end, n)
    real_start = prefix_end + lead
    start = _tail_start(messages, max(n - count, real_start), prefix_end)
    if count == 0 or newest_request(messages, start, n) is not None:
        return prefix_end, start, real_start, None
    request = newest_request(messages, real_start, start)
    if request is None:
        return prefix_end, start, real_start, None
    start = _tail_start(messages, max(n - count + 1, request + 1), prefix_end)
    return prefix_end, start, real_start, request


def _tail_start(messages: Sequence[Message], floor: int, prefix_end: int) -> int:
    """The first safe cut at or after ``floor``, with the kept part's pairing checked."""
    n = len(messages)
    if floor >= n:
        return n
    # Walk back from the end to the floor, tracking results whose call is not in the tail.
    pending: dict[str, int] = {}
    first_safe_after: int = n  # the smallest safe cut > floor seen so far
    for i in range(n - 1, floor - 1, -1):
        for part in messages[i].parts:
            if part.kind == "tool_call":
                pending.pop(part.id, None)
            elif part.kind == "tool_result":
                pending[part.call_id] = i
        if not pending and i > floor:
            first_safe_after = i
    if not pending:
        start = floor
    else:
        # The floor lands inside a tool-call unit whose call is older: move forward to the
        # unit's end. First make sure each such call exists, looking back no further than the
        # start of the current turn (a unit never spans a turn), so an orphaned result in the
        # kept part is reported rather than silently dropped.
        _resolve_calls(messages, floor, prefix_end, dict(pending))
        start = first_safe_after
    if start < n:
        try:
            validate(messages[start:])
        except PairingError as exc:
            where = None if exc.index is None else exc.index + start
            raise PairingError(
                f"in the kept messages from {start}: {exc} (message {where} of the input)",
                index=where,
                call_id=exc.call_id,
            ) from exc
    return start


def _resolve_calls(
    messages: Sequence[Message], floor: int, stop: int, pending: dict[str, int]
) -> None:
    """Raise :class:`PairingError` unless every pending result's call precedes ``floor``."""
    j = floor - 1
    while pending and j >= stop:
        m = messages[j]
        for c in m.tool_calls:
            pending.pop(c.id, None)
        if not pending or m.role in ("system", "developer"):
            break
        if is_turn_start(m) and not m.tool_results:
            break
        j -= 1
    if pending:
        call_id, at = min(pending.items(), key=lambda kv: kv[1])
        raise PairingError(
            f"tool result for {call_id!r} at message {at} has no matching call",
            index=at,
            call_id=call_id,
        )
