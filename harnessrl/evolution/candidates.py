"""The harness update candidates the evolver's tools build, trial and commit, and the error a tool call the
evolver must change.

A :class:`CandidateRecord` is the trainer side's record of one candidate: the update, the failure it answers,
its preview, its trials (the critic's :class:`~harnessrl.records.trials.TrialResult`, newest last) and the
harness state they measured, its status, and where it was applied. :meth:`CandidateRecord.view` is what the
evolver sees of it (the tool contract's :class:`~harnessrl.interfaces.tools.Candidate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harnessrl.errors import HarnessRLError
from harnessrl.interfaces.tools import Candidate

if TYPE_CHECKING:
    from harnessrl.interfaces import InterfaceUpdate
    from harnessrl.records.failures import Failure
    from harnessrl.records.trials import CandidateStatus, TrialResult

__all__ = ["CandidateError", "CandidateRecord"]


class CandidateError(HarnessRLError):
    """A tool call the evolver must change: an invalid candidate, an unknown id, a refused commit.
    The message says what to do instead (it is what the LLM reads)."""


@dataclass
class CandidateRecord:
    """One candidate as the tools keep it (see the module docstring)."""

    candidate_id: str
    update: InterfaceUpdate
    failure_id: str | None
    failure: Failure | None
    step: int
    preview: dict[str, Any]
    revision: int = 0
    parent_id: str | None = None
    status: CandidateStatus = "proposed"
    trials: list[TrialResult] = field(default_factory=list)
    trial_step: int | None = None
    trial_target: str | None = None
    """The harness state the update changes, as it was when the latest trial measured it (JSON text)."""
    version: int | None = None
    applied_step: int | None = None

    def view(self) -> Candidate:
        return Candidate(
            candidate_id=self.candidate_id,
            interface=self.update.interface,
            payload=self.update.model_dump(mode="json"),
            failure_id=self.failure_id,
            status=self.status,
            preview=self.preview,
            revision=self.revision,
            parent_id=self.parent_id,
        )
