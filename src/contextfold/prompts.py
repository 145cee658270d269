"""Old home of the prompt set; it now lives in :mod:`contextfold.summarizers.prompts`.

Kept as a re-export so existing imports (``from contextfold.prompts import PromptSet``) keep
working; new code should import from :mod:`contextfold.summarizers.prompts`.
"""

from __future__ import annotations

from contextfold.summarizers.prompts import (
    CHECKPOINT_SECTIONS,
    DEFAULT_PROMPTS,
    PromptSet,
    build_cache_aligned_messages,
    build_isolated_prompt,
    instruction_for,
    prompt_hash,
)

__all__ = [
    "CHECKPOINT_SECTIONS",
    "DEFAULT_PROMPTS",
    "PromptSet",
    "build_cache_aligned_messages",
    "build_isolated_prompt",
    "instruction_for",
    "prompt_hash",
]
