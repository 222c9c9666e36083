"""Rollout guidance: a hint for part of each group, and the sampling temperature, per task or domain.

When every rollout of a task fails the same way, GRPO learns nothing from it. Guiding *part* of the
group (a hint or scaffold appended to the prompt) lets some rollouts succeed, so the group becomes
discriminative again; the rest of the group stays unguided, so the policy is still trained on the
plain prompt. A rule set for a task overrides its domain's rule. Which members of a group are guided
is fixed by their position in the group (the first ``k``), so every process agrees on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, model_validator

from harnessrl.data.schema import Criterion, Task, task_group
from harnessrl.interfaces.base import (
    AppliedUpdate,
    HarnessContext,
    Interface,
    InterfaceUpdate,
    Row,
    Signature,
    Suggestion,
    suggestions,
)
from harnessrl.interfaces.evidence import ProposalEvidence, TrialView, as_sentence, clip_text, excerpt, number
from harnessrl.records.evidence import CriterionStreakEvidence, ScaffoldOutgrownEvidence

if TYPE_CHECKING:
    from harnessrl.critic.acceptance import Measured
    from harnessrl.critic.trials import Trial

__all__ = [
    "CoveredHint",
    "GuidanceRule",
    "RolloutGuidance",
    "RolloutGuidanceState",
    "SetGuidance",
    "guided_count",
    "with_hint",
]

MAX_COVER = 16
"""Most tasks a hint reaches beyond its own (a group of the data can be a whole domain of a public set)."""

HINT_TEMPLATE = "\n\n(Hint: {text})"


class GuidanceRule(BaseModel):
    """Guidance in force for a task or a domain."""

    text: str | None = None
    fraction: float = Field(default=0.0, ge=0, le=1)
    temperature: float | None = Field(default=None, gt=0, le=3)


class CoveredHint(BaseModel):
    """A hint's instance for one more task of the same group of the data, built from that task's own rubric (and
    reference answer)."""

    task_id: str = Field(min_length=1)
    text: str = Field(min_length=1, max_length=2000)


class SetGuidance(InterfaceUpdate):
    """Guide part of each rollout group for a task or a whole domain: ``text`` is a hint appended to the
    prompt of the first ``fraction`` of the group (the rest stays unguided, so the policy still learns
    the plain prompt); ``temperature`` overrides the sampling temperature for the whole group (higher
    explores more). Use it when a task's rollouts all fail alike (uniformly low rewards). Set
    ``text`` to null and ``fraction`` to 0 to remove guidance."""

    interface: Literal["rollout_guidance"] = "rollout_guidance"
    scope: Literal["task", "domain"] = "task"
    target: str = Field(min_length=1, description="The task id or the domain name.")
    text: str | None = Field(default=None, max_length=2000, description="The hint shown to guided rollouts.")
    fraction: float = Field(default=0.5, ge=0, le=1, description="Share of each group that sees the hint.")
    temperature: float | None = Field(default=None, gt=0, le=3, description="Sampling temperature override.")
    cover: list[CoveredHint] = Field(
        default_factory=list,
        description="Leave empty: the trainer adds this hint's instances for the other tasks of the task's group.",
    )

    @model_validator(mode="after")
    def _text_with_fraction(self):
        if self.fraction > 0 and not (self.text and self.text.strip()):
            raise ValueError("a guidance fraction > 0 needs a hint text")
        return self

    def removes(self) -> bool:
        """Whether this update removes the rule for its target (no hint and no temperature)."""
        return self.fraction == 0 and self.temperature is None

    def rule(self, task_id: str | None = None) -> GuidanceRule:
        """The rule it puts in force for its target, or for ``task_id`` when that is a task it covers."""
        text = next((c.text for c in self.cover if c.task_id == task_id), self.text) if task_id else self.text
        return GuidanceRule(text=text, fraction=self.fraction if text else 0.0, temperature=self.temperature)

    def covered(self) -> list[str]:
        return [c.task_id for c in self.cover]


class RolloutGuidanceState(BaseModel):
    per_task: dict[str, GuidanceRule] = Field(default_factory=dict)
    per_domain: dict[str, GuidanceRule] = Field(default_factory=dict)
    default_temperature: float = 1.0
    version: int = 0
    history: list[AppliedUpdate] = Field(default_factory=list)


def guided_count(group_size: int, fraction: float) -> int:
    """How many of a group get the hint: at least one when fraction > 0, never the whole group."""
    if fraction <= 0 or group_size < 2:
        return 0
    return min(group_size - 1, max(1, math.floor(fraction * group_size + 0.5)))


def with_hint(messages: list[dict[str, str]], text: str) -> list[dict[str, str]]:
    """``messages`` with ``text`` appended to the last user turn as a hint (a copy): how every hint reaches a
    guided member, this interface's and a rubric edit's that states its new checks (docs/design.md §4)."""
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    out = [dict(m) for m in messages]
    out[last]["content"] += HINT_TEMPLATE.format(text=text.strip())
    return out


class RolloutGuidance(Interface):
    """The rollout-guidance interface. With no update applied no prompt changes (plain GRPO)."""

    name = "rollout_guidance"
    update_type = SetGuidance
    builder_tool = "set_guidance"
    answers = ("non_discriminative_low", "criterion_saturated", "criterion_dead", "scaffold_outgrown")
    hint_for = ("non_discriminative_low", "criterion_dead", "scaffold_outgrown")
    evolver_text = (
        "a hint for part of each rollout group (and the sampling temperature), so some rollouts succeed "
        "and the group tells answers apart again. Blame it when every rollout fails alike (uniformly "
        "low) although the task is within reach, and when a hint outlived its use (scaffold_outgrown: the "
        "unguided members give signal alone), so that it fades."
    )

    def __init__(
        self, default_temperature: float = 1.0, domains: set[str] | None = None, tasks: Mapping[str, Task] | None = None
    ):
        self.state = RolloutGuidanceState(default_temperature=default_temperature)
        self.domains = domains
        self.tasks = dict(tasks or {})

    @property
    def version(self) -> int:
        return self.state.version

    def rule_for(self, task: Task, overlay: SetGuidance | None = None) -> GuidanceRule | None:
        """The rule in force for ``task`` (a task rule beats a domain rule); ``overlay`` previews a candidate
        exactly as ``apply`` would put it in force (a domain candidate does not override a task rule; a
        removal uncovers the domain rule)."""
        per_task = self.state.per_task.get(task.id)
        per_domain = self.state.per_domain.get(task.domain)
        if overlay is not None:
            new = None if overlay.removes() else overlay.rule(task.id)
            if overlay.scope == "task" and (overlay.target == task.id or task.id in overlay.covered()):
                per_task = new
            elif overlay.scope == "domain" and overlay.target == task.domain:
                per_domain = new
        return per_task or per_domain

    def temperature_for(self, task: Task, overlay: SetGuidance | None = None) -> float:
        rule = self.rule_for(task, overlay)
        return rule.temperature if rule and rule.temperature else self.state.default_temperature

    def prompt_for(
        self, task: Task, member: int, group_size: int, overlay: SetGuidance | None = None
    ) -> tuple[list[dict[str, str]], bool]:
        """Chat messages for group member ``member`` of ``task``, and whether they carry the hint."""
        messages = task.messages()
        rule = self.rule_for(task, overlay)
        if rule is None or not rule.text or member >= guided_count(group_size, rule.fraction):
            return messages, False
        return with_hint(messages, rule.text), True

    def apply(self, update: SetGuidance, step: int, candidate_id: str | None = None) -> int:
        if update.scope == "task" and self.tasks and update.target not in self.tasks:
            raise ValueError(f"unknown task id {update.target!r}")
        if update.scope == "domain" and self.domains is not None and update.target not in self.domains:
            raise ValueError(f"unknown domain {update.target!r}; known: {sorted(self.domains)}")
        table = self.state.per_task if update.scope == "task" else self.state.per_domain
        for target in [update.target, *update.covered()]:
            if update.removes():
                table.pop(target, None)
            else:
                table[target] = update.rule(target)
        self.state.version += 1
        self.state.history.append(
            AppliedUpdate(version=self.state.version, step=step, update=update.model_dump(), candidate_id=candidate_id)
        )
        return self.state.version

    def to_dict(self) -> dict:
        return self.state.model_dump()

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], domains: set[str] | None = None, tasks: Mapping[str, Task] | None = None
    ) -> RolloutGuidance:
        obj = cls.__new__(cls)
        obj.state = RolloutGuidanceState.model_validate(data)
        obj.domains = domains
        obj.tasks = dict(tasks or {})
        return obj

    # ------------------------------------------------------------------ as a harness interface
    @classmethod
    def create(cls, ctx: HarnessContext) -> RolloutGuidance:
        return cls(default_temperature=ctx.temperature, domains=ctx.domains, tasks=ctx.tasks)

    @classmethod
    def restore(cls, data: Mapping[str, Any], ctx: HarnessContext) -> RolloutGuidance:
        return cls.from_dict(data, domains=ctx.domains, tasks=ctx.tasks)

    @property
    def history(self) -> list[AppliedUpdate]:
        return self.state.history

    def shape(self, task: Task, member: int, group_size: int, row: Row, overlay: SetGuidance | None = None) -> Row:
        """The hint for the first members of the group, and the group's temperature."""
        messages, guided = self.prompt_for(task, member, group_size, overlay)
        return Row(messages, row.guided or guided, row.generation).with_generation(
            temperature=self.temperature_for(task, overlay)
        )

    def targets(self, update: SetGuidance) -> list[Task]:
        """The task (and those it covers), or the tasks of the domain, the update can change (ValueError: unknown)."""
        if update.scope == "task":
            for tid in [update.target, *update.covered()]:
                if tid not in self.tasks:
                    raise ValueError(f"unknown task id {tid!r}")
            return [self.tasks[tid] for tid in [update.target, *update.covered()]]
        domains = sorted(self.domains or {t.domain for t in self.tasks.values()})
        if update.target not in domains:
            raise ValueError(f"unknown domain {update.target!r}; known: {domains}")
        return [t for t in self.tasks.values() if t.domain == update.target]

    def describe(self, update: SetGuidance) -> str:
        more = f" and {len(update.cover)} more of its group" if update.cover else ""
        return f"{update.scope} {update.target!r}{more}"

    def preview(self, update: SetGuidance, step: int) -> dict[str, Any]:
        scope = self.targets(update)
        changed = [t for t in scope if self.rule_for(t) != self.rule_for(t, overlay=update)]
        if not changed:
            why = (
                "every task of that domain has its own task rule, which a domain rule does not override"
                if update.scope == "domain" and scope
                else "the same guidance is already in force"
            )
            raise ValueError(f"it changes nothing ({why})")
        before, after = self.rule_for(changed[0]), self.rule_for(changed[0], overlay=update)
        return {
            "tasks_affected": len(changed),
            "task_ids": [t.id for t in changed[:20]],
            "rule_before": None if before is None else before.model_dump(mode="json"),
            "rule_after": None if after is None else after.model_dump(mode="json"),
        }

    def target_state(self, update: SetGuidance) -> Any:
        if update.scope == "task":
            tids = [update.target, *update.covered()]
            domains = sorted({self.tasks[t].domain for t in tids if t in self.tasks})
        else:
            tids = [t.id for t in self.tasks.values() if t.domain == update.target]
            domains = [update.target]

        def dump(rule: GuidanceRule | None) -> Any:
            return None if rule is None else rule.model_dump(mode="json")

        return {
            "task": {t: dump(self.state.per_task.get(t)) for t in tids},
            "domain": {d: dump(self.state.per_domain.get(d)) for d in domains},
        }

    def widen(self, update: SetGuidance) -> SetGuidance:
        """A first hint for a task (remedies ``guide`` and ``guide_more``), extended to the other tasks of its group
        of the data (:func:`~harnessrl.data.schema.task_group`: a family, a tag, a domain) that have no guidance
        yet, at most :data:`MAX_COVER`, each with the same remedy's hint built from its own rubric (and reference
        answer): the failure a family shares (a format the policy never tries) is answered on every task of it, not
        one draw at a time. A fade, a removal, a domain rule or another remedy's hint stays the task's own; what an
        evolver wrote in ``cover`` is not trusted (computed here, afresh)."""
        update = update.model_copy(update={"cover": [], "signature": None})
        build = _GROUP_HINTS.get(update.remedy or "")
        source = self.tasks.get(update.target)
        if build is None or update.scope != "task" or source is None or not update.text or update.fraction <= 0:
            return update
        group = task_group(source)
        cover = []
        for task in sorted(self.tasks.values(), key=lambda t: t.id):
            if task.id == source.id or task_group(task) != group or self.rule_for(task) is not None:
                continue
            text = build(task, update.text)
            if text:
                cover.append(CoveredHint(task_id=task.id, text=text))
            if len(cover) >= MAX_COVER:
                break
        if not cover:
            return update
        sig = Signature(kind="group", key=group, tasks=[source.id, *(c.task_id for c in cover)])
        return update.model_copy(update={"cover": cover, "signature": sig})

    def reverting(self, update: SetGuidance) -> list[SetGuidance]:
        """Per target of ``update`` (its own and those it covers), the rule in force there now at its scope, or its
        removal: applied in order they put back what ``update`` replaces."""
        table = self.state.per_task if update.scope == "task" else self.state.per_domain
        out = []
        for target in [update.target, *update.covered()]:
            old = table.get(target) or GuidanceRule()
            hint = old.text if old.fraction > 0 else None
            out.append(
                SetGuidance(
                    scope=update.scope,
                    target=target,
                    text=hint,
                    fraction=old.fraction if hint else 0.0,
                    temperature=old.temperature,
                    remedy="revert",
                    rationale=f"probation ended: back to the rule before {update.remedy or 'the hint'}",
                )
            )
        return out

    def fades(self, update: SetGuidance) -> bool:
        """Whether ``update`` only takes guidance away: on each task it changes, a hint in force now is shown to
        a smaller share of the group (the same text) or to none, at the same temperature."""
        changed = [t for t in self.targets(update) if self.rule_for(t) != self.rule_for(t, overlay=update)]
        if not changed:
            return False
        for task in changed:
            before, after = self.rule_for(task), self.rule_for(task, overlay=update)
            if before is None or not before.text or before.fraction <= 0:
                return False
            if self.temperature_for(task) != self.temperature_for(task, overlay=update):
                return False
            hinted = after is not None and bool(after.text) and after.fraction > 0
            if hinted and (after.text != before.text or after.fraction >= before.fraction):  # type: ignore[union-attr]
                return False
        return True

    def trial(self, update: SetGuidance, trial: Trial) -> Measured:
        """A hint is measured on probation (``trials.guidance_trial: in_group``, the default; :meth:`Trial.probation`:
        the training groups after it, nothing generated). With ``arms``, and for a candidate that fades a hint: two
        arms of fresh rollouts on the task, or on up to two tasks of the domain (recently flat ones first), the
        prompts built now and with the candidate (:meth:`Trial.rollout_arms`), graded as the loss sees them (under
        the task's plain prompt).
        A candidate that only fades a hint is measured for non-inferiority (docs/design.md §4): it need not raise
        the signal, only keep it, within the metric's smallest effect worth a change."""
        try:
            targets = self.targets(update)
        except ValueError as e:
            trial.reject(f"invalid candidate: {e}")
        fades = self.fades(update)
        m = trial.measurements
        m.scope, m.target, m.fades = update.scope, update.target, fades
        if trial.config.guidance_trial == "in_group" and not fades and update.fraction > 0 and update.text:
            return trial.probation(targets, describe=self.describe(update))
        got = trial.rollout_arms(targets, describe=self.describe(update))
        if fades:
            got.margin = trial.config.signal.threshold(trial.metric)
        return got

    def summary(self) -> dict[str, Any]:
        return {
            **super().summary(),
            "task_rules": sorted(self.state.per_task),
            "domain_rules": sorted(self.state.per_domain),
        }

    def task_view(self, task: Task, step: int) -> dict[str, Any]:
        rule = self.rule_for(task)
        scope = "task" if task.id in self.state.per_task else "domain" if rule is not None else None
        return {
            "guidance": None if rule is None else rule.model_dump(mode="json"),
            "guidance_scope": scope,
            "temperature": self.temperature_for(task),
        }

    # ------------------------------------------------------------------ its remedies
    @classmethod
    def suggest(cls, evidence: ProposalEvidence) -> list[Suggestion]:
        """A hint for half of each group built from what the rollouts fail (a dead criterion: quoting it; a
        pitfall every rollout commits: to avoid it), then, after the critic's reject, the same or a more
        explicit hint for a larger share of the group. A hint that outlived its use (``scaffold_outgrown``):
        the same hint for half as many members, or none (:func:`_fade`)."""
        if evidence.failure.kind == "scaffold_outgrown":
            return suggestions(evidence, [("fade", _fade)])
        first = {
            "criterion_saturated": ("avoid", _avoid_hint),
            "criterion_dead": ("guide_criterion", _guide_criterion),
        }.get(evidence.failure.kind, ("guide", _guide))
        return suggestions(evidence, [first, ("guide_more", _guide_more)])


