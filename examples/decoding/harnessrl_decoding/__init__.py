"""Decoding: the sampling temperature, top-p and completion budget of a task's or a domain's groups.

A HarnessRL interface written outside HarnessRL, as a plug-in (see this package's README): one
:class:`~harnessrl.interfaces.Interface` subclass holds its state, its typed update and every use of
it. A rule for a task beats its domain's rule; a setting a rule leaves null stays as the other
interfaces shaped it (e.g. rollout guidance's temperature).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from harnessrl.data.schema import Task
from harnessrl.interfaces import (
    AppliedUpdate,
    HarnessContext,
    Interface,
    InterfaceUpdate,
    ProposalEvidence,
    Row,
    Suggestion,
)

__all__ = ["Decoding", "DecodingRule", "SetDecoding"]


class DecodingRule(BaseModel):
    """The sampling settings in force for a task or a domain (null: unchanged)."""

    temperature: float | None = None
    top_p: float | None = None
    max_new_tokens: int | None = None


class SetDecoding(InterfaceUpdate):
    """Change how a task's (or a whole domain's) rollouts are sampled: ``temperature`` (higher explores
    more: use it when every rollout of a group fails alike and the task is within reach), ``top_p``
    (nucleus sampling; 1.0 keeps the whole distribution) and ``max_new_tokens`` (a completion budget:
    smaller when the reward rises with length). Leave a setting null to keep it as it is; set all three
    to null to remove the rule."""

    interface: Literal["decoding"] = "decoding"
    scope: Literal["task", "domain"] = "task"
    target: str = Field(min_length=1, description="The task id or the domain name.")
    temperature: float | None = Field(default=None, gt=0, le=3, description="Sampling temperature of the group.")
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling mass.")
    max_new_tokens: int | None = Field(default=None, ge=1, le=4096, description="Completion budget in tokens.")

    def rule(self) -> DecodingRule | None:
        """The rule this update puts in force (None: it removes the target's rule)."""
        rule = DecodingRule(temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_new_tokens)
        return None if rule == DecodingRule() else rule


class DecodingState(BaseModel):
    per_task: dict[str, DecodingRule] = Field(default_factory=dict)
    per_domain: dict[str, DecodingRule] = Field(default_factory=dict)
    version: int = 0
    history: list[AppliedUpdate] = Field(default_factory=list)


class Decoding(Interface):
    """The decoding interface. With no update applied it changes no sampling setting (plain GRPO)."""

    name = "decoding"
    update_type = SetDecoding
    builder_tool = "set_decoding"
    answers = ("non_discriminative_low", "criterion_dead", "spurious_length")
    evolver_text = (
        "the sampling temperature, top-p and completion budget of a task's or a domain's rollout groups. "
        "Blame it when every rollout of a task fails alike and more exploration could find the answer "
        "(raise the temperature), or when the reward rises with length (a smaller completion budget)."
    )

    def __init__(self, tasks: Mapping[str, Task], max_temperature: float = 1.5):
        self.tasks = dict(tasks)
        self.max_temperature = max_temperature
        self.state = DecodingState()

    # ------------------------------------------------------------------ state
    @classmethod
    def create(cls, ctx: HarnessContext) -> Decoding:
        settings = dict(ctx.settings.get(cls.name, {}))
        unknown = sorted(set(settings) - {"max_temperature"})
        if unknown:
            raise ValueError(f"unknown decoding setting(s) {unknown}; known: ['max_temperature']")
        return cls(ctx.tasks, max_temperature=float(settings.get("max_temperature", 1.5)))

    @classmethod
    def restore(cls, data: Mapping[str, Any], ctx: HarnessContext) -> Decoding:
        obj = cls.create(ctx)
        obj.state = DecodingState.model_validate(data)
        return obj

    def to_dict(self) -> dict[str, Any]:
        return self.state.model_dump(mode="json")

    @property
    def version(self) -> int:
        return self.state.version

    @property
    def history(self) -> list[AppliedUpdate]:
        return self.state.history

    # ------------------------------------------------------------------ its update
    def rule_for(self, task: Task, overlay: SetDecoding | None = None) -> DecodingRule | None:
        """The rule in force for ``task`` (a task rule beats a domain rule), with ``overlay`` previewed."""
        per_task = self.state.per_task.get(task.id)
        per_domain = self.state.per_domain.get(task.domain)
        if overlay is not None:
            if overlay.scope == "task" and overlay.target == task.id:
                per_task = overlay.rule()
            elif overlay.scope == "domain" and overlay.target == task.domain:
                per_domain = overlay.rule()
        return per_task or per_domain

    def targets(self, update: SetDecoding) -> list[Task]:
        if update.scope == "task":
            if update.target not in self.tasks:
                raise ValueError(f"unknown task id {update.target!r}")
            return [self.tasks[update.target]]
        out = [t for t in self.tasks.values() if t.domain == update.target]
        if not out:
            raise ValueError(
                f"unknown domain {update.target!r}; known: {sorted({t.domain for t in self.tasks.values()})}"
            )
        return out

    def describe(self, update: SetDecoding) -> str:
        return f"{update.scope} {update.target!r}"

    def _check(self, update: SetDecoding) -> list[Task]:
        if update.temperature is not None and update.temperature > self.max_temperature:
            raise ValueError(
                f"temperature {update.temperature} is above decoding.max_temperature={self.max_temperature}"
            )
        return self.targets(update)

    def preview(self, update: SetDecoding, step: int) -> dict[str, Any]:
        changed = [t for t in self._check(update) if self.rule_for(t) != self.rule_for(t, update)]
        if not changed:
            raise ValueError("it changes nothing (the same settings are in force, or a task rule overrides it)")
        before, after = self.rule_for(changed[0]), self.rule_for(changed[0], update)
        return {
            "tasks_affected": len(changed),
            "task_ids": [t.id for t in changed[:20]],
            "rule_before": before.model_dump(mode="json") if before else None,
            "rule_after": after.model_dump(mode="json") if after else None,
        }

    def apply(self, update: SetDecoding, step: int, candidate_id: str | None = None) -> int:
        self._check(update)
        table = self.state.per_task if update.scope == "task" else self.state.per_domain
        rule = update.rule()
        if rule is None:
            table.pop(update.target, None)
        else:
            table[update.target] = rule
        self.state.version += 1
        self.state.history.append(
            AppliedUpdate(version=self.version, step=step, update=update.model_dump(), candidate_id=candidate_id)
        )
        return self.version

    def target_state(self, update: SetDecoding) -> Any:
        table = self.state.per_task if update.scope == "task" else self.state.per_domain
        rule = table.get(update.target)
        return rule.model_dump(mode="json") if rule else None

    # ------------------------------------------------------------------ how it reaches training
    def shape(self, task: Task, member: int, group_size: int, row: Row, overlay: SetDecoding | None = None) -> Row:
        rule = self.rule_for(task, overlay)
        if rule is None:
            return row
        return row.with_generation(temperature=rule.temperature, top_p=rule.top_p, max_new_tokens=rule.max_new_tokens)

    # the critic: the default recipe (Interface.trial) draws fresh rollouts of the frozen policy with the
    # rows shaped now and with the candidate, and measures the failure's metric on both arms

    # ------------------------------------------------------------------ the evolver and the report
    def task_view(self, task: Task, step: int) -> dict[str, Any]:
        rule = self.rule_for(task)
        return {"decoding": rule.model_dump(mode="json") if rule else None}

    @classmethod
    def suggest(cls, evidence: ProposalEvidence) -> list[Suggestion]:
        """Its remedies, as the built-in interfaces give theirs: wider sampling when every rollout fails
        alike, a smaller completion budget when the reward pays for length."""
        task_id = evidence.task_id
        view = evidence.task.model_extra if evidence.task is not None else {}
        now = (view or {}).get("decoding") or {}
        temperature = float(now.get("temperature") or (view or {}).get("temperature") or 1.0)
        kind = evidence.failure.kind
        if kind in ("non_discriminative_low", "criterion_dead"):
            why = "every rollout fails alike: sample more widely so some of the group finds the criteria"
            return [
                Suggestion(
                    "explore",
                    SetDecoding(target=task_id, temperature=round(min(1.5, temperature + 0.3), 2), rationale=why),
                ),
                Suggestion("explore_more", SetDecoding(target=task_id, temperature=1.5, top_p=1.0, rationale=why)),
            ]
        if kind == "spurious_length":
            why = "the reward rises with length: a smaller completion budget stops padding from paying"
            return [Suggestion("budget", SetDecoding(target=task_id, max_new_tokens=32, rationale=why))]
        return []

    def summary(self) -> dict[str, Any]:
        return {
            **super().summary(),
            "task_rules": {t: r.model_dump(exclude_none=True) for t, r in sorted(self.state.per_task.items())},
            "domain_rules": {d: r.model_dump(exclude_none=True) for d, r in sorted(self.state.per_domain.items())},
        }
