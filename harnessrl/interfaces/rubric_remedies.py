"""The rubric interface's remedies: for each failure kind, the rubric edits the rule-based evolver tries, best
first (:data:`PLAYBOOK`), each a function of the proposal's evidence (:data:`REMEDIES`).

To add a remedy: write a function ``(ProposalEvidence) -> EditRubric | None`` here, name it in
:data:`REMEDIES`, and put its name in the failure kind's order in :data:`PLAYBOOK`.
:meth:`~harnessrl.interfaces.rubric.RubricCriteria.suggest` calls :func:`suggest_edits`.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harnessrl.critic.power import mostly_broken
from harnessrl.data.checks import BulletCount, Check, Contains, Regex, WordCount, count_bullets, read_check, words
from harnessrl.data.schema import Criterion
from harnessrl.interfaces.base import Suggestion, suggestions
from harnessrl.interfaces.evidence import ProposalEvidence, as_sentence, clip_text, excerpt, number, round_weight
from harnessrl.interfaces.induction import (
    InducedCheck,
    UpperBound,
    reference_terms,
    stated_requirements,
    tightened_bound,
)
from harnessrl.interfaces.rubric_edit import EditRubric, criterion_requirement, new_criterion
from harnessrl.records.evidence import (
    CriterionStreakEvidence,
    JudgeDisagreementEvidence,
    ReferenceBelowPolicyEvidence,
    ReferenceFailsEvidence,
    ScaffoldOutgrownEvidence,
    SpuriousEvidence,
    SpuriousFeatureEvidence,
    UncheckedRequirementEvidence,
)

__all__ = ["PLAYBOOK", "REMEDIES", "suggest_edits"]

# ---------------------------------------------------------------------------------------------- remedies
#
# Each failure kind's remedies, in the order they are tried (each is a function below, named in PLAYBOOK):
# - a requirement the rubric audit found unchecked: its exact criterion; when the policy does not meet it yet (at
#   most a tenth of the rollouts do: UNMET_SHARE), the criterion with a hint that states it to half of each group,
#   one update measured on probation;
# - a criterion the task's own reference answer fails (a pitfall it commits): removed, from every task whose reference
#   fails its own criterion of the same requirement (drop_suspect); the first remedy, too, of a spurious feature, of a
#   reference below the policy, of a dead criterion and of a uniformly low group, whenever the criterion they name (or
#   any, for the last two) is suspect;
# - uniformly high: an exact criterion induced from what the prompt states and the reference answer meets that
#   splits the rollouts (harnessrl.interfaces.induction) -> a stated requirement no rollout meets, with its hint
#   (as above) -> the next induced criterion -> an exact check of a key term the reference states and part of the
#   rollouts omit, for the whole group of the data (reference_term) -> the next such term -> a stricter judged
#   criterion derived from the saturated criteria (mean verdict >= 0.9), weighted like the heaviest criterion
#   -> the same at twice the weight *in place of* the saturated ones (a task is retired as solved only after
#   these: the fallback);
# - spurious length: a programmatic word_count pitfall (negative weight, half the rubric's positive weight)
#   above length_margin (1.2) x the reference answer's words (the policy's median without a reference) ->
#   after a reject, looser (x1.25) when the trial says the reference answer lost score, else tighter (1.0 x
#   the reference, twice the weight) -> a judged padding pitfall;
# - spurious feature: a pitfall against it, derived from the reference (no list where the reference has none;
#   repeated "!", keyword stuffing) -> heavier -> a judged padding pitfall;
# - reference below policy: a length pitfall when the policy writes much longer than the reference, else a
#   criterion asking for the reference's key points -> the other one;
# - saturated criterion: a saturated bound check tightened to the bound the reference meets and part of the
#   rollouts miss; a judged one reworded stricter, grounded in the reference answer (its sentence closest to
#   the criterion) -> an induced exact criterion -> a harder criterion in its place -> drop it. Never a
#   reweight: a criterion every rollout passes adds the same to every reward of a group, so reweighting it is
#   an affine change the advantages do not see (the critic rejects it as "no effect on the learning signal");
# - dead criterion: a criterion the policy can partly meet (a first step towards the dead one);
# - a hint the rubric states, outgrown (the unguided members meet it alone): the hint for half as many members, or
#   none; the criteria stay;
# - spurious length (above): the limit is the prompt's own ("at most 20 words") when it states one;
# - judge disagreement: reword the criterion to be explicitly checkable -> reweight it down.


@dataclass(frozen=True)
class _Target:
    """The criterion a failure names (in the rubric, or only in the failure's evidence)."""

    id: str
    text: str
    weight: float | None
    programmatic: bool
    in_rubric: bool


def _target(e: ProposalEvidence) -> _Target | None:
    streak = e.ev.narrow(CriterionStreakEvidence)
    cid = streak.criterion_id or e.ev.narrow(JudgeDisagreementEvidence).worst_criterion
    crit = e.criterion(cid)
    if crit is not None:
        return _Target(crit.id, crit.text, crit.weight, crit.check is not None or crit.kind == "programmatic", True)
    if cid and streak.criterion_text:
        return _Target(str(cid), streak.criterion_text, number(streak.weight), False, False)
    return None


def _saturated(e: ProposalEvidence) -> list[Criterion]:
    """The judged positive criteria every rollout passes (mean verdict >= 0.9), else all judged ones, else all."""
    means = e.criterion_means()
    judged = [c for c in e.positive if c.kind == "judged"]
    return [c for c in judged if means.get(c.id, 0) >= 0.9] or judged or e.positive


def _stricter_text(texts: Sequence[str]) -> str:
    return clip_text(
        "Goes beyond the basics on every point, with specific, concrete detail (a generic or passing mention "
        "does not count): " + "; ".join(as_sentence(t) for t in texts[:3] if t) + ".",
        600,
    )


def _stricter(e: ProposalEvidence, heavier: bool = False) -> EditRubric | None:
    sat = _saturated(e)
    if not sat:
        return None
    weight = e.max_pos * (2 if heavier else 1)
    ids = ", ".join(c.id for c in sat)
    why = f"every rollout passes {ids}; a stricter judged criterion derived from them (weight {round_weight(weight)})"
    remove: list[str] = []
    if heavier:
        # in place of the saturated criteria, not beside them reweighted: a criterion every rollout passes only
        # shifts every reward alike (an affine change GRPO's advantages do not see)
        rubric_ids = {x.id for x in e.rubric}
        remove = [c.id for c in sat if c.id in rubric_ids]
        if remove:
            why += " in place of the saturated criteria, since the first one left the group flat"
    return EditRubric(
        task_id=e.task_id,
        add=[new_criterion("stricter", _stricter_text([c.text for c in sat]), round_weight(weight))],
        **({"remove": remove} if remove else {}),
        rationale=f"The rubric is too lax ({e.summary}): {why}.",
    )


def _prompt_word_limit(e: ProposalEvidence) -> int | None:
    """The word limit the prompt states, if any (and induced criteria are on)."""
    if not e.settings.induced_criteria:
        return None
    for check, _ in stated_requirements(e.prompt or ""):
        if isinstance(check, WordCount) and check.max is not None:
            return check.max
    return None


def _length_limit(e: ProposalEvidence, factor: float) -> tuple[int, str] | None:
    stated = _prompt_word_limit(e)
    if stated is not None and factor >= 1.0:
        return stated, f"the limit the prompt states ({stated} words)"
    if e.ref_words:
        return math.ceil(factor * e.ref_words), f"{factor:g} × the reference answer's {e.ref_words} words"
    lengths = e.policy_words()
    if lengths:
        med = statistics.median(lengths)
        return math.ceil(med), f"the policy's median length ({med:g} words; the task has no reference answer)"
    return None


def _reachable(e: ProposalEvidence, limit: int) -> tuple[int, str]:
    """``limit``, or, when fewer than a quarter of the task's rollouts are within it, their lower quartile: a length
    bound every rollout breaks splits no group (each commits the pitfall alike, the rewards fall together and the
    group teaches nothing), while one part of the group meets pushes the rest toward it; a later revision tightens it
    toward the reference as the policy shortens. A bound the prompt states is the prompt's and stays. The second item
    says why (empty: unchanged)."""
    lengths = sorted(e.policy_words())
    if _prompt_word_limit(e) is not None or len(lengths) < 4 or sum(n <= limit for n in lengths) * 4 >= len(lengths):
        return limit, ""
    quartile = lengths[(len(lengths) - 1) // 4]
    return quartile, (
        f", raised from {limit} to the rollouts' lower quartile ({quartile} words: no rollout of {len(lengths)} "
        f"met {limit}, and a bound every rollout breaks splits no group)"
    )


def _length_pitfall_edit(e: ProposalEvidence, limit: int, weight: float, why: str) -> EditRubric:
    text = f"The response is longer than {limit} words (padding instead of substance)."
    pitfall = new_criterion("length_pitfall", text, -round_weight(weight), WordCount(min=limit + 1))
    return EditRubric(task_id=e.task_id, add=[pitfall], rationale=why)


def _length_pitfall(e: ProposalEvidence, margin: float | None = None) -> EditRubric | None:
    got = _length_limit(e, margin or e.settings.length_margin)
    if got is None:
        return None
    limit, basis = got
    limit, raised = _reachable(e, limit)
    basis += raised
    weight = 0.5 * e.sum_pos
    # a reference_below_policy failure comes here too (its length remedy): its rollouts counted, no rho
    spurious = e.ev.narrow(SpuriousEvidence)
    n = spurious.n if isinstance(e.ev, SpuriousEvidence) else e.ev.narrow(ReferenceBelowPolicyEvidence).n
    return _length_pitfall_edit(
        e,
        limit,
        weight,
        f"Reward rises with length (Spearman rho {spurious.rho} over {n} rollouts), so padding pays. A "
        f"word_count pitfall above {limit} words ({basis}) with weight -{round_weight(weight)} makes padding cost "
        "reward while an answer of the reference's length keeps its score.",
    )


def _previous_limit(e: ProposalEvidence) -> int | None:
    for a in reversed(e.attempts_with("edit_rubric")):
        for c in a.payload.get("add") or []:
            check = read_check(c.get("check")) if isinstance(c, dict) else None
            if isinstance(check, WordCount) and check.min:
                return check.min - 1
    return None


def _length_revise(e: ProposalEvidence) -> EditRubric | None:
    """After a reject: looser when the reference guard refused it (the trial's typed ``verdict_kind``, never its
    reason's words), the policy's median when the pitfall never fired, else tighter at twice the weight."""
    prev = _previous_limit(e)
    reason = (e.trial.reason if e.trial else None) or ""
    measured = json.dumps(e.trial.measurements.model_dump() if e.trial else {}).lower()
    if prev is None:
        return _length_pitfall(e, 1.0)
    lengths = e.policy_words()
    if e.trial is not None and e.trial.verdict_kind == "reference_guard":
        limit = math.ceil(prev * 1.25)
        weight = 0.5 * e.sum_pos
        why = f"the trial says the reference answer lost score ({reason}); a looser limit ({prev} → {limit} words)"
    elif lengths and max(lengths) <= prev:
        limit = max(1, math.ceil(statistics.median(lengths)))
        weight = 0.5 * e.sum_pos
        why = f"no rollout was longer than {prev} words, so the pitfall never fired; the policy's median {limit}"
    else:
        base = e.ref_words or prev
        limit = min(prev - 1, math.ceil(1.0 * base)) if prev > 1 else prev
        limit, raised = _reachable(e, limit)
        limit = min(limit, prev - 1) if prev > 1 else limit
        weight = 1.0 * e.sum_pos
        why = f"the correlation did not fall enough ({reason or measured[:200]}); a tighter limit ({prev} → {limit}"
        why += f"{raised}) at twice the weight (-{round_weight(weight)})"
    return _length_pitfall_edit(e, limit, weight, f"Revision after the critic's reject: {why}.")


def _padding_pitfall(e: ProposalEvidence) -> EditRubric:
    text = "The response pads its length with repetition, filler or restated points instead of adding substance."
    return EditRubric(
        task_id=e.task_id,
        add=[new_criterion("padding_pitfall", text, -round_weight(0.5 * e.sum_pos))],
        rationale="A length limit did not pass the critic; a judged pitfall against padding targets the hack "
        "itself rather than length.",
    )


def _feature_pitfall(e: ProposalEvidence, heavier: bool = False) -> EditRubric | None:
    """A pitfall against the surface feature the reward tracks, derived from the reference answer: for bullet lines,
    more than the reference has (no list at all where the reference has none, a list being two lines or more); for
    exclamation marks, any where the reference has none (else more than one)."""
    spurious = e.ev.narrow(SpuriousFeatureEvidence)
    feature = spurious.feature or ""
    weight = -round_weight((1.0 if heavier else 0.5) * e.sum_pos)
    if feature == "bullets":
        ref_bullets = count_bullets(e.reference or "") if e.reference else None
        if ref_bullets == 0:
            text = "The response is a list (two or more bullet lines) where a good answer is prose."
            crit = new_criterion("bullet_pitfall", text, weight, BulletCount(min=2))
        else:
            n = max((ref_bullets or 0) + 2, 4)
            text = f"The response uses more than {n - 1} bullet lines (list padding)."
            crit = new_criterion("bullet_pitfall", text, weight, BulletCount(min=n))
    elif feature == "exclamations":
        if e.reference and "!" not in e.reference:  # none where the reference has none
            text = "The response uses an exclamation mark where a good answer states it calmly."
            check = Regex(pattern="!")
        else:
            text = "The response uses more than one exclamation mark (hype instead of content)."
            check = Regex(pattern="!.*!", multiline=False)
        crit = new_criterion("exclamation_pitfall", text, weight, check)
    elif feature:
        cid = f"{re.sub(r'[^a-z0-9_]+', '_', feature.lower())}_pitfall"
        crit = new_criterion(
            cid,
            f"The response games the grader through {feature.replace('_', ' ')} instead of substance.",
            weight,
        )
    else:
        return None
    return EditRubric(
        task_id=e.task_id,
        add=[crit],
        rationale=f"Reward rises with {feature} (rho {spurious.rho}, partial given length "
        f"{spurious.partial_rho_given_length}): a pitfall against it with weight {weight}.",
    )


def _reference_criterion(e: ProposalEvidence) -> EditRubric | None:
    if not e.reference:
        return None
    text = clip_text(f'Covers the key points of this reference answer: "{excerpt(e.reference, 60)}"', 900)
    below = e.ev.narrow(ReferenceBelowPolicyEvidence)
    return EditRubric(
        task_id=e.task_id,
        add=[new_criterion("reference_points", text, round_weight(e.max_pos))],
        rationale=f"The reference answer scores below the policy ({below.reference_reward} vs median "
        f"{below.median_reward}): a criterion for the reference's key points restores the order.",
    )


def _reference_length(e: ProposalEvidence) -> EditRubric | None:
    if not e.ref_words or not e.policy_words():
        return None
    return _length_pitfall(e)


def _writes_longer_than_reference(e: ProposalEvidence) -> bool:
    lengths = e.policy_words()
    return bool(e.ref_words and lengths and statistics.median(lengths) > 1.2 * e.ref_words)


def _reference_first(e: ProposalEvidence) -> EditRubric | None:
    return _reference_length(e) if _writes_longer_than_reference(e) else _reference_criterion(e)


def _reference_second(e: ProposalEvidence) -> EditRubric | None:
    return _reference_criterion(e) if _writes_longer_than_reference(e) else _reference_length(e)


def _reweight_down(e: ProposalEvidence) -> EditRubric | None:
    crit = _target(e)
    if crit is None or crit.weight is None or crit.weight <= 0:
        return None
    new = round_weight(max(0.1, crit.weight * 0.5))
    if new == crit.weight:
        return None
    return EditRubric(
        task_id=e.task_id,
        reweight={crit.id: new},
        rationale=f"Criterion {crit.id} no longer tells responses apart ({e.summary}); reweighting it "
        f"{crit.weight:g} → {new:g} gives the criteria that still discriminate more of the reward.",
    )


def _reword(e: ProposalEvidence, suffix: str, rationale: str) -> EditRubric | None:
    """Reword the failure's criterion by appending ``suffix``; ``rationale`` may use ``{id}``."""
    crit = _target(e)
    if crit is None or not crit.text:
        return None
    text = crit.text.rstrip(".")
    return EditRubric(
        task_id=e.task_id, reword={crit.id: clip_text(f"{text}{suffix}", 600)}, rationale=rationale.format(id=crit.id)
    )


def _reword_stricter(e: ProposalEvidence) -> EditRubric | None:
    return _reword(
        e,
        ", with specific, concrete detail (a passing mention does not count).",
        "Criterion {id} is judged loosely (every rollout passes it); reworded stricter.",
    )


def _reword_checkable(e: ProposalEvidence) -> EditRubric | None:
    return _reword(
        e,
        " (count it only when the response states it explicitly).",
        f"The judge disagrees with itself on criterion {{id}} (mean |Δ| "
        f"{e.ev.narrow(JudgeDisagreementEvidence).mean_abs_delta}); "
        "reworded to be explicitly checkable.",
    )


_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "with",
        "by",
        "as",
        "is",
        "are",
        "be",
        "it",
        "its",
        "this",
        "that",
        "response",
        "answer",
        "mentions",
        "explains",
        "describes",
        "gives",
        "states",
        "includes",
    ]
)


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in words(text) if len(w) > 2 and w.lower() not in _STOP}


