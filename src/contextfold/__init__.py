"""contextfold: decide what part of an LLM conversation is sent to the model.

The 90% case imports from here::

    from contextfold import ConversationMemory, Message, SlidingWindow

Everything else lives in its concept's subpackage: :mod:`contextfold.formats`,
:mod:`contextfold.tokens`, :mod:`contextfold.strategies`, :mod:`contextfold.summarizers`,
:mod:`contextfold.stores`. Importing this package does no I/O and needs no optional
dependency.

Every name in ``__all__`` reports this package as its ``__module__`` (the tail of this file),
so reprs, tracebacks and generated docs show ``contextfold.ConversationMemory`` rather than
the private module that defines it.
"""

from __future__ import annotations

from contextfold.checkpoints import CheckpointRecord
from contextfold.errors import (
    BudgetError,
    CancelledError,
    ConfigError,
    ConflictError,
    ContextfoldError,
    FormatError,
    MissingExtraError,
    PairingError,
    StoreError,
    SummarizerError,
)
from contextfold.memory import Context, ContextPlan, ConversationMemory, MemoryStats
from contextfold.messages import (
    ImagePart,
    Message,
    Part,
    Role,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from contextfold.stores import open_store
from contextfold.strategies import (
    Checkpoint,
    Hybrid,
    Pipeline,
    PruneToolOutputs,
    Recall,
    SearchCall,
    SlidingWindow,
    Strategy,
    StrategyResult,
    Summarization,
    SummaryCall,
    SummaryCompactor,
    SummaryPlacement,
)
from contextfold.summarizers import (
    AsyncSummarizer,
    CancelToken,
    ExtractiveSummarizer,
    FunctionSummarizer,
    SummarizationResult,
    Summarizer,
    SummaryRequest,
)
from contextfold.tokens import ApproxCounter, TokenCounter
from contextfold.transforms import keep_last_messages, keep_last_with_summary, trim_to_token_budget

__version__ = "0.1.0"

__all__ = [
    "ApproxCounter",
    "AsyncSummarizer",
    "BudgetError",
    "CancelToken",
    "CancelledError",
    "Checkpoint",
    "CheckpointRecord",
    "ConfigError",
    "ConflictError",
    "Context",
    "ContextPlan",
    "ContextfoldError",
    "ConversationMemory",
    "ExtractiveSummarizer",
    "FormatError",
    "FunctionSummarizer",
    "Hybrid",
    "ImagePart",
    "MemoryStats",
    "Message",
    "MissingExtraError",
    "PairingError",
    "Part",
    "Pipeline",
    "PruneToolOutputs",
    "Recall",
    "Role",
    "SearchCall",
    "SlidingWindow",
    "StoreError",
    "Strategy",
    "StrategyResult",
    "Summarization",
    "SummarizationResult",
    "Summarizer",
    "SummarizerError",
    "SummaryCall",
    "SummaryCompactor",
    "SummaryPlacement",
    "SummaryRequest",
    "TextPart",
    "ThinkingPart",
    "TokenCounter",
    "ToolCallPart",
    "ToolResultPart",
    "__version__",
    "keep_last_messages",
    "keep_last_with_summary",
    "open_store",
    "trim_to_token_budget",
]

# Public names report their public module (as httpx does): `contextfold.Message`, not
# `contextfold.messages.Message`. Type aliases (Part, Role) take the attribute too.
__locals = locals()
for __name in __all__:
    if not __name.startswith("__"):
        setattr(__locals[__name], "__module__", "contextfold")  # noqa: B010
del __locals, __name
