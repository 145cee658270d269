"""The model registry: limits by model name, the default budget rule, and ``--model``."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from contextfold.cli import main
from contextfold.errors import ConfigError
from contextfold.models import (
    BUILTIN_LIMITS,
    DEFAULT_ANSWER_CAP,
    ModelLimits,
    budget_for,
    model_limits,
)
from contextfold.strategies import SlidingWindow
from shared_data import ROOT


def test_builtin_table_covers_the_common_families_with_source_and_date() -> None:
    for name in ("claude-sonnet-4-5", "claude-haiku-4-5", "gpt-4o", "gpt-4.1", "gpt-5", "o3"):
        limits = model_limits(name, source="builtin")
        assert limits.context_window >= 100_000
        assert limits.max_output_tokens
        assert limits.source
        assert limits.as_of
    assert model_limits("gemini-2.5-pro", source="builtin").provider == "google"
    assert len({(e.model, e.provider) for e in BUILTIN_LIMITS}) == len(BUILTIN_LIMITS)


def test_names_with_provider_prefix_date_or_version_match_their_family() -> None:
    for name in (
        "claude-sonnet-4-5-20250929",
        "anthropic:claude-sonnet-4-5",
        "anthropic/claude-sonnet-4-5",
        "claude-sonnet-4-5@20250929",
    ):
        assert model_limits(name, source="builtin").model == "claude-sonnet-4-5"
    assert model_limits("gpt-4o-mini-2024-07-18", source="builtin").model == "gpt-4o-mini"
    assert model_limits("gpt-4.1-mini", source="builtin").model == "gpt-4.1-mini"
    # A family prefix matches only at a "-": gpt-4 is not a prefix of gpt-4.5.
    with pytest.raises(ConfigError):
        model_limits("gpt-4.5-preview", source="builtin")


def test_default_rule_is_80_percent_minus_the_answer() -> None:
    assert budget_for("gpt-4o", source="builtin") == int(128_000 * 0.8) - 16_384
    # The answer's room is capped: gpt-5 may write 128k tokens, 16,384 are kept.
    assert budget_for("gpt-5", source="builtin") == int(272_000 * 0.8) - DEFAULT_ANSWER_CAP
    # ...and is the model's own cap when smaller.
    assert budget_for("gpt-4", source="builtin") == int(8_192 * 0.8) - 4_096
    assert budget_for("gpt-4o", ratio=0.5, answer_tokens=0, source="builtin") == 64_000


def test_a_table_of_your_own() -> None:
    mine = [ModelLimits("house-model", 10_000, 1_000, "local", "our deployment")]
    assert budget_for("house-model-v2", table=mine, source="builtin") == 7_000
    assert budget_for("house-model", table=mine) == 7_000  # auto falls back to the table


def test_unknown_model_says_how_to_pass_a_budget() -> None:
    with pytest.raises(ConfigError) as info:
        budget_for("no-such-model-xyz")
    assert info.value.argument == "model"
    assert "max_tokens" in str(info.value)
    assert "no-such-model-xyz" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"ratio": 0}, "ratio"),
        ({"ratio": 1.5}, "ratio"),
        ({"ratio": True}, "ratio"),
        ({"answer_tokens": -1}, "answer_tokens"),
        ({"answer_tokens": 200_000}, "answer_tokens"),
        ({"source": "web"}, "source"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], argument: str) -> None:
    with pytest.raises(ConfigError) as info:
        budget_for("gpt-4o", **kwargs)  # type: ignore[arg-type]
    assert info.value.argument == argument
    with pytest.raises(ConfigError):
        model_limits("")


def test_litellm_map_is_read_without_importing_litellm() -> None:
    if importlib.util.find_spec("litellm") is None:  # not importorskip: importing goes online
        pytest.skip("litellm is not installed")
    was_imported = "litellm" in sys.modules
    limits = model_limits("gpt-4o", source="litellm")
    assert limits.context_window == 128_000
    assert limits.max_output_tokens == 16_384
    assert "LiteLLM" in limits.source
    assert ("litellm" in sys.modules) == was_imported
    # A model only LiteLLM knows is found by auto before the table is tried.
    assert model_limits("gpt-4o", source="auto").source == limits.source


def test_genai_prices_knows_windows() -> None:
    pytest.importorskip("genai_prices")
    limits = model_limits("claude-sonnet-4-5", source="genai-prices")
    assert limits.context_window == 200_000
    assert limits.source.startswith("genai-prices")
    assert limits.max_output_tokens == 64_000  # from our table's family


def test_a_strategy_for_a_model() -> None:
    strategy = SlidingWindow(budget_for("claude-sonnet-4-5"))
    assert strategy.max_tokens == budget_for("claude-sonnet-4-5")


# -- the command line ---------------------------------------------------------------------


def test_cli_model_sets_the_budget(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(ROOT / "examples" / "support_chat.json")
    assert main(["compact", path, "--model", "gpt-4o", "--strategy", "sliding", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stats"]["budget"] == budget_for("gpt-4o")


def test_cli_unknown_model_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(ROOT / "examples" / "support_chat.json")
    with pytest.raises(SystemExit) as info:
        main(["plan", path, "--model", "no-such-model-xyz"])
    assert info.value.code == 2
    assert "give --budget N instead" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["plan", path, "--model", "gpt-4o", "--budget", "100"])