def _grounding(e: ProposalEvidence, text: str) -> str | None:
    """The reference answer's sentence that shares the most content words with a criterion's ``text``."""
    if not e.reference:
        return None
    want = _content_words(text)
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", e.reference) if len(s.split()) >= 4]
    if not sentences:
        return None
    return clip_text(max(sentences, key=lambda s: len(want & _content_words(s))), 300)


def _reword_grounded(e: ProposalEvidence) -> EditRubric | None:
    """A saturated criterion, reworded stricter and grounded in what the reference answer actually says."""
    crit = _target(e)
    if crit is None or not crit.text or crit.programmatic:
        return None  # a programmatic check's verdict does not depend on its wording
    quote = _grounding(e, crit.text)
    if quote is None:
        return _reword_stricter(e)
    text = crit.text.rstrip(".")
    return EditRubric(
        task_id=e.task_id,
        reword={crit.id: clip_text(f'{text}, as specifically as the reference answer does: "{quote}"', 600)},
        rationale=f"Every rollout passes criterion {crit.id} ({e.summary}), so it adds the same to every reward and "
        "nothing to the advantage; reworded stricter, grounded in the reference answer's own sentence, so that "
        "only rollouts that say it as specifically pass.",
    )


def _replace_harder(e: ProposalEvidence) -> EditRubric | None:
    """A harder criterion in the saturated one's place, at its weight."""
    crit = _target(e)
    if crit is None or not crit.text or crit.weight is None or crit.weight <= 0:
        return None
    return EditRubric(
        task_id=e.task_id,
        add=[new_criterion(f"{crit.id}_strict", _stricter_text([crit.text]), round_weight(crit.weight))],
        **({"remove": [crit.id]} if crit.in_rubric else {}),
        rationale=f"Criterion {crit.id} is saturated and a stricter wording did not pass the critic: a harder "
        f"criterion in its place (weight {crit.weight:g}), so this part of the rubric tells rollouts apart again.",
    )