# ---------------------------------------------------------------------------------------------- remedies
#
# Uniformly low or a dead criterion: a hint built from the failing criteria's text (positive criteria with a
# mean verdict < 0.5; a dead criterion: quoting it), for half of each group -> after a reject the guided share
# rises by 0.25 and the measurements decide the rest: a guided arm that still showed no spread also gets a
# more explicit hint (the start of the reference answer) and temperature 1.3; one that helped keeps its hint.
# A pitfall every rollout commits: a hint to avoid it.


def _reference_fails_check(task: Task, criterion: Criterion) -> bool:
    """Whether ``task``'s own reference answer fails ``criterion``'s exact check (judged: not known here)."""
    return (
        bool(task.reference_answer)
        and criterion.check is not None
        and criterion.check.evaluate(task.reference_answer) < 1
    )


def _task_hint(task: Task) -> str | None:
    """A task's first hint without rollouts: its positive criteria, heaviest first (what ``_failing_hint`` gives
    when every criterion fails), never one whose exact check the task's own reference answer fails."""
    positive = sorted(
        (c for c in task.rubric if c.weight > 0 and not _reference_fails_check(task, c)), key=lambda c: -c.weight
    )
    texts = [as_sentence(clip_text(c.text, 200)) for c in positive if c.text]
    return clip_text("A good answer must meet each of these: " + "; ".join(texts) + ".", 600) if texts else None


