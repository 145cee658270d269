"""spread_ranks: a match lends part of its rank to the messages beside it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contextfold.search import spread_ranks
from contextfold.strategies.base import SearchCall


def call(limit: int = 5, spread: float = 0.8) -> SearchCall:
    return SearchCall("q", 100, limit, 0, spread)


def test_without_a_spread_the_search_order_stands() -> None:
    assert spread_ranks([7, 3, 9, 1], call(limit=3, spread=0.0), 0, 100) == [7, 3, 9]


def test_the_reply_after_a_matching_question_ranks_next_to_it() -> None:
    # 20 is the question that matched best; 21, its answer, matched nothing.
    ranked = spread_ranks([20, 50, 70, 90], call(limit=6), 0, 100)
    assert ranked == [20, 50, 70, 21, 19, 90]  # the neighbours before a weaker lone match


def test_a_match_beside_another_match_outranks_an_equal_lone_one() -> None:
    # 40 and 41 match side by side; 10 ranks above 41 on its own.
    assert spread_ranks([40, 10, 41], call(limit=3), 0, 100)[:2] == [40, 41]


def test_a_run_of_weak_matches_lends_no_more_than_its_best() -> None:
    # A strong lone match, then a long run of weak adjacent matches: each of the run is
    # lent by its better neighbour only, so the strong match keeps a place.
    weak = list(range(60, 90))
    assert 5 in spread_ranks([5, *weak], call(limit=10), 0, 100)


def test_a_neighbour_never_displaces_the_match_that_lends_to_it() -> None:
    assert spread_ranks([2], call(limit=1, spread=1.0), 0, 100) == [2]


def test_neighbours_stay_inside_the_searched_range() -> None:
    ranked = spread_ranks([10, 19], call(limit=10), 10, 20)
    assert 9 not in ranked
    assert 20 not in ranked
    assert set(ranked) == {10, 11, 18, 19}


@given(
    st.lists(st.integers(0, 60), unique=True, max_size=30),
    st.integers(1, 30),
    st.floats(0, 1),
)
def test_matches_and_their_neighbours_only_each_once_and_deterministic(
    positions: list[int], limit: int, spread: float
) -> None:
    c = call(limit=limit, spread=spread)
    ranked = spread_ranks(positions, c, 1, 50)
    assert len(ranked) <= limit
    assert len(set(ranked)) == len(ranked)
    near = {q for p in positions for q in (p - 1, p + 1) if 1 <= q < 50}
    assert all(p in positions or p in near for p in ranked)
    assert ranked == spread_ranks(list(positions), c, 1, 50)
    if spread == 0:
        assert ranked == positions[:limit]
    if positions and len(ranked) < limit:
        assert positions[0] in ranked  # room for all: nothing matched is dropped