def _drop_saturated(e: ProposalEvidence) -> EditRubric | None:
    """Drop the saturated criterion: what it adds to a group's rewards beyond a constant is judge noise."""
    crit = _target(e)
    if crit is None or not crit.in_rubric:
        return None
    if not [c for c in e.positive if c.id != crit.id]:
        return None  # the rubric needs a positive criterion left
    return EditRubric(
        task_id=e.task_id,
        remove=[crit.id],
        rationale=f"Criterion {crit.id} stays saturated and no stricter version passed the critic: what it adds to "
        "a group's rewards beyond a constant is the judge's noise, so drop it.",
    )


def _partial_criterion(e: ProposalEvidence) -> EditRubric | None:
    """A dead criterion: add one the policy can partly meet now, a first step towards it (never towards one the
    task's own reference answer fails)."""
    crit = _target(e)
    if crit is None or not crit.text or crit.weight is None or crit.weight <= 0:
        return None
    own = e.criterion(crit.id)
    if own is not None and e.reference_fails(own):
        return None
    text = f"Makes a clear start on this, even if incomplete: {as_sentence(clip_text(crit.text, 300))}."
    return EditRubric(
        task_id=e.task_id,
        add=[new_criterion(f"{crit.id}_partial", text, round_weight(max(0.1, 0.5 * crit.weight)))],
        rationale=f"No rollout meets criterion {crit.id} (recent means "
        f"{e.ev.narrow(CriterionStreakEvidence).recent_means}), so it adds "
        "nothing to the advantage; a criterion the policy can partly meet now gives the group a spread towards it.",
    )


