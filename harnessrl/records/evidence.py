"""A failure's evidence: the numbers that triggered it, one typed model per failure kind.

Each detector of :mod:`harnessrl.detection.detectors` (and the rubric audit) builds the model of its kind;
:class:`~harnessrl.records.failures.Failure` parses a stored dict into the model its ``kind`` names
(:data:`EVIDENCE_MODELS`), so readers use attributes, never ``.get`` on a dict (a reader that serves several
kinds narrows with :meth:`Evidence.narrow`). Changing what a detector records is one model here and the
detector that fills it.

Serialised as it was written: a model dumps the fields that were set (a detector sets them all) and any
extra key an older run wrote, so ``events.jsonl``, the failures a run keeps and a failure's id (a digest of
its summary and evidence) stay byte for byte what they were, and an old run directory still loads. Numbers
are ``int | float`` where either was written, so an int is never dumped back as a float.

This module is a data type at the bottom of the layers: it imports nothing of the package but the records' own base.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from harnessrl.records.as_written import AsWritten, Number

__all__ = [
    "EVIDENCE_MODELS",
    "CriterionStreakEvidence",
    "Evidence",
    "FlatGroupEvidence",
    "JudgeDisagreementEvidence",
    "ReferenceBelowPolicyEvidence",
    "ReferenceFailsEvidence",
    "ScaffoldOutgrownEvidence",
    "SpuriousEvidence",
    "SpuriousFeatureEvidence",
    "SpuriousLengthEvidence",
    "UncheckedRequirementEvidence",
    "parse_evidence",
]

E = TypeVar("E", bound="Evidence")


class Evidence(AsWritten, BaseModel):  # BaseModel named: ruff reads the fields as pydantic's
    """The numbers behind a failure (the base of every kind's model; a kind without its own model keeps its
    keys as extra fields). Dumped as written (:class:`~harnessrl.records.as_written.AsWritten`): a detector sets
    every field; an older run's file may have fewer."""

    def narrow(self, model: type[E]) -> E:
        """This evidence as ``model`` when it is one, else an empty ``model`` (every field at its default: None,
        0, False or empty): a reader that serves several kinds reads one kind's fields without a ``.get``."""
        return self if isinstance(self, model) else model()

    @property
    def subject(self) -> str | None:
        """What stays the same while the failure persists across steps besides its kind and task (a criterion,
        a feature, a requirement); None: the kind and task alone."""
        return None


class FlatGroupEvidence(Evidence):
    """``non_discriminative_low`` / ``_high``: a group whose rewards collapsed to one value."""

    rewards: list[Number | None] = []
    mean: Number | None = None
    std: Number | None = None
    eps: Number | None = None
    threshold: Number | None = None
    n: int | None = None
    missing_rewards: int | None = None
    guided: int = 0
    """Members of the group that saw the task's guidance."""
    temperature: Number | None = None


class SpuriousEvidence(Evidence):
    """Reward rising with a surface feature of the completions, pooled over the task's recent groups."""

    n: int | None = None
    groups: int | None = None
    steps: list[int] = []
    threshold: Number | None = None
    feature: str | None = None
    rho: Number | None = None

    @property
    def subject(self) -> str | None:
        return self.feature


# the fields in the order the detector writes them (a dump lists them in that order)
class SpuriousLengthEvidence(SpuriousEvidence):
    """``spurious_length``: reward rises with completion length."""

    p_value: Number | None = None
    within_group: bool | None = None
    points: list[list[Number | None]] = []
    """(length, reward) pairs, evenly spread over the pooled rollouts."""
    mean_length: Number | None = None


class SpuriousFeatureEvidence(SpuriousEvidence):
    """``spurious_feature``: reward rises with another surface feature (controlling for length by default)."""

    partial_rho_given_length: Number | None = None
    rho_feature_length: Number | None = None
    rho_length: Number | None = None
    p_value: Number | None = None
    within_group: bool | None = None
    points: list[list[Number | None]] = []
    """(feature value, reward) pairs, evenly spread over the pooled rollouts."""


class ReferenceBelowPolicyEvidence(Evidence):
    """``reference_below_policy``: the reference answer scores below the group's median policy reward."""

    reference_reward: Number | None = None
    median_reward: Number | None = None
    gap: Number | None = None
    margin: Number | None = None
    rewards: list[Number | None] = []
    rollouts_above_reference: int | None = None
    n: int | None = None


