"""Held-out evaluation: greedy decoding, rubric version 0, the eval judge; ``harnessrl eval`` on a run dir.

The policy is a tiny random Llama with the real SmolLM2 tokenizer (built once for the module); the
judge is the embedded semantic judge.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from harnessrl import models
from harnessrl.cli import app
from harnessrl.data import Criterion, Task, load_tasks
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.interfaces import EditRubric, Harness
from harnessrl.records.run_dir import RunDir, read_jsonl
from harnessrl.records.run_record import RunRecord
from harnessrl.trainer.checkpoint_eval import BASE_CHECKPOINT, default_checkpoint
from harnessrl.trainer.evaluation import (
    EvalResult,
    eval_decoding,
    evaluate_policy,
    generate_completions,
    generate_greedy,
)
from harnessrl.trainer.run import evaluate_run
from harnessrl.trainer.train_config import TrainConfig, load_train_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _task(tid: str, domain: str, prompt: str, judged: str) -> dict:
    return {
        "id": tid,
        "domain": domain,
        "prompt": prompt,
        "reference_answer": f"A good answer to: {prompt}",
        "rubric": [
            {"id": "c1", "text": judged, "weight": 3},
            {"id": "c2", "text": "Writes at most 50 words", "weight": 1, "check": {"type": "word_count", "max": 50}},
            {
                "id": "p1",
                "text": "Says 'as an AI'",
                "weight": -1,
                "check": {"type": "contains", "phrases": ["as an AI"]},
            },
        ],
    }


ROWS = [
    _task("h-soup", "food", "Name a soup.", "Names a soup"),
    _task("h-cake", "food", "How do you bake a cake? Explain the steps in a few sentences.", "Mentions an oven"),
    _task("h-snow", "nature", "What is snow?", "Says snow is frozen water"),
    _task("h-wind", "nature", "What makes the wind blow?", "Mentions air pressure"),
    _task("h-moon", "space", "Why does the moon change shape over a month?", "Mentions sunlight on the moon"),
]


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return [Task.model_validate(r) for r in ROWS]


@pytest.fixture(scope="module")
def tokenizer(real_tokenizer):
    return real_tokenizer


@pytest.fixture(scope="module")
def model_dir(tiny_model_dir) -> Path:
    return tiny_model_dir


@pytest.fixture(scope="module")
def policy(model_dir):
    return models.load_causal_lm(str(model_dir), device="cpu")


@pytest.fixture(scope="module")
def judge():
    from harnessrl.judges import build_judge

    return build_judge({"backend": "semantic"})


class SpyJudge:
    """Records the rubric requests it is asked to grade, and grades them with a real judge."""

    def __init__(self, inner):
        self.inner = inner
        self.requests = []

    @property
    def name(self) -> str:
        return self.inner.name

    def grade(self, requests):
        self.requests.extend(requests)
        return self.inner.grade(requests)


# --------------------------------------------------------------------------- evaluate_policy


def test_scores_per_domain_and_overall(policy, tasks, judge):
    model, tok = policy
    res = evaluate_policy(model, tok, tasks, judge, step=4, max_new_tokens=8)
    assert isinstance(res, EvalResult) and res.step == 4 and res.tasks == 5
    assert set(res.per_task) == {t.id for t in tasks}
    assert all(v is not None and 0.0 <= v <= 1.0 for v in res.per_task.values())
    assert set(res.per_domain) == {"food", "nature", "space"}
    assert all(0.0 <= v <= 1.0 for v in res.per_domain.values())
    assert res.per_domain["food"] == pytest.approx((res.per_task["h-soup"] + res.per_task["h-cake"]) / 2)
    assert res.overall == pytest.approx(sum(res.per_task.values()) / 5)
    assert 0.0 <= res.overall <= 1.0
    assert len(res.samples) == 5 and res.samples[0]["task_id"] == "h-soup"
    assert res.seconds > 0
    EvalResult.model_validate(json.loads(res.model_dump_json()))  # round-trips through eval.jsonl


def test_greedy_is_deterministic_and_batch_independent(policy, tasks, judge):
    model, tok = policy
    a = generate_greedy(model, tok, tasks, max_new_tokens=8, batch_size=16)
    b = generate_greedy(model, tok, tasks, max_new_tokens=8, batch_size=16)
    one = generate_greedy(model, tok, tasks, max_new_tokens=8, batch_size=1)
    two = generate_greedy(model, tok, tasks, max_new_tokens=8, batch_size=2)
    assert a == b == one == two
    assert any(a), "the tiny model produced only empty responses"
    assert tok.padding_side == "left"  # restored
    r16 = evaluate_policy(model, tok, tasks, judge, step=0, max_new_tokens=8, batch_size=16)
    r1 = evaluate_policy(model, tok, tasks, judge, step=0, max_new_tokens=8, batch_size=1)
    assert r1.per_task == pytest.approx(r16.per_task)
    assert r1.overall == pytest.approx(r16.overall)
    assert [s["response"] for s in r1.samples] == [s["response"] for s in r16.samples]


def test_mean_of_k_sampled_completions(policy, tasks, judge):
    """completions=k: k sampled answers per task, the task's score their mean reward; the same seed gives
    the same draws whatever the batch, and the caller's random stream is left as it was."""
    model, tok = policy
    outs = generate_completions(model, tok, tasks, max_new_tokens=8, batch_size=2, completions=3, seed=7)
    assert [len(o) for o in outs] == [3] * len(tasks)
    assert any(len(set(o)) > 1 for o in outs), "sampling gave the same answer three times for every task"
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    spy = SpyJudge(judge)
    res = evaluate_policy(model, tok, tasks, spy, step=2, max_new_tokens=8, batch_size=2, completions=3, seed=7)
    assert torch.equal(torch.rand(1), before)  # the evaluation's sampling ran in a forked RNG
    assert res.completions_per_task == 3 and len(spy.requests) == 3 * len(tasks)
    again = evaluate_policy(model, tok, tasks, judge, step=2, max_new_tokens=8, batch_size=2, completions=3, seed=7)
    assert again.per_task == res.per_task
    spread = []
    for k, t in enumerate(tasks):
        rewards = [judge.grade_one(t, text).reward for text in outs[k]]
        assert res.per_task[t.id] == pytest.approx(sum(rewards) / 3)
        spread.append(float(np.var(rewards, ddof=1)) / 3)
    # the score's sampling standard error, from the answers' spread within each task
    assert res.sampling_se == pytest.approx(np.sqrt(sum(spread)) / len(tasks))
    assert res.scores.sampling_se == res.sampling_se
    assert res.samples[0]["response"] == outs[0][0]
    with pytest.raises(ValueError, match="at least 1"):
        generate_completions(model, tok, tasks, max_new_tokens=4, completions=0)


