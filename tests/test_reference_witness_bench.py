"""benchmarks/reference_witness.py: the witness wired as the trainer wires it, and the figures it reports."""

from __future__ import annotations

from pathlib import Path

from helpers import load_script

from harnessrl.data.schema import Task
from harnessrl.judges import GradeResult, Verdict

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "reference_witness.py"


def _bench():
    return load_script(SCRIPT)


class _Judge:
    """Judged verdicts from a table, exact ones from the check (as RubricJudge grades them)."""

    def __init__(self, values):
        self.values = values

    def grade_one(self, task, response, criteria):
        out = []
        for c in criteria:
            v = c.check.evaluate(response) if c.check is not None else self.values[(task.id, c.id)]
            out.append(Verdict(criterion_id=c.id, value=v))
        return GradeResult(verdicts=out, reward=None)


def _task(tid, rubric, reference="One short sentence."):
    return Task(id=tid, domain="d", prompt="p", reference_answer=reference, rubric=rubric)


def test_tally_splits_suspects_by_exact_judged_and_positive_pitfall():
    tasks = [
        _task(
            "a",
            [
                {"id": "c1", "text": "states x", "weight": 2},
                {"id": "c2", "text": "recommends y", "weight": -3},
                {"id": "c3", "text": "at least 50 words", "weight": 1, "check": {"type": "word_count", "min": 50}},
            ],
        ),
        _task("b", [{"id": "c1", "text": "states z", "weight": 1}, {"id": "c2", "text": "harm", "weight": -1}]),
        _task("c", [{"id": "c1", "text": "no reference", "weight": 1}], reference=None),
    ]
    bench = _bench()
    judge = _Judge({("a", "c1"): 0.9, ("a", "c2"): 0.7, ("b", "c1"): 0.2, ("b", "c2"): 0.1})
    w = bench.witness(tasks, judge)
    grades = {tid: g for (tid, _), g in w.grades.items()}
    t = bench.tally(tasks, grades)
    cells = t["by_kind"]
    assert (t["graded"], t["tasks_with_suspect"]) == (2, 2)  # task c has no reference: never graded
    assert (cells["judged_positive"]["criteria"], cells["judged_positive"]["suspect"]) == (2, 1)  # b/c1 fails
    assert (cells["judged_pitfall"]["criteria"], cells["judged_pitfall"]["suspect"]) == (2, 1)  # a/c2 commits
    assert (cells["exact_positive"]["criteria"], cells["exact_positive"]["suspect"]) == (1, 1)  # 3 words < 50
    assert t["all"] == {"criteria": 5, "suspect": 3, "breaks_prompt": 0, "suspect_share": 0.6}

    sample = bench.sample_suspects(tasks, grades, per_kind=5, seed=0)
    assert [(s["key"], s["kind"]) for s in sample] == [("b/c1", "positive"), ("a/c2", "pitfall")]  # judged only
    labels = {"b/c1": {"label": "false_alarm"}, "a/c2": {"label": "true"}}
    lab = bench.label_sample(sample, labels, {"positive": 1, "pitfall": 3})
    assert (lab["labelled"], lab["false_alarms"], lab["unlabelled"]) == (2, 1, [])
    assert lab["false_alarm_rate_weighted"] == 0.25  # 1.0 x 1 positive suspect, 0.0 x 3 pitfall suspects
