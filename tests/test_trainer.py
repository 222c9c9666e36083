"""The GRPO trainer with the harness wired in, on a tiny random Llama with the real SmolLM2 tokenizer.

One two-step training run (module-scoped, ~10-20 s on two CPU cores) backs the run-directory tests;
task sampling, guidance, rubric versions and the per-temperature generation split are tested on the
trainer's own methods without a model (``object.__new__`` plus the attributes they read).
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import task_row
from trl import GRPOTrainer

from harnessrl.data import Criterion, Task, load_tasks
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.interfaces import EditRubric, Harness, ReweightTasks, SetGuidance, guided_count
from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import GroupRecord, RolloutRecord
from harnessrl.trainer.generation import RolloutGeneration
from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer
from harnessrl.trainer.judge_faults import JudgeFaults
from harnessrl.trainer.rewards import RubricReward
from harnessrl.trainer.run import build_grpo_config, evaluate_run, train
from harnessrl.trainer.step_records import StepRecords
from harnessrl.trainer.train_config import TrainConfig, load_train_config

G = 2  # group size of the training run


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --------------------------------------------------------------------------- data


def _task(tid: str, domain: str, prompt: str, reference: str, judged: str, **extra) -> dict:
    return task_row(tid, domain, prompt, reference, judged, **extra)


TRAIN_ROWS = [
    _task("fruit", "food", "Name a fruit.", "An apple is a fruit.", "Names a fruit such as an apple"),
    _task("bread", "food", "How is bread made?", "Bread is baked from flour and water.", "Mentions flour"),
    _task("sky", "nature", "Why is the sky blue?", "Sunlight scatters off air.", "Mentions scattered sunlight"),
    _task("rain", "nature", "Where does rain come from?", "Rain falls from clouds.", "Mentions clouds"),
]
HELDOUT_ROWS = [  # split alternately per domain: soup and snow to test, stew and fog to validation
    _task("h-soup", "food", "Name a soup.", "Tomato soup.", "Names a soup"),
    _task("h-snow", "nature", "What is snow?", "Frozen water falling from clouds.", "Says snow is frozen water"),
    _task("h-stew", "food", "What goes in a stew?", "Meat and vegetables.", "Names a vegetable"),
    _task("h-fog", "nature", "What is fog?", "A cloud near the ground.", "Says fog is a low cloud"),
]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def data_files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("data")
    return {
        "train": _write_jsonl(d / "train.jsonl", TRAIN_ROWS),
        "heldout": _write_jsonl(d / "heldout.jsonl", HELDOUT_ROWS),
    }


@pytest.fixture(scope="module")
def train_tasks(data_files) -> list[Task]:
    return load_tasks(data_files["train"])


# --------------------------------------------------------------------------- the tiny model


@pytest.fixture(scope="module")
def tokenizer(real_tokenizer):
    return real_tokenizer


@pytest.fixture(scope="module")
def model_dir(tiny_model_dir) -> Path:
    """A tiny random LlamaForCausalLM and the real SmolLM2 tokenizer, saved as a loadable checkpoint."""
    return tiny_model_dir


def _config(run_dir: Path, model_dir: Path, data_files: dict[str, Path], **grpo) -> TrainConfig:
    return TrainConfig.model_validate(
        {
            "run_dir": str(run_dir),
            "model": str(model_dir),
            "device": "cpu",
            "data": {
                "train": str(data_files["train"]),
                "validation": str(data_files["heldout"]),
                "test": str(data_files["heldout"]),
            },
            "grpo": {
                "num_generations": G,
                "tasks_per_step": 2,
                "max_completion_length": 8,
                "learning_rate": 1e-2,
                "max_steps": 2,
                "save_steps": 2,
                **grpo,
            },
            "eval": {"every_steps": None, "max_new_tokens": 8, "batch_size": 4},
        }
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory, model_dir, data_files):
    """One two-step run: its config, summary, trainer and run directory."""
    run_dir = tmp_path_factory.mktemp("runs") / "tiny"
    config = _config(run_dir, model_dir, data_files)
    trainers: list[HarnessGRPOTrainer] = []
    t0 = time.perf_counter()
    summary = train(config, trainer_hook=lambda tr, run: trainers.append(tr))
    print(f"two-step tiny run: {time.perf_counter() - t0:.1f} s")
    return SimpleNamespace(config=config, summary=summary, trainer=trainers[0], run=RunDir(run_dir, create=False))


def _safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


# --------------------------------------------------------------------------- 1. a real run


def test_training_changes_the_weights(trained, model_dir):
    before = _safetensors(model_dir)
    after = _safetensors(trained.run.checkpoints / "final")
    assert before.keys() == after.keys()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed, "no parameter moved in two GRPO steps"
    assert any("layers.0" in k for k in changed)
    assert trained.summary.steps == 2 == trained.trainer.state.global_step


def test_run_directory_is_complete(trained, train_tasks):
    run, config = trained.run, trained.config
    assert load_train_config(run.config) == config
    harness = Harness.load(run.harness, train_tasks)
    assert harness.versions == {
        **dict.fromkeys(harness.versions, 0),
        "task_sampling": 0,
        "rollout_guidance": 0,
        "rubric_criteria": 0,
    }

    rows = [m for m in run.read("metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in rows] == [1, 2]
    for m in rows:
        for key in (
            "reward",
            "frac_reward_zero_std/all_low",
            "frac_reward_zero_std/all_high",
            "judge/latency",
            "judge/parse_fail_rate",
            "criteria/pass_rate/judged",
            "criteria/pass_rate/programmatic",
            "time/generation",
        ):
            assert key in m, key
        assert 0.0 <= m["reward"] <= 1.0
        assert m["criteria/pass_rate/programmatic"] is not None
        assert m["judge/parse_fail_rate"] == 0.0
        assert m["effective_group_ratio"] == pytest.approx(1 - m["frac_reward_zero_std/eps"])
        # cumulative accounting: every training rollout, and the groups DAPO's dynamic sampling dropped (the
        # default method is the harness over it), no trials (no evolution point)
        dropped = sum(g["step"] <= m["step"] for g in run.read("discarded_groups.jsonl"))
        assert m["rollouts/discarded"] == dropped * G and m["rollouts/trial"] == 0
        assert m["rollouts/generated"] == m["step"] * 2 * G + m["rollouts/discarded"]
    # judge requests so far (training grading, reference answers): at least the steps' own
    assert rows[0]["judge/calls_total"] >= rows[0]["judge/calls"] > 0
    assert rows[1]["judge/calls_total"] >= rows[0]["judge/calls_total"] + rows[1]["judge/calls"]

    groups = [GroupRecord.model_validate(g) for g in run.read("steps.jsonl")]
    assert sorted(Counter(g.step for g in groups).items()) == [(1, 2), (2, 2)]  # 1-based, as in metrics.jsonl
    ids = {t.id for t in train_tasks}
    for step in (1, 2):
        assert len({g.task_id for g in groups if g.step == step}) == 2  # two distinct task groups a step
    for g in groups:
        assert g.task_id in ids
        assert len(g.rewards) == G and len(g.lengths) == G
        assert all(0 < n <= config.grpo.max_completion_length for n in g.lengths)
        assert g.rubric_version == 0
        assert set(g.criterion_means) == {"c1", "c2"}
        assert g.guided == 0 and g.guidance is None

    files = sorted(p.name for p in (run.path / "rollouts").iterdir())
    assert files == ["step_000001.jsonl", "step_000002.jsonl"]
    rollouts = [RolloutRecord.model_validate(r) for r in run.read("rollouts/step_000001.jsonl")]
    rollouts = [r for r in rollouts if r.trained]  # the groups DAPO dropped are kept too, marked as not trained
    assert len(rollouts) == 2 * G
    assert sorted(r.member for r in rollouts) == sorted(list(range(G)) * 2)

    evals = run.read("eval.jsonl")
    assert [(e["step"], e["split"]) for e in evals] == [(0, "validation"), (0, "test"), (2, "validation"), (2, "test")]
    assert all(set(e["per_domain"]) == {"food", "nature"} and e["tasks"] == 2 for e in evals)
    assert {t for e in evals if e["split"] == "test" for t in e["per_task"]} == {"h-soup", "h-snow"}
    assert {t for e in evals if e["split"] == "validation" for t in e["per_task"]} == {"h-stew", "h-fog"}
    validation = [e for e in evals if e["split"] == "validation"]
    evals = [e for e in evals if e["split"] == "test"]  # the reported curve
    best = run.read_json("best.json")
    assert best["step"] in (0, 2) and best["split"] == "validation"
    assert best["overall"] == max(e["overall"] for e in validation)  # chosen on validation alone
    assert best["test"]["overall"] == next(e["overall"] for e in evals if e["step"] == best["step"])
    if best["step"] == 2:
        assert (run.checkpoints / "best" / "model.safetensors").exists()
    assert (run.checkpoints / "final" / "model.safetensors").exists()
    assert (run.checkpoints / "final" / "tokenizer.json").exists()

    summary = run.read_json("summary.json")
    assert summary["steps"] == 2
    assert summary["eval_before"] == evals[0]["overall"] and summary["eval_after"] == evals[-1]["overall"]
    assert summary["reward_first"] == rows[0]["reward"] and summary["reward_last"] == rows[-1]["reward"]
    assert summary["method"] == "harnessrl" and summary["evolver_enabled"] is True
    assert summary["steps_to_best"] == best["step"]
    assert summary["eval"]["validation"]["best"] == best["overall"]
    assert summary["eval"]["test"]["at_best"] == best["test"]["overall"]
    acc = summary["accounting"]
    assert acc["rollouts_generated"] == rows[-1]["rollouts/generated"] >= 2 * 2 * G
    assert "rollouts_generated" not in summary  # the totals: once
    assert acc["judge_calls"] >= rows[-1]["judge/calls_total"]
    assert acc["wall_seconds"] == summary["wall_seconds"] and 0 <= acc["harness_overhead_share"] < 1

    events = run.read("events.jsonl")
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert events[0]["method"] == "harnessrl" and events[0]["evolver"] is True
    assert events[0]["validation_tasks"] == events[0]["test_tasks"] == 2
    assert kinds.count("evaluation") == 4
    # where every part ran: the judges follow the run's device (cpu here) unless told otherwise
    devices = {"policy": "cpu", "critic_trials": "cpu", "evaluation": "cpu", "judge": "cpu", "eval_judge": "cpu"}
    assert events[0]["devices"] == summary["extra"]["devices"] == devices


def test_report_is_written(trained):
    from harnessrl.trainer.run_report import write_report

    path = write_report(trained.run.path)
    assert path == trained.run.report and path.exists()
    text = path.read_text(encoding="utf-8")
    assert "plots/training.png" in text and "Evaluation (validation chooses" in text
    assert (trained.run.plots / "training.png").stat().st_size > 1000


def test_existing_run_dir_needs_resume_or_overwrite(trained):
    with pytest.raises(HarnessRLError, match="--resume"):
        train(trained.config)


def test_real_trainer_rows(trained):
    tr = trained.trainer
    rows = tr.harness_rows(2 * G, step=0)
    assert [r["member"] for r in rows] == list(range(G)) * 2
    assert all(r["rubric_version"] == 0 and not r["guided"] for r in rows)


def test_evaluate_run_on_a_run(trained):
    run = trained.run
    n_before = len(run.read("eval.jsonl"))
    best = json.loads((run.path / "best.json").read_text())
    if (run.checkpoints / "best").exists():
        default = "best"
    else:  # the untrained policy scored best on validation (no checkpoint of it): `base`, the run's model
        default = "base" if best["step"] == 0 and not best.get("checkpoint") else "final"
    out = evaluate_run(run.path)
    assert Path(out["checkpoint"]).name == default
    assert out["result"].tasks == 2 and 0.0 <= out["result"].overall <= 1.0
    assert out["result"] is out["results"]["test"] and set(out["results"]) == {"validation", "test"}
    rows = run.read("eval.jsonl")
    assert len(rows) == n_before + 2 and all(r["source"] == "harnessrl eval" for r in rows[-2:])
    assert [r["split"] for r in rows[-2:]] == ["validation", "test"]
    with pytest.raises(HarnessRLError, match="no checkpoint 'checkpoint-99'") as e:
        evaluate_run(run.path, "checkpoint-99")
    assert "final" in str(e.value) and "checkpoint-2" in str(e.value)


def test_resume_continues_with_the_saved_harness(trained, tmp_path, train_tasks):
    copy = tmp_path / "resumed"
    shutil.copytree(trained.run.path, copy)
    # a committed harness update in the run directory must survive the restart
    harness = Harness.load(copy / "harness.json", train_tasks)
    harness.apply(ReweightTasks(task_ids=["fruit"], action="retire"), step=2)
    harness.apply(SetGuidance(target="rain", text="Think of clouds.", fraction=0.5), step=2)
    harness.save(copy / "harness.json")
    versions = harness.versions

    data = trained.config.data
    config = _config(copy, trained.config.model, {"train": data.train, "heldout": data.test}, max_steps=3)
    summary = train(config, resume=True)
    assert summary.steps == 3
    assert Harness.load(copy / "harness.json", train_tasks).versions == versions
    groups = [GroupRecord.model_validate(g) for g in RunDir(copy, create=False).read("steps.jsonl")]
    assert sorted({g.step for g in groups}) == [1, 2, 3]
    assert all(g.task_id != "fruit" for g in groups if g.step == 3)
    metrics = [m for m in RunDir(copy, create=False).read("metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    for g in groups:
        if g.step == 3 and g.task_id == "rain":
            assert g.guided == 1 and g.guidance == "Think of clouds."
    evals = [e for e in RunDir(copy, create=False).read("eval.jsonl") if e.get("source") != "harnessrl eval"]
    evals = [e for e in evals if e["split"] == "test"]
    assert [e["step"] for e in evals] == [0, 2, 3]
    assert summary.eval_after == evals[-1]["overall"]
    assert (
        not _safetensors(copy / "checkpoints" / "final").keys() ^ _safetensors(trained.run.checkpoints / "final").keys()
    )


# --------------------------------------------------------------------------- 2. task sampling rows


def _bare_trainer(harness: Harness, g: int = 4, num_processes: int = 1, process_index: int = 0):
    tr = object.__new__(HarnessGRPOTrainer)
    tr.harness = harness
    tr.num_generations = g
    tr.accelerator = SimpleNamespace(num_processes=num_processes, process_index=process_index)
    return tr


def _assert_grouped(rows: list[dict], g: int) -> list[str]:
    """Each task fills exactly ``g`` consecutive rows with members 0..g-1; returns the tasks in order."""
    assert len(rows) % g == 0
    order = []
    for k in range(0, len(rows), g):
        block = rows[k : k + g]
        assert len({r["task_id"] for r in block}) == 1
        assert [r["member"] for r in block] == list(range(g))
        order.append(block[0]["task_id"])
    return order


def test_rows_group_each_task_g_times(train_tasks):
    tr = _bare_trainer(Harness(train_tasks), g=4)
    for step in range(5):
        rows = tr.harness_rows(12, step)
        order = _assert_grouped(rows, 4)
        assert len(set(order)) == 3  # distinct tasks while enough are eligible
        by_id = {t.id: t for t in train_tasks}
        for r in rows:
            assert r["prompt"] == by_id[r["task_id"]].messages()
            assert r["rubric_version"] == 0 and r["guided"] is False and r["temperature"] == 1.0
    assert tr.harness_rows(12, 3) == tr.harness_rows(12, 3)  # a pure function of the step
    with pytest.raises(ValueError, match="multiple of num_generations"):
        tr.harness_rows(6, 0)


def test_retired_and_parked_tasks_never_appear(train_tasks):
    harness = Harness(train_tasks)
    harness.apply(ReweightTasks(task_ids=["fruit"], action="retire"), step=0)
    harness.apply(ReweightTasks(task_ids=["sky"], action="park", park_steps=30), step=0)
    tr = _bare_trainer(harness, g=2)
    for step in range(30):
        assert {r["task_id"] for r in tr.harness_rows(4, step)} == {"bread", "rain"}
    seen = {r["task_id"] for step in range(30, 60) for r in tr.harness_rows(4, step)}
    assert "sky" in seen and "fruit" not in seen  # parking ends; retiring does not


def test_weights_shift_task_frequencies(train_tasks):
    harness = Harness(train_tasks)
    tr = _bare_trainer(harness, g=2)
    steps = range(400)
    uniform = Counter(tr.harness_rows(2, s)[0]["task_id"] for s in steps)
    harness.apply(ReweightTasks(task_ids=["rain"], action="reweight", weight=10.0), step=0)
    weighted = Counter(tr.harness_rows(2, s)[0]["task_id"] for s in steps)
    assert max(uniform.values()) < 160  # ~100 each
    assert weighted["rain"] > 250  # p = 10/13
    assert weighted["rain"] > 3 * max(v for k, v in weighted.items() if k != "rain")


@pytest.mark.parametrize(("g", "tasks"), [(4, 3), (2, 2), (3, 2)])
def test_two_processes_make_the_single_process_batch(train_tasks, g, tasks):
    harness = Harness(train_tasks)
    total = g * tasks
    single = _bare_trainer(harness, g=g).harness_rows(total, step=7)
    halves = [_bare_trainer(harness, g=g, num_processes=2, process_index=i).harness_rows(total // 2, 7) for i in (0, 1)]
    assert len(halves[0]) == len(halves[1]) == total // 2
    assert halves[0] + halves[1] == single
    _assert_grouped(halves[0] + halves[1], g)
    # a group split across processes keeps its member indices consistent
    members = [r["member"] for r in halves[0] + halves[1]]
    assert members == list(range(g)) * tasks


class WordBackend:
    """Satisfied when the response contains 'good'."""

    name = "word"

    def grade(self, requests):
        from harnessrl.judges import BackendVerdict

        return [BackendVerdict(float("good" in r.response), 0.9) for r in requests]


def test_the_second_opinion_asks_the_judge_again(train_tasks):
    """The judge-disagreement check's re-grade bypasses the verdict cache (a cached verdict would always
    agree) and keeps its answers out of it, under the rubric version each rollout was graded with."""
    from harnessrl.judges import RubricJudge, RubricRequest
    from harnessrl.records.steps import RolloutRecord
    from harnessrl.trainer.attach import _second_opinion

    harness = Harness(train_tasks[:1])
    task = train_tasks[0]
    judge = RubricJudge(WordBackend())
    judge.grade([RubricRequest.for_task(task, "a good answer", harness.rubrics.current(task.id).criteria)])
    asked = judge.stats.backend_requests
    rollout = RolloutRecord(
        step=1, task_id=task.id, member=0, guided=False, rubric_version=0, temperature=1.0,
        completion="a good answer", length_tokens=3, length_words=3, reward=1.0, verdicts={},
    )  # fmt: skip
    trainer = SimpleNamespace(rubric_reward=SimpleNamespace(judge=judge), harness=harness)
    (again,) = _second_opinion(trainer)([rollout])
    assert judge.stats.backend_requests > asked  # asked again, not read from the cache
    assert all(v.source != "cache" for v in again.verdicts)


def test_step_record_keeps_each_group_apart(train_tasks):
    """More groups than eligible tasks: a task drawn twice makes two GroupRecords of G rollouts each."""
    from collections import defaultdict

    from harnessrl.judges import RubricJudge
    from harnessrl.records.steps import Recorder

    harness = Harness(train_tasks[:2])
    pit = Criterion(id="pit", text="Says bad", weight=-1, check={"type": "contains", "phrases": ["bad"]})
    harness.apply(EditRubric(task_id="bread", add=[pit]), step=0)
    tr = _bare_trainer(harness, g=2)
    tr.accelerator.is_main_process = True
    tr.rubric_reward = RubricReward(RubricJudge(WordBackend()), harness)
    tr.recorder = Recorder(None)
    tr.step_records = StepRecords(harness, tr.rubric_reward, 2, zero_std_eps=0.02, flat_low=0.3, flat_high=0.8)
    tr.judge_faults = JudgeFaults()
    tr.accounting = dict.fromkeys(HarnessGRPOTrainer.ACCOUNTING, 0)
    tr._metrics = {"train": defaultdict(list)}
    seen = []
    tr.step_listeners = [seen.append]

    rows = tr.harness_rows(6, step=5)
    order = _assert_grouped(rows, 2)
    assert len(set(order)) < 3  # two tasks for three groups: one is drawn twice
    texts = ["good one", "good two", "bad one", "bad two", "good three", "bad three"]
    tr.rubric_reward(
        [r["prompt"] for r in rows],
        [[{"role": "assistant", "content": t}] for t in texts],
        task_id=[r["task_id"] for r in rows],
        rubric_version=[r["rubric_version"] for r in rows],
        completion_ids=[[1] * (i + 1) for i in range(6)],
    )
    tr._record_step(5, rows, {"generation": 0.5, "judging": 0.25})

    record = tr.recorder.steps[5]
    assert seen == [record]
    assert [g.task_id for g in record.groups] == order
    assert [g.lengths for g in record.groups] == [[1, 2], [3, 4], [5, 6]]
    high, low, mixed = record.groups
    assert high.flat and high.mean == 1.0 and high.std == 0.0
    assert low.flat and low.mean < 0.5
    assert not mixed.flat and mixed.std > 0.1
    for g in record.groups:
        assert g.rubric_version == (1 if g.task_id == "bread" else 0)
        assert set(g.criterion_means) == ({"c1", "c2", "pit"} if g.task_id == "bread" else {"c1", "c2"})
    assert len(tr.recorder.latest_rollouts()) == 6

    m = tr._metrics["train"]
    assert m["frac_reward_zero_std/eps"] == [pytest.approx(2 / 3)]
    assert m["frac_reward_zero_std/all_high"] == [pytest.approx(1 / 3)]
    # split at the detectors' thresholds (0.3 / 0.8), as the detectors call a group uniformly low / high
    low_share = 1 / 3 if low.mean < 0.3 else 0.0
    assert m["frac_reward_zero_std/all_low"] == [pytest.approx(low_share)]
    assert m["frac_reward_zero_std/mid"] == [pytest.approx(1 / 3 - low_share)]
    assert m["criteria/pass_rate/judged"] == [pytest.approx(0.5)]
    assert m["criteria/pass_rate/programmatic"] == [1.0]
    assert "criteria/pass_rate/pitfall" in m
    assert m["time/generation"] == [0.5] and m["time/judging"] == [0.25]
    assert m["judge/parse_fail_rate"] == [0.0] and "judge/latency" in m
    assert m["harness/version/rubric_criteria"] == [1.0]
    assert m["guided_fraction"] == [0.0]


# --------------------------------------------------------------------------- 3. guidance


def test_guidance_hint_goes_to_the_first_members(train_tasks):
    harness = Harness(train_tasks, temperature=1.0)
    harness.apply(SetGuidance(target="bread", text="Start with flour.", fraction=0.5, temperature=1.7), step=0)
    tr = _bare_trainer(harness, g=4)
    plain = {t.id: t.messages() for t in train_tasks}
    saw = False
    for step in range(10):
        for r in tr.harness_rows(8, step):
            if r["task_id"] != "bread":
                assert r["prompt"] == plain[r["task_id"]] and not r["guided"] and r["temperature"] == 1.0
                continue
            saw = True
            k = guided_count(4, 0.5)
            assert k == 2
            assert r["temperature"] == 1.7
            if r["member"] < k:
                assert r["guided"]
                user = [m for m in r["prompt"] if m["role"] == "user"][-1]
                assert user["content"].endswith("(Hint: Start with flour.)")
                assert user["content"].startswith(plain["bread"][-1]["content"])
            else:
                assert not r["guided"] and r["prompt"] == plain["bread"]
    assert saw


def test_temperature_only_guidance_changes_no_prompt(train_tasks):
    harness = Harness(train_tasks)
    harness.apply(SetGuidance(scope="domain", target="nature", temperature=0.6, fraction=0.0), step=0)
    tr = _bare_trainer(harness, g=2)
    rows = [r for s in range(6) for r in tr.harness_rows(4, s)]
    for r in rows:
        assert not r["guided"]
        assert r["temperature"] == (0.6 if r["task_id"] in ("sky", "rain") else 1.0)


# --------------------------------------------------------------------------- 4. rubric versions


@pytest.fixture(scope="module")
def semantic_judge():
    from harnessrl.judges import build_judge

    return build_judge({"backend": "semantic"})


def test_rubric_edit_reaches_rows_and_reward(train_tasks, semantic_judge):
    harness = Harness(train_tasks)
    pitfall = Criterion(
        id="pad", text="Writes anything at all", weight=-2, check={"type": "word_count", "min": 0}
    )  # every completion trips it
    assert harness.apply(EditRubric(task_id="sky", add=[pitfall]), step=1) == 1
    tr = _bare_trainer(harness, g=2)
    rows = [r for s in range(8) for r in tr.harness_rows(4, s)]
    assert {r["rubric_version"] for r in rows if r["task_id"] == "sky"} == {1}
    assert {r["rubric_version"] for r in rows if r["task_id"] != "sky"} == {0}

    reward = RubricReward(semantic_judge, harness)
    text = "The sky is blue because sunlight is scattered by the air."
    prompts = [harness.tasks["sky"].messages()] * 2
    completions = [[{"role": "assistant", "content": text}]] * 2
    out = reward(
        prompts, completions, task_id=["sky", "sky"], rubric_version=[0, 1], completion_ids=[[1, 2], [1, 2, 3]]
    )
    assert len(out) == 2 and all(v is not None for v in out)
    assert out[1] < out[0]
    assert out is reward.last and out.texts == [text, text]  # a typed ScoredBatch, rewards first
    assert [v.criterion_id for v in reward.last.results[0].verdicts] == ["c1", "c2"]
    assert [v.criterion_id for v in reward.last.results[1].verdicts] == ["c1", "c2", "pad"]
    assert reward.last.results[1].by_id()["pad"].value == 1.0
    assert reward.last.texts == [text, text] and reward.last.lengths == [2, 3]
    # the rubric a rollout was made with, not the latest: version 0 still grades as before
    again = reward(prompts[:1], completions[:1], task_id=["sky"], rubric_version=[0])
    assert again == [out[0]]


# --------------------------------------------------------------------------- 5. per-temperature generation


@pytest.fixture
def fake_generation(monkeypatch):
    """Replace TRL's generation: record each call's prompts and temperatures, answer from the prompt."""
    calls = []

    def fake(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        vg = getattr(self, "vllm_generation", None)
        calls.append(
            {
                "prompts": [list(p) for p in prompt_ids],
                "temperature": self.generation_config.temperature,
                "top_p": self.generation_config.top_p,
                "max_new_tokens": self.generation_config.max_new_tokens,
                "vllm_temperature": vg.temperature if vg is not None else None,
            }
        )
        ids = [[p[0] * 10, p[0] * 10 + 1] for p in prompt_ids]
        lps = [[-float(p[0])] for p in prompt_ids] if self.return_logprobs else None
        return ids, lps

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", fake)
    return calls


def _gen_trainer(temps, logprobs=False, vllm=False, settings=None):
    tr = object.__new__(HarnessGRPOTrainer)
    rows = settings or ([{"temperature": t} for t in temps] if temps else None)
    # TRL's own path: a bare trainer has no accelerator to unwrap the model with
    tr.generation = RolloutGeneration(autocast="forward")
    tr.generation.settings = [tuple(sorted(r.items())) for r in rows] if rows else None
    tr.temperature = 1.0
    tr.generation_config = SimpleNamespace(temperature=1.0, top_p=1.0, max_new_tokens=48)
    tr.return_logprobs = logprobs
    if vllm:
        tr.vllm_generation = SimpleNamespace(temperature=1.0)
    return tr


@pytest.mark.parametrize("vllm", [False, True])
@pytest.mark.parametrize("logprobs", [False, True])
def test_generation_split_by_temperature(fake_generation, logprobs, vllm):
    temps = [1.5, 1.5, 1.0, 1.0, 0.7, 0.7]
    tr = _gen_trainer(temps, logprobs, vllm)
    prompts = [[i + 1, 99] for i in range(6)]
    ids, lps = tr._generate_single_turn(prompts, None, {}, 2)
    assert ids == [[(i + 1) * 10, (i + 1) * 10 + 1] for i in range(6)]  # the original order
    assert lps == ([[-float(i + 1)] for i in range(6)] if logprobs else None)
    by_temp = {c["temperature"]: c["prompts"] for c in fake_generation}
    assert by_temp == {0.7: prompts[4:], 1.0: prompts[2:4], 1.5: prompts[:2]}
    if vllm:
        assert [c["vllm_temperature"] for c in fake_generation] == [c["temperature"] for c in fake_generation]
        assert tr.vllm_generation.temperature == 1.0
    assert tr.generation_config.temperature == 1.0  # restored
    assert tr.generation.seconds > 0


def test_generation_interleaved_temperatures_keep_order(fake_generation):
    temps = [2.0, 1.0, 2.0, 1.0]
    tr = _gen_trainer(temps)
    prompts = [[5], [6], [7], [8]]
    ids, _ = tr._generate_single_turn(prompts, None, {}, 2)
    assert ids == [[50, 51], [60, 61], [70, 71], [80, 81]]
    assert {c["temperature"]: c["prompts"] for c in fake_generation} == {1.0: [[6], [8]], 2.0: [[5], [7]]}


def test_generation_one_temperature_is_one_call(fake_generation):
    tr = _gen_trainer([1.3] * 4)
    ids, _ = tr._generate_single_turn([[1], [2], [3], [4]], None, {}, 2)
    assert len(fake_generation) == 1 and fake_generation[0]["temperature"] == 1.3
    assert ids == [[10, 11], [20, 21], [30, 31], [40, 41]]
    assert tr.generation_config.temperature == 1.0
    tr = _gen_trainer(None)  # outside a training step (e.g. TRL's own eval): untouched
    tr._generate_single_turn([[1]], None, {}, 2)
    assert fake_generation[-1]["temperature"] == 1.0


def test_generation_applies_every_sampling_setting_of_a_row(fake_generation):
    # a plug-in interface (e.g. decoding) may set top_p and a completion budget besides the temperature
    rows = [{"temperature": 1.0}, {"temperature": 1.0, "top_p": 0.9, "max_new_tokens": 16}] * 2
    tr = _gen_trainer(None, settings=rows)
    ids, _ = tr._generate_single_turn([[1], [2], [3], [4]], None, {}, 2)
    assert ids == [[10, 11], [20, 21], [30, 31], [40, 41]]
    got = {(c["top_p"], c["max_new_tokens"]): c["prompts"] for c in fake_generation}
    assert got == {(1.0, 48): [[1], [3]], (0.9, 16): [[2], [4]]}
    assert (tr.generation_config.top_p, tr.generation_config.max_new_tokens) == (1.0, 48)  # restored


def test_generation_restores_temperature_after_an_error(monkeypatch):
    def boom(self, *a, **k):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", boom)
    tr = _gen_trainer([1.0, 2.0])
    with pytest.raises(RuntimeError):
        tr._generate_single_turn([[1], [2]], None, {}, 2)
    assert tr.generation_config.temperature == 1.0


# --------------------------------------------------------------------------- 6. configuration


def _plain_config(tmp_path, **sections) -> TrainConfig:
    return TrainConfig.model_validate({"run_dir": str(tmp_path / "run"), **sections})


def test_build_grpo_config_fields(tmp_path):
    config = _plain_config(tmp_path, grpo={"num_generations": 3, "tasks_per_step": 4, "extra": {"warmup_steps": 2}})
    args = build_grpo_config(config, tmp_path / "ck", "cpu")
    assert args.per_device_train_batch_size == 12 and args.num_generations == 3
    assert args.warmup_steps == 2 and args.use_cpu and not args.bf16
    assert args.remove_unused_columns is False
    args2 = build_grpo_config(config, tmp_path / "ck", "cpu", num_processes=2)
    assert args2.per_device_train_batch_size == 6
    with pytest.raises(ConfigError, match="must divide over 5 processes"):
        build_grpo_config(config, tmp_path / "ck", "cpu", num_processes=5)


def test_vllm_backend_without_vllm(tmp_path):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    config = _plain_config(tmp_path, device="auto", generation={"backend": "vllm"})
    with pytest.raises(ConfigError, match=r"harnessrl\[vllm\]"):
        build_grpo_config(config, tmp_path / "ck", "cuda")
    with pytest.raises(ConfigError, match="needs a GPU"):
        load_train_config(None, ["device=cpu", "generation.backend=vllm"])


def test_grpo_extra_clash_and_unknown(tmp_path):
    clash = _plain_config(tmp_path, grpo={"extra": {"learning_rate": 1.0}})
    with pytest.raises(ConfigError, match="learning_rate"):
        build_grpo_config(clash, tmp_path / "ck", "cpu")
    unknown = _plain_config(tmp_path, grpo={"extra": {"not_a_grpo_field": 1}})
    with pytest.raises(ConfigError, match="not_a_grpo_field"):
        build_grpo_config(unknown, tmp_path / "ck", "cpu")


def test_misspelt_key_is_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("grpo:\n  max_step: 3\nmodle: x\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_train_config(path)
    assert "grpo.max_step" in str(e.value) and "modle" in str(e.value)
    assert "unknown setting" in str(e.value)


def test_overrides_parse_values(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("grpo:\n  max_steps: 3\n  learning_rate: 1.0e-5\n", encoding="utf-8")
    config = load_train_config(
        path,
        [
            "grpo.max_steps=7",
            "eval.every_steps=null",
            "data.heldout=null",
            "grpo.temperature=0.9",
            "eval.before_training=false",
            "report_to=[wandb]",
            "grpo.extra.warmup_steps=2",
            "run_dir=runs/x=y",
        ],
    )
    assert config.grpo.max_steps == 7 and config.grpo.learning_rate == 1e-5
    assert config.eval.every_steps is None and config.data.validation is None and config.data.test is None
    assert config.grpo.temperature == 0.9 and config.eval.before_training is False
    assert config.report_to == ["wandb"] and config.grpo.extra == {"warmup_steps": 2}
    assert config.run_dir == "runs/x=y"
    with pytest.raises(ConfigError, match=r"key\.sub=value"):
        load_train_config(path, ["grpo.max_steps"])
    with pytest.raises(ConfigError, match=r"grpo\.max_steps"):
        load_train_config(path, ["grpo.max_steps=many"])
    with pytest.raises(ConfigError, match="not a section"):
        load_train_config(path, ["grpo.max_steps.x=1"])


def test_cli_set_reaches_the_config(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import harnessrl.trainer.run as run_mod
    from harnessrl.cli import app

    seen = {}

    def fake_train(cfg, **kw):
        seen["cfg"], seen["kw"] = cfg, kw
        raise HarnessRLError("stop here")

    monkeypatch.setattr(run_mod, "train", fake_train)
    result = CliRunner().invoke(app, ["train", "--set", "grpo.max_steps=5", "-s", "seed=3", "--resume"])
    assert isinstance(result.exception, HarnessRLError)
    assert seen["cfg"].grpo.max_steps == 5 and seen["cfg"].seed == 3
    assert seen["kw"]["resume"] is True and seen["kw"]["overwrite"] is False


def test_training_runs_the_evolver_at_evolution_points(tmp_path, model_dir, data_files):
    """The whole loop on a tiny policy: detectors flag failures, an evolution point runs the rule-based
    graph over the trainer's MCP tools, trials measure on the frozen policy, only accepted updates commit."""
    config = _config(tmp_path / "evolved", model_dir, data_files, max_steps=4)
    config = config.model_copy(
        update={
            "harness": config.harness.model_copy(
                update={"detectors": config.harness.detectors.model_copy(update={"eps": 0.6, "low": 0.9})}
            ),
            "evolver": config.evolver.model_copy(
                update={
                    "every_steps": 2,
                    "trials": config.evolver.trials.model_copy(update={"rollouts_per_arm": 2, "max_new_tokens": 8}),
                    "graph": config.evolver.graph.model_copy(update={"max_failures": 1, "max_revisions": 1}),
                }
            ),
        }
    )
    summary = train(config)
    run = RunDir(tmp_path / "evolved", create=False)
    events = run.read("events.jsonl")
    kinds = [e["kind"] for e in events]
    print(
        Counter(kinds), [(e["result"]["accepted"], e["result"]["reason"][:90]) for e in events if e["kind"] == "trial"]
    )
    assert "failure" in kinds
    assert "evolution_point" in kinds
    assert {"attribution", "proposal", "trial"} <= set(kinds)
    assert summary.extra.evolver.points >= 1
    assert not (run.path / "tool_server.json").exists()  # removed when training ends
    # every committed update was measured and accepted first
    trials = {e["candidate_id"]: e for e in events if e["kind"] == "trial"}
    for e in events:
        if e["kind"] == "commit":
            assert trials[e["candidate_id"]]["result"]["accepted"] is True
    harness = Harness.load(run.harness, load_tasks(data_files["train"]))
    assert sum(harness.versions.values()) == sum(1 for k in kinds if k == "commit")
    # the report tells each handled failure's story: failure, attribution, candidate, trial, verdict
    from harnessrl.trainer.run_report import write_report

    page = write_report(run.path).read_text()
    assert "Harness updates" in page and "Attribution" in page and "Trial</b> on the frozen policy" in page


