"""The harness interfaces (one :class:`Interface` type; task sampling, rollout guidance and rubric criteria
built in, more as plug-ins), their registry, the harness that holds them, and the evolver's tool contract."""

from harnessrl.interfaces.base import AppliedUpdate, HarnessContext, Interface, InterfaceUpdate, Row, Suggestion
from harnessrl.interfaces.evidence import ProposalEvidence
from harnessrl.interfaces.guidance import GuidanceRule, RolloutGuidance, SetGuidance, guided_count
from harnessrl.interfaces.harness import Harness, parse_update
from harnessrl.interfaces.registry import ENTRY_POINT_GROUP, interface_classes, load_interface
from harnessrl.interfaces.rubric import RubricCriteria, RubricVersion
from harnessrl.interfaces.rubric_edit import EditRubric
from harnessrl.interfaces.sampling import DifficultyFilterSettings, ReweightTasks, TaskSampling

__all__ = [
    "ENTRY_POINT_GROUP",
    "AppliedUpdate",
    "DifficultyFilterSettings",
    "EditRubric",
    "GuidanceRule",
    "Harness",
    "HarnessContext",
    "Interface",
    "InterfaceUpdate",
    "ProposalEvidence",
    "ReweightTasks",
    "RolloutGuidance",
    "Row",
    "RubricCriteria",
    "RubricVersion",
    "SetGuidance",
    "Suggestion",
    "TaskSampling",
    "guided_count",
    "interface_classes",
    "load_interface",
    "parse_update",
]
