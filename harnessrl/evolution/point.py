"""Evolution points: where training stops, the evolver graph runs over the trainer's MCP tools, and goes on.

In-process mode (the default): every ``evolver.every_steps`` steps, if reward failures were detected
since the last point, the trainer waits (so the policy really is frozen) while the evolver graph runs
against the trainer's own tool server through a real MCP client session (langchain-mcp-adapters), the
same path an external evolver takes. Its time is bounded by ``evolver.graph.time_budget_s``.

External mode: the trainer only serves the tools (URL and token in ``run_dir/tool_server.json``,
readable by the owner only) and ``harnessrl evolver --url URL --token T`` runs the same graph as its
own process (:mod:`harnessrl.evolution.client`). It first *holds* training (the ``hold_training`` tool):
the trainer stops at its next step boundary and waits there while the evolver measures and commits,
so a trial and its commit see one frozen policy (``evolver.max_trial_age_steps`` can allow more); the
hold is a lease (``evolver.hold_s``) that ends at ``release_training`` or when it runs out, so an
evolver that dies never stalls training. Every step it decides reaches the run's events.jsonl and
memory through the ``record_event`` tool, as in-process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from transformers import TrainerCallback

from harnessrl.evolution.client import run_evolution_point
from harnessrl.graph_builder import make_evolver_model
from harnessrl.interfaces.tools import ReleaseTraining
from harnessrl.records.event_payloads import EvolutionPointPayload

__all__ = ["EvolutionCallback", "write_server_file"]

logger = logging.getLogger(__name__)


class EvolutionCallback(TrainerCallback):
    """Runs the rubric audit before step 1, and an evolution point at the end of every ``every_steps``-th step
    that saw new failures, and at any step the service says one is due at first evidence
    (:meth:`~harnessrl.evolution.service.EvolutionService.point_due`: a finding of the audit has newly graded
    groups, or a failure of a new kind on a group of the data).

    ``settings`` is the run's ``evolver`` section (:class:`~harnessrl.trainer.train_config.EvolverSettings`).
    """

    def __init__(
        self,
        service,
        url: str,
        token: str,
        settings,
        failures: Callable[[], list],
        run_dir=None,
        console=None,
    ):
        self.service = service
        self.failures = failures
        self.url = url
        self.token = token
        self.settings = settings
        self.run_dir = run_dir
        self.console = console
        self.model = make_evolver_model(
            settings.backend, settings.llm, settings.graph.interfaces, settings.graph.remedies
        )
        self.seconds = 0.0
        self.points = 0
        self._seen_failures = 0
        self.trainer = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.service.training = True
        if not state.is_world_process_zero:
            return
        first = state.global_step == 0  # a resumed run audits again quietly and probes nothing
        findings = self.service.run_audit(record=first)
        if findings and self.console is not None and first:
            covered = len({t for f in findings for t in f.tasks})
            self.console.log(
                f"rubric audit: {len(findings)} requirement(s) the prompts of {covered} task(s) state and their "
                "rubrics do not check"
            )
        if first and self.settings.audit_probe_tasks and self.trainer is not None and self.service.open_findings():
            self._probe_audit()

    def _probe_audit(self) -> None:
        """The audit's probes before step 1 (``evolver.audit_probe_tasks``; docs/design.md §4, "Audit probes"), then,
        in-process, an evolution point at step 0 on them: a repair it commits applies from step 1."""
        probe = self.service.probe_audit(
            self.settings.audit_probe_tasks,
            self.trainer.num_generations,
            self.service.trials.probe_allowance(),
            self.trainer.record_probe,
        )
        if probe and self.console is not None:
            if probe.rollouts:
                said = f"probed {len(probe.tasks)} task(s) with {probe.rollouts} rollouts of the initial policy"
            else:
                why = probe.error or (
                    f"no group fits the {probe.allowance} rollouts trials.max_rollout_share allows before step 1"
                )
                said = f"no probe made ({why})"
            self.console.log(f"rubric audit: {said}")
        early = self.service.point_due(0) if probe and self.settings.mode == "in-process" else None
        if early:
            self._evolve(0, early, self.failures())

    def on_train_end(self, args, state, control, **kwargs):
        self.service.training = False
        self.service.release_training(ReleaseTraining())  # an evolver still holding has nothing left to hold

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if not state.is_world_process_zero:
            return
        # an evolver that holds training (external mode, `harnessrl evolver`) measures and commits here,
        # on a policy that does not move until it releases the hold or its lease runs out
        self.service.step_boundary(step)
        if self.settings.mode != "in-process":
            return
        if step >= state.max_steps:
            return
        failures = self.failures()
        due = step % self.settings.every_steps == 0 and len(failures) > self._seen_failures
        early = None if due else self.service.point_due(step)
        if due or early:
            self._evolve(step, early, failures)

    def _evolve(self, step: int, early: str | None, failures: list) -> None:
        """An evolution point at the end of ``step`` (0: before the first step), training stopped; ``early``: why it
        comes out of its schedule (None: on it)."""
        since = max(0, step - self.settings.every_steps + 1)
        graph_config = self.settings.graph.model_copy(update={"since_step": since})
        t0 = time.perf_counter()
        error = None
        boundary = None
        try:
            # the graph's steps reach events.jsonl and the memory through the server's record_event tool, the
            # same path as an external `harnessrl evolver`; training is stopped here, so no hold is needed
            with self.service.at_boundary(step) as boundary:
                run_dir = self.run_dir.path if self.run_dir is not None else None
                point = run_evolution_point(self.url, self.token, self.model, graph_config, run_dir=run_dir, step=step)
                final = _run(point)
        except Exception as e:  # the evolver failing must never lose the training run; it is logged and recorded
            logger.exception("evolution point at step %d failed; training goes on with the harness as it is", step)
            final, error = {}, f"{type(e).__name__}: {e}"
        elapsed = time.perf_counter() - t0
        self.seconds += elapsed
        self.points += 1
        self._seen_failures = len(failures)
        self.service.saw_failures()
        outcomes = final.get("outcomes", []) if isinstance(final, dict) else []
        committed = sum(1 for o in outcomes if getattr(o, "status", None) == "committed")
        if self.run_dir is not None:
            # the trials' count and seconds as the service saw them; handled and committed as the graph ended
            stats = boundary.stats.written() if boundary is not None and boundary.stats is not None else {}
            payload = EvolutionPointPayload(
                early=early,
                seconds=elapsed,
                stop_reason=final.get("stop_reason") if isinstance(final, dict) else None,
                error=error,
                **{**stats, "mode": "in-process", "handled": len(outcomes), "committed": committed},
            )
            self.run_dir.event(payload.KIND, step=step, **payload.written())
        if self.console is not None:
            self.console.log(
                f"evolution point @ step {step}: {len(outcomes)} failure(s) handled, {committed} update(s) "
                f"committed ({elapsed:.1f}s)"
            )
        if self.trainer is not None:
            self.trainer.record_metrics({"time/evolver": elapsed, **self.service.metrics()})


def _run(coro):
    """Run an evolution point to its end: ``asyncio.run`` here, or in a worker thread when this thread already
    runs an event loop (training called from a Jupyter cell), where ``asyncio.run`` cannot."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def write_server_file(run_dir, url: str, token: str) -> None:
    """``tool_server.json`` (owner-only) so ``harnessrl evolver --run-dir`` can find a live run's tools."""
    path = run_dir.file("tool_server.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": url, "token": token, "pid": os.getpid()}, f)
