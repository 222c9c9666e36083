"""The harness: the three interfaces together, applied by one entry point and saved as one file.

``harness.json`` in the run directory is rewritten atomically (temp file + rename) after every
applied update, so a killed run resumes with every committed update and never reads a torn file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Annotated

from pydantic import Field, TypeAdapter

from harnessrl.data.schema import Task
from harnessrl.errors import HarnessRLError
from harnessrl.interfaces.guidance import RolloutGuidance, SetGuidance
from harnessrl.interfaces.rubric import EditRubric, RubricCriteria
from harnessrl.interfaces.sampling import ReweightTasks, TaskSampling

__all__ = ["Harness", "HarnessUpdate", "parse_update"]

HarnessUpdate = Annotated[ReweightTasks | SetGuidance | EditRubric, Field(discriminator="interface")]
"""Any interface update, told apart by its ``interface`` field."""

_UPDATE = TypeAdapter(HarnessUpdate)


def parse_update(data: dict) -> ReweightTasks | SetGuidance | EditRubric:
    """Validate a dict as one of the three update types (raises pydantic's ValidationError)."""
    return _UPDATE.validate_python(data)


class Harness:
    """Task sampling, rollout guidance and rubric criteria over one set of training tasks."""

    def __init__(
        self,
        tasks: list[Task],
        *,
        sampling_floor: float = 0.1,
        seed: int = 0,
        temperature: float = 1.0,
    ):
        self.tasks = {t.id: t for t in tasks}
        self.sampling = TaskSampling(self.tasks, floor=sampling_floor, seed=seed)
        self.guidance = RolloutGuidance(default_temperature=temperature, domains={t.domain for t in tasks})
        self.rubrics = RubricCriteria(tasks)

    @property
    def versions(self) -> dict[str, int]:
        return {
            "task_sampling": self.sampling.version,
            "rollout_guidance": self.guidance.version,
            "rubric_criteria": self.rubrics.version,
        }

    def apply(
        self, update: ReweightTasks | SetGuidance | EditRubric, step: int, candidate_id: str | None = None
    ) -> int:
        """Apply any update to its interface from ``step`` on; returns that interface's new version."""
        if isinstance(update, ReweightTasks):
            return self.sampling.apply(update, step, candidate_id)
        if isinstance(update, SetGuidance):
            if update.scope == "task" and update.target not in self.tasks:
                raise ValueError(f"unknown task id {update.target!r}")
            return self.guidance.apply(update, step, candidate_id)
        if isinstance(update, EditRubric):
            return self.rubrics.apply(update, step, candidate_id)
        raise TypeError(f"not a harness update: {type(update).__name__}")

    def to_dict(self) -> dict:
        return {
            "versions": self.versions,
            "task_sampling": self.sampling.to_dict(),
            "rollout_guidance": self.guidance.to_dict(),
            "rubric_criteria": self.rubrics.to_dict(),
        }

    def save(self, path: str | Path) -> None:
        """Write ``harness.json`` atomically."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".harness-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.to_dict(), f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: str | Path, tasks: list[Task]) -> Harness:
        """Read a saved harness back over the same training tasks."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise HarnessRLError(f"{path}: cannot read the saved harness ({e}); the run directory is damaged") from e
        obj = cls.__new__(cls)
        obj.tasks = {t.id: t for t in tasks}
        try:
            obj.sampling = TaskSampling.from_dict(data["task_sampling"])
            obj.guidance = RolloutGuidance.from_dict(data["rollout_guidance"], domains={t.domain for t in tasks})
            obj.rubrics = RubricCriteria.from_dict(data["rubric_criteria"], tasks)
        except (KeyError, TypeError, ValueError) as e:  # TypeError: valid JSON of the wrong shape
            raise HarnessRLError(f"{path}: saved harness does not match this run's tasks or format ({e})") from e
        missing = set(obj.tasks) - set(obj.sampling.task_ids)
        if missing:
            raise HarnessRLError(f"{path}: saved harness lacks tasks {sorted(missing)[:5]}: was the data changed?")
        extra = set(obj.sampling.task_ids) - set(obj.tasks)
        if extra:
            raise HarnessRLError(
                f"{path}: saved harness samples tasks {sorted(extra)[:5]} that this run's training data lacks:"
                " was the data changed?"
            )
        return obj