def test_eval_settings_reach_the_evaluation():
    config = load_train_config(
        None, ["eval.completions=4", "eval.temperature=0.7", "eval.seed=3", "generation.autocast=never"]
    )
    assert eval_decoding(config) == {
        "max_new_tokens": config.grpo.max_completion_length,
        "batch_size": 16,
        "completions": 4,
        "temperature": 0.7,
        "seed": 3,
        "autocast": "never",  # evaluation generates in the precision the rollouts are generated in
    }
    with pytest.raises(ConfigError, match="completions"):
        load_train_config(None, ["eval.completions=0"])


def test_model_mode_restored(policy, tasks, judge):
    model, tok = policy
    model.train()
    try:
        evaluate_policy(model, tok, tasks[:1], judge, step=0, max_new_tokens=4)
        assert model.training
    finally:
        model.eval()


def test_grades_with_version_zero_despite_harness_edits(policy, tasks, judge):
    model, tok = policy
    harness = Harness(list(tasks))
    harness.apply(
        EditRubric(
            task_id="h-soup",
            add=[Criterion(id="pad", text="Writes anything", weight=-5, check={"type": "word_count", "min": 0})],
            reweight={"c1": 10.0},
        ),
        step=3,
    )
    assert harness.rubrics.current("h-soup").version == 1
    spy = SpyJudge(judge)
    res = evaluate_policy(model, tok, tasks, spy, step=3, max_new_tokens=8)
    assert len(spy.requests) == len(tasks)
    for t, req in zip(tasks, spy.requests, strict=True):
        assert list(req.rubric) == list(t.rubric) == harness.rubrics.original(t.id)
        assert req.reference_answer == t.reference_answer
    assert res.per_task["h-soup"] is not None and res.per_task["h-soup"] > 0  # the pitfall would floor it at 0


