"""A failure's evidence (docs/design.md §4): one typed model per kind, serialised exactly as it was written."""

from __future__ import annotations

import json

from harnessrl.interfaces.evidence import FailureView
from harnessrl.records.evidence import (
    EVIDENCE_MODELS,
    CriterionStreakEvidence,
    Evidence,
    FlatGroupEvidence,
    JudgeDisagreementEvidence,
    SpuriousFeatureEvidence,
)
from harnessrl.records.failures import FAILURE_KINDS, Failure


def _failure(kind: str, evidence) -> Failure:
    return Failure(kind=kind, step=3, task_id="t1", domain="d", summary="s", evidence=evidence)


def test_every_kind_has_its_model():
    assert set(EVIDENCE_MODELS) == set(FAILURE_KINDS)
    assert type(_failure("criterion_dead", {"criterion_id": "c1"}).evidence) is CriterionStreakEvidence
    assert type(_failure("non_discriminative_low", {}).evidence) is FlatGroupEvidence


def test_an_old_file_loads_and_is_written_back_as_it_was():
    # fewer keys than a detector writes today, an extra one, and ints where floats could be
    raw = {"criterion_id": "c1", "recent_means": [1, 1.0], "threshold": 1, "legacy_note": "x"}
    f = _failure("criterion_saturated", raw)
    assert f.evidence.criterion_id == "c1" and f.evidence.recent_means == [1, 1.0]
    assert f.model_dump(mode="json")["evidence"] == raw
    assert json.dumps(f.model_dump(mode="json")["evidence"]) == json.dumps(raw)
    again = Failure.model_validate_json(f.model_dump_json())
    assert again.id == f.id and again.evidence == f.evidence
    # the id is the digest of what was written: the same as the dict gave before the evidence was typed
    assert f.id == _failure("criterion_saturated", raw).id


def test_narrow_reads_another_kind_as_empty():
    ev = _failure("spurious_feature", {"feature": "bullets", "rho": 0.8}).evidence
    assert ev.narrow(SpuriousFeatureEvidence).feature == "bullets" and ev.subject == "bullets"
    assert ev.narrow(CriterionStreakEvidence).criterion_id is None
    assert ev.narrow(JudgeDisagreementEvidence).worst_criterion is None


def test_a_failure_view_parses_the_evidence_of_its_kind():
    view = FailureView(
        failure_id="f",
        kind="judge_disagreement",
        step=1,
        task_id="t",
        domain="d",
        summary="s",
        evidence={"worst_criterion": "c2", "n": 8},
    )
    assert isinstance(view.evidence, JudgeDisagreementEvidence) and view.evidence.worst_criterion == "c2"
    assert view.model_dump(mode="json")["evidence"] == {"worst_criterion": "c2", "n": 8}
    unknown = FailureView(
        failure_id="f", kind="plugin_kind", step=1, task_id="t", domain="d", summary="s", evidence={"a": 1}
    )
    assert type(unknown.evidence) is Evidence and unknown.model_dump()["evidence"] == {"a": 1}
