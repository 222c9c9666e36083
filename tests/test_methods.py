"""The compared methods (fixed, DAPO, ODF, the evolving harness), honest evaluation splits, accounting.

Pure logic is tested without a model: the method setting's resolution, ODF's eligibility and
re-probe rule inside task sampling, the validation/test split, the best checkpoint chosen on
validation (with a scripted evaluation), and DAPO's drop-and-refill on the trainer's own method with
TRL's generation replaced by a fake. Then every method trains two steps end to end on a tiny random
Llama with a scripted judge (some tasks always score the same, so their groups are flat).
"""

from __future__ import annotations

import json
import zlib
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from trl import GRPOTrainer

from harnessrl.data import Task, load_bundled
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.interfaces import DifficultyFilterSettings, Harness, TaskSampling
from harnessrl.judges import BackendVerdict, RubricJudge
from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import GroupRecord, Recorder, RolloutRecord
from harnessrl.trainer.callbacks import EvalCallback
from harnessrl.trainer.evaluation import EvalResult
from harnessrl.trainer.generation import RolloutGeneration
from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer
from harnessrl.trainer.judge_faults import JudgeFaults
from harnessrl.trainer.rewards import RubricReward
from harnessrl.trainer.run import load_run_tasks, rollout_steps_kept, split_alternating, train
from harnessrl.trainer.step_records import StepRecords
from harnessrl.trainer.train_config import TrainConfig, load_run_config, load_train_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

G = 2


class ScriptedBackend:
    """A judge that gives 1.0 on tasks whose prompt says 'always', and a fixed pseudo-random value of
    the response text otherwise: the first kind makes flat groups, the second discriminative ones."""

    name = "scripted"

    @classmethod
    def from_config(cls, config):
        return cls()

    def grade(self, requests):
        return [
            BackendVerdict(1.0 if "always" in r.prompt else (zlib.crc32(r.response.encode()) % 101) / 100, 0.9)
            for r in requests
        ]


def _task(tid: str, domain: str, prompt: str) -> dict:
    return {
        "id": tid,
        "domain": domain,
        "prompt": prompt,
        "reference_answer": f"An answer to: {prompt}",
        "rubric": [
            {"id": "c1", "text": "Answers the question", "weight": 2},
            {"id": "c2", "text": "Writes at least one word", "weight": 1, "check": {"type": "word_count", "min": 0}},
        ],
    }


def _tasks(rows: list[dict]) -> list[Task]:
    return [Task.model_validate(r) for r in rows]


# --------------------------------------------------------------------------- 1. the method setting


def test_method_resolves_the_evolver():
    assert load_train_config(None).method == "harnessrl" and load_train_config(None).runs_evolver
    for method in ("fixed", "dapo", "odf"):
        config = load_train_config(None, [f"method={method}"])
        assert config.method == method and config.runs_evolver is False and config.evolver.enabled is None
    with pytest.warns(FutureWarning):
        legacy = load_train_config(None, ["evolver.enabled=false"])  # the older way to ask for a fixed harness
    assert legacy.method == "fixed" and not legacy.runs_evolver
    with pytest.raises(ConfigError, match="never runs the evolver"):
        load_train_config(None, ["method=dapo", "evolver.enabled=true"])
    with pytest.raises(ConfigError, match="use method 'fixed'"):
        load_train_config(None, ["method=harnessrl", "evolver.enabled=false"])
    with pytest.raises(ConfigError, match="use method 'oracle'"):  # plain GRPO on the method's own rubrics
        load_train_config(None, ["method=oracle-harness", "evolver.enabled=false"])
    with pytest.raises(ConfigError, match="method"):
        load_train_config(None, ["method=grpo"])
    # the resolved config reloads to itself (config.yaml of a run), which never holds the deprecated alias
    for config in (legacy, load_train_config(None, ["method=odf"])):
        dumped = config.model_dump(mode="json")
        assert "enabled" not in dumped["evolver"]
        assert TrainConfig.model_validate(dumped) == config


