"""Every process at a step boundary (``harnessrl.trainer.step_boundary``), over gloo on two CPU processes.

- Under real FSDP2 (torch's ``fully_shard`` of a tiny policy: its parameters are sharded DTensors, every
  forward pass gathers them): the main process's sampling call is shared out, each process generates its
  batches (the one with fewer runs a batch again, for transformers' lockstep generation), and the texts
  gathered on the main process are the texts one process draws with an unsharded copy of the same policy.
  (accelerate 1.16 does not turn FSDP on for a CPU run, docs/design.md §6: torch does, so the sharding is
  torch's own here.)
- The boundary's decisions (a trial's result, a commit) reach the other process, which applies the harness
  and records the same trial numbers and versions; the best checkpoint is saved by both; a request that fails
  on the other process is raised on the main one with its name, and the next request still works; a request
  outside an open boundary is refused.
"""

from __future__ import annotations

import gc
import json
import socket
from types import SimpleNamespace

import pytest
import torch.multiprocessing as mp

from harnessrl.data import Task
from harnessrl.interfaces import Harness, ReweightTasks
from harnessrl.trainer.harness_sync import SyncMark

TEXTS = ["Hi", "Name a colour.", "Count to three please", "Why?", "A"]
PROMPTS = [[{"role": "user", "content": text}] for text in TEXTS]
TASKS = [
    Task(id=f"t{i}", domain="d", prompt=f"Question {i}?", rubric=[{"id": "c1", "text": "Answers", "weight": 1}])
    for i in range(4)
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fake_trainer(model, tokenizer, accelerator, run_dir):
    """What a StepBoundary reads of a HarnessGRPOTrainer (tests only: the real one needs accelerate's FSDP)."""
    return SimpleNamespace(
        accelerator=accelerator,
        model_wrapped=model,
        processing_class=tokenizer,
        args=SimpleNamespace(ds3_gather_for_generation=True, gradient_checkpointing_kwargs=None),
        is_fsdp_enabled=True,
        harness=Harness(TASKS, seed=1),
        recorder=SimpleNamespace(run_dir=run_dir),
        _harness_sync=SyncMark(),
    )


def _rank(rank: int, world: int, port: int, model_dir: str, out: str) -> None:
    import os

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))  # fmt: skip
    import torch
    from accelerate import Accelerator

    torch.set_num_threads(1)
    accelerator = Accelerator(cpu=True)  # torch.distributed over gloo (MULTI_CPU)
    try:
        _rank_work(rank, world, accelerator, model_dir, out)
        torch.distributed.barrier()  # no process tears the group down while the other's collectives are in flight
    finally:
        gc.collect()  # FSDP2's pending work holds tensors: freed now, not during interpreter shutdown
        torch.distributed.destroy_process_group()


def _rank_work(rank: int, world: int, accelerator, model_dir: str, out: str) -> None:
    from pathlib import Path

    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harnessrl.records.trials import TrialCost, TrialResult
    from harnessrl.trainer.step_boundary import CollectiveSampler, StepBoundary

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    mesh = init_device_mesh("cpu", (world,))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    sharded = type(next(model.parameters())).__name__
    trainer = _fake_trainer(model, tokenizer, accelerator, Path(out))
    boundary = StepBoundary(trainer)
    sampler = CollectiveSampler(boundary, seed=7, batch_size=2)
    got: dict = {"sharded": sharded}

    saved = Path(out, f"saved{rank}")
    trainer.save_model = saved.write_text  # what the real trainer's save_model is asked, on every process
    boundary.handle("fail_on_1", lambda _: 1 / 0 if rank == 1 else "fine")

    def main_work():
        boundary.request("save", "checkpoints/best")
        try:
            boundary.request("fail_on_1")
        except RuntimeError as e:  # every process still met at the gather: the next request goes on
            got["failed"] = str(e)
        got["texts"] = sampler.sample(PROMPTS, 1.0, 6)
        got["greedy"] = sampler.sample(PROMPTS[:1], 0.0, 6)  # one batch: the other process runs it and drops it
        boundary.note_trial(_trial(TrialResult, TrialCost))
        trainer.harness.apply(ReweightTasks(task_ids=["t0"], action="park", park_steps=5), step=3, candidate_id="c1")

    boundary.around(main_work if rank == 0 else lambda: None)
    boundary.end("on_step_end", 2)
    # training goes on over the same sharded parameters (buffers gathered under inference mode could not be)
    ids = torch.tensor([[5, 6, 7, 8]])
    model(input_ids=ids, labels=ids).loss.backward()
    got["trained_after"] = all(p.grad is not None for p in model.parameters())
    if rank == 0:
        try:
            sampler.sample(PROMPTS[:1], 1.0, 4)
        except RuntimeError as e:
            got["closed"] = str(e)
    got["versions"] = trainer.harness.versions
    Path(out, f"rank{rank}.json").write_text(json.dumps(got))


