"""A run's tasks: training, validation and test, loaded, validated and split.

:func:`load_run_tasks` loads the three splits a :class:`~harnessrl.trainer.train_config.TrainConfig` names (one file
may give validation and test, split alternately within each domain), refuses a task id in two splits, keeps the
first tasks of each domain when asked, and gives training its view of its tasks (:func:`training_view`): graded
with their rubric or their gold rubric, never holding a gold one, so the harness, its tool server, the memory, the
detectors, the critic and the evolver never see one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harnessrl.data import Task, data_path, load_tasks
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.trainer.methods import METHOD_TABLE

if TYPE_CHECKING:
    from harnessrl.trainer.train_config import TrainConfig

__all__ = ["RunTasks", "load_run_tasks", "split_alternating", "training_view"]


def _first_per_domain(tasks: list[Task], n: int | None) -> list[Task]:
    if n is None:
        return tasks
    seen: dict[str, int] = {}
    out = []
    for t in tasks:
        if seen.get(t.domain, 0) < n:
            out.append(t)
            seen[t.domain] = seen.get(t.domain, 0) + 1
    return out


def split_alternating(tasks: Sequence[Task]) -> tuple[list[Task], list[Task]]:
    """(test, validation): within each domain in file order, the 1st, 3rd, ... task to test, the 2nd,
    4th, ... to validation. Deterministic, balanced across domains, and test keeps the odd one out."""
    seen: Counter[str] = Counter()
    test, validation = [], []
    for t in tasks:
        (test if seen[t.domain] % 2 == 0 else validation).append(t)
        seen[t.domain] += 1
    return test, validation


@dataclass
class RunTasks:
    """A run's tasks: training (as training sees them: no gold rubric), validation (chooses the best
    checkpoint) and test (only reported), both with their gold rubrics for evaluation."""

    train: list[Task]
    validation: list[Task]
    test: list[Task]

    @property
    def eval_splits(self) -> dict[str, list[Task]]:
        """The evaluation splits that have tasks, validation first."""
        return {name: ts for name, ts in (("validation", self.validation), ("test", self.test)) if ts}


def load_run_tasks(config: TrainConfig) -> RunTasks:
    """Train, validation and test tasks, validated; no two of them may share a task id."""
    d = config.data
    train = load_tasks(data_path(d.train, "train"), d.format, default_domain=d.domain)
    evals = (("validation", d.validation), ("test", d.test))
    paths = {name: data_path(value, name) if value else None for name, value in evals}
    same_file = paths["validation"] is not None and paths["test"] is not None
    same_file = same_file and paths["validation"].resolve() == paths["test"].resolve()  # type: ignore[union-attr]
    splits: dict[str, list[Task]] = {}
    for name, path in paths.items():
        if path is None:
            splits[name] = []
            continue
        tasks = load_tasks(path, d.format, default_domain=d.domain)
        if same_file or getattr(d, name) == "bundled":
            test, validation = split_alternating(tasks)
            tasks = validation if name == "validation" else test
            if not tasks:
                raise ConfigError(
                    f"splitting {path} into validation and test left no {name} tasks (a domain needs at least "
                    f"two tasks to give one to each): name a separate data.{name} file, or set data.{name}=null"
                )
        splits[name] = tasks
    named = {"training": train, **splits}
    names = list(named)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = {t.id for t in named[a]} & {t.id for t in named[b]}
            if shared:
                hint = (
                    "evaluation tasks must be split off before training"
                    if a == "training"
                    else "validation and test must not overlap"
                )
                raise HarnessRLError(
                    f"{len(shared)} task id(s) are both in the {a} and the {b} data (e.g. {sorted(shared)[:3]}): {hint}"
                )
    return RunTasks(
        train=training_view(_first_per_domain(train, d.tasks_per_domain), d.train_rubric),
        validation=_first_per_domain(splits["validation"], d.validation_per_domain),
        test=_first_per_domain(splits["test"], d.test_per_domain),
    )


def training_view(tasks: Sequence[Task], train_rubric: str = "rubric") -> list[Task]:
    """The tasks as training sees them: graded with their rubric (``train_rubric: rubric``) or their gold
    rubric (``gold``: the oracle, a clean variant), and never holding a gold rubric."""
    if train_rubric != "gold":
        return [t.without_gold() for t in tasks]
    without = [t.id for t in tasks if t.gold_rubric is None]
    if without:
        by = " or ".join(repr(n) for n, s in METHOD_TABLE.items() if s.train_rubric == "gold") or "no method"
        raise ConfigError(
            f"data.train_rubric is 'gold' (method {by} sets it), but {len(without)} training task(s) have no "
            f"gold_rubric (e.g. {without[:3]}): add one to each, or train on their rubric"
        )
    return [t.trained_on_gold() for t in tasks]
