"""What every harness interface is: one unit with its state, its typed update, and every use of it.

An interface owns some state the trainer consults every step (task weights, guidance texts, rubric
versions, a plug-in's own). It changes only through its typed update (a pydantic model whose
docstring is the instruction the evolver's LLM reads); every applied update bumps the interface's
version and is appended to its history with the step it applies from, so a run can be read back and
resumed.

:class:`Interface` is the one type. A subclass says, in one place:

- **state**: :meth:`create` (fresh, over the run's tasks), :meth:`to_dict` / :meth:`restore`
  (``harness.json``), :attr:`version`, :attr:`history`;
- **its update**: :attr:`update_type`, :meth:`apply`, :meth:`preview` (what a candidate would change,
  applying nothing), :meth:`target_state` (what must still be as it was at commit);
- **how it reaches training**: :meth:`shape` changes one group member's :class:`Row` (its chat
  messages and sampling settings), and the task draw and the rubric stay with the interfaces that
  own them;
- **how the critic measures a candidate**: :meth:`metric` and :meth:`trial` (a recipe of the critic's
  trial kit, :class:`~harnessrl.critic.trials.Trial`); by default fresh rollouts of the frozen policy
  with the rows it shapes now and the rows it would shape with the candidate;
- **which failures it answers**: :attr:`answers` (the attributor's choices) and :attr:`hint_for`
  (the detectors' hint);
- **its MCP tools and prompt text**: :attr:`builder_tool` (built from :attr:`update_type`), extra
  read fields in :meth:`task_view`, :attr:`evolver_text` for the attributor's prompt;
- **its remedies**: :meth:`suggest`, its own candidates for a failure, best first, each built with its
  update model from a typed :class:`~harnessrl.interfaces.evidence.ProposalEvidence` (the rule-based
  evolver orders and calls them; a built-in and a plug-in propose the same way);
- **how the report shows it**: :meth:`summary`.

Interfaces are registered in :mod:`harnessrl.interfaces.registry` (built in, the
``harnessrl.interfaces`` entry-point group, or a dotted path in the run config).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError

from harnessrl.critic.signal import CRITERION_SIGNAL, RHO_PREFIX, SIGNAL_SHARE
from harnessrl.data.schema import Task
from harnessrl.interfaces.evidence import ProposalEvidence
from harnessrl.records.evidence import CriterionStreakEvidence, SpuriousFeatureEvidence
from harnessrl.records.failures import Failure

if TYPE_CHECKING:
    from typing import Self

    from harnessrl.critic.acceptance import Measured
    from harnessrl.critic.trials import Trial

__all__ = [
    "AppliedUpdate",
    "HarnessContext",
    "Interface",
    "InterfaceUpdate",
    "Row",
    "Signature",
    "Suggestion",
    "failure_metric",
    "suggestions",
]

logger = logging.getLogger(__name__)


class Signature(BaseModel):
    """What a repair covers (docs/design.md §4, "Repairs that reach a signature"): every training task that
    shares one stated requirement the rubric does not check (``kind="requirement"``, ``key``: the
    requirement's kind, its check's ``requirement_key()``), or one group of the data
    (``kind="group"``, ``key``: ``family:<name>``, ``tag:<tag>`` or ``domain:<name>``), or, for the fade of a
    rubric's hint, every task whose rubric states the same requirements as a hint (``kind="hint"``, ``key``: their
    keys), or, for the removal of criteria the tasks' own reference answers fail, every task whose rubric has an exact
    criterion of the same requirement its reference fails (``kind="reference"``, ``key``: ``fails:<key>`` or
    ``commits:<key>`` for a pitfall). ``tasks``: the tasks the repair changes, each with its own instance. Filled in
    by the trainer, not by the evolver."""

    kind: Literal["requirement", "group", "hint", "reference"]
    key: str = Field(min_length=1)
    tasks: list[str] = Field(default_factory=list)


class InterfaceUpdate(BaseModel):
    """Base of every interface update: what to change, and why (``rationale``, for the trace).

    A subclass sets ``interface: Literal["<its interface's name>"] = "<name>"``: the tag that tells
    updates apart in ``harness.json``, the events and the tool server."""

    interface: str
    rationale: str = Field(
        default="", max_length=2000, description="Why this update: the failure and evidence it answers."
    )
    remedy: str | None = Field(
        default=None,
        max_length=80,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="The name of the remedy that built it (e.g. 'requirement', 'length_pitfall'), if it has one: a "
        "revision does not propose the same remedy twice, and the report groups trials and commits by it.",
    )
    signature: Signature | None = Field(
        default=None,
        description="Leave null: the trainer fills it in when it widens the repair to every task that shares it.",
    )


@dataclass(frozen=True)
class Suggestion:
    """One candidate an interface proposes for a failure: the name of the remedy that built it (``tag``, also
    the update's typed ``remedy`` field, so that a revision does not propose it again) and the update."""

    tag: str
    update: InterfaceUpdate

    def __post_init__(self):
        if self.update.remedy != self.tag:
            object.__setattr__(self, "update", self.update.model_copy(update={"remedy": self.tag}))

    def builder_arguments(self) -> dict[str, Any]:
        """The update as its builder tool's arguments: the fields the remedy set (the tool implies
        ``interface``)."""
        return self.update.model_dump(mode="json", exclude_unset=True, exclude={"interface"})


def suggestions(
    evidence: ProposalEvidence, remedies: Iterable[tuple[str, Callable[[ProposalEvidence], InterfaceUpdate | None]]]
) -> list[Suggestion]:
    """The candidates the named ``remedies`` build from ``evidence``, in order: one that does not apply
    (None) is left out, and so is one whose update fails its model's validation (logged: a remedy's bug
    must not stop the others)."""
    out = []
    for tag, remedy in remedies:
        try:
            update = remedy(evidence)
        except ValidationError as e:
            logger.warning("remedy %s built an invalid update for %s: %s", tag, evidence.failure.failure_id, e)
            continue
        if update is not None:
            out.append(Suggestion(tag, update))
    return out


class AppliedUpdate(BaseModel):
    """One entry of an interface's history: the update, the version it made, and from which step."""

    version: int
    step: int
    update: dict[str, Any]
    candidate_id: str | None = None


@dataclass(frozen=True)
class HarnessContext:
    """What an interface is built over: the run's training tasks and the settings it may read.

    ``settings`` holds ``harness.interface_settings[<name>]`` from the run config (a plug-in's own)."""

    tasks: Mapping[str, Task]
    seed: int = 0
    sampling_floor: float = 0.1
    temperature: float = 1.0
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def domains(self) -> set[str]:
        return {t.domain for t in self.tasks.values()}


@dataclass(frozen=True)
class Row:
    """One group member as the interfaces shape it: its chat messages, whether it saw guidance, and the
    sampling settings it is generated with (``temperature`` always; ``top_p``, ``max_new_tokens`` when
    an interface sets them)."""

    messages: list[dict[str, str]]
    guided: bool = False
    generation: Mapping[str, float] = field(default_factory=dict)

    def with_generation(self, **settings: float | None) -> Row:
        """This row with the given sampling settings (None: leave that setting as it is)."""
        merged = {**self.generation, **{k: v for k, v in settings.items() if v is not None}}
        return replace(self, generation=merged)

    @property
    def temperature(self) -> float:
        return float(self.generation.get("temperature", 1.0))


def failure_metric(failure: Failure | None, *, reference_rank: str | None = None) -> str:
    """The metric a trial measures for the failure it answers, invariant to a per-group affine change of
    the rewards as the trainer's advantages are: ``rho_reward_length`` / ``rho_reward_<feature>`` for
    spurious rewards, ``criterion_signal`` for a saturated or dead criterion named in the evidence,
    ``reference_rank`` for reference_below_policy and reference_fails_criterion when the interface passes that
    metric, and else
    ``signal_share`` (the share of groups that give signal)."""
    if failure is None:
        return SIGNAL_SHARE
    kind, ev = failure.kind, failure.evidence
    if kind == "spurious_length":
        return RHO_PREFIX + "length"
    if kind == "spurious_feature":
        return RHO_PREFIX + (ev.narrow(SpuriousFeatureEvidence).feature or "length")
    if kind in ("reference_below_policy", "reference_fails_criterion") and reference_rank:
        return reference_rank
    if kind in ("criterion_saturated", "criterion_dead") and ev.narrow(CriterionStreakEvidence).criterion_id:
        return CRITERION_SIGNAL
    return SIGNAL_SHARE


class Interface(ABC):
    """A harness interface: state the trainer consults, changed only through its typed update.

    With no update applied an interface changes nothing (plain GRPO)."""

    name: ClassVar[str]
    """Its name: the ``interface`` tag of its updates, its key in ``harness.json`` and the events."""
    update_type: ClassVar[type[InterfaceUpdate]]
    """Its update model; the docstring is what the evolver's LLM reads about it."""
    builder_tool: ClassVar[str]
    """The MCP tool that builds a candidate of this interface (it validates, records, applies nothing)."""
    answers: ClassVar[tuple[str, ...]] = ()
    """Failure kinds an update of this interface can answer: the attributor may blame it for these."""
    hint_for: ClassVar[tuple[str, ...]] = ()
    """Failure kinds for which it is the first choice: the detectors' ``interface_hint``."""
    evolver_text: ClassVar[str] = ""
    """One paragraph for the attributor's prompt: what it changes and when to blame it."""

    # ------------------------------------------------------------------ state
    @classmethod
    @abstractmethod
    def create(cls, ctx: HarnessContext) -> Self:
        """A fresh interface over the run's tasks (version 0: changes nothing)."""

    @classmethod
    @abstractmethod
    def restore(cls, data: Mapping[str, Any], ctx: HarnessContext) -> Self:
        """Read back what :meth:`to_dict` wrote (raise ValueError/KeyError/TypeError when it does not fit)."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable state, version and history included."""

    @property
    @abstractmethod
    def version(self) -> int: ...

    @property
    @abstractmethod
    def history(self) -> list[AppliedUpdate]: ...

    # ------------------------------------------------------------------ its update
    @abstractmethod
    def apply(self, update: Any, step: int, candidate_id: str | None = None) -> int:
        """Apply ``update`` from ``step`` on; returns the interface's new version (ValueError: invalid)."""

    @abstractmethod
    def preview(self, update: Any, step: int) -> dict[str, Any]:
        """What ``update`` would change from ``step`` on, before and after, as JSON; applies nothing.
        Raise ValueError with a readable reason when the candidate is invalid or changes nothing."""

    @abstractmethod
    def target_state(self, update: Any) -> Any:
        """The part of the state ``update`` changes (JSON-serialisable): a commit needs it as it was when
        the candidate was measured."""

    def targets(self, update: Any) -> list[Task]:
        """The training tasks ``update`` can change (the default rollout trial probes these)."""
        return []

    def widen(self, update: Any) -> Any:
        """``update`` extended to every training task that shares its signature (:class:`Signature`), each
        task with its own instance, built trainer-side so that any evolver's repair reaches them; the critic
        then measures it on all of them together. Default: unchanged (the update is the task's own)."""
        return update

    # ------------------------------------------------------------------ how it reaches training
    def shape(self, task: Task, member: int, group_size: int, row: Row, overlay: Any | None = None) -> Row:
        """Member ``member`` of a group of ``group_size`` for ``task``, as this interface shapes it;
        ``overlay``: a candidate update of this interface, previewed exactly as :meth:`apply` would put
        it in force. Default: unchanged."""
        return row

    # ------------------------------------------------------------------ the critic
    def metric(self, update: Any, failure: Failure | None) -> str:
        """The metric a trial of ``update`` measures (default: from the failure, :func:`failure_metric`)."""
        return failure_metric(failure)

    def trial(self, update: Any, trial: Trial) -> Measured:
        """Measure ``update`` on the frozen policy (default: two arms of fresh rollouts of the tasks it
        changes, the rows shaped now vs with the candidate; :meth:`Trial.rollout_arms`)."""
        return trial.rollout_arms(self.targets(update), describe=self.describe(update))

    def describe(self, update: Any) -> str:
        """A few words on what ``update`` targets, for the critic's reasons."""
        return f"{self.name} update"

    def reverting(self, update: Any) -> list[InterfaceUpdate]:
        """The updates that would put back what ``update`` changes, read before it is applied (a probation's
        revert: :mod:`harnessrl.evolution.probation`). Only an interface whose trial can put a candidate on
        probation needs it."""
        raise NotImplementedError(f"the {self.name} interface does not put candidates on probation")

    # ------------------------------------------------------------------ the evolver
    def task_view(self, task: Task, step: int) -> dict[str, Any]:
        """What ``get_harness_state`` shows of this interface for ``task`` at ``step`` (JSON)."""
        return {}

    @classmethod
    def suggest(cls, evidence: ProposalEvidence) -> list[Suggestion]:
        """This interface's candidates for ``evidence.failure``, best first, each built with its update
        model (remedies that do not apply to the evidence are left out). The rule-based evolver tries them
        in order, skipping those already tried for the failure. Default: none."""
        return []

    @classmethod
    def suggestion(cls, tag: str, evidence: ProposalEvidence) -> Suggestion | None:
        """The candidate of the remedy named ``tag`` for ``evidence`` (None: it does not apply). Default: the
        one :meth:`suggest` gives under that name; an interface whose remedies serve as another's fallback
        builds any of them by name."""
        return next((s for s in cls.suggest(evidence) if s.tag == tag), None)

    # ------------------------------------------------------------------ the report
    def summary(self) -> dict[str, Any]:
        """What the report shows of this interface (JSON): its version, how many updates it applied, and
        what an interface adds of its own (what is in force now)."""
        return {"version": self.version, "updates": len(self.history)}