class CriterionStreakEvidence(Evidence):
    """``criterion_saturated`` / ``criterion_dead``: a criterion's mean verdict stayed at one end."""

    criterion_id: str | None = None
    criterion_text: str | None = None
    weight: Number | None = None
    pitfall: bool = False
    recent_means: list[Number | None] = []
    consecutive: int | None = None
    threshold: Number | None = None
    k: int | None = None

    @property
    def subject(self) -> str | None:
        return self.criterion_id


class JudgeDisagreementEvidence(Evidence):
    """``judge_disagreement``: re-grading the same rollouts moved the reward."""

    mean_abs_delta: Number | None = None
    max_abs_delta: Number | None = None
    mean_delta: Number | None = None
    n: int | None = None
    threshold: Number | None = None
    original: list[Number | None] = []
    regraded: list[Number | None] = []
    steps: list[int] = []
    criterion_mean_abs_delta: dict[str, Number | None] = {}
    worst_criterion: str | None = None
    """The criterion whose verdicts moved most (None: the re-grade returned no verdicts)."""


class ScaffoldOutgrownEvidence(Evidence):
    """``scaffold_outgrown``: a guided task's unguided members give signal on their own, or, for a hint the rubric
    states (``checks``: the criteria it states), meet those criteria without it (``plain_met``: their mean verdict
    among the unguided members of each of the last guided groups)."""

    guidance: str | None = None
    guided: int = 0
    group_size: int | None = None
    temperature: Number | None = None
    plain_rewards: list[Number | None] = []
    guided_rewards: list[Number | None] = []
    plain_std: list[Number | None] = []
    eps: Number | None = None
    groups: int | None = None
    steps: list[int] = []
    checks: list[str] = []
    plain_met: dict[str, list[Number | None]] = {}


class UncheckedRequirementEvidence(Evidence):
    """``unchecked_requirement``: the rubric audit's finding, a requirement prompts state and rubrics do not check."""

    requirement_key: str | None = None
    requirement: dict[str, Any] = {}
    """The task's own instance of the check."""
    requirement_text: str | None = None
    covers: list[str] = []
    graded_groups: int | None = None
    audit: bool = True

    @property
    def subject(self) -> str | None:
        return self.requirement_key


class ReferenceFailsEvidence(Evidence):
    """``reference_fails_criterion``: the task's own reference answer, graded by its rubric, fails an exact positive
    criterion or commits an exact pitfall of it (:mod:`harnessrl.evolution.reference`): the criterion pays for what a
    good answer does not do. The finding covers every task whose reference fails a criterion of the same requirement."""

    criterion_id: str | None = None
    criterion_text: str | None = None
    weight: Number | None = None
    pitfall: bool = False
    """A pitfall (negative weight) the reference commits, rather than a positive criterion it fails."""
    verdict: Number | None = None
    """The reference's verdict on it (0: fails; a pitfall's 1: commits)."""
    requirement_key: str | None = None
    covers: list[str] = []
    """Every task of the finding: its rubric has a criterion of this requirement that its reference fails."""
    criteria: dict[str, str] = {}
    """Each covered task's own suspect criterion id."""
    graded_groups: int | None = None

    @property
    def subject(self) -> str | None:
        return self.requirement_key


EVIDENCE_MODELS: dict[str, type[Evidence]] = {
    "non_discriminative_low": FlatGroupEvidence,
    "non_discriminative_high": FlatGroupEvidence,
    "spurious_length": SpuriousLengthEvidence,
    "spurious_feature": SpuriousFeatureEvidence,
    "reference_below_policy": ReferenceBelowPolicyEvidence,
    "criterion_saturated": CriterionStreakEvidence,
    "criterion_dead": CriterionStreakEvidence,
    "judge_disagreement": JudgeDisagreementEvidence,
    "scaffold_outgrown": ScaffoldOutgrownEvidence,
    "unchecked_requirement": UncheckedRequirementEvidence,
    "reference_fails_criterion": ReferenceFailsEvidence,
}
"""The evidence model of each failure kind (every kind of :data:`~harnessrl.records.failures.FailureKind`)."""


def parse_evidence(kind: str | None, raw: Evidence | Mapping[str, Any] | None) -> Evidence:
    """``raw`` as the evidence model of ``kind`` (a kind without a model: :class:`Evidence` with its keys
    kept); a model of another kind is re-read from what it holds."""
    model = EVIDENCE_MODELS.get(kind or "", Evidence)
    if isinstance(raw, model):
        return raw
    if isinstance(raw, Evidence):
        raw = raw.model_dump()
    return model.model_validate(dict(raw or {}))