def _induced_candidates(e: ProposalEvidence) -> list[InducedCheck]:
    """The requirements the prompt states that the rubric does not check and the reference answer passes, those
    that split the task's own rollouts first (a split of one group is not needed: the critic measures the
    candidate on the pooled groups of every task that states the requirement)."""
    if not e.settings.induced_criteria:
        return []
    checked = {criterion_requirement(c) for c in e.rubric}
    rollouts = e.completions()
    found: list[InducedCheck] = []
    for check, text in stated_requirements(e.prompt or ""):
        key = check.requirement_key()
        if key in checked or any(f.check.requirement_key() == key for f in found):
            continue
        try:
            if e.reference is not None and not check.passes(e.reference):
                continue
            passes = sum(check.passes(r) for r in rollouts)
        except ValueError:
            continue
        found.append(InducedCheck(check, text, "prompt", passes, len(rollouts)))
    return sorted(found, key=lambda c: -c.balance)


def _is_unmet(c: InducedCheck) -> bool:
    return c.source == "prompt" and _rarely_met(c.passes, c.total)


def _induced_guided(e: ProposalEvidence) -> EditRubric | None:
    """A requirement the prompt states and no rollout meets (so no check of it can split the uniformly high
    groups): its exact criterion with a hint that states it to part of each group, measured as one on probation."""
    c = next((c for c in _induced_candidates(e) if _is_unmet(c)), None)
    if c is None:
        return None
    cid = f"induced_{c.check.type}"
    if any(x.id == cid for x in e.rubric):
        cid = f"{cid}_{len(e.rubric)}"
    why = f"{c.passes} of the task's {c.total} latest rollouts meet it"
    return _guided(e, c.check, c.text, cid, why, "The rubric does not check what the prompt asks")


