"""One exception tree for everything contextfold raises.

    ContextfoldError
    ├── ConfigError          a bad argument or option (also a ValueError)
    ├── FormatError          a provider payload or serialized message is malformed
    ├── PairingError         a tool call and its result are not properly paired
    ├── BudgetError          the context cannot fit the token budget (and why)
    ├── SummarizerError      a summarizer failed and the caller asked for no fallback
    ├── StoreError           a store cannot be opened, read or written
    │   └── ConflictError    a checkpoint covers a span that changed underneath it
    ├── CancelledError       work was cancelled or its deadline passed
    └── MissingExtraError    an optional dependency is not installed (also an ImportError)

Adapters catch SDK and driver exceptions at the boundary and re-raise one of these
``from`` the original, so callers only ever need ``except ContextfoldError``.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "CancelledError",
    "ConfigError",
    "ConflictError",
    "ContextfoldError",
    "FormatError",
    "MissingExtraError",
    "PairingError",
    "StoreError",
    "SummarizerError",
]


class ContextfoldError(Exception):
    """Base class of every error raised by contextfold."""


class ConfigError(ContextfoldError, ValueError):
    """A constructor or function was given a bad argument.

    Raised where the mistake is made (in the constructor, not at the first build), with the
    argument's name and the value given, so every kind of misuse is caught by one
    ``except ConfigError`` (or ``except ValueError``).

    Attributes:
        argument: the name of the bad argument, when there is one.
    """

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument


class FormatError(ContextfoldError, ValueError):
    """A payload does not match the provider format it claims to be.

    Attributes:
        index: position of the offending message or item, when known.
        field: the field that is wrong (``"role"``, ``"tool_calls[0].id"`` ...), when known.
    """

    def __init__(self, message: str, *, index: int | None = None, field: str | None = None) -> None:
        where = []
        if index is not None:
            where.append(f"message {index}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{message} (at {', '.join(where)})" if where else message)
        self.index = index
        self.field = field


class PairingError(ContextfoldError, ValueError):
    """A tool result has no call, a call has no result, or an id is duplicated.

    Attributes:
        index: position of the message that breaks the pairing.
        call_id: the tool call id concerned.
    """

    def __init__(
        self, message: str, *, index: int | None = None, call_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.index = index
        self.call_id = call_id


class BudgetError(ContextfoldError, ValueError):
    """The context cannot be made to fit the budget.

    Attributes:
        budget: the token budget asked for.
        required: the smallest number of tokens a valid context would need.
    """

    def __init__(
        self, message: str, *, budget: int | None = None, required: int | None = None
    ) -> None:
        super().__init__(message)
        self.budget = budget
        self.required = required


class SummarizerError(ContextfoldError):
    """A summarizer failed and no fallback was allowed.

    Attributes:
        code: the failure code of the summarization result (``"truncated"``, ``"timeout"`` ...).
    """

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class StoreError(ContextfoldError):
    """A store could not be opened, read or written. Nothing already stored is lost."""


class ConflictError(StoreError):
    """A checkpoint was rejected because the span it covers changed underneath it."""


class CancelledError(ContextfoldError):
    """Work was cancelled by the caller or ran past its deadline."""


class MissingExtraError(ContextfoldError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, feature: str, extra: str) -> None:
        super().__init__(f"{feature} needs the {extra!r} extra: pip install 'contextfold[{extra}]'")
        self.extra = extra