# --------------------------------------------------------------------------- harnessrl eval --run-dir


@pytest.fixture
def run_dir(tmp_path, model_dir, tasks) -> RunDir:
    """A run directory as `harnessrl train` leaves it, without training: config, data, checkpoints."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text(
        json.dumps({**ROWS[0], "id": "t-soup"}) + "\n" + json.dumps({**ROWS[2], "id": "t-snow"}) + "\n",
        encoding="utf-8",
    )
    (data / "heldout.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS[:3]), encoding="utf-8")
    run = RunDir(tmp_path / "run")
    config = TrainConfig.model_validate(
        {
            "run_dir": str(run.path),
            "model": str(model_dir),
            "device": "cpu",
            "data": {
                "train": str(data / "train.jsonl"),
                "validation": str(data / "heldout.jsonl"),
                "test": str(data / "heldout.jsonl"),
            },
            "eval": {"max_new_tokens": 6},
        }
    )
    run.write_config(config)
    for name in ("checkpoint-3", "final"):
        shutil.copytree(model_dir, run.checkpoints / name)
    return run


def test_eval_run_defaults_to_final_then_best(run_dir):
    out = evaluate_run(run_dir.path)
    assert Path(out["checkpoint"]) == run_dir.checkpoints / "final"
    res = out["result"]
    # the one held-out file is split per domain: soup and snow to test (reported), cake to validation
    assert res.split == "test" and set(res.per_task) == {"h-soup", "h-snow"}
    assert res.tasks == 2 and res.step == -1 and 0.0 <= res.overall <= 1.0
    assert list(out["results"]["validation"].per_task) == ["h-cake"]
    rows = run_dir.read("eval.jsonl")
    assert [r["split"] for r in rows] == ["validation", "test"]
    assert all(r["source"] == "harnessrl eval" and r["checkpoint"] == out["checkpoint"] for r in rows)
    assert rows[1]["per_task"] == res.per_task

    shutil.copytree(run_dir.checkpoints / "final", run_dir.checkpoints / "best")
    assert Path(evaluate_run(run_dir.path)["checkpoint"]).name == "best"
    out = evaluate_run(run_dir.path, "checkpoint-3")
    assert out["result"].step == 3
    # the same weights give the same scores, whichever name they are under
    assert out["result"].per_task == pytest.approx(res.per_task)
    out = evaluate_run(run_dir.path, str(run_dir.checkpoints / "final"))  # a path works too
    assert Path(out["checkpoint"]) == run_dir.checkpoints / "final"
    assert len(run_dir.read("eval.jsonl")) == 4 * 2  # a row per split


def test_eval_run_scores_the_untrained_policy_where_it_was_the_best(run_dir):
    """best.json at step 0 with no checkpoint: training never beat the untrained policy on validation, so the best
    is the run's model before training (`base`), not the final weights."""
    (run_dir.path / "best.json").write_text(json.dumps({"step": 0, "overall": 0.3, "checkpoint": None}))
    assert default_checkpoint(run_dir.path) == BASE_CHECKPOINT
    out = evaluate_run(run_dir.path, splits=["test"])
    assert out["checkpoint"] == BASE_CHECKPOINT and out["result"].step == 0
    # the run's model is the weights the final checkpoint copies here: the same scores
    final = evaluate_run(run_dir.path, "final", splits=["test"])["result"]
    assert out["result"].per_task == pytest.approx(final.per_task)
    assert [r["checkpoint"] for r in run_dir.read("eval.jsonl")] == [
        BASE_CHECKPOINT,
        str(run_dir.checkpoints / "final"),
    ]
    # a best checkpoint saved later wins; with neither, the final weights
    shutil.copytree(run_dir.checkpoints / "final", run_dir.checkpoints / "best")
    assert default_checkpoint(run_dir.path) == "best"
    shutil.rmtree(run_dir.checkpoints / "best")
    (run_dir.path / "best.json").write_text(json.dumps({"step": 3, "overall": 0.3, "checkpoint": None}))
    assert default_checkpoint(run_dir.path) == "final"


