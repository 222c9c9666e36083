"""The prepared scale check (``benchmarks/scale_check.py``, run by ``benchmarks/gpu_check_scale.sh`` on a GPU):
each part's config is a valid training config that differs from the others in generation alone, and the report
reads a run directory's step time, trial and evaluation cost and the ranks' agreement."""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path

import pytest
from helpers import load_script

from harnessrl.trainer.train_config import TrainConfig

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "scale_check.py"


@pytest.fixture(scope="module")
def scale_check():
    module = load_script(SCRIPT)
    yield module
    sys.modules.pop("scale_check", None)
    sys.modules.pop("gpu_check", None)


def test_each_part_is_a_valid_config_differing_in_generation_alone(scale_check, tmp_path):
    args = Namespace(device="cuda", tasks=8, g=8, tokens=128, steps=4, server_url="http://127.0.0.1:8000")
    configs = {p: scale_check.part_config(p, tmp_path / "m", tmp_path / p, args) for p in scale_check.PARTS}
    parsed = {p: TrainConfig.model_validate(c) for p, c in configs.items()}
    assert parsed["fsdp2"].generation.backend == "transformers"
    assert (parsed["colocate"].generation.backend, parsed["colocate"].generation.vllm_mode) == ("vllm", "colocate")
    assert parsed["server"].generation.vllm_server_base_url == "http://127.0.0.1:8000"
    assert parsed["fsdp2"].evolver.trials.max_rollout_share is None and parsed["fsdp2"].eval.before_training
    rest = [{k: v for k, v in c.items() if k not in ("generation", "run_dir")} for c in configs.values()]
    assert rest[0] == rest[1] == rest[2]


def test_the_report_reads_a_run_directory(scale_check, tmp_path):
    run = tmp_path / "run"
    (run / "ranks").mkdir(parents=True)
    rows = [{"step": s, "time": 10.0 * s + (5 if s >= 3 else 0), "time/generation": 1.0} for s in range(1, 5)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    trial = {"kind": "trial", "step": 2, "result": {"cost": {"rollouts": 8, "seconds": 4.0, "judge_calls": 0}}}
    events = [trial, {"kind": "evolution_point", "step": 3}, {"kind": "commit", "step": 3}]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    ev = {"step": 0, "overall": 0.5, "seconds": 6.0, "tasks": 3, "completions_per_task": 2}
    (run / "eval.jsonl").write_text(json.dumps(ev) + "\n")
    for rank in (0, 1):
        (run / "ranks" / f"rank{rank}.points.jsonl").write_text(json.dumps({"step": 3, "rank": rank, "trials": []}))
    figures = scale_check.part_figures(run)
    assert figures["step_s_median"] == 10.0  # step 3 (an evolution point) left out: steps 2 and 4 took 10 s
    assert (figures["trial_rollouts"], figures["trial_s_per_rollout"]) == (8, 0.5)
    assert figures["eval_s_per_rollout"] == 1.0 and figures["commits"] == 1 and figures["ranks_agree"] is True