def _task_hint_explicit(task: Task, source_text: str) -> str | None:
    """The explicit hint for ``task``: its first hint with the start of its own reference answer, when the source's
    hint quoted its reference."""
    hint = _task_hint(task)
    if hint and task.reference_answer and "A good answer could start" in source_text:
        return clip_text(f'{hint} A good answer could start: "{excerpt(task.reference_answer, 30)}"', 1000)
    return hint


_GROUP_HINTS = {
    "guide": lambda task, text: _task_hint(task),
    "guide_more": _task_hint_explicit,
}
"""The remedies whose hint reaches the task's group, each with how the hint is built for another task."""


def _hint_targets(e: ProposalEvidence) -> list[Criterion]:
    """The positive criteria a hint may aim at: never one the task's own reference answer fails (a suspect criterion
    pays for what a good answer does not do; guiding toward it pushes the policy toward the spurious reward)."""
    return [c for c in e.positive if not e.reference_fails(c)]


def _committed_pitfalls(e: ProposalEvidence) -> list[Criterion]:
    """The pitfalls most of the rollouts commit (mean verdict at least 0.5) and the reference answer does not."""
    means = e.criterion_means()
    return [c for c in e.rubric if c.weight < 0 and means.get(c.id, 0.0) >= 0.5 and not e.reference_fails(c)]