def test_eval_run_prefers_the_run_checkpoint_over_the_cwd(run_dir, tmp_path, monkeypatch):
    stray = tmp_path / "elsewhere"
    (stray / "final").mkdir(parents=True)  # not a model: loading it would fail
    monkeypatch.chdir(stray)
    out = evaluate_run(run_dir.path, "final")
    assert Path(out["checkpoint"]) == run_dir.checkpoints / "final"


def test_eval_run_unknown_checkpoint_lists_what_exists(run_dir):
    with pytest.raises(HarnessRLError) as e:
        evaluate_run(run_dir.path, "checkpoint-9")
    msg = str(e.value)
    assert "no checkpoint 'checkpoint-9'" in msg
    assert "checkpoint-3" in msg and "final" in msg


def test_eval_run_scores_a_selection_with_more_answers(run_dir):
    """--completions, --split, --domain/--family: the rows say what they scored and stay out of the curve."""
    out = evaluate_run(run_dir.path, "final", completions=3, splits=["test"], domains=["nature"])
    res = out["result"]
    assert list(out["results"]) == ["test"] and list(res.per_task) == ["h-snow"]
    assert res.completions_per_task == 3 and res.tasks == 1
    (row,) = run_dir.read("eval.jsonl")
    assert row["selection"] == {"domains": ["nature"]} and row["completions_per_task"] == 3
    record = RunRecord.load(run_dir.path)
    assert record.evaluations == ()  # a row of `harnessrl eval` is not a point of the training curve
    # the whole of both splits, at the run's own eval.completions, says it selected nothing
    out = evaluate_run(run_dir.path, "final")
    assert run_dir.read("eval.jsonl")[-1]["selection"] is None
    assert out["results"]["test"].completions_per_task == 1
    assert out["results"]["test"].sampling_se is None  # one greedy answer a task: no spread to measure


def test_eval_run_selection_errors_name_what_the_run_has(run_dir):
    with pytest.raises(HarnessRLError, match=r"no held-out task of domain 'ocean'.*food, nature"):
        evaluate_run(run_dir.path, domains=["ocean"])
    with pytest.raises(HarnessRLError, match=r"no held-out task of family 'brief'.*none \(no task names one\)"):
        evaluate_run(run_dir.path, families=["brief"])
    with pytest.raises(HarnessRLError, match=r"no train split; the run has: validation, test"):
        evaluate_run(run_dir.path, splits=["train"])
    with pytest.raises(HarnessRLError, match="completions must be at least 1"):
        evaluate_run(run_dir.path, completions=0)
    assert not (run_dir.path / "eval.jsonl").exists()  # nothing written before the error


