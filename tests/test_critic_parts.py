"""The critic's parts: one rank correlation shared with the detectors, grading within the budget, the
Protocols through which the critic reads the harness, and the trial result types below the critic."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import harnessrl.critic
import harnessrl.critic.trials
import harnessrl.records
from harnessrl.critic.budget import Budget, Rejected, count_judged
from harnessrl.critic.config import TrialConfig
from harnessrl.critic.protocols import HarnessView
from harnessrl.critic.stats import abs_spearman, abs_spearman_rows
from harnessrl.critic.trials import TrialHarness
from harnessrl.data import Criterion, Task
from harnessrl.detection.ranks import rank_rows, spearman, spearman_rows
from harnessrl.interfaces import Harness
from harnessrl.judges import BackendVerdict, GradeRequest, RubricJudge
from harnessrl.records.trials import TrialCost, TrialResult

JUDGED = Criterion(id="detail", text="Gives a detailed answer", weight=1)
CHECKED = Criterion(id="words", text="Writes a word", weight=1, check={"type": "word_count", "min": 1})
EXTRA = Criterion(id="kind", text="Is kind", weight=1)
TASK = Task(id="t", domain="d", prompt="Say something.", rubric=[JUDGED, CHECKED])


class CountingBackend:
    name = "counting"

    def __init__(self):
        self.requests: list[GradeRequest] = []

    def grade(self, requests: Sequence[GradeRequest]) -> list[BackendVerdict | None]:
        self.requests.extend(requests)
        return [BackendVerdict(min(1.0, len(r.response.split()) / 10)) for r in requests]


# ------------------------------------------------------------------------------------------- rank correlation


def test_rank_rows_are_scipy_average_ranks_row_by_row():
    from scipy.stats import rankdata

    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, (50, 12)).astype(float)  # many ties
    assert (rank_rows(a) == rankdata(a, axis=1)).all()
    assert (rank_rows(a[0]) == rankdata(a[0])).all()


def test_detection_and_critic_share_one_rank_correlation():
    """The critic's bootstrap rows and the detectors' one pair are the same computation: equal to the last bit."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, (200, 9)).astype(float)
    y = rng.random((200, 9)).round(1)
    x[0] = 2.0  # a constant row: undefined
    rows = spearman_rows(x, y)
    for i in range(x.shape[0]):
        one = spearman(x[i], y[i])
        if one is None:
            assert np.isnan(rows[i])
            continue
        assert rows[i] == one  # not approx: one implementation
        assert one == pytest.approx(spearmanr(x[i], y[i]).statistic, abs=1e-12)
    critic = abs_spearman_rows(x, y)
    assert critic[0] == 0.0  # a constant row correlates with nothing
    assert (critic[1:] == np.abs(rows[1:])).all()
    assert abs_spearman(x[1], y[1]) == abs(spearman(x[1], y[1]))


# ------------------------------------------------------------------------------------------- the budget


def test_grading_within_the_budget_grades_each_distinct_text_once():
    backend = CountingBackend()
    budget = Budget(TrialConfig(), RubricJudge(backend))
    texts = ["one two", "one two three", "one two"]  # a repeated completion costs nothing more
    base, cand = budget.grade(TASK, texts, [TASK.rubric, [*TASK.rubric, EXTRA]], "grading")
    assert set(base) == set(cand) == {"one two", "one two three"}
    # two texts x the judged criterion, then only the candidate's new one: the cache serves the rest
    assert [(r.criterion.id, r.response) for r in backend.requests] == [
        ("detail", "one two"),
        ("detail", "one two three"),
        ("kind", "one two"),
        ("kind", "one two three"),
    ]
    assert budget.judge_calls == 4 and count_judged(TASK.rubric) == 1


def test_grading_checks_every_rubric_against_the_budget_before_grading_any():
    backend = CountingBackend()
    budget = Budget(TrialConfig(max_judge_calls=3), RubricJudge(backend))
    with pytest.raises(Rejected, match="budget: grading needs 4 judge calls, 3 left of max_judge_calls=3"):
        budget.grade(TASK, ["a b", "a b c"], [TASK.rubric, [*TASK.rubric, EXTRA]], "grading")
    assert backend.requests == []


def test_sampling_without_a_sampler_is_a_rejection():
    budget = Budget(TrialConfig(), RubricJudge(CountingBackend()))
    assert not budget.can_sample
    row = Harness([TASK]).row(TASK, 0, 4)
    with pytest.raises(Rejected, match="no policy sampler"):
        budget.sample_rows([row])


# ------------------------------------------------------------------------------------------- the layers


def test_the_harness_is_what_the_critic_reads():
    """The critic types against its own Protocols (it never imports the interfaces); the harness fits them."""
    harness = Harness([TASK])
    assert isinstance(harness, HarnessView) and isinstance(harness, TrialHarness)


def test_trial_results_live_below_the_critic_and_keep_their_old_names():
    assert harnessrl.critic.trials.TrialResult is harnessrl.critic.TrialResult is TrialResult
    assert harnessrl.critic.trials.TrialCost is harnessrl.records.TrialCost is TrialCost
    assert TrialResult.__module__ == "harnessrl.records.trials"