def test_evolver_enabled_is_a_deprecated_alias_of_method(tmp_path):
    import warnings

    from harnessrl.trainer.methods import plain_method

    with pytest.warns(FutureWarning, match=r"evolver.enabled is deprecated.*use method instead.*method: fixed"):
        agreeing = load_train_config(None, ["method=harnessrl", "evolver.enabled=true"])
    assert agreeing.runs_evolver and agreeing.method == "harnessrl" and agreeing.evolver.enabled is None
    # an old run's config.yaml, which wrote the alias beside its method, still loads (with the warning)
    path = tmp_path / "config.yaml"
    path.write_text("method: fixed\nevolver:\n  enabled: false\n")
    with pytest.warns(FutureWarning, match="evolver.enabled is deprecated"):
        assert load_train_config(path).method == "fixed"
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # without the alias: no warning
        assert not load_train_config(None, ["method=fixed"]).runs_evolver
        # read as a run's own saved config, the alias that agrees with its method is dropped without a warning
        assert not load_run_config(path).runs_evolver
        path.write_text("method: harnessrl\nevolver:\n  enabled: true\n  hold_s: 5\n")
        assert load_run_config(path).runs_evolver and load_run_config(path).evolver.hold_s == 5
    path.write_text("method: harnessrl\nevolver:\n  enabled: false\n")  # disagreeing: read as written, so it says so
    with pytest.warns(FutureWarning), pytest.raises(ConfigError, match=r"evolver\.enabled is false"):
        load_run_config(path)
    # the method's table, not a name, says which plain-GRPO method a fixed harness is
    assert (plain_method(), plain_method("gold")) == ("fixed", "oracle")


def test_a_new_method_is_one_entry_of_the_table(tmp_path):
    from harnessrl.bench.config import BenchConfig, builtin_methods
    from harnessrl.bench.runner import plan_jobs
    from harnessrl.trainer.methods import METHOD_TABLE, MethodSpec, method_spec, register_method

    spec = MethodSpec(
        "gold_dapo",
        summary="DAPO on the gold rubrics",
        dynamic_sampling=True,
        train_rubric="gold",
        settings=lambda c: {"eps": c.dapo_eps},
        describe=lambda s: f"DAPO (eps {s['eps']}) on the gold rubrics",
        settings_section="dapo",
        in_default_bench=False,
    )
    register_method(spec)
    try:
        with pytest.raises(ValueError, match="registered already"):
            register_method(spec)
        # training: the run config takes it, and resolves what it turns on from the entry alone
        config = load_train_config(None, ["method=gold_dapo"])
        assert config.method == "gold_dapo" and not config.runs_evolver and config.data.train_rubric == "gold"
        assert method_spec(config.method).describe(method_spec(config.method).settings(config)).startswith("DAPO")
        with pytest.raises(ConfigError, match="never runs the evolver"):
            load_train_config(None, ["method=gold_dapo", "evolver.enabled=true"])
        # the bench: a built-in method under its own name, not run by default, its settings section its own
        bench = BenchConfig.model_validate(
            {"base": {"model": "tiny", "device": "cpu"}, "methods": ["fixed", "gold_dapo"], "out": str(tmp_path)}
        )
        assert builtin_methods()["gold_dapo"] == {"method": "gold_dapo"}
        assert "gold_dapo" not in BenchConfig.model_validate({"base": {}}).methods
        jobs = {j.method: j.settings for j in plan_jobs(bench.select(seeds=[0]))}
        assert jobs["gold_dapo"]["method"] == "gold_dapo" and jobs["gold_dapo"]["data"]["train_rubric"] == "gold"
    finally:
        METHOD_TABLE.pop("gold_dapo")
    with pytest.raises(ConfigError, match="unknown method 'gold_dapo'"):
        load_train_config(None, ["method=gold_dapo"])


def test_a_method_by_its_earlier_name_is_refused_with_its_name_now():
    # on 2026-12-06 the harness over DAPO became `harnessrl` and the harness over plain GRPO `harnessrl-grpo`
    with pytest.raises(ConfigError, match=r"'harnessrl-dapo' is called 'harnessrl' since 2026-12-06.*'harnessrl-grpo'"):
        load_train_config(None, ["method=harnessrl-dapo"])
    assert load_train_config(None, ["method=harnessrl-grpo"]).runs_evolver


def test_the_evolver_keeps_the_rollouts_of_every_step_it_handles():
    # an evolution point every 5 steps handles failures from 5 steps: their rollouts must still be kept
    assert rollout_steps_kept(load_train_config(None, ["harness.keep_rollout_steps=4"])) == 5
    assert rollout_steps_kept(load_train_config(None, ["harness.keep_rollout_steps=7"])) == 7
    assert rollout_steps_kept(load_train_config(None, ["method=fixed", "harness.keep_rollout_steps=4"])) == 4


def test_dapo_and_odf_settings():
    config = load_train_config(None, ["method=dapo", "harness.detectors.eps=0.05", "grpo.tasks_per_step=3"])
    assert config.dapo_eps == 0.05 and config.dapo_max_extra_groups == 6  # defaults follow eps and batch size
    config = load_train_config(None, ["dapo.eps=0.1", "dapo.max_extra_groups=1"])
    assert config.dapo_eps == 0.1 and config.dapo_max_extra_groups == 1
    assert load_train_config(None).odf == DifficultyFilterSettings(window=4, low=0.2, high=0.8, reprobe_after=10)
    with pytest.raises(ConfigError, match="must not exceed"):
        load_train_config(None, ["odf.low=0.9", "odf.high=0.5"])