def _failing_hint(e: ProposalEvidence) -> str | None:
    """'A good answer must meet each of these: ...': the positive criteria the rollouts fail (all of them
    when none fails), heaviest first; none the reference answer fails (:func:`_hint_targets`). When most rollouts
    commit a pitfall the reference avoids (a length bound every rollout breaks), the hint is to avoid it: that is what
    makes the group flat, and a hint toward the positive criteria would push the other way (toward what a spurious
    reward pays for)."""
    committed = _committed_pitfalls(e)
    if committed:
        texts = [as_sentence(clip_text(c.text, 200)) for c in sorted(committed, key=lambda c: c.weight) if c.text]
        return clip_text("A good answer must avoid each of these: " + "; ".join(texts) + ".", 600)
    means = e.criterion_means()
    targets = _hint_targets(e)
    if targets != e.positive and not any(means.get(c.id, 0.0) < 0.5 for c in targets):
        return None  # what the rollouts fail is only what the reference fails too: the rubric's to fix
    failing = [c for c in targets if means.get(c.id, 0.0) < 0.5] or targets
    failing = sorted(failing, key=lambda c: -c.weight)
    texts = [as_sentence(clip_text(c.text, 200)) for c in failing if c.text]
    if not texts:
        return None
    return clip_text("A good answer must meet each of these: " + "; ".join(texts) + ".", 600)


