"""aggregate_reward: docs/design.md §4, reward = (Σ_{w>0} w·v − Σ_{w<0} |w|·v) / Σ_{w>0} w, clipped to [0, 1]."""

from __future__ import annotations

import pytest

from harnessrl.data import Criterion
from harnessrl.judges import aggregate_reward


def c(cid: str, weight: float) -> Criterion:
    return Criterion(id=cid, text=f"criterion {cid}", weight=weight)


# a: essential (3), b: nice to have (1), p: pitfall (-2)
RUBRIC = [c("a", 3), c("b", 1), c("p", -2)]


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ({"a": 1, "b": 1, "p": 0}, 1.0),
        ({"a": 0, "b": 0, "p": 0}, 0.0),
        ({"a": 1, "b": 0, "p": 0}, 3 / 4),
        ({"a": 0, "b": 1, "p": 0}, 1 / 4),
        ({"a": 0.5, "b": 1, "p": 0}, (1.5 + 1) / 4),
        ({"a": 1, "b": 1, "p": 0.5}, (4 - 1) / 4),  # a half-met pitfall costs half its weight
        ({"a": 1, "b": 1, "p": 1}, (4 - 2) / 4),
        ({"a": 1, "b": 0.25, "p": 0.25}, (3 + 0.25 - 0.5) / 4),
    ],
)
def test_formula_on_hand_computed_cases(verdicts, expected):
    assert aggregate_reward(RUBRIC, verdicts) == pytest.approx(expected)


def test_pitfalls_subtract():
    without = aggregate_reward(RUBRIC, {"a": 1, "b": 0, "p": 0})
    with_pitfall = aggregate_reward(RUBRIC, {"a": 1, "b": 0, "p": 1})
    assert without == pytest.approx(0.75)
    assert with_pitfall == pytest.approx((3 - 2) / 4)
    assert with_pitfall < without


def test_several_pitfalls():
    rubric = [c("a", 2), c("b", 2), c("p1", -1), c("p2", -0.5)]
    assert aggregate_reward(rubric, {"a": 1, "b": 1, "p1": 1, "p2": 1}) == pytest.approx((4 - 1.5) / 4)


def test_clipped_at_zero():
    # (1 - 2) / 4 < 0
    assert aggregate_reward(RUBRIC, {"a": 0, "b": 1, "p": 1}) == 0.0
    assert aggregate_reward(RUBRIC, {"a": 0, "b": 0, "p": 1}) == 0.0


def test_verdicts_clipped_to_unit_interval():
    assert aggregate_reward(RUBRIC, {"a": 5.0, "b": 1, "p": 0}) == 1.0  # never above 1
    assert aggregate_reward(RUBRIC, {"a": 1, "b": 1, "p": -3.0}) == 1.0  # a negative pitfall verdict adds nothing
    assert aggregate_reward(RUBRIC, {"a": -1.0, "b": 1, "p": 0}) == pytest.approx(1 / 4)
    assert aggregate_reward(RUBRIC, {"a": 1, "b": 1, "p": 7.0}) == pytest.approx((4 - 2) / 4)


def test_result_always_in_unit_interval():
    import itertools

    values = [0.0, 0.3, 1.0]
    for va, vb, vp in itertools.product(values, repeat=3):
        r = aggregate_reward(RUBRIC, {"a": va, "b": vb, "p": vp})
        assert r is not None and 0.0 <= r <= 1.0


def test_missing_positive_is_skipped_not_zero():
    # b missing: the sums run over a and p; the denominator is the covered positive weight 3, not 4
    assert aggregate_reward(RUBRIC, {"a": 1, "b": None, "p": 0}) == pytest.approx(1.0)
    assert aggregate_reward(RUBRIC, {"a": 1, "p": 0}) == pytest.approx(1.0)  # absent == missing
    assert aggregate_reward(RUBRIC, {"a": 1, "b": None, "p": 1}) == pytest.approx((3 - 2) / 3)
    assert aggregate_reward(RUBRIC, {"a": 0.5, "b": None, "p": 0}) == pytest.approx(0.5)
    # were it read as 0, the reward would be 0.75
    assert aggregate_reward(RUBRIC, {"a": 1, "b": None, "p": 0}) != pytest.approx(0.75)


def test_missing_pitfall_is_ignored():
    assert aggregate_reward(RUBRIC, {"a": 1, "b": 0, "p": None}) == pytest.approx(0.75)
    assert aggregate_reward(RUBRIC, {"a": 1, "b": 0}) == pytest.approx(0.75)


def test_nan_verdict_is_missing_not_zero():
    assert aggregate_reward(RUBRIC, {"a": 1, "b": float("nan"), "p": 0}) == pytest.approx(1.0)
    assert aggregate_reward(RUBRIC, {"a": 1, "b": 1, "p": float("nan")}) == pytest.approx(1.0)


def test_coverage_below_minimum_is_none():
    # only b (1 of 4 positive weight) has a verdict
    assert aggregate_reward(RUBRIC, {"a": None, "b": 1, "p": 0}) is None
    assert aggregate_reward(RUBRIC, {"a": None, "b": 1, "p": 0}, min_coverage=0.25) == pytest.approx(1.0)
    assert aggregate_reward(RUBRIC, {"a": None, "b": 1, "p": 0}, min_coverage=0.26) is None


def test_coverage_exactly_at_minimum_counts():
    rubric = [c("a", 1), c("b", 1)]
    assert aggregate_reward(rubric, {"a": None, "b": 0.4}, min_coverage=0.5) == pytest.approx(0.4)


def test_everything_missing_is_none():
    assert aggregate_reward(RUBRIC, {}) is None
    assert aggregate_reward(RUBRIC, {"a": None, "b": None, "p": None}, min_coverage=0.01) is None
    # pitfall verdicts alone cover no positive weight
    assert aggregate_reward(RUBRIC, {"p": 0.0}, min_coverage=0.01) is None


def test_verdicts_for_other_ids_are_ignored():
    assert aggregate_reward(RUBRIC, {"a": 1, "b": 1, "p": 0, "zzz": 1}) == pytest.approx(1.0)


@pytest.mark.parametrize("rubric", [[], [c("p", -1)], [c("p", -1), c("q", -2)]])
def test_rubric_without_positive_weight_raises(rubric):
    with pytest.raises(ValueError, match="no positive weight"):
        aggregate_reward(rubric, {"p": 1, "q": 0})


def test_integer_verdicts_give_a_float():
    assert aggregate_reward([c("a", 1), c("b", 1)], {"a": 1, "b": 0}) == pytest.approx(0.5)
    assert isinstance(aggregate_reward([c("a", 1)], {"a": 1}), float)