def _induced(e: ProposalEvidence, rank: int = 0) -> EditRubric | None:
    """An exact criterion the prompt states (or a bound the reference meets) that splits the rollouts (one the
    policy does not meet yet is :func:`_induced_guided`'s)."""
    found = [c for c in _induced_candidates(e) if not _is_unmet(c)]
    if len(found) <= rank:
        return None
    c = found[rank]
    cid = f"induced_{c.check.type}"
    if any(x.id == cid for x in e.rubric):
        cid = f"{cid}_{len(e.rubric)}"
    what = "the prompt asks for it" if c.source == "prompt" else "the reference answer meets it"
    return EditRubric(
        task_id=e.task_id,
        add=[new_criterion(cid, c.text, round_weight(e.max_pos), c.check)],
        rationale=f"The rubric does not check what the prompt asks ({e.summary}): an exact criterion, {c.text!r}: "
        f"{what}, the reference answer passes it and {c.passes} of {c.total} rollouts do, so it gives the group "
        "a spread the judge cannot blur.",
    )


def _tightened(e: ProposalEvidence) -> EditRubric | None:
    """A saturated bound check, tightened to the bound the reference meets and part of the rollouts miss."""
    crit = e.criterion(e.ev.narrow(CriterionStreakEvidence).criterion_id)
    if not e.settings.induced_criteria or crit is None or crit.check is None or crit.weight <= 0:
        return None
    old = crit.check
    new = tightened_bound(old, e.reference, e.completions())
    if new is None or not isinstance(old, UpperBound):
        return None
    text = f"{crit.text.rstrip('.')} (at most {new.max}, the bound the reference answer meets)"
    return EditRubric(
        task_id=e.task_id,
        remove=[crit.id],
        add=[new_criterion(f"{crit.id}_tight", clip_text(text, 600), round_weight(crit.weight), new)],
        rationale=f"Every rollout passes the bound of criterion {crit.id} ({old.max}); tightened to "
        f"{new.max}, which the reference answer meets and part of the rollouts miss.",
    )


