"""The harness's decisions as the bench reads them from a run's ``events.jsonl``: typed, parsed once.

Every part of the bench that asks what an update changed, which remedy made it or why the critic refused it
asks here, so the answer has one source:

- :func:`changed_tasks`: the training tasks an update changes. A newer event says it in a field (``covers``,
  every task the update changes, top level of a commit); else it is read from the update's own fields (a
  rubric edit's ``task_id``, the ``cover`` it extends to and its ``signature``'s tasks, task sampling's
  ``task_ids``, guidance's ``target`` of scope ``task``, or every task of the domain for scope ``domain``).
- :func:`audit_tasks`: the tasks a ``rubric_audit`` event's findings name (a detection at the audit's step).
- :meth:`Update.remedy_name`: ``interface:remedy``, from the typed ``remedy`` field of the update (commit and
  proposal events) or of the trial event; runs written before that field existed are read by
  :func:`legacy_remedy_tag`, the one place the rule-based evolver's rationale tag is still parsed.
- :func:`refusal_kind`: a refused candidate's kind, the trial's typed ``verdict_kind``, else (older runs)
  :func:`legacy_refusal_kind`, the reason's text up to its numbers.

Nothing here reads a file or imports HarnessRL: it parses the dicts :class:`~harnessrl.analysis.results.RunData`
read, and tolerates what an older or a live run lacks (a missing field is None or empty, never an error).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harnessrl.records.events import Event
from harnessrl.records.run_record import finite_number

__all__ = [
    "Cover",
    "Signature",
    "Trial",
    "Update",
    "UpdateEvent",
    "Verdict",
    "audit_tasks",
    "changed_tasks",
    "legacy_refusal_kind",
    "legacy_remedy_tag",
    "refusal_kind",
]

_LEGACY_TAG = re.compile(r"\[rule-based: ([a-z_]+)\]")


def legacy_remedy_tag(rationale: Any) -> str | None:
    """The remedy of an update written **before updates carried a ``remedy`` field**: the last
    ``[rule-based: <remedy>]`` tag the rule-based evolver appended to its rationale (None without one).

    Legacy only: it exists so the reports of older runs (those under ``benchmarks/results/``) read the same;
    an update that has the ``remedy`` field, even null, is never read through it."""
    tags = _LEGACY_TAG.findall(str(rationale or ""))
    return tags[-1] if tags else None


def legacy_refusal_kind(reason: Any) -> str:
    """A refusal's kind for a trial written **before trials carried ``verdict_kind``**: its reason up to the
    numbers ("rejected by the reference guard", "no effect on the learning signal", "budget", "rejected: the
    improvement is not reliably above 0", ...). Legacy only, as :func:`legacy_remedy_tag`."""
    reason = str(reason or "")
    head = reason.split(":", 1)[0].strip() or "rejected"
    if head == "rejected" and ":" in reason:  # "rejected: the improvement is not reliably above 0: ..."
        head = "rejected: " + reason.split(":", 2)[1].strip()
    return head[:80]


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def _strs(v: Any) -> tuple[str, ...]:
    """The ids of a list (strings, or integers written as ids); () for anything else."""
    if not isinstance(v, list):
        return ()
    return tuple(str(x) for x in v if isinstance(x, str | int) and not isinstance(x, bool))


def _texts(criteria: Any) -> tuple[str, ...]:
    """The texts of criteria written as dicts (``{"id", "text", ...}``) or as plain strings."""
    if not isinstance(criteria, list):
        return ()
    out = [c.get("text") if isinstance(c, dict) else c for c in criteria]
    return tuple(t for t in out if isinstance(t, str) and t)


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


@dataclass(frozen=True)
class Cover:
    """One task a rubric repair is extended to (``update.cover``), with the texts of the criteria it adds."""

    task_id: str
    added: tuple[str, ...] = ()


@dataclass(frozen=True)
class Signature:
    """What a widened repair reaches (``update.signature``): its kind (``requirement``: one stated requirement
    the rubric does not check; ``group``: one group of the data), its key, and the tasks it changes."""

    kind: str | None
    key: str | None
    tasks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Update:
    """An interface update as an event records it (``update``), with the fields the bench reads."""

    interface: str | None = None
    rationale: str = ""
    action: str | None = None
    remedy: str | None = None
    """The remedy that built it: the typed ``remedy`` field, else (older runs) :func:`legacy_remedy_tag`."""
    task_id: str | None = None
    task_ids: tuple[str, ...] = ()
    scope: str | None = None
    target: str | None = None
    added: tuple[str, ...] = ()
    """Texts of the criteria a rubric edit adds to its own task."""
    cover: tuple[Cover, ...] = ()
    signature: Signature | None = None

    @classmethod
    def parse(cls, data: Any) -> Update:
        d = data if isinstance(data, dict) else {}
        sig = d.get("signature")
        return cls(
            interface=_str(d.get("interface")),
            rationale=str(d.get("rationale") or ""),
            action=_str(d.get("action")),
            remedy=_str(d["remedy"]) if "remedy" in d else legacy_remedy_tag(d.get("rationale")),
            task_id=_str(d.get("task_id")),
            task_ids=_strs(d.get("task_ids")),
            scope=_str(d.get("scope")),
            target=_str(d.get("target")),
            added=_texts(d.get("add")),
            cover=tuple(
                Cover(str(c["task_id"]), _texts(c.get("add")))
                for c in (d.get("cover") if isinstance(d.get("cover"), list) else [])
                if isinstance(c, dict) and _str(c.get("task_id"))
            ),
            signature=Signature(_str(sig.get("kind")), _str(sig.get("key")), _strs(sig.get("tasks")))
            if isinstance(sig, dict)
            else None,
        )

    def remedy_name(self, interface: Any = None, remedy: str | None = None) -> str:
        """``interface:remedy``: ``remedy`` when given (a trial's own field), else the update's, else its
        action, else ``update``; the interface is ``interface`` when given (the event's), else the update's."""
        return f"{interface or self.interface}:{remedy or self.remedy or self.action or 'update'}"

    def own_tasks(self, domains: Mapping[str, str]) -> tuple[str, ...]:
        """The tasks this update changes by its own fields (what an event without ``covers`` says):
        ``task_id`` and the tasks of its ``cover``, the tasks of its ``signature`` (the trainer fills them in
        with the tasks a widened repair changes), ``task_ids``, and ``target`` (a task, or with scope ``domain``
        every task of ``domains`` in that domain: none when the domains are not known)."""
        out = [
            *([self.task_id] if self.task_id else []),
            *(c.task_id for c in self.cover),
            *(self.signature.tasks if self.signature is not None else ()),
            *self.task_ids,
        ]
        if self.target:
            if self.scope == "domain":
                out += sorted(t for t, dom in domains.items() if dom == self.target)
            else:
                out.append(self.target)
        return _unique(out)

    def added_texts(self) -> tuple[str, ...]:
        """Texts of every criterion it adds, to its own task and to those it covers."""
        return _unique([*self.added, *(t for c in self.cover for t in c.added)])


@dataclass(frozen=True)
class UpdateEvent:
    """A ``proposal`` or ``commit`` event: the update, and (commits) where it applies from and what it covers."""

    kind: str
    step: int | None
    interface: str | None
    candidate_id: str | None
    update: Update
    applies_from_step: int | None = None
    version: int | None = None
    covers: tuple[str, ...] | None = None
    """Every task the update changes, when the event says so (``covers``, newer runs); None: read the update."""
    probation: bool = False
    """A commit on probation: a hint (or a rubric edit with the hint that states it) committed without fresh rollouts,
    kept or reverted by its training groups."""

    @classmethod
    def parse(cls, e: Event) -> UpdateEvent:
        """A proposal, a commit, or a ``revert`` (the end of a probation: its ``updates`` put the rule back, one
        per task, all of remedy ``revert``; read as one update of that remedy)."""
        event = e.model_dump()
        step = _int(event.get("step"))
        applies = _int(event.get("applies_from_step"))
        covers = event.get("covers")
        reverting = event.get("updates") if e.kind == "revert" else None
        return cls(
            kind=str(event.get("kind") or ""),
            step=step,
            interface=_str(event.get("interface")),
            candidate_id=_str(event.get("candidate_id")),
            update=Update.parse(reverting[0] if isinstance(reverting, list) and reverting else event.get("update")),
            applies_from_step=applies if applies is not None else (step + 1 if step is not None else None),
            version=_int(event.get("version")),
            covers=_strs(covers) if isinstance(covers, list) else None,
            probation=event.get("probation") is True,
        )

    @property
    def name(self) -> str:
        """``interface:remedy`` (:meth:`Update.remedy_name`), the interface the event's own; ``(on probation)``
        after a commit on probation."""
        name = self.update.remedy_name(self.interface)
        return f"{name} (on probation)" if self.probation else name


def changed_tasks(e: UpdateEvent, domains: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The training tasks a commit (or a proposal) changes: its ``covers`` when it has one (newer runs),
    else what its update's own fields name (:meth:`Update.own_tasks`; ``domains``, task id -> domain, resolves
    a guidance of scope ``domain``). The one answer to "which tasks did this update change" in the bench."""
    return e.covers if e.covers is not None else e.update.own_tasks(domains or {})


def audit_tasks(e: Event) -> tuple[str, ...]:
    """The training tasks a ``rubric_audit`` event's findings name (a finding's ``task_id``, or its ``tasks`` /
    ``task_ids`` / ``covers``; the event's own ``task_ids`` / ``covers`` too): the tasks whose rubric the audit
    before training found failing, detected at the audit's step."""
    event = e.model_dump()
    findings = event.get("findings") if isinstance(event.get("findings"), list) else []
    out: list[str] = [*_strs(event.get("task_ids")), *_strs(event.get("covers"))]
    for f in findings:
        if isinstance(f, dict):
            out += [*([f["task_id"]] if _str(f.get("task_id")) else []), *_strs(f.get("tasks"))]
            out += [*_strs(f.get("task_ids")), *_strs(f.get("covers"))]
    return _unique(out)


@dataclass(frozen=True)
class Trial:
    """A ``trial`` event: the critic's measurement of one candidate, what it cost and its verdict."""

    step: int | None
    interface: str | None
    candidate_id: str | None
    accepted: bool
    reason: str
    verdict_kind: str | None
    """The verdict's kind as a field (``accepted``, ``not_reliable``, ``budget``, ...); None in older runs."""
    remedy: str | None
    """The candidate's remedy as a field of the trial event (or of its result); None in older runs, or none named."""
    min_detectable_effect: float | None
    rollouts: float | None = None
    judge_calls: float | None = None
    seconds: float | None = None
    """What it spent (``result.cost``): rollouts generated, judge calls, seconds; None where not recorded."""

    @classmethod
    def parse(cls, e: Event) -> Trial:
        event = e.model_dump()
        result = event.get("result") if isinstance(event.get("result"), dict) else {}
        cost = result.get("cost") if isinstance(result.get("cost"), dict) else {}
        mde = event.get("min_detectable_effect", result.get("min_detectable_effect"))
        return cls(
            step=_int(event.get("step")),
            interface=_str(event.get("interface")),
            candidate_id=_str(event.get("candidate_id")),
            accepted=bool(result.get("accepted")),
            reason=str(result.get("reason") or ""),
            verdict_kind=_str(event.get("verdict_kind")) or _str(result.get("verdict_kind")),
            remedy=_str(event.get("remedy")) or _str(result.get("remedy")),
            min_detectable_effect=finite_number(mde),
            rollouts=finite_number(cost.get("rollouts")),
            judge_calls=finite_number(cost.get("judge_calls")),
            seconds=finite_number(cost.get("seconds")),
        )


@dataclass(frozen=True)
class Verdict:
    """A ``verdict`` event (the critic's decision on a candidate), a ``give_up`` (a failure given up) or a
    ``failure`` (a detection): the candidate or task it is about, and what was decided or found."""

    candidate_id: str | None
    task_id: str | None
    interface: str | None
    verdict: str | None
    """``accepted`` or ``rejected`` (a verdict event; None for the others)."""
    verdict_kind: str | None
    reason: str
    failure: str | None = None
    """A failure event's kind (``non_discriminative_low``, ...)."""

    @property
    def rejected(self) -> bool:
        return self.verdict == "rejected"

    @classmethod
    def parse(cls, e: Event) -> Verdict:
        event = e.model_dump()
        return cls(
            candidate_id=_str(event.get("candidate_id")),
            task_id=_str(event.get("task_id")),
            interface=_str(event.get("interface")),
            verdict=_str(event.get("verdict")),
            verdict_kind=_str(event.get("verdict_kind")),
            reason=str(event.get("reason") or ""),
            failure=_str(event.get("failure")),
        )


def refusal_kind(verdict: Verdict, trial: Trial | None = None) -> str:
    """Why the critic refused a candidate, as one kind: the ``verdict_kind`` the verdict event or the
    candidate's trial carries (newer runs: ``not_reliable``, ``too_small``, ``no_effect``, ``reference_guard``,
    ``budget``, ...), else :func:`legacy_refusal_kind` of the verdict's reason."""
    kind = verdict.verdict_kind or (trial.verdict_kind if trial is not None else None)
    return kind or legacy_refusal_kind(verdict.reason)