def _guide(e: ProposalEvidence) -> SetGuidance | None:
    hint = _failing_hint(e)
    if not hint:
        return None
    means = e.criterion_means()
    committed = [f"{c.id} (committed by mean {means[c.id]:.2f})" for c in _committed_pitfalls(e)]
    failing = [f"{c.id} (mean verdict {means[c.id]:.2f})" for c in _hint_targets(e) if means.get(c.id, 1) < 0.5]
    if committed:  # the hint is to avoid them (:func:`_failing_hint`)
        why = f"the pitfalls most rollouts commit, {', '.join(committed)}"
    else:
        why = f"failing criteria {', '.join(failing)}" if failing else "the task's criteria"
    return SetGuidance(
        scope="task",
        target=e.task_id,
        text=hint,
        fraction=0.5,
        rationale=f"Every rollout fails alike ({e.summary}); a hint built from {why} for half of each group should "
        "let some rollouts succeed, so the group becomes discriminative.",
    )


def _guide_more(e: ProposalEvidence) -> SetGuidance | None:
    """After a reject: a larger guided share; a more explicit hint (the reference answer's start) and a higher
    temperature when the guided arm still showed no spread."""
    prev = e.attempts_with("set_guidance")
    last = prev[-1].payload if prev else {}
    hint = last.get("text") or _failing_hint(e)
    if not hint:
        return None
    fraction = min(0.875, (number(last.get("fraction")) or 0.5) + 0.25)
    trial = e.trial or TrialView()
    spread, metric = trial.candidate, trial.metric or "metric"
    text, temperature = hint, None
    if spread is None or spread <= 1e-6:
        if e.reference:
            text = clip_text(f'{hint} A good answer could start: "{excerpt(e.reference, 30)}"', 1000)
        temperature = 1.3
        why = (
            f"the guided arm still showed no spread ({metric} {spread}): a more explicit hint"
            + (" (with the start of the reference answer)" if e.reference else "")
            + ", a higher temperature and a larger guided share"
        )
    else:
        why = (
            f"the hint helped ({metric} {spread:.3f}, improvement {trial.improvement}) but not surely "
            "enough: the same hint for a larger share of the group"
        )
    reason = "no reason" if trial.reason is None else trial.reason
    rationale = f"Revision after the critic's reject ({reason}): {why} ({fraction:g})."
    extra = {} if temperature is None else {"temperature": temperature}
    return SetGuidance(scope="task", target=e.task_id, text=text, fraction=fraction, rationale=rationale, **extra)