UNMET_SHARE = 0.1
"""A stated requirement met by at most this share of the policy's rollouts is *unmet*: a check of it alone would split
hardly any group (a rate ``p`` of breaking it splits ``1 - p**G - (1-p)**G`` of groups of ``G``), so it is proposed
with a hint that states it to part of the group (``EditRubric.guide_fraction``; docs/design.md §4)."""
GUIDE_FRACTION = 0.5
"""The share of a group an unmet requirement's hint reaches (half: the other half keeps the plain prompt)."""


def _rarely_met(met: float, total: float, least: int = 4) -> bool:
    """Whether ``met`` of ``total`` rollouts (at least ``least``) is at most :data:`UNMET_SHARE`: a requirement the
    policy does not meet yet."""
    return total >= least and met <= UNMET_SHARE * total


def _unmet(e: ProposalEvidence, check: Check, key: str) -> str | None:
    """Why the policy (almost) never meets ``check`` (of requirement ``key``), or None when it does or nothing says:
    at most :data:`UNMET_SHARE` of the task's rollouts the proposer read (at least 4) pass it, or an earlier exact
    check of the same requirement was refused on pooled rollouts of which at most that share passed it, or its
    pooled test is pending with fewer rollouts meeting it than breaking it (an attempt the critic sends back under
    ``evolver.graph.revise_unmet_pending``)."""
    rollouts = e.completions()
    try:
        passes = sum(check.passes(r) for r in rollouts)
    except ValueError:
        return None
    if _rarely_met(passes, len(rollouts)):
        return f"{passes} of the task's {len(rollouts)} latest rollouts meet it"
    for a in e.attempts:
        split = a.trial.measurements.split if a.trial is not None and not a.trial.accepted else None
        if split is None or not split.rollouts or split.broken is None or a.interface != "rubric_criteria":
            continue
        n, broken = split.rollouts, split.broken
        adds = [read_check(c.get("check")) for c in (a.payload.get("add") or []) if isinstance(c, dict)]
        if not any(c is not None and c.requirement_key() == key for c in adds):
            continue
        if a.trial.verdict_kind == "pending" and mostly_broken(broken, n):
            return f"the pooled test of an exact check of it is pending: {n - broken:g} of {n:g} rollouts met it"
        if _rarely_met(n - broken, n, 1):
            return f"an exact check of it was refused: {n - broken:g} of {n:g} pooled rollouts met it"
    return None


def _stated(e: ProposalEvidence, key: str) -> tuple[Check, str, str] | None:
    """The requirement of ``key`` the task's prompt states and its rubric does not check yet: its check, text and a
    free criterion id (None: not stated, or checked already)."""
    for check, text in stated_requirements(e.prompt or ""):
        if check.requirement_key() != key:
            continue
        if any(criterion_requirement(c) == key for c in e.rubric):
            return None  # checked already (a repair landed since the audit)
        cid = f"req_{check.type}"
        if any(x.id == cid for x in e.rubric):
            cid = f"{cid}_{len(e.rubric)}"
        return check, text, cid
    return None


