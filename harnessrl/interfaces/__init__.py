"""The three harness interfaces (task sampling, rollout guidance, rubric criteria) and the evolver's tool contract."""

from harnessrl.interfaces.guidance import GuidanceRule, RolloutGuidance, SetGuidance, guided_count
from harnessrl.interfaces.harness import Harness, HarnessUpdate, parse_update
from harnessrl.interfaces.rubric import EditRubric, RubricCriteria, RubricVersion
from harnessrl.interfaces.sampling import DifficultyFilterSettings, ReweightTasks, TaskSampling

__all__ = [
    "DifficultyFilterSettings",
    "EditRubric",
    "GuidanceRule",
    "Harness",
    "HarnessUpdate",
    "ReweightTasks",
    "RolloutGuidance",
    "RubricCriteria",
    "RubricVersion",
    "SetGuidance",
    "TaskSampling",
    "guided_count",
    "parse_update",
]