def test_eval_cli_prints_the_selection(run_dir):
    out = CliRunner().invoke(
        app, ["eval", "--run-dir", str(run_dir.path), "--checkpoint", "final", "--completions", "2", "--split", "test"]
    )
    assert out.exit_code == 0, out.output
    assert "test (2 tasks × 2), rubric" in out.output and "validation" not in out.output
    assert "sampling standard error" in out.output
    out = CliRunner().invoke(app, ["eval", "--run-dir", str(run_dir.path), "--family", "brief"])
    assert isinstance(out.exception, HarnessRLError) and "no held-out task of family 'brief'" in str(out.exception)


def test_eval_run_errors(tmp_path, run_dir):
    with pytest.raises(HarnessRLError, match="no such run directory"):
        evaluate_run(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(HarnessRLError, match=r"no config\.yaml"):
        evaluate_run(tmp_path / "empty")
    cfg = _yaml(run_dir.config)
    cfg["data"]["validation"] = cfg["data"]["test"] = None
    run_dir.write_config(TrainConfig.model_validate(cfg))
    with pytest.raises(HarnessRLError, match="no held-out data"):
        evaluate_run(run_dir.path)


def test_eval_run_rejects_shared_task_ids(run_dir):
    cfg = _yaml(run_dir.config)
    shutil.copy(cfg["data"]["test"], cfg["data"]["train"])  # every held-out task now also trains
    with pytest.raises(HarnessRLError, match="split off before training"):
        evaluate_run(run_dir.path)
    assert load_tasks(cfg["data"]["train"])


def _yaml(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- run directory reading


def test_torn_last_line_is_skipped(tmp_path):
    run = RunDir(tmp_path / "r")
    run.append("metrics.jsonl", {"step": 1, "reward": 0.5})
    run.append("metrics.jsonl", {"step": 2, "reward": 0.6}, sync=True)
    with open(run.file("metrics.jsonl"), "a", encoding="utf-8") as f:
        f.write('{"step": 3, "rew')  # killed mid-write
    assert run.read("metrics.jsonl") == [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.6}]
    assert read_jsonl(run.file("metrics.jsonl")) == run.read("metrics.jsonl")
    # a resumed run appends after the torn line: its first row must not be glued to the fragment
    run.append("metrics.jsonl", {"step": 3, "reward": 0.7})
    assert [r["step"] for r in run.read("metrics.jsonl")] == [1, 2, 3]
    assert read_jsonl(tmp_path / "missing.jsonl") == []
    assert run.read_json("best.json") is None


def test_recorder_appends_after_a_torn_line(tmp_path):
    from harnessrl.records.steps import GroupRecord, Recorder, StepRecord

    def group(step: int) -> GroupRecord:
        return GroupRecord(
            step=step,
            task_id="t",
            domain="d",
            rubric_version=0,
            rewards=[0.1, 0.2],
            mean=0.15,
            std=0.05,
            flat=False,
            lengths=[3, 4],
            criterion_means={"c1": 0.5},
        )

    rec = Recorder(tmp_path)
    rec.add(StepRecord(step=0, groups=[group(0)]), [])
    with open(tmp_path / "steps.jsonl", "a", encoding="utf-8") as f:
        f.write('{"step": 1, "task')  # killed mid-write
    Recorder(tmp_path).add(StepRecord(step=1, groups=[group(1)]), [])
    assert [r["step"] for r in read_jsonl(tmp_path / "steps.jsonl")] == [0, 1]


def test_blank_and_corrupt_lines(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n   \nnot json\n{"a": 2}\n', encoding="utf-8")
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]


def test_run_dir_layout(tmp_path):
    run = RunDir(tmp_path / "new")
    assert all((run.path / d).is_dir() for d in ("checkpoints", "plots", "rollouts"))
    run.write_json("best.json", {"step": 2, "overall": 0.5})
    assert run.read_json("best.json") == {"step": 2, "overall": 0.5}
    assert not list(run.path.glob(".*.tmp"))
    ev = run.event("evaluation", step=2, overall=0.5)
    assert run.read("events.jsonl") == [ev.model_dump()]
    with pytest.raises(HarnessRLError):
        RunDir(tmp_path / "absent", create=False)