def _requirement(e: ProposalEvidence) -> EditRubric | None:
    """The requirement the rubric audit found the prompt states and the rubric does not check (the failure's
    ``requirement_key``), as this task's own exact criterion; the trainer widens it to every task that states it.
    Not for a requirement the policy does not meet yet (:func:`_unmet`): that is :func:`_requirement_guided`'s."""
    key = e.ev.narrow(UncheckedRequirementEvidence).requirement_key
    found = _stated(e, key or "")
    if found is None or _unmet(e, found[0], key or ""):
        return None
    check, text, cid = found
    return EditRubric(
        task_id=e.task_id,
        add=[new_criterion(cid, text, round_weight(e.max_pos), check)],
        rationale=f"The prompt states a requirement its rubric does not check ({e.summary}): {text!r}, exact, "
        "weighted like the heaviest criterion, for every task whose prompt states it.",
    )


def _guided(e: ProposalEvidence, check: Check, text: str, cid: str, why: str, what: str) -> EditRubric:
    return EditRubric(
        task_id=e.task_id,
        add=[new_criterion(cid, text, round_weight(e.max_pos), check)],
        guide_fraction=GUIDE_FRACTION,
        rationale=f"{what} ({e.summary}): {text!r}, and the policy does not meet it yet ({why}), so a check alone "
        f"would split no group. The check and a hint that states it to {GUIDE_FRACTION:.0%} of each group are one "
        "update: the guided members that meet it give the group a spread, measured on probation.",
    )


def _requirement_guided(e: ProposalEvidence) -> EditRubric | None:
    """The audit's requirement when the policy does not meet it yet: its exact criterion with a hint that states it
    to part of each group (``guide_fraction``), committed and measured as one on probation."""
    key = e.ev.narrow(UncheckedRequirementEvidence).requirement_key or ""
    found = _stated(e, key)
    why = _unmet(e, found[0], key) if found is not None else None
    if found is None or why is None:
        return None
    check, text, cid = found
    return _guided(e, check, text, cid, why, "The prompt states a requirement its rubric does not check")


def _fade_hint(e: ProposalEvidence) -> EditRubric | None:
    """A hint the rubric states, outgrown (the unguided members meet what it states alone): the same hint for half as
    many members, or none when one was guided; the criteria stay. Widened to every task whose rubric states the same
    hint, measured on their unguided members (``hint_met_rate``)."""
    view = (e.task.model_extra or {}) if e.task is not None else {}
    hint = view.get("rubric_hint") or {}
    ev = e.ev.narrow(ScaffoldOutgrownEvidence)
    guided, size = int(number(ev.guided) or 0), int(number(ev.group_size) or 0)
    if not ev.checks or not hint.get("text") or guided < 1 or size < 2:
        return None
    keep = guided // 2
    met = ", ".join(f"{c} {v[-1]:g}" for c, v in ev.plain_met.items() if v and v[-1] is not None)
    return EditRubric(
        task_id=e.task_id,
        fade_to=keep / size,
        rationale=f"The {size - guided} unguided members meet the criteria the rubric states as a hint without it "
        f"(mean verdicts {met}): the hint fades from {guided} to {keep} of {size} members and the criteria stay, so "
        "fewer completions are sampled under a prompt the policy will not be asked at test time.",
    )


def _drop_suspects(e: ProposalEvidence) -> EditRubric | None:
    """Remove the criteria the task's own reference answer fails (positive) or commits (pitfalls): each pays for what
    a good answer does not do (docs/design.md §4, "The reference as witness"). Exact checks only: the judge's verdict
    on one text is too noisy to remove a judged criterion by (it stays evidence: no hint aims at it). For a failure
    that names one criterion
    (the witness's finding, a dead or saturated criterion), that one only, when it is suspect; else every suspect.
    The trainer widens the removal to every task whose rubric has an exact criterion of the same requirement that its
    own reference fails. At least one positive criterion stays."""
    named = e.ev.narrow(ReferenceFailsEvidence).criterion_id or e.ev.narrow(CriterionStreakEvidence).criterion_id
    suspects = [c for c in e.suspects() if c.check is not None]  # a judged verdict on one text is the judge's noise
    if named is not None:
        suspects = [c for c in suspects if c.id == named]
    if not suspects or not any(c.weight > 0 and c not in suspects for c in e.rubric):
        return None
    ids = [c.id for c in suspects]
    verdicts = ", ".join(f"{c.id} {e.reference_verdicts.get(c.id, 'exact')}" for c in suspects)
    return EditRubric(
        task_id=e.task_id,
        remove=ids,
        rationale=f"The task's own reference answer fails (or, for a pitfall, commits) {', '.join(ids)} (its verdicts: "
        f"{verdicts}): the criterion pays for what a good answer does not do, so it is removed ({e.summary}); where it "
        "is an exact check, from every task whose reference fails its own criterion of the same requirement.",
    )


