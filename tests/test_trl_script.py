"""HarnessRL inside a user's own TRL script: ``examples/trl_script.py`` on a tiny model, and the public API's
refusals (a trainer without its rubric reward, a harness holding gold rubrics, the harness attached to
something that is not a HarnessGRPOTrainer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import WORD_CHECKS, load_script, task_row

import harnessrl
from harnessrl.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "trl_script.py"


def _example():
    return load_script(EXAMPLE)


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _passed_by_every_answer(n: int) -> list[dict]:
    """Tasks whose one criterion, a word-count check, every answer passes: groups flat and high, which the
    detectors report."""
    check = WORD_CHECKS["at least one word"]
    return [
        {**task_row(f"t{i}", "food", f"Name a food, number {i}.", "An apple.", "Names a food"),
         "rubric": [{"id": "c1", "text": "Writes at least one word", "weight": 1, "check": check}]}
        for i in range(n)
    ]  # fmt: skip


def _jsonl_rows(rows: list[dict]) -> Path:
    import tempfile

    return _jsonl(Path(tempfile.mkdtemp()) / "tasks.jsonl", rows)


@pytest.fixture
def train_tasks():
    return harnessrl.load_tasks(
        _jsonl_rows([task_row(f"t{i}", "food", f"Name food {i}.", "An apple.", "Names a food") for i in range(2)])
    )


def test_the_api_names_load_on_first_use_and_match_all():
    names = set(harnessrl.__all__) - {"__version__"}
    assert all(getattr(harnessrl, n) is not None for n in names)
    assert set(harnessrl._API) <= names
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        harnessrl.nope  # noqa: B018


@pytest.mark.usefixtures("one_torch_thread")
def test_the_example_trl_script_trains_with_the_harness_attached(tmp_path, tiny_model_dir):
    """The script as a user runs it (TrlParser over its arguments, a GRPOConfig and a ModelConfig): the rubric
    reward beside the script's own, the detectors, memory and in-process evolver attached, their records in
    the output directory, the tool server stopped at the end."""
    from trl import GRPOConfig, ModelConfig, TrlParser

    example = _example()
    data = _jsonl(tmp_path / "train.jsonl", _passed_by_every_answer(4))
    out = tmp_path / "out"
    parser = TrlParser((example.HarnessScriptArguments, GRPOConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config(
        args=[
            "--model_name_or_path", str(tiny_model_dir), "--data", str(data), "--output_dir", str(out),
            "--max_steps", "3", "--per_device_train_batch_size", "4", "--num_generations", "2",
            "--max_completion_length", "8", "--learning_rate", "1e-2", "--use_cpu", "--report_to", "none",
            "--save_strategy", "no", "--logging_steps", "1", "--evolver_every_steps", "1", "--memory", "false",
        ]
    )  # fmt: skip
    trainer = example.main(script_args, training_args, model_args)

    assert trainer.state.global_step == 3
    assert [getattr(f, "__name__", None) for f in trainer.reward_funcs] == ["rubric", "within_budget"]
    logged = {k for row in trainer.state.log_history for k in row}
    assert {"rewards/rubric/mean", "rewards/within_budget/mean"} <= logged  # TRL adds both rewards
    steps = [json.loads(line)["step"] for line in (out / "steps.jsonl").read_text().splitlines()]
    assert sorted(set(steps)) == [1, 2, 3] and len(steps) == 6  # 2 groups a step
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    kinds = {e["kind"] for e in events}
    assert "failure" in kinds  # the detectors saw the flat-high groups
    assert {"attribution", "proposal", "trial", "verdict", "evolution_point"} <= kinds  # the evolver ran its graph
    assert not (out / "tool_server.json").exists()  # the tool server stopped with training
    assert any(out.glob("*.safetensors"))  # the model saved


def test_a_trainer_needs_one_rubric_reward_over_its_own_harness(train_tasks):
    harness = harnessrl.Harness(train_tasks)
    other = harnessrl.Harness(train_tasks)
    judge = object()
    with pytest.raises(ConfigError, match=r"hold 0: pass reward_funcs=\[harnessrl\.RubricReward"):
        harnessrl.HarnessGRPOTrainer(model=None, harness=harness, reward_funcs=[lambda **kw: [0.0]])
    with pytest.raises(ConfigError, match="hold 2"):
        harnessrl.HarnessGRPOTrainer(
            model=None,
            harness=harness,
            reward_funcs=[harnessrl.RubricReward(judge, harness), harnessrl.RubricReward(judge, harness)],
        )
    with pytest.raises(ConfigError, match="another harness than the trainer's"):
        harnessrl.HarnessGRPOTrainer(model=None, harness=harness, rubric_reward=harnessrl.RubricReward(judge, other))


def test_a_harness_holding_gold_rubrics_is_refused_for_training(train_tasks):
    gold = [t.model_copy(update={"gold_rubric": t.rubric}) for t in train_tasks]
    harness = harnessrl.Harness(gold)
    with pytest.raises(ConfigError, match=r"carry a gold rubric .* only evaluation may read"):
        harnessrl.HarnessGRPOTrainer(model=None, harness=harness, rubric_reward=harnessrl.RubricReward(None, harness))


def test_attach_harness_names_what_it_needs():
    with pytest.raises(ConfigError, match=r"needs a harnessrl\.HarnessGRPOTrainer .* not a GRPOTrainer"):
        harnessrl.attach_harness(type("GRPOTrainer", (), {})())


@pytest.mark.usefixtures("one_torch_thread")
def test_a_served_harness_on_a_trainer_built_from_a_model_path(tmp_path, tiny_model_dir):
    """The API without the example: the model named by its path (TRL loads it), the evolver served for an
    external `harnessrl evolver --run-dir` (mode external): tool_server.json is there while training runs,
    gone after; the attachment closes itself at the end of training."""
    from transformers import TrainerCallback
    from trl import GRPOConfig

    tasks = harnessrl.load_tasks(_jsonl(tmp_path / "train.jsonl", _passed_by_every_answer(2)))
    harness = harnessrl.Harness(tasks)
    out = tmp_path / "out"
    seen: list[bool] = []

    class ServerFile(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            seen.append((out / "tool_server.json").is_file())

    trainer = harnessrl.HarnessGRPOTrainer(
        model=str(tiny_model_dir),
        args=GRPOConfig(
            output_dir=str(out), max_steps=2, per_device_train_batch_size=4, num_generations=2,
            max_completion_length=8, learning_rate=1e-2, use_cpu=True, report_to="none", save_strategy="no",
        ),
        harness=harness,
        reward_funcs=[harnessrl.RubricReward(harnessrl.build_judge(), harness)],
        callbacks=[ServerFile()],
    )  # fmt: skip
    attached = harnessrl.attach_harness(trainer, evolver=harnessrl.EvolverSettings(mode="external"), memory=False)
    assert attached.server is not None and attached.evolution is not None
    trainer.train()
    assert seen == [True, True]  # served while training ran
    assert attached.closed and attached.server is None and not (out / "tool_server.json").exists()
    assert "failure" in {json.loads(line)["kind"] for line in (out / "events.jsonl").read_text().splitlines()}