def _trial(TrialResult, TrialCost):
    return TrialResult(
        candidate_id="c1", interface="task_sampling", metric="signal_share", baseline=0.25, candidate=0.5,
        improvement=0.25, ci_low=0.1, ci_high=0.4, accepted=True, verdict_kind="accepted", reason="better",
        measurements={"groups": 4}, cost=TrialCost(rollouts=8, judge_calls=0, seconds=1.5),
    )  # fmt: skip


@pytest.mark.slow
def test_fsdp2_sharded_sampling_draws_what_one_process_draws(tmp_path, tiny_model_dir):
    mp.spawn(_rank, args=(2, _free_port(), str(tiny_model_dir), str(tmp_path)), nprocs=2, join=True)
    main, other = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert main["sharded"] == other["sharded"] == "DTensor"  # the parameters really were sharded
    assert main["trained_after"] and other["trained_after"]

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harnessrl.critic.rollouts import TransformersSampler

    torch.set_num_threads(1)
    alone = TransformersSampler(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir),
        batch_size=2, seed=7,
    )  # fmt: skip
    assert main["texts"] == alone.sample(PROMPTS, 1.0, 6)  # three batches over two processes: the same draws
    assert main["greedy"] == alone.sample(PROMPTS[:1], 0.0, 6)
    assert len(set(main["texts"])) > 1
    # the decisions reached the other process: the commit applied, the trial's numbers recorded alike
    assert main["versions"] == other["versions"] and main["versions"]["task_sampling"] == 1
    rows = [json.loads((tmp_path / "ranks" / f"rank{r}.points.jsonl").read_text()) for r in (0, 1)]
    assert rows[0]["trials"] == rows[1]["trials"] and rows[0]["trials"][0]["improvement"] == 0.25
    assert rows[0]["digest"] == rows[1]["digest"] and (rows[0]["rank"], rows[1]["rank"]) == (0, 1)
    assert "training is not stopped at one now" in main["closed"]
    # the best checkpoint is saved by every process; a failure on one is raised on the main one, named
    assert [(tmp_path / f"saved{r}").read_text() for r in (0, 1)] == ["checkpoints/best"] * 2
    assert main["failed"] == "a step boundary's 'fail_on_1' failed on process 1: ZeroDivisionError: division by zero"


def test_an_evolution_point_longer_than_the_process_group_allows_is_refused():
    """The other processes wait at the boundary inside a collective: a point that may last longer than its
    timeout (transformers' ddp_timeout) would end the run, so it is refused at start-up with the fix."""
    from harnessrl.errors import ConfigError
    from harnessrl.trainer.attach import check_boundary_wait
    from harnessrl.trainer.train_config import EvolverSettings

    trainer = SimpleNamespace(accelerator=SimpleNamespace(num_processes=2), args=SimpleNamespace(ddp_timeout=1800))
    check_boundary_wait(trainer, EvolverSettings())  # the defaults: a 600 s point, 1800 s timeout
    slow = EvolverSettings.model_validate({"graph": {"time_budget_s": 2400}})
    with pytest.raises(ConfigError, match=r"time_budget_s is 2400 s.*grpo.extra.ddp_timeout above it"):
        check_boundary_wait(trainer, slow)
    held = EvolverSettings.model_validate({"mode": "external", "hold_s": 1800})
    with pytest.raises(ConfigError, match=r"evolver.hold_s is 1800 s"):
        check_boundary_wait(trainer, held)
    trainer.accelerator.num_processes = 1  # one process: nobody waits
    check_boundary_wait(trainer, slow)