def test_judges_follow_the_run_device_unless_told_otherwise():
    from harnessrl.judges.config import JudgeConfig
    from harnessrl.models import resolve_device
    from harnessrl.trainer.trl_config import judge_on_device

    assert resolve_device("cuda:1") == "cuda:1" and resolve_device(None) == resolve_device("auto") in ("cpu", "cuda")
    assert judge_on_device(JudgeConfig(), "cuda").device == "cuda"  # device: null follows the run
    assert judge_on_device(JudgeConfig(device="cpu"), "cuda").device == "cpu"  # its own setting wins
    assert JudgeConfig(backend="openai", model="m", base_url="http://x/v1").where() == "server http://x/v1"
    assert JudgeConfig(device="cuda:1").where() == "cuda:1"


def test_the_policy_lock_holds_from_the_optimizer_step_to_the_step_end():
    """A trial on another thread never samples weights mid-update, nor new weights under the old step."""
    import threading

    from harnessrl.trainer.update_lock import LockPolicyThroughUpdate

    trainer = SimpleNamespace(policy_lock=threading.Lock())
    cb = LockPolicyThroughUpdate(trainer)
    cb.on_pre_optimizer_step(None, None, None)
    cb.on_pre_optimizer_step(None, None, None)  # once per update, whatever calls it twice
    assert trainer.policy_lock.locked()
    waited = threading.Event()

    def trial():
        with trainer.policy_lock:
            waited.set()

    t = threading.Thread(target=trial)
    t.start()
    assert not waited.wait(0.2)  # the trial waits while the weights change
    cb.on_step_end(None, None, None)
    t.join(5)
    assert waited.is_set() and not trainer.policy_lock.locked()
    cb.release()  # nothing held: nothing to release
    cb.on_train_end(None, None, None)
    assert not trainer.policy_lock.locked()


def test_the_policy_lock_is_free_after_training(trained):
    assert not trained.trainer.policy_lock.locked() and not trained.trainer._update_lock.held