def _criterion_text(e: ProposalEvidence) -> str | None:
    """The text of the failure's criterion (from its evidence, else from the rubric)."""
    streak = e.ev.narrow(CriterionStreakEvidence)
    crit = e.criterion(streak.criterion_id)
    text = streak.criterion_text or (crit.text if crit else None)
    return str(text).rstrip(".") if text else None


def _criterion_hint(e: ProposalEvidence, hint: str, why: tuple[str, str]) -> SetGuidance:
    """A hint about the failure's criterion for half of each group; ``why`` follows the criterion's id and its
    recent means in the rationale."""
    streak = e.ev.narrow(CriterionStreakEvidence)
    return SetGuidance(
        scope="task",
        target=e.task_id,
        text=clip_text(hint, 600),
        fraction=0.5,
        rationale=f"{why[0]} {streak.criterion_id} (recent means {streak.recent_means}); {why[1]}",
    )


def _streak_criterion_suspect(e: ProposalEvidence) -> bool:
    """Whether the failure's criterion is one the task's reference answer fails (positive) or commits (a pitfall)."""
    crit = e.criterion(e.ev.narrow(CriterionStreakEvidence).criterion_id)
    return crit is not None and e.reference_fails(crit)


def _guide_criterion(e: ProposalEvidence) -> SetGuidance | None:
    if _streak_criterion_suspect(e):
        return None  # the reference fails it: a hint toward it would teach the spurious reward
    text = _criterion_text(e)
    if not text:
        return _guide(e)
    return _criterion_hint(
        e,
        f"Make sure your answer does this: {text}.",
        ("No rollout satisfies criterion", "a hint quoting it for half of each group gives it signal."),
    )