# --------------------------------------------------------------------------- 2. evaluation splits


def test_bundled_splits_are_disjoint_and_balanced():
    config = load_train_config(None)
    tasks = load_run_tasks(config)
    heldout = load_bundled("heldout")
    assert len(tasks.test) == 20 and len(tasks.validation) == 15
    assert {t.id for t in tasks.test} | {t.id for t in tasks.validation} == {t.id for t in heldout}
    ids = [{t.id for t in ts} for ts in (tasks.train, tasks.validation, tasks.test)]
    assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    for domain in {t.domain for t in heldout}:
        assert sum(t.domain == domain for t in tasks.test) == 4
        assert sum(t.domain == domain for t in tasks.validation) == 3
    assert load_run_tasks(config).test == tasks.test  # deterministic
    # the older single setting means the same thing; per-domain caps apply to each split
    legacy = load_run_tasks(load_train_config(None, ["data.heldout=bundled", "data.heldout_per_domain=2"]))
    assert len(legacy.test) == len(legacy.validation) == 10
    assert [t.id for t in legacy.test] == [t.id for t in tasks.test if t.id in {x.id for x in legacy.test}]
    none = load_run_tasks(load_train_config(None, ["data.heldout=null"]))
    assert none.eval_splits == {}
    only_test = load_run_tasks(load_train_config(None, ["data.validation=null"]))
    assert list(only_test.eval_splits) == ["test"] and len(only_test.test) == 20


def test_split_alternates_within_each_domain():
    rows = [_task(f"{d}{i}", d, f"q {d}{i}") for i in range(3) for d in ("a", "b")]
    test, validation = split_alternating(_tasks(rows))
    assert [t.id for t in test] == ["a0", "b0", "a2", "b2"] and [t.id for t in validation] == ["a1", "b1"]


