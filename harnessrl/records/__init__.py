"""What a run records: step and rollout records, failures, trial results, events, the run directory and its reader."""

from harnessrl.records.events import EVENT_KINDS, EventCallback
from harnessrl.records.failures import FAILURE_KINDS, Failure, FailureKind
from harnessrl.records.run_dir import RunDir, open_append, read_jsonl
from harnessrl.records.run_record import Missing, RunRecord
from harnessrl.records.steps import GroupRecord, Recorder, RolloutRecord, StepRecord, group_stats
from harnessrl.records.trials import CandidateStatus, TrialCost, TrialResult

__all__ = [
    "EVENT_KINDS",
    "FAILURE_KINDS",
    "CandidateStatus",
    "EventCallback",
    "Failure",
    "FailureKind",
    "GroupRecord",
    "Missing",
    "Recorder",
    "RolloutRecord",
    "RunDir",
    "RunRecord",
    "StepRecord",
    "TrialCost",
    "TrialResult",
    "group_stats",
    "open_append",
    "read_jsonl",
]