def _reference_term(e: ProposalEvidence, rank: int = 0) -> EditRubric | None:
    """A lax rubric tightened from the reference answer: an exact check of a key term the reference states and part
    of the rollouts omit (:func:`~harnessrl.interfaces.induction.reference_terms`: the one that splits them most
    evenly; ``rank`` 1: the next), weighted like the heaviest criterion, for every task of the group of the data, each
    with its own reference's term. One check a repair: the critic's power rule pools the rate at which the rollouts
    break the checks an edit adds, and a rollout rarely states every term at once. A task is retired as solved only
    when no such term is left that the rollouts omit."""
    if not e.settings.induced_criteria or not e.reference:
        return None
    existing = [c.check for c in e.rubric if c.check is not None]
    found = reference_terms(e.prompt or "", e.reference, e.completions(), existing, n=REFERENCE_TERMS)
    if len(found) <= rank:
        return None
    c = found[rank]
    term = c.check.phrases[0] if isinstance(c.check, Contains) else c.text  # reference_terms' checks are Contains
    return EditRubric(
        task_id=e.task_id,
        add=[new_criterion(f"reference_term_{rank + 1}", c.text, round_weight(e.max_pos), c.check)],
        rationale=f"Every rollout satisfies the rubric ({e.summary}), but the reference answer states content the "
        f"rollouts omit: an exact check of its key term '{term}' ({c.passes} of {c.total} rollouts "
        "state it) makes the rubric ask for it, so the group tells answers apart again instead of the task being "
        "retired as solved.",
    )


REFERENCE_TERMS = 3
"""Most key terms of the reference answer one repair of a lax rubric asks for."""


def _saturated_first(e: ProposalEvidence) -> EditRubric | None:
    crit = _target(e)
    return _tightened(e) if crit is not None and crit.programmatic else _reword_grounded(e)


REMEDIES: dict[str, Callable[[ProposalEvidence], EditRubric | None]] = {
    "requirement": _requirement,
    "requirement_guided": _requirement_guided,
    "induced_guided": _induced_guided,
    "induced": _induced,
    "induced_next": lambda e: _induced(e, rank=1),
    "tightened_or_reworded": _saturated_first,
    "stricter": _stricter,
    "stricter_more": lambda e: _stricter(e, heavier=True),
    "length_pitfall": _length_pitfall,
    "length_revise": _length_revise,
    "padding_pitfall": _padding_pitfall,
    "feature_pitfall": _feature_pitfall,
    "feature_heavier": lambda e: _feature_pitfall(e, heavier=True),
    "reference_first": _reference_first,
    "reference_second": _reference_second,
    "reword_grounded": _reword_grounded,
    "replace_harder": _replace_harder,
    "drop": _drop_saturated,
    "partial": _partial_criterion,
    "reword_checkable": _reword_checkable,
    "reweight_down": _reweight_down,
    "fade_hint": _fade_hint,
    "drop_suspect": _drop_suspects,
    "reference_term": _reference_term,
    "reference_term_next": lambda e: _reference_term(e, rank=1),
}
PLAYBOOK: dict[str, tuple[str, ...]] = {
    "unchecked_requirement": ("requirement", "requirement_guided"),
    "reference_fails_criterion": ("drop_suspect",),
    "non_discriminative_high": (
        "induced",
        "induced_guided",
        "induced_next",
        "reference_term",
        "reference_term_next",
        "stricter",
        "stricter_more",
    ),
    "non_discriminative_low": ("drop_suspect",),
    "spurious_length": ("length_pitfall", "length_revise", "padding_pitfall"),
    "spurious_feature": ("drop_suspect", "feature_pitfall", "feature_heavier", "padding_pitfall"),
    "reference_below_policy": ("drop_suspect", "reference_first", "reference_second", "length_revise"),
    "criterion_saturated": ("tightened_or_reworded", "induced", "reference_term", "replace_harder", "drop"),
    "criterion_dead": ("drop_suspect", "partial"),
    "judge_disagreement": ("reword_checkable", "reweight_down"),
    "scaffold_outgrown": ("fade_hint",),
}
"""The rubric's remedies for each failure kind, best first (any other kind: a stricter criterion)."""


def suggest_edits(evidence: ProposalEvidence) -> list[Suggestion]:
    """The rubric's remedies for the failure's kind, best first (:data:`PLAYBOOK`), each built from the evidence."""
    order = PLAYBOOK.get(evidence.failure.kind, ("stricter",))
    return suggestions(evidence, [(tag, REMEDIES[tag]) for tag in order])