def _write(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_splits_refuse_shared_task_ids(tmp_path):
    train = _write(tmp_path / "train.jsonl", [_task("t1", "a", "q1"), _task("t2", "a", "q2")])
    val = _write(tmp_path / "val.jsonl", [_task("v1", "a", "q3"), _task("x", "a", "q4")])
    test = _write(tmp_path / "test.jsonl", [_task("x", "a", "q4"), _task("s1", "a", "q5")])

    def load(**data):
        return load_run_tasks(TrainConfig.model_validate({"data": {"train": train, **data}}))

    ok = load(validation=val, test=_write(tmp_path / "t2.jsonl", [_task("s1", "a", "q5")]))
    assert [t.id for t in ok.validation] == ["v1", "x"] and [t.id for t in ok.test] == ["s1"]
    with pytest.raises(HarnessRLError, match=r"validation and the test data.*must not overlap"):
        load(validation=val, test=test)
    with pytest.raises(HarnessRLError, match=r"training and the test data.*split off before training"):
        load(validation=None, test=train)
    # one file named for both is split; a domain needs two tasks to give validation one
    with pytest.raises(ConfigError, match="left no validation tasks"):
        load(heldout=_write(tmp_path / "one.jsonl", [_task("o1", "a", "q6")]))


class _ScriptedEval:
    """Stands in for evaluate_policy: a score per (split, step)."""

    def __init__(self, scores):
        self.scores = scores

    def __call__(self, model, tokenizer, tasks, judge, *, step, split, **decoding):
        v = self.scores[split][step]
        return EvalResult(
            step=step,
            split=split,
            overall=v,
            per_domain={"a": v},
            per_task={t.id: v for t in tasks},
            tasks=len(tasks),
            seconds=0.0,
        )


def test_best_checkpoint_is_chosen_on_validation_alone(tmp_path, monkeypatch):
    import harnessrl.trainer.callbacks as callbacks

    # test improves at step 4, validation peaks at step 2: the best checkpoint is step 2's
    scores = {"validation": {0: 0.3, 2: 0.6, 4: 0.5}, "test": {0: 0.2, 2: 0.25, 4: 0.9}}
    monkeypatch.setattr(callbacks, "evaluate_policy", _ScriptedEval(scores))
    run = RunDir(tmp_path / "run")
    splits = {"test": _tasks([_task("s", "a", "q")]), "validation": _tasks([_task("v", "a", "q")])}
    cb = EvalCallback(run, splits, None, every_steps=2, before_training=True, max_new_tokens=4, batch_size=2)
    saved = []
    cb.trainer = SimpleNamespace(save_model=saved.append)
    state = SimpleNamespace(global_step=0, max_steps=4, is_world_process_zero=True)
    cb.on_train_begin(None, state, None)
    state.global_step = 2
    cb.on_step_end(None, state, None)
    state.global_step = 4
    cb.on_train_end(None, state, None)

    rows = run.read("eval.jsonl")
    assert [(r["step"], r["split"]) for r in rows] == [(s, sp) for s in (0, 2, 4) for sp in ("validation", "test")]
    best = run.read_json("best.json")
    assert best["step"] == 2 and best["split"] == "validation" and best["overall"] == 0.6
    assert best["graded_with"] == "rubric"
    # reported, not used to choose
    assert best["test"] == {"overall": 0.25, "per_domain": {"a": 0.25}, "per_family": {}, "proxy": None}
    assert saved == [str(run.checkpoints / "best")]
    assert [r.overall for r in cb.split_results("test")] == [0.2, 0.25, 0.9]
    events = [e for e in run.read("events.jsonl") if e["kind"] == "evaluation"]
    assert [e["split"] for e in events] == ["validation", "test"] * 3
    # a resumed callback reads the rows back and evaluates nothing twice
    again = EvalCallback(run, splits, None, every_steps=2, before_training=True, max_new_tokens=4, batch_size=2)
    assert again._evaluated(4) and again.best is not None and again.best.model_dump() == best


def test_no_validation_split_chooses_no_best(tmp_path, monkeypatch):
    import harnessrl.trainer.callbacks as callbacks

    monkeypatch.setattr(callbacks, "evaluate_policy", _ScriptedEval({"test": {0: 0.4, 2: 0.7}}))
    run = RunDir(tmp_path / "run")
    cb = EvalCallback(
        run, {"test": _tasks([_task("s", "a", "q")])}, None, every_steps=None, before_training=True,
        max_new_tokens=4, batch_size=2,
    )  # fmt: skip
    state = SimpleNamespace(global_step=0, max_steps=2, is_world_process_zero=True)
    cb.on_train_begin(None, state, None)
    state.global_step = 2
    cb.on_train_end(None, state, None)
    assert [r["split"] for r in run.read("eval.jsonl")] == ["test", "test"]
    assert cb.best is None and run.read_json("best.json") is None


# --------------------------------------------------------------------------- 3. ODF as a task-sampling policy


def _odf_sampling(n: int = 6, **settings) -> TaskSampling:
    s = TaskSampling([f"t{i}" for i in range(n)], floor=0.0, seed=3)
    s.set_difficulty_filter(DifficultyFilterSettings(**{"window": 2, "reprobe_after": 5, **settings}))
    return s


def test_odf_eligibility_and_reprobe():
    s = _odf_sampling()
    odf = s.state.difficulty_filter
    assert all(odf.eligible(t, 1) for t in s.task_ids)  # no history: eligible (the first draw probes)
    s.observe(1, [("t0", 0.0), ("t1", 0.5), ("t2", 1.0), ("t3", None)])
    assert not odf.eligible("t0", 2) and not odf.eligible("t2", 2)  # out of band: skipped
    assert odf.eligible("t1", 2) and odf.eligible("t3", 2)  # in band / no reward: nothing learnt
    assert s.metrics(2) == {"odf/eligible_tasks": 4.0, "odf/skipped": 2.0, "odf/reprobes": 0.0}
    for step in range(2, 6):
        assert not {"t0", "t2"} & set(s.sample(3, step))
    assert odf.eligible("t0", 6)  # reprobe_after steps later: one re-probe
    # the re-probe is judged on its own groups: t0 now in band stays; t2 still out is skipped again
    s.observe(6, [("t0", 0.4), ("t2", 0.9)])
    assert odf.recent["t0"] == [0.4] and odf.eligible("t0", 7)
    assert odf.skipped_at["t2"] == 6 and not odf.eligible("t2", 10) and odf.eligible("t2", 11)
    assert odf.reprobes == 2
    # the recent mean is over the last `window` groups
    s.observe(7, [("t1", 0.1), ("t1", 0.2)])
    assert odf.recent["t1"] == [0.1, 0.2] and not odf.eligible("t1", 8)


def test_odf_draw_is_a_pure_function_and_persists(tmp_path):
    tasks = _tasks([_task(f"t{i}", "a", f"q{i}") for i in range(6)])
    harness = Harness(tasks, sampling_floor=0.0, seed=3)
    harness.sampling.set_difficulty_filter(DifficultyFilterSettings(window=2, reprobe_after=5))
    harness.sampling.observe(1, [("t0", 0.05), ("t4", 0.95)])
    draws = [harness.sampling.sample(2, step) for step in range(2, 8)]
    harness.save(tmp_path / "harness.json")  # the filter's state travels in harness.json
    saved = json.loads((tmp_path / "harness.json").read_text())
    assert saved["task_sampling"]["difficulty_filter"]["skipped_at"] == {"t0": 1, "t4": 1}
    loaded = Harness.load(tmp_path / "harness.json", tasks)
    assert loaded.sampling.state.difficulty_filter == harness.sampling.state.difficulty_filter
    assert [loaded.sampling.sample(2, step) for step in range(2, 8)] == draws  # every process draws the same
    assert (
        loaded.versions
        == harness.versions
        == {**dict.fromkeys(harness.versions, 0), "task_sampling": 0, "rollout_guidance": 0, "rubric_criteria": 0}
    )
    # without the filter, sampling is as before (plain GRPO's draw does not change)
    plain = TaskSampling([f"t{i}" for i in range(6)], floor=0.0, seed=3)
    on = _odf_sampling()
    assert [plain.sample(2, k) for k in range(5)] == [on.sample(2, k) for k in range(5)]


def test_odf_with_every_task_skipped_reprobes_the_earliest():
    s = _odf_sampling(n=3)
    s.observe(1, [("t0", 0.0)])
    s.observe(2, [("t1", 1.0), ("t2", 1.0)])
    assert s.metrics(3)["odf/eligible_tasks"] == 0
    assert set(s.sample(2, 3)) == {"t0"}  # due soonest; drawn twice rather than stopping


def test_sampling_refill_draws_other_tasks():
    s = TaskSampling([f"t{i}" for i in range(5)], seed=0)
    first = s.sample(2, 4)
    assert s.sample(2, 4) == first  # the same step draws the same
    more = s.sample(3, 4, draw=1, exclude=first)
    assert not set(more) & set(first) and len(set(more)) == 3
    assert s.sample(3, 4, draw=1, exclude=first) == more
    assert len(s.sample(4, 4, draw=2, exclude=first)) == 4  # too few others: any task again


# --------------------------------------------------------------------------- 4. DAPO dynamic sampling


ALWAYS = {"a0", "a1", "a2"}  # prompts with 'always': the scripted judge scores them 1.0 whatever is said


@pytest.fixture
def dapo_trainer(monkeypatch):
    """A bare HarnessGRPOTrainer whose TRL generation is a fake: task k's prompt has k + 2 tokens, a
    completion has (member + row) % 3 + 1 tokens, and each row's advantage names its round and row."""
    rows = [_task(t, "a", f"Say {'always' if t in ALWAYS else 'anything'} {t}") for t in ("a0", "a1", "a2", "v0", "v1")]
    harness = Harness(_tasks(rows), sampling_floor=0.0, seed=0)
    calls: list[list[dict]] = []

    def fake_trl(self, inputs):
        calls.append(inputs)
        n = len(inputs)
        texts = [f"{r['task_id']} reply {len(calls)}.{i}" for i, r in enumerate(inputs)]
        comp_ids = [[7] * ((r["member"] + i) % 3) + [2] for i, r in enumerate(inputs)]  # 2 = EOS
        self.rubric_reward(
            [r["prompt"] for r in inputs],
            [[{"role": "assistant", "content": t}] for t in texts],
            task_id=[r["task_id"] for r in inputs],
            rubric_version=[r["rubric_version"] for r in inputs],
            completion_ids=comp_ids,
        )
        self._metrics["train"]["reward"].append(-1.0)  # TRL's per-call value, to be replaced
        tid_index = sorted(harness.tasks)
        p_lens = [tid_index.index(r["task_id"]) + 2 for r in inputs]
        p_max, c_max = max(p_lens), max(len(c) for c in comp_ids)
        prompt_ids = torch.zeros(n, p_max, dtype=torch.long)
        prompt_mask = torch.zeros(n, p_max, dtype=torch.long)
        completion_ids = torch.zeros(n, c_max, dtype=torch.long)
        completion_mask = torch.zeros(n, c_max, dtype=torch.long)
        for i, (pl, c) in enumerate(zip(p_lens, comp_ids, strict=True)):
            prompt_ids[i, p_max - pl :] = 100 + tid_index.index(inputs[i]["task_id"])
            prompt_mask[i, p_max - pl :] = 1
            completion_ids[i, : len(c)] = torch.tensor(c)
            completion_mask[i, : len(c)] = 1
        return {
            "prompt_ids": prompt_ids,
            "prompt_mask": prompt_mask,
            "completion_ids": completion_ids,
            "completion_mask": completion_mask,
            "advantages": torch.tensor([len(calls) * 100.0 + i for i in range(n)]),
            "old_per_token_logps": completion_mask.float() * -1.0,
            "num_items_in_batch": completion_mask.sum(),
        }

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", fake_trl)
    tr = object.__new__(HarnessGRPOTrainer)
    tr.harness = harness
    tr.num_generations = G
    tr.accelerator = SimpleNamespace(num_processes=1, process_index=0, is_main_process=True, gather=lambda t: t)
    tr.rubric_reward = RubricReward(RubricJudge(ScriptedBackend()), harness)
    tr.recorder = Recorder(None)
    tr.step_records = StepRecords(harness, tr.rubric_reward, G, zero_std_eps=0.02, flat_low=0.3, flat_high=0.8)
    tr.judge_faults = JudgeFaults()
    tr.dapo_eps, tr.dapo_max_extra_groups = 0.02, 4
    tr.accounting = dict.fromkeys(HarnessGRPOTrainer.ACCOUNTING, 0)
    tr._metrics = {"train": defaultdict(list)}
    tr.step_listeners = []
    tr.generation = RolloutGeneration()
    tr.timings = defaultdict(float)
    tr.state = SimpleNamespace(global_step=0)
    tr.model = SimpleNamespace(training=True)
    tr._tokenizer = SimpleNamespace(pad_token_id=0)
    tr.eos_token_ids = [2]
    tr.reward_func_names = ["rubric"]
    tr.vllm_importance_sampling_mode = "sequence_mask"
    tr.calls = calls
    return tr


def _check_merged(out: dict, record, g: int = G):
    """Shape, padding and row identity of a merged batch against the step's kept groups."""
    n = len(record.groups) * g
    assert out["prompt_ids"].shape[0] == out["completion_ids"].shape[0] == out["advantages"].shape[0] == n
    assert out["old_per_token_logps"].shape == out["completion_ids"].shape
    ids = sorted({"a0", "a1", "a2", "v0", "v1"})
    for i in range(n):
        pm, cm = out["prompt_mask"][i], out["completion_mask"][i]
        first = int(pm.argmax())
        assert pm[:first].sum() == 0 and pm[first:].all()  # left-padded
        assert (out["prompt_ids"][i, :first] == 0).all()
        assert int(out["prompt_ids"][i, -1]) == 100 + ids.index(record.groups[i // g].task_id)
        length = int(cm.sum())
        assert cm[:length].all() and not cm[length:].any()  # right-padded
        assert int(out["completion_ids"][i, length - 1]) == 2 and (out["completion_ids"][i, length:] == 0).all()
    assert int(out["num_items_in_batch"]) == int(out["completion_mask"].sum())


def test_dapo_drops_flat_groups_and_refills(dapo_trainer):
    tr = dapo_trainer
    out = tr._generate_and_score_completions([{}] * (2 * G))
    record = tr.recorder.steps[1]
    assert len(record.groups) == 2 and all(not g.flat for g in record.groups)
    assert {g.task_id for g in record.groups} == {"v0", "v1"}  # only the 'anything' tasks give a spread
    assert record.discarded and all(g.flat and g.task_id in ALWAYS for g in record.discarded)
    _check_merged(out, record)
    # each kept row's advantage is the one TRL computed for it in its own round
    rounds = [int(a) // 100 for a in out["advantages"].tolist()]
    for k, g in enumerate(record.groups):
        call = tr.calls[rounds[k * G] - 1]
        row = int(out["advantages"][k * G]) % 100
        assert call[row]["task_id"] == g.task_id and call[row]["member"] == 0
    generated = sum(len(c) for c in tr.calls)
    assert tr.accounting["rollouts/generated"] == generated == (2 + len(record.discarded)) * G
    assert tr.accounting["rollouts/discarded"] == len(record.discarded) * G
    m = tr._metrics["train"]
    assert m["dapo/discarded_groups"] == [len(record.discarded)]
    assert m["dapo/rounds"] == [len(tr.calls)] and m["dapo/extra_groups"] == [len(record.discarded)]
    assert m["effective_group_ratio"] == [1.0] and m["frac_reward_zero_std/eps"] == [0.0]
    assert m["reward"] == [pytest.approx(sum(r for g in record.groups for r in g.rewards) / (2 * G))]
    assert len(m["completions/mean_length"]) <= 1  # one value a step, not one a round
    # the refill drew tasks not yet drawn this step
    drawn = [r["task_id"] for c in tr.calls for r in c[::G]]
    assert len(drawn) == len(set(drawn))
    # the harness's evidence is every graded group: the dropped ones are kept, marked, and counted as graded
    assert all(g.trained for g in record.groups) and not any(g.trained for g in record.discarded)
    assert record.observed == [*record.groups, *record.discarded]
    kept = tr.recorder.rollouts[1]
    assert [r.task_id for r in kept] == [g.task_id for g in record.observed for _ in range(G)]
    assert [r.trained for r in kept] == [g.trained for g in record.observed for _ in range(G)]
    for g in record.discarded:
        assert tr.recorder.graded(g.task_id) == 1 and len(tr.recorder.latest_rollouts(g.task_id)) == G


def test_the_detectors_read_the_groups_dapo_drops(dapo_trainer):
    # a task whose group DAPO drops (uniformly high) is still seen by the detectors: it raises
    # non_discriminative_high though no group of it was trained
    from harnessrl.detection.failure_detector import FailureDetector

    tr = dapo_trainer
    failures = []
    detector = FailureDetector(rollouts_for=tr.recorder.rollouts.get, on_failures=failures.extend)
    tr.step_listeners.append(detector)
    tr._generate_and_score_completions([{}] * (2 * G))
    record = tr.recorder.steps[1]
    dropped, trained = {g.task_id for g in record.discarded}, {g.task_id for g in record.groups}
    assert dropped and not dropped & trained
    assert set(detector.histories) == dropped | trained
    assert {f.task_id for f in failures if f.kind == "non_discriminative_high"} == dropped


def test_dapo_at_the_cap_fills_with_the_best_dropped(dapo_trainer):
    tr = dapo_trainer
    tr.dapo_max_extra_groups = 1
    for t in ("v0", "v1"):  # only flat tasks left to draw
        tr.harness.sampling.state.status[t] = "retired"
    out = tr._generate_and_score_completions([{}] * (2 * G))
    record = tr.recorder.steps[1]
    assert len(record.groups) == 2 and all(g.flat for g in record.groups)  # the batch keeps its shape
    assert len(record.discarded) == 1
    assert tr.accounting["rollouts/generated"] == 3 * G and tr.accounting["rollouts/discarded"] == G
    _check_merged(out, record)
    assert tr._metrics["train"]["effective_group_ratio"] == [0.0]


def test_plain_step_keeps_one_call(dapo_trainer):
    tr = dapo_trainer
    tr.dapo_eps = None  # fixed / odf / harnessrl: one generation, whatever the groups look like
    out = tr._generate_and_score_completions([{}] * (2 * G))
    assert len(tr.calls) == 1 and out["advantages"].shape[0] == 2 * G
    # one judged criterion a rollout; the two tasks' reference answers are graded after the step's snapshot
    # and counted once folded in (at the next step, or now by accounting_metrics)
    assert tr.accounting == {
        **dict.fromkeys(HarnessGRPOTrainer.ACCOUNTING, 0),
        "rollouts/generated": 2 * G,
        "judge/calls_total": 2 * G,
    }
    assert tr.accounting_metrics()["judge/calls_total"] == 2 * G + 2
    assert tr.recorder.steps[1].discarded == []


# --------------------------------------------------------------------------- 5. every method, end to end


@pytest.fixture(scope="module")
def method_data(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("methods")
    ids = ["t0", "t1", "t2", "t3"]
    # the tasks drawn first at steps 1 and 2 always score 1.0: each step starts with a flat group
    flat = {TaskSampling(ids, seed=0).sample(2, s)[0] for s in (1, 2)}
    rows = [_task(t, "a", f"Say {'always' if t in flat else 'anything'} about {t}.") for t in ids]
    held = [_task(f"h{i}", "a", f"Say anything about h{i}.") for i in range(4)]
    return {
        "train": _write(d / "train.jsonl", rows),
        "heldout": _write(d / "heldout.jsonl", held),
    }


def _method_run(tmp_path, model_dir, data, method: str):
    config = TrainConfig.model_validate(
        {
            "run_dir": str(tmp_path / method),
            "model": str(model_dir),
            "device": "cpu",
            "method": method,
            "data": {"train": data["train"], "validation": data["heldout"], "test": data["heldout"]},
            "judge": {"backend": f"{__name__}:ScriptedBackend"},
            "grpo": {"num_generations": G, "tasks_per_step": 2, "max_completion_length": 6, "max_steps": 2},
            "harness": {"memory": {"enabled": False}},
            "eval": {"every_steps": None, "before_training": False, "max_new_tokens": 4, "batch_size": 4},
            "odf": {"window": 1, "reprobe_after": 5},
        }
    )
    summary = train(config)
    return summary, RunDir(tmp_path / method, create=False)


@pytest.mark.parametrize("method", ["fixed", "dapo", "odf", "harnessrl", "harnessrl-grpo"])
def test_each_method_trains_two_steps(tmp_path, tiny_model_dir, method_data, method):
    summary, run = _method_run(tmp_path, tiny_model_dir, method_data, method)
    assert summary.steps == 2 and summary.method == method
    assert (run.checkpoints / "final" / "model.safetensors").exists()
    start = run.read("events.jsonl")[0]
    evolving = method.startswith("harnessrl")
    assert start["kind"] == "run_start" and start["method"] == method and start["evolver"] is evolving
    rows = [m for m in run.read("metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in rows] == [1, 2]
    groups = [GroupRecord.model_validate(g) for g in run.read("steps.jsonl")]
    assert [sum(g.step == s for g in groups) for s in (1, 2)] == [2, 2]  # the batch shape never changes
    discarded = run.read("discarded_groups.jsonl")
    last = rows[-1]
    assert last["rollouts/generated"] == (len(groups) + len(discarded)) * G
    assert last["rollouts/discarded"] == len(discarded) * G and last["rollouts/trial"] == 0
    assert last["judge/calls_total"] > 0
    for m in rows:
        kept = [g for g in groups if g.step == m["step"]]
        assert m["effective_group_ratio"] == sum(not g.flat for g in kept) / 2
    evals = run.read("eval.jsonl")
    assert sorted(e["split"] for e in evals) == ["test", "validation"]
    summary_json = run.read_json("summary.json")
    assert summary_json["accounting"]["rollouts_generated"] == last["rollouts/generated"]
    assert "rollouts_generated" not in summary_json  # written once: the totals are in the accounting
    assert summary_json["accounting"]["rollouts_discarded"] == last["rollouts/discarded"]
    assert summary_json["steps_to_best"] == 2 and summary_json["eval"]["test"]["at_best"] is not None
    if method in ("dapo", "harnessrl"):
        # each step began with a flat group: it was dropped and the batch refilled with a spread (under the
        # harness too: the evolver reads the trained groups, DAPO's refill is the trainer's)
        assert len(discarded) >= 2 and all(GroupRecord.model_validate(g).flat for g in discarded)
        assert all(not g.flat for g in groups)
        assert [m["dapo/discarded_groups"] for m in rows] == [sum(g["step"] == s for g in discarded) for s in (1, 2)]
        # the dropped groups and their rollouts are kept for the harness, marked as not trained
        assert all(g["trained"] is False for g in discarded) and all(g.trained for g in groups)
        for s in (1, 2):
            lines = (run.path / "rollouts" / f"step_{s:06d}.jsonl").read_text().splitlines()
            kept = [RolloutRecord.model_validate_json(line) for line in lines]
            assert sorted(r.task_id for r in kept if not r.trained) == sorted(
                g["task_id"] for g in discarded if g["step"] == s for _ in range(G)
            )
    else:
        assert discarded == [] and "dapo/discarded_groups" not in last
    harness = json.loads(run.harness.read_text())
    odf = harness["task_sampling"]["difficulty_filter"]
    if method == "odf":
        # the flat tasks seen at step 1 (mean 1.0, above the band) are skipped at step 2
        seen1 = {g.task_id: g.mean for g in groups if g.step == 1}
        skipped = {t for t, mean in seen1.items() if mean > 0.8}
        assert set(odf["skipped_at"]) >= skipped
        assert not skipped & {g.task_id for g in groups if g.step == 2}
        assert rows[1]["odf/skipped"] >= len(skipped) and "odf/eligible_tasks" in rows[1]
    else:
        assert odf is None and "odf/skipped" not in last
    assert not (run.path / "tool_server.json").exists()
    if method == "harnessrl":  # the run says what it turned on: the evolver's settings and DAPO's
        assert start["method_settings"]["eps"] == 0.02 and start["method_settings"]["backend"] == "rule-based"
    if method == "harnessrl-grpo":  # the harness over plain GRPO reads no DAPO setting
        assert "eps" not in start["method_settings"] and start["method_settings"]["backend"] == "rule-based"


def test_critic_trials_generate_with_the_training_completion_budget():
    # a guidance trial's fresh rollouts are the policy's samples as training draws them: the same length budget
    config = TrainConfig.model_validate({"grpo": {"max_completion_length": 64}})
    assert config.evolver.trials.max_new_tokens == 64
    own = TrainConfig.model_validate(
        {"grpo": {"max_completion_length": 64}, "evolver": {"trials": {"max_new_tokens": 30}}}
    )
    assert own.evolver.trials.max_new_tokens == 30
    again = TrainConfig.model_validate(config.model_dump(mode="json"))  # the resolved config.yaml reads back alike
    assert again.evolver.trials.max_new_tokens == 64


def test_the_older_heldout_setting_still_works_and_says_it_is_deprecated():
    with pytest.warns(FutureWarning, match=r"data.heldout is deprecated: .* data.validation: 'h.jsonl' and data.test"):
        config = TrainConfig.model_validate({"data": {"heldout": "h.jsonl"}})
    assert config.data.validation == config.data.test == "h.jsonl"
