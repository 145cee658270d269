"""ConversationMemory: a stored transcript and the context built from it for each request.

The memory keeps the whole conversation in a :class:`~contextfold.stores.base.Store` (an
append-only log) and, on every :meth:`ConversationMemory.build_context`, runs its strategy to
decide what is sent. It reports what that request saved in :class:`MemoryStats`: plain
figures, so reading them never touches the store. The figures that need the token count of
the whole stored history are None when the memory would have to read the log to know it,
and :meth:`ConversationMemory.count_totals` fills them. Likewise the whole transcript is read
by a method, :meth:`ConversationMemory.read_messages`, never by an attribute.

The implementation modules are private (``_memory``, ``_core``, ``_stats`` ...): the public
place of each name is this package, and the root package for the ones it re-exports (whose
``__module__`` says ``contextfold``).

Three properties matter most for a long-lived conversation:

* **Reading cost does not grow with the conversation.** Sequence numbers are gap-free, so
  the memory reads windows by arithmetic. It caches what it read, and each build reads only
  the sequence numbers it has not seen. A :class:`~contextfold.strategies.sliding.SlidingWindow`
  build reads the system prefix plus the newest messages that cover the budget (walking back
  to a turn boundary, so the window never starts inside a tool exchange). With a stored
  checkpoint, it reads only the messages after the checkpoint. Any other strategy without a
  checkpoint receives the whole history once; later builds then read only what is new.
  A stored checkpoint is used when its ``strategy`` equals the strategy's ``name`` (or, for a
  :class:`~contextfold.strategies.pipeline.Pipeline`, the name of one of its stages), or
  when the strategy has an ``accepts_checkpoint(record) -> bool`` method that says yes. In that
  case the strategy receives the prefix, the newest covered message (found by its stored
  sequence number, ``last_covered_seq``) and the messages after it, not the older covered
  ones. A strategy finds the checkpoint at the first message after the prefix that carries
  ``last_covered_id``, so a newer message repeating that id (turns loaded one at a time)
  cannot move it; a strategy that does not find the id treats everything after the prefix as
  newer than the checkpoint.
* **A span is summarized once.** A checkpoint the strategy returns is committed to the store
  and reused by later builds, and by every other process that serves the conversation.
  Compaction is single-flight: the summarizer runs only while this process holds
  :meth:`~contextfold.stores.base.Store.compaction_lock`. When another process holds it, the
  build goes ahead without compacting (the strategy falls back as it does on a summarizer
  failure), and :attr:`MemoryStats.fallback_reason` says so. A commit rejected with
  :class:`~contextfold.errors.ConflictError` reloads the newest checkpoint and rebuilds once.
* **Nothing stored is lost or edited.** Building never writes messages. It can only append
  a checkpoint. :meth:`ConversationMemory.clear` is the one destructive call.

The synchronous and asynchronous methods share one sans-I/O core. The core is a generator
that yields small "store operation" and "summary call" requests, and two drivers carry them
out against a sync or an async store. The logic is written once. A sync-only store also
serves the async methods (its calls then block the event loop briefly); an async-only store
serves only the async methods.

A memory runs its own calls one at a time: concurrent calls from several threads wait for
each other, and so do concurrent async calls from tasks of one event loop (do not mix the two
on one memory at the same time). Many memories, in many processes, may serve the same stored
conversation. When another
memory clears the conversation, this one notices at its next build if the log is now shorter
than what it has seen, and starts over; a log cleared and refilled past that length is not
detected, so clear a conversation from the memory that serves it.
"""

from __future__ import annotations

from contextfold.memory._context import Context, ContextPlan
from contextfold.memory._memory import DEFAULT_MAX_TOKENS, ConversationMemory
from contextfold.memory._stats import MemoryStats

__all__ = ["DEFAULT_MAX_TOKENS", "Context", "ContextPlan", "ConversationMemory", "MemoryStats"]
