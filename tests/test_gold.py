"""Gold rubrics: what a prompt truly asks, read by evaluation only.

The schema and every loader carry a task's ``gold_rubric`` with the rubric's own validation; a run strips it
from every training task (or trains on it: the oracle); evaluation grades with it and reports the proxy
(rubric version 0) beside it, per domain and per family; and no file a run writes, no tool answer and no
evolver prompt ever holds a gold criterion.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from harnessrl.data import Task, data_path, load_hf_dataset, load_tasks, validate_file
from harnessrl.errors import ConfigError
from harnessrl.judges import BackendVerdict, RubricJudge
from harnessrl.records.run_dir import RunDir
from harnessrl.trainer.evaluation import evaluate_policy, resolve_grade_with
from harnessrl.trainer.run import load_run_tasks, train, training_view
from harnessrl.trainer.train_config import TrainConfig

SECRET = "goldsecret"  # in every gold criterion's text and check: must never reach the harness's side


def _row(tid: str, prompt: str = "Say something.", family: str = "f", gold: bool = True, **extra) -> dict:
    row = {
        "id": tid,
        "domain": "d",
        "prompt": prompt,
        "reference_answer": "An answer.",
        "rubric": [
            {"id": "c1", "text": "Answers the question", "weight": 2},
            {"id": "c2", "text": "Writes at least one word", "weight": 1, "check": {"type": "word_count", "min": 1}},
        ],
        "metadata": {"family": family},
        **extra,
    }
    if gold:
        row["gold_rubric"] = [
            {
                "id": "g1",
                "text": f"Says the {SECRET} word",
                "weight": 1,
                "check": {"type": "contains", "phrases": [SECRET]},
            },
            {"id": "g2", "text": f"Is short ({SECRET} limit)", "weight": 1, "check": {"type": "word_count", "max": 3}},
        ]
    return row


def _write(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------------------------------ schema, loaders


def test_a_gold_rubric_is_validated_like_the_rubric(tmp_path):
    bad = _row("b")
    bad["gold_rubric"][0]["check"] = {"type": "word_cnt", "max": 3}
    empty, negative = _row("c"), _row("d")
    empty["gold_rubric"] = []
    negative["gold_rubric"] = [{"id": "g1", "text": "Rambles", "weight": -1}]
    twice = _row("e")
    twice["gold_rubric"][1]["id"] = "g1"
    path = _write(tmp_path / "t.jsonl", [_row("a"), bad, empty, negative, twice, _row("f", gold=False)])
    report = validate_file(path)
    errors = {e.line: e.message for e in report.errors}
    assert sorted(errors) == [2, 3, 4, 5]
    assert "gold criterion 1 ('g1')" in errors[2] and "unknown programmatic check 'word_cnt'" in errors[2]
    assert "gold rubric is empty" in errors[3] and "drop gold_rubric" in errors[3]
    assert "gold rubric has no criterion with a positive weight" in errors[4]
    assert "appears twice in the gold rubric" in errors[5]
    good = {t.id: t for t in report.tasks}
    assert [c.id for c in good["a"].gold_rubric] == ["g1", "g2"] and good["f"].gold_rubric is None
    assert report.summary()["with_gold_rubric"] == 1


def test_training_views_of_a_task():
    task = Task.model_validate(_row("a"))
    plain = task.without_gold()
    assert plain.gold_rubric is None and plain.rubric == task.rubric
    oracle = task.trained_on_gold()
    assert oracle.gold_rubric is None and [c.id for c in oracle.rubric] == ["g1", "g2"]
    no_gold = Task.model_validate(_row("b", gold=False))
    assert no_gold.without_gold() is no_gold
    assert [t.rubric for t in training_view([task], "rubric")] == [task.rubric]
    with pytest.raises(ConfigError, match=r"1 training task\(s\) have no gold_rubric \(e\.g\. \['b'\]\)"):
        training_view([task, no_gold], "gold")


def test_every_loader_reads_a_gold_rubric(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [_row("a"), _row("b", gold=False)]
    # parquet: one struct type for both rows (Arrow fills the missing column and keys with None)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    tasks = {t.id: t for t in load_tasks(tmp_path / "t.parquet")}
    assert [c.check.type for c in tasks["a"].gold_rubric] == ["contains", "word_count"]
    assert tasks["b"].gold_rubric is None
    # the column-mapping loader: a gold column under another name, as JSON text
    mapped = [{"q": "Say it.", "crit": json.dumps(rows[0]["rubric"]), "gold": json.dumps(rows[0]["gold_rubric"])}]
    (t,) = load_hf_dataset(mapped, mapping={"prompt": "q", "rubric": "crit", "gold_rubric": "gold"}, default_domain="x")
    assert [c.id for c in t.gold_rubric] == ["g1", "g2"]
    # the RaR layout, gold in its own item shape
    rar = {
        "question": "Why?",
        "reference_answer": "Because.",
        "rubric": [{"title": "Reason", "description": "Gives a reason", "weight": 3}],
        "gold_rubric": [{"title": "Cause", "description": "Names the cause", "weight": 2}],
    }
    (t,) = load_tasks(_write(tmp_path / "rar.jsonl", [rar]), "rar")
    assert [(c.text, c.weight) for c in t.gold_rubric] == [("Names the cause", 2.0)]


def test_the_gold_suite_is_valid_and_its_references_pass_their_gold():
    for split, n in (("train", 42), ("validation", 14), ("test", 28)):
        tasks = load_tasks(data_path("bench-gold", split))
        assert len(tasks) == n and all(t.gold_rubric for t in tasks)
        families = {t.metadata["family"] for t in tasks}
        assert len(families) == 7
        for t in tasks:
            for c in t.gold_rubric:
                assert c.check is not None, f"{t.id}: gold criterion {c.id} is not an exact check"
                assert c.check.evaluate(t.reference_answer) == 1.0
    train_ids = {t.id for t in load_tasks(data_path("bench-gold", "train"))}
    held = {t.id for s in ("validation", "test") for t in load_tasks(data_path("bench-gold", s))}
    assert not train_ids & held


# ------------------------------------------------------------------------------------------ configuration


def _config(tmp_path, **settings) -> TrainConfig:
    train_path = _write(tmp_path / "train.jsonl", [_row("t1"), _row("t2", family="g")])
    val = _write(tmp_path / "val.jsonl", [_row("v1"), _row("v2", family="g")])
    test = _write(tmp_path / "test.jsonl", [_row("x1"), _row("x2", family="g")])
    data = {"train": train_path, "validation": val, "test": test, **settings.pop("data", {})}
    return TrainConfig.model_validate({"run_dir": str(tmp_path / "run"), "data": data, **settings})


def test_the_oracle_trains_on_gold_and_training_never_holds_gold(tmp_path):
    plain = load_run_tasks(_config(tmp_path))
    assert all(t.gold_rubric is None for t in plain.train)
    assert [c.id for c in plain.train[0].rubric] == ["c1", "c2"]
    assert all(t.gold_rubric for t in plain.validation + plain.test)  # evaluation keeps it
    config = _config(tmp_path, method="oracle")
    assert config.data.train_rubric == "gold" and not config.runs_evolver
    oracle = load_run_tasks(config)
    assert [c.id for c in oracle.train[0].rubric] == ["g1", "g2"] and oracle.train[0].gold_rubric is None
    with pytest.raises(ValueError, match="method 'oracle' trains on the gold rubrics"):
        _config(tmp_path, method="oracle", data={"train_rubric": "rubric"})
    clean = _config(tmp_path, data={"train_rubric": "gold"})  # the clean variant, with the evolver on
    assert clean.method == "harnessrl" and clean.runs_evolver


def test_grade_with_resolves_from_the_evaluated_tasks():
    gold, plain = Task.model_validate(_row("a")), Task.model_validate(_row("b", gold=False))
    assert resolve_grade_with("auto", {"test": [gold]}) == "gold"
    assert resolve_grade_with("auto", {"test": [gold], "validation": [plain]}) == "rubric"
    assert resolve_grade_with("rubric", {"test": [gold]}) == "rubric"
    with pytest.raises(ConfigError, match=r"1 evaluated task\(s\) have no gold_rubric \(e\.g\. \['b'\]\)"):
        resolve_grade_with("gold", {"test": [gold, plain]})


# ------------------------------------------------------------------------------------------ evaluation


class FixedAnswers:
    """A policy sampler answering each prompt with its scripted text."""

    def __init__(self, answers: dict[str, str]):
        self.answers = answers

    def sample(self, prompts, temperature, max_new_tokens, **settings):
        return [self.answers[p[-1]["content"]] for p in prompts]


class HalfJudge:
    """Every judged criterion at 0.5."""

    name = "half"

    def grade(self, requests):
        return [BackendVerdict(0.5, 0.9) for _ in requests]


class DeadJudge:
    name = "dead"

    def grade(self, requests):
        return [None for _ in requests]


def test_evaluation_grades_gold_with_the_proxy_beside_it():
    tasks = [
        Task.model_validate(_row("a", prompt="Qa", family="short")),
        Task.model_validate(_row("b", prompt="Qb", family="long")),
    ]
    answers = {"Qa": f"{SECRET} yes", "Qb": f"a long answer that says {SECRET} with many words"}
    judge = RubricJudge(HalfJudge())
    res = evaluate_policy(
        None, None, tasks, judge, step=3, max_new_tokens=8, sampler=FixedAnswers(answers), grade_with="gold"
    )
    assert res.graded_with == "gold"
    # gold: 'a' passes both exact checks, 'b' fails the 3-word limit
    assert res.per_task == {"a": 1.0, "b": 0.5} and res.overall == 0.75
    assert res.per_family == {"long": 0.5, "short": 1.0}
    # the proxy: judged c1 at 0.5 (weight 2) and the word check passed (weight 1) on both
    assert res.proxy is not None and res.proxy.per_task == {"a": pytest.approx(2 / 3), "b": pytest.approx(2 / 3)}
    assert res.rubric_scores.overall == pytest.approx(2 / 3)
    as_rubric = evaluate_policy(None, None, tasks, judge, step=3, max_new_tokens=8, sampler=FixedAnswers(answers))
    assert as_rubric.graded_with == "rubric" and as_rubric.proxy is None
    assert as_rubric.overall == pytest.approx(2 / 3)


def test_an_evaluation_without_a_score_says_why_instead_of_nan():
    (task,) = [Task.model_validate(_row("a", prompt="Qa", gold=False))]
    task = task.model_copy(update={"rubric": [task.rubric[0]]})  # judged only: nothing without the judge
    res = evaluate_policy(
        None, None, [task], RubricJudge(DeadJudge()), step=0, max_new_tokens=8, sampler=FixedAnswers({"Qa": "x"})
    )
    assert res.overall is None and "no task of 1 could be scored" in res.no_score_reason
    assert "NaN" not in res.model_dump_json()


# ------------------------------------------------------------------------------------------ a whole run


class ScriptedBackend:
    """1.0 on prompts that say 'always' (flat groups the detectors flag), else a value of the text."""

    name = "scripted"

    @classmethod
    def from_config(cls, config):
        return cls()

    def grade(self, requests):
        return [
            BackendVerdict(1.0 if "always" in r.prompt else (zlib.crc32(r.response.encode()) % 101) / 100, 0.9)
            for r in requests
        ]


@pytest.mark.usefixtures("one_torch_thread")
def test_no_part_of_a_run_holds_a_gold_criterion(tmp_path, tiny_model_dir, monkeypatch):
    """A harnessrl run (evolver, tool server, memory on) over tasks with gold rubrics: no file of the run
    directory but the evaluation's scores, no tool answer and no evolver prompt holds any gold criterion's text;
    and the run's evaluation is graded with gold, the proxy beside it."""
    from harnessrl.agents.rule_based import RuleBasedChatModel

    seen: list[str] = []
    decide = RuleBasedChatModel.decide

    def recording(self, messages):
        seen.extend(
            str(getattr(m, "content", m)) + json.dumps(getattr(m, "tool_calls", None), default=str) for m in messages
        )
        return decide(self, messages)

    monkeypatch.setattr(RuleBasedChatModel, "decide", recording)
    rows = [_row(f"t{i}", prompt=f"Say always {i}." if i < 2 else f"Say anything {i}.") for i in range(4)]
    config = TrainConfig.model_validate(
        {
            "run_dir": str(tmp_path / "run"),
            "model": str(tiny_model_dir),
            "device": "cpu",
            "method": "harnessrl",
            "data": {
                "train": _write(tmp_path / "train.jsonl", rows),
                "validation": _write(tmp_path / "val.jsonl", [_row("v1")]),
                "test": _write(tmp_path / "test.jsonl", [_row("x1")]),
            },
            "judge": {"backend": f"{__name__}:ScriptedBackend"},
            "grpo": {"num_generations": 2, "tasks_per_step": 2, "max_completion_length": 6, "max_steps": 2},
            "evolver": {"every_steps": 1},
            "eval": {"every_steps": None, "before_training": True, "max_new_tokens": 4, "batch_size": 4},
        }
    )
    held: list = []
    summary = train(config, trainer_hook=lambda trainer, run: held.append(trainer))
    run = RunDir(summary.run_dir, create=False)
    (trainer,) = held
    # what the harness, the reward, the detectors, the critic and the tool server hold: no gold rubric
    assert trainer.harness.tasks and all(t.gold_rubric is None for t in trainer.harness.tasks.values())
    assert summary.extra.evolver.points >= 1 and seen, "the evolver must have run to prove anything"
    # every file: events, steps, rollouts, harness.json, the memory's Chroma files, the tool server's, the report
    files = [p for p in run.path.rglob("*") if p.is_file() and p.suffix not in (".safetensors", ".bin", ".pt", ".pth")]
    assert any("memory" in p.parts for p in files) and (run.path / "events.jsonl").is_file()
    leaks = [str(p) for p in files if SECRET.encode() in p.read_bytes()]
    assert leaks == [], f"files that hold a gold criterion: {leaks}"
    assert not any(SECRET in text for text in seen), "an evolver prompt or tool answer holds a gold criterion"
    evals = run.read("eval.jsonl")
    assert {e["graded_with"] for e in evals} == {"gold"} and all(e["proxy"] is not None for e in evals)
    start = next(e for e in run.read("events.jsonl") if e["kind"] == "run_start")
    assert start["eval_graded_with"] == "gold" and start["train_rubric"] == "rubric"