def _avoid_hint(e: ProposalEvidence) -> SetGuidance | None:
    if _streak_criterion_suspect(e):
        return None  # a pitfall the reference itself commits is the rubric's to fix, not a hint's to avoid
    text = _criterion_text(e)
    if not text:
        return None
    return _criterion_hint(
        e,
        f"Avoid this: {text}.",
        ("Every rollout commits pitfall", "a hint to avoid it for half of each group makes the pitfall discriminate."),
    )


# A scaffold that fades (RuscaRL decays its scaffold over training; here the evidence decides when): once the
# unguided members give signal alone, the hint goes to half as many members, and when one member was guided, to
# none. Measured for non-inferiority by the critic: the group must keep its signal without it.


def _fade(e: ProposalEvidence) -> SetGuidance | None:
    view = (e.task.model_extra or {}) if e.task is not None else {}
    try:
        rule = GuidanceRule.model_validate(view.get("guidance") or {})
    except ValueError:
        return None
    ev = e.ev.narrow(ScaffoldOutgrownEvidence)
    guided, size = int(number(ev.guided) or 0), int(number(ev.group_size) or 0)
    if not rule.text or rule.fraction <= 0 or guided < 1 or size < 2:
        return None
    keep = guided // 2
    plain = ", ".join(f"{v:g}" for v in ev.plain_rewards if v is not None)
    why = f"The {size - guided} unguided members give signal without the hint (rewards {plain})"
    if keep:
        return SetGuidance(
            scope="task",
            target=e.task_id,
            text=rule.text,
            fraction=keep / size,
            temperature=rule.temperature,
            rationale=f"{why}: the scaffold fades from {guided} to {keep} of {size} members, so fewer completions "
            "are sampled under a prompt the policy will not be asked at test time.",
        )
    # none left: remove the task's rule; a domain's rule is covered by a task rule without a hint
    temperature = rule.temperature
    if view.get("guidance_scope") == "domain" and temperature is None:
        temperature = number(view.get("temperature")) or number(ev.temperature)
    return SetGuidance(
        scope="task",
        target=e.task_id,
        text=None,
        fraction=0.0,
        temperature=temperature,
        rationale=f"{why}: the scaffold ({guided} of {size} members) is removed, so the group is sampled on-policy "
        "from the plain prompt again.",
    )
