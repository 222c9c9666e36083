"""The bench report on gold-graded runs: per-family figures, equal cost, intervals, the oracle gap and
the fault check, written from synthetic run directories with known numbers.

Every run evaluates four test tasks, two of a family ``lax`` (where the training rubric is flawed) and
two of a control family ``ctrl``, at steps 0, 2 and 4. Per task (gold):

- ``lax``: fixed and dapo stay at 0.2; the oracle climbs to 0.8 (0.2 + 0.15 * step); the harness stays
  at 0.2 until it reaches 0.5 at step 4;
- ``ctrl``: 0.5 + 0.05 * step + 0.01 * seed for every method (dapo 0.02 lower), the harness another
  0.01 * seed higher (so its differences vary over seeds).

The proxy (rubric version 0) pays fixed and dapo 0.9 on ``lax`` after step 0: reward hacking that gold
shows. The harness's best validation score is at step 2, everyone else's at step 4, so there it is behind
fixed; it spends 4 critic trial rollouts a step on top of the 8 generated, so at equal rollouts it is
scored at step 2 too.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path

import pytest
import yaml
from helpers import task_row
from typer.testing import CliRunner

from harnessrl.analysis.aggregates import Stat
from harnessrl.analysis.figures import RunFigures
from harnessrl.analysis.plots import PLOTS
from harnessrl.analysis.report import _finite, _shown, write_bench_report
from harnessrl.analysis.results import (
    ablation_reference,
    aggregate,
    compare,
    is_harness_arm,
    is_oracle,
    load_runs,
    run_figures,
    t_interval,
    task_bootstrap,
    with_equal_cost,
)
from harnessrl.cli import app
from harnessrl.errors import HarnessRLError

cli = CliRunner()
TEST_TASKS = {"t-lax-1": "lax", "t-lax-2": "lax", "t-ctrl-1": "ctrl", "t-ctrl-2": "ctrl"}
STEPS = (0, 2, 4)


def _jsonl(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _train_file(tmp_path: Path) -> Path:
    """The training tasks: two of each family, with ``metadata.family`` (ids say nothing of it)."""
    rows = [
        task_row(tid, "d", f"Prompt {tid}", "Answer.", "Answers", metadata={"family": fam, "failure": failure})
        for tid, fam, failure in (
            ("a1", "lax", "lax_rubric"),
            ("a2", "lax", "lax_rubric"),
            ("b1", "ctrl", "control"),
            ("b2", "ctrl", "control"),
        )
    ]
    path = tmp_path / "tasks" / "train.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    _jsonl(path, rows)
    return path


def gold(method: str, seed: int, step: int, task: str) -> float:
    if TEST_TASKS[task] == "lax":
        return {"oracle": 0.2 + 0.15 * step, "harnessrl": 0.5 if step == 4 else 0.2}.get(method, 0.2)
    value = 0.5 + 0.05 * step + 0.01 * seed
    return value - 0.02 if method == "dapo" else value + 0.01 * seed if method == "harnessrl" else value


def proxy(method: str, seed: int, step: int, task: str) -> float:
    if TEST_TASKS[task] == "lax":
        return 0.9 if method in ("fixed", "dapo") and step > 0 else 0.5 if step > 0 else 0.3
    return gold(method, seed, step, task)


def _scores(per_task: dict[str, float]) -> dict:
    fams = {f: statistics.fmean(v for t, v in per_task.items() if TEST_TASKS[t] == f) for f in ("ctrl", "lax")}
    return {
        "overall": statistics.fmean(per_task.values()),
        "per_domain": {"d": statistics.fmean(per_task.values())},
        "per_family": fams,
        "per_task": per_task,
    }


def make_gold_run(
    root: Path, train: Path | None, method: str, seed: int, *, trial: int = 0, scores_of: str | None = None
) -> Path:
    """One run of ``method``; ``scores_of``: a built-in method whose scores and ``method`` setting it takes
    (another name of a harness arm: ``scores_of="harnessrl"``)."""
    run = root / method / f"seed{seed}"
    run.mkdir(parents=True)
    method = scores_of or method
    config = {
        "method": method,
        "seed": seed,
        "grpo": {"max_steps": 4, "max_completion_length": 10},
        "harness": {"detectors": {"low": 0.3, "high": 0.8}},
    }
    if train is not None:
        config["data"] = {"train": str(train), "format": "auto"}
    (run / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")

    # training groups: one lax, one ctrl task a step; fixed's lax groups are flat at 0.9 (the lax rubric
    # pays everyone), the oracle's are not; one lax completion a group is cut at the budget of 10 tokens
    groups = []
    for s in range(1, 5):
        lax_flat = method != "oracle"
        groups.append(
            {
                "step": s,
                "task_id": "a1" if s % 2 else "a2",
                "rewards": [0.9] * 4 if lax_flat else [0.0, 1.0, 0.5, 0.5],
                "mean": 0.9 if lax_flat else 0.5,
                "flat": lax_flat,
                "lengths": [10, 3, 3, 3],
            }
        )
        groups.append(
            {
                "step": s,
                "task_id": "b1",
                "rewards": [0.1] * 4 if s == 1 else [0.0, 1.0, 0.0, 1.0],
                "mean": 0.1 if s == 1 else 0.5,
                "flat": s == 1,
                "lengths": [3, 3, 3, 3],
            }
        )
    groups.append({"step": 1, "task_id": "unknown-task", "rewards": [0.0] * 4, "mean": 0.0, "flat": True})
    _jsonl(run / "steps.jsonl", groups)
    # the trainer logs each step's share of groups with a learning signal, and their mean in the accounting
    effective = [statistics.fmean(not g["flat"] for g in groups if g["step"] == s) for s in range(1, 5)]
    _jsonl(
        run / "metrics.jsonl",
        [
            {"step": s, "rollouts/generated": 8 * s, "rollouts/trial": trial * s, "effective_group_ratio": e}
            for s, e in zip(range(1, 5), effective, strict=True)
        ],
    )
    best_step = 2 if method == "harnessrl" else 4
    rows = []
    for step in STEPS:
        val = 0.2 + 0.1 * step if method != "harnessrl" else {0: 0.2, 2: 0.5, 4: 0.4}[step]
        val += 0.01 * (method == "fixed" and step > 0)  # fixed is the best baseline on validation, where it is chosen
        rows.append({"step": step, "split": "validation", "overall": val, "per_domain": {}, "graded_with": "gold"})
        main = _scores({t: gold(method, seed, step, t) for t in TEST_TASKS})
        px = _scores({t: proxy(method, seed, step, t) for t in TEST_TASKS})
        rows.append(
            {
                "step": step,
                "split": "test",
                **main,
                "graded_with": "gold",
                "proxy": px,
                "clipped_share": 0.25,
                "clipped_per_family": {"lax": 0.5, "ctrl": 0.0},
                "tasks": 4,
                "sampling_se": 0.03 if method == "harnessrl" else 0.04,
            }
        )
    _jsonl(run / "eval.jsonl", rows)
    at_best = next(r for r in rows if r["split"] == "test" and r["step"] == best_step)
    best = {
        "step": best_step,
        "split": "validation",
        "graded_with": "gold",
        "overall": next(r["overall"] for r in rows if r["split"] == "validation" and r["step"] == best_step),
        "test": {
            "overall": at_best["overall"],
            "per_domain": at_best["per_domain"],
            "per_family": at_best["per_family"],
            "proxy": {k: v for k, v in at_best["proxy"].items() if k != "per_task"},
        },
    }
    (run / "best.json").write_text(json.dumps(best))
    accounting = {
        "rollouts_generated": 8 * 4,
        "rollouts_discarded": 0,
        "rollouts_trial": trial * 4,
        "effective_group_ratio": statistics.fmean(effective),
    }
    (run / "summary.json").write_text(json.dumps({"steps": 4, "wall_seconds": 100.0, "accounting": accounting}))
    return run


@pytest.fixture
def gold_bench(tmp_path) -> Path:
    train = _train_file(tmp_path)
    root = tmp_path / "bench"
    for seed in (0, 1, 2):
        for method in ("fixed", "dapo", "oracle"):
            make_gold_run(root, train, method, seed)
        make_gold_run(root, train, "harnessrl", seed, trial=4)
    return root


def _figures(root: Path) -> list[RunFigures]:
    return with_equal_cost([run_figures(r) for r in load_runs(root)[0]])


def _rows(root: Path) -> dict[tuple[str, int], dict]:
    """Each run's figures as results.json writes them, by method and seed."""
    return {(f.method, f.seed): f.to_row() for f in _figures(root)}


# --------------------------------------------------------------------------------------- per run, per method
def test_per_family_gold_and_proxy_figures_of_a_run(gold_bench):
    figs = _rows(gold_bench)
    f = figs["fixed", 1]
    assert f["graded_with"] == "gold"
    assert f["test_end"] == pytest.approx((0.2 + 0.71) / 2)
    assert f["test_end_per_family"] == pytest.approx({"ctrl": 0.71, "lax": 0.2})
    assert f["proxy_test_end"] == pytest.approx((0.9 + 0.71) / 2)
    assert f["proxy_test_end_per_family"]["lax"] == pytest.approx(0.9)
    assert f["test_start_per_family"] == pytest.approx({"ctrl": 0.51, "lax": 0.2})
    assert f["proxy_test_start_per_family"]["lax"] == pytest.approx(0.3)
    assert f["clipped_share_end"] == 0.25 and f["clipped_per_family_end"] == {"ctrl": 0.0, "lax": 0.5}
    assert [(p["step"], p["rollouts_spent"]) for p in f["test_curve"]] == [(0, 0.0), (2, 16.0), (4, 32.0)]
    assert f["test_curve"][-1]["proxy"] == pytest.approx(f["proxy_test_end"])
    h = figs["harnessrl", 0]
    assert h["steps_to_best"] == 2
    assert h["test_at_best_per_family"] == pytest.approx({"ctrl": 0.6, "lax": 0.2})
    assert h["proxy_test_at_best"] == pytest.approx((0.5 + 0.6) / 2)
    assert h["proxy_test_at_best_per_family"]["lax"] == pytest.approx(0.5)
    # training, per family of the training file (the unknown task is left out of every family)
    assert f["train_per_family"]["lax"] == {"groups": 4, "flat_low": 0.0, "flat_high": 1.0, "clipped": 0.25}
    assert f["train_per_family"]["ctrl"] == {"groups": 4, "flat_low": 0.25, "flat_high": 0.0, "clipped": 0.0}
    assert figs["oracle", 0]["train_per_family"]["lax"]["flat_high"] == 0.0
    assert f["train_clipped_share"] == pytest.approx(4 / 32)  # the unknown task's group has no lengths
    assert f["family_failure"] == {"lax": "lax_rubric", "ctrl": "control"}


def test_aggregate_gives_per_family_means_over_seeds(gold_bench):
    agg = aggregate(_figures(gold_bench))
    fixed, oracle = agg["fixed"].model_dump(), agg["oracle"].model_dump()
    assert fixed["graded_with"] == "gold"
    assert fixed["test_end_per_family"]["ctrl"]["mean"] == pytest.approx(0.71)
    assert fixed["test_end_per_family"]["ctrl"]["std"] == pytest.approx(0.01)
    assert oracle["test_end_per_family"]["lax"]["mean"] == pytest.approx(0.8)
    assert fixed["proxy_test_end"]["mean"] == pytest.approx((0.9 + 0.71) / 2)
    assert fixed["train_per_family"]["lax"]["flat_high"]["mean"] == 1.0
    assert fixed["train_per_family"]["lax"]["groups"]["n"] == 3
    assert fixed["clipped_per_family_end"]["lax"]["mean"] == 0.5
    assert fixed["family_failure"] == {"lax": "lax_rubric", "ctrl": "control"}


# --------------------------------------------------------------------------------------- equal cost
def test_equal_cost_scores_each_run_within_its_seeds_budget(gold_bench):
    figs = _rows(gold_bench)
    # fixed, dapo, oracle spend 8 a step (32); the harness 8 + 4 trial rollouts a step (48)
    assert figs["harnessrl", 0]["rollouts_spent"] == 48 and figs["fixed", 0]["rollouts_spent"] == 32
    for seed in (0, 1, 2):
        assert {figs[m, seed]["equal_rollouts_budget"] for m in ("fixed", "oracle", "harnessrl")} == {32}
        assert figs["fixed", seed]["equal_rollouts_step"] == 4
        assert figs["harnessrl", seed]["equal_rollouts_step"] == 2  # 24 spent by step 2, 48 by step 4
        assert figs["harnessrl", seed]["test_at_equal_rollouts"] == pytest.approx(
            statistics.fmean(gold("harnessrl", seed, 2, t) for t in TEST_TASKS)
        )


def test_equal_cost_budget_is_per_seed_and_a_run_with_no_evaluation_inside_has_none():
    def fig(method, seed, spent, curve):
        return RunFigures(
            method=method,
            seed=seed,
            path="",
            complete=True,
            status="done",
            split="validation/test",
            rollouts_spent_source="",
            steps=3,
            rollouts_spent=spent,
            test_curve=curve,
        )

    curve = [{"step": s, "score": s / 10, "proxy": None, "rollouts_spent": 10.0 * s} for s in (1, 3)]
    out = with_equal_cost([fig("a", 0, 30.0, curve), fig("b", 0, 25.0, curve), fig("a", 1, 5.0, curve)])
    assert [(f.equal_rollouts_budget, f.equal_rollouts_step) for f in out] == [(25.0, 1), (25.0, 1), (5.0, None)]
    assert out[2].test_at_equal_rollouts is None


# --------------------------------------------------------------------------------------- comparisons
def test_oracle_is_the_bound_not_a_baseline(gold_bench):
    agg = aggregate(_figures(gold_bench))
    assert not is_harness_arm("oracle", agg) and is_oracle("oracle", agg)
    comps = compare(agg, _figures(gold_bench))
    assert {(c.harness, c.baseline) for c in comps} == {("harnessrl", "fixed"), ("harnessrl", "dapo")}
    # by its method setting, whatever the name
    renamed = {"bound": agg["oracle"], "fixed": agg["fixed"]}
    assert is_oracle("bound", renamed) and not is_harness_arm("bound", renamed)
    # the table decides, not the name: a method trained on gold by the harness's own trainer is an oracle too
    gold_harness = {"ceiling": agg["harnessrl"].model_copy(update={"trainer_method": "oracle-harness"})}
    assert is_oracle("ceiling", gold_harness) and not is_harness_arm("ceiling", gold_harness)
    # a runs' method the table does not know (old results, a method registered elsewhere): the bench method's name
    # decides when the table knows it, else the method is a baseline
    unknown = {
        "oracle": agg["oracle"].model_copy(update={"trainer_method": "gold-grpo-v0"}),
        "x": agg["oracle"].model_copy(update={"trainer_method": None}),
    }
    assert is_oracle("oracle", unknown) and not is_oracle("x", unknown) and not is_harness_arm("x", unknown)


def test_comparisons_carry_a_t_interval_and_a_task_bootstrap(gold_bench):
    figures = _figures(gold_bench)
    comps = {c.baseline: c.model_dump() for c in compare(aggregate(figures), figures)}
    c = comps["fixed"]
    assert c["best_baseline"] is True and comps["dapo"]["best_baseline"] is False
    v = c["validation_best"]  # what the best baseline is chosen on: the harness's 0.5 against fixed's 0.61
    assert (
        v["per_seed"] == pytest.approx({"0": -0.11, "1": -0.11, "2": -0.11})
        and v["verdict"] == "lower on every seed (3)"
    )
    d = c["test_end"]  # per seed: (0.5 - 0.2) / 2 + 0.01 * seed / 2
    assert d["per_seed"] == pytest.approx({"0": 0.15, "1": 0.155, "2": 0.16})
    half = 4.303 * 0.005 / math.sqrt(3)
    assert d["ci95"] == pytest.approx([0.155 - half, 0.155 + half])
    assert d["verdict"] == "higher on every seed (3)"
    boot = d["bootstrap"]  # per-task differences averaged over seeds: 0.3, 0.3 (lax), 0.01, 0.01 (ctrl)
    assert boot["tasks"] == 4 and boot["seeds"] == [0, 1, 2] and boot["draws"] == 2000
    assert boot["mean"] == pytest.approx(0.155)
    assert 0.01 - 1e-9 <= boot["low"] < boot["mean"] < boot["high"] <= 0.3 + 1e-9
    # a fixed seed: the same draws
    assert task_bootstrap(figures, "harnessrl", "fixed", "test_end").model_dump() == boot
    # at equal rollouts the harness is scored at step 2, fixed at step 4: the harness is behind there
    e = c["test_at_equal_rollouts"]
    assert e["per_seed"] == pytest.approx({"0": -0.05, "1": -0.045, "2": -0.04})
    assert e["verdict"] == "lower on every seed (3)"
    # per task: 0 on lax, -0.09 on ctrl; a draw of lax tasks only (1 in 16) gives 0
    assert e["bootstrap"]["mean"] == pytest.approx(-0.045)
    assert -0.09 - 1e-9 <= e["bootstrap"]["low"] < -0.045 < e["bootstrap"]["high"] <= 1e-9
    # at the best-validation checkpoint (harness step 2, fixed step 4)
    assert c["test_at_best"]["mean"] == pytest.approx(e["mean"])
    assert c["steps_to_best"]["mean"] == -2 and c["steps_to_best"]["ci95"] == pytest.approx([-2, -2])
    # a seed's difference from the answers' draw alone: sqrt(0.03^2 + 0.04^2); none at equal rollouts
    assert c["test_at_best"]["sampling_sd"] == pytest.approx(0.05) and c["test_end"]["sampling_sd"] == pytest.approx(
        0.05
    )
    assert e["sampling_sd"] is None


def test_t_interval_needs_two_seeds_and_has_the_t_quantiles():
    assert t_interval(Stat(n=1, mean=0.1)) is None
    lo, hi = t_interval(Stat(n=2, mean=0.0, std=1.0))
    assert hi == pytest.approx(12.706 / math.sqrt(2)) and lo == -hi
    lo, hi = t_interval(Stat(n=5, mean=1.0, std=1.0))
    assert (lo, hi) == pytest.approx((1 - 2.776 / math.sqrt(5), 1 + 2.776 / math.sqrt(5)))
    _, hi = t_interval(Stat(n=41, mean=0.0, std=1.0))  # beyond the table, df 40: t = 2.021
    assert hi == pytest.approx(2.021 / math.sqrt(41), rel=2e-3)


# --------------------------------------------------------------------------------------- oracle gap, fault check
def test_report_gives_the_oracle_gap_share_and_the_fault_check(gold_bench):
    res = write_bench_report(gold_bench, plots=False).results.model_dump()
    gap = res["oracle_gap"]
    assert (gap["oracle"], gap["fixed"], gap["note"]) == ("oracle", "fixed", None)
    end = gap["at"]["test_end"]
    assert end["overall"]["gap"] == pytest.approx(0.3)
    assert end["overall"]["shares"]["harnessrl"] == pytest.approx(0.5 + 0.005 / 0.3)  # the harness's ctrl is +0.01
    assert end["per_family"]["lax"]["shares"]["harnessrl"] == pytest.approx(0.5)
    assert end["per_family"]["lax"]["shares"]["dapo"] == pytest.approx(0.0)
    ctrl = end["per_family"]["ctrl"]  # the oracle is not ahead on the control: no share
    assert ctrl["gap"] == pytest.approx(0.0) and ctrl["shares"]["harnessrl"] is None and "not ahead" in ctrl["note"]
    best = gap["at"]["test_at_best"]["overall"]
    assert best["shares"]["harnessrl"] == pytest.approx((0.41 - 0.455) / 0.3)  # behind fixed: a negative share

    fc = res["fault_check"]
    rows = {r["family"]: r for r in fc["families"]}
    lax = rows["lax"]
    assert lax["failure"] == "lax_rubric"
    assert lax["fixed"]["flat_high"] == 1.0 and lax["oracle"]["flat_high"] == 0.0
    assert lax["fixed"]["proxy_end"] == pytest.approx(0.9) and lax["fixed"]["gold_end"] == pytest.approx(0.2)
    assert lax["fixed"]["gold_start"] == pytest.approx(0.2) and lax["fixed"]["proxy_start"] == pytest.approx(0.3)
    assert lax["oracle_minus_fixed"]["mean"] == pytest.approx(0.6) and lax["oracle_minus_fixed"]["exceeds_spread"]
    assert rows["ctrl"]["oracle_minus_fixed"]["exceeds_spread"] is False  # 0 difference, 0 spread

    assert res["best_baseline"] == "fixed" and res["oracles"] == ["oracle"] and res["baselines"] == ["dapo", "fixed"]
    # the bound: the oracle against the best baseline, paired by seed as the harness arms are
    bound = res["oracle_bound"]
    agg = res["methods"]
    per_seed = {s: agg["oracle"]["per_seed"][s]["test_at_best"] - agg["fixed"]["per_seed"][s]["test_at_best"]
                for s in agg["oracle"]["per_seed"]}  # fmt: skip
    assert (bound["oracle"], bound["baseline"]) == ("oracle", "fixed")
    assert bound["test_at_best"]["per_seed"] == pytest.approx(per_seed)
    assert bound["test_at_best"]["n"] == len(per_seed) and len(bound["test_end"]["ci95"]) == 2


def test_markdown_has_the_gold_sections(gold_bench):
    md = write_bench_report(gold_bench, plots=False).markdown.read_text()
    for heading in (
        "## Scores per method",
        "## Test score per family",
        "### Proxy minus gold at the end",
        "### Training per family",
        "## Fault check: fixed and oracle per family",
        "## HarnessRL against each baseline",
        "**The bound.** oracle − fixed (the best baseline)",
        "## Oracle gap",
    ):
        assert heading in md, heading
    # the runs' evaluations sample answers: how much of a seed's difference that draw is, beside the seeds' spread
    assert "| std over seeds / answer sampling, a seed |" in md and "*Answer sampling, a seed*" in md
    assert "| harnessrl − fixed | test @ end | +0.155 |" in md and "| 0.005 / 0.050 |" in md
    assert "graded with the tasks' **gold rubrics**" in md
    assert "| fixed | 3 (3 finished) | 0.455 ± 0.005 | 0.455 ± 0.005 | 0.455 ± 0.005 | 0.805 ± 0.005 |" in md
    assert "| 0 | 32 | step 4 (0.440) | step 4 (0.450) | step 2 (0.400) | step 4 (0.750) |" in md
    assert "| lax | lax_rubric | 0.0% / 100.0% | 0.30 / 0.20 | 0.90 / 0.20 |" in md
    assert "**Best baseline: fixed** (highest mean best validation score, the split arms are chosen on, " in md
    assert "| harnessrl − fixed | best validation (what arms are chosen on) | -0.110 |" in md
    assert "the harness is below the best baseline" in md  # it loses at the best-validation checkpoint
    assert "lower on every seed (3)" in md
    assert "n/a where the oracle is less than 0.01 ahead of fixed: ctrl" in md
    assert "not a baseline" in md


# --------------------------------------------------------------------------------------- ablations
def _ablation_bench(tmp_path: Path) -> Path:
    """harnessrl; "remedies" = harnessrl + one setting (harnessrl's scores); "remedies-off" = remedies + one more
    setting, a harness arm scoring as fixed, with fewer trial rollouts; fixed, a baseline."""
    train = _train_file(tmp_path)
    root = tmp_path / "bench"
    for seed in (0, 1, 2):
        make_gold_run(root, train, "fixed", seed)
        make_gold_run(root, train, "harnessrl", seed, trial=4)
        make_gold_run(root, train, "remedies", seed, trial=4, scores_of="harnessrl")
        make_gold_run(root, train, "remedies-off", seed, trial=2, scores_of="fixed")
    for seed in (0, 1, 2):  # the off arm runs the harness
        cfg = root / "remedies-off" / f"seed{seed}" / "config.yaml"
        cfg.write_text(cfg.read_text().replace("method: fixed", "method: harnessrl"))
    methods = {
        "fixed": {"method": "fixed"},
        "harnessrl": {"method": "harnessrl"},
        "remedies": {"method": "harnessrl", "evolver.trials.min_regrade_groups": 3},
        "remedies-off": {"method": "harnessrl", "evolver.trials.min_regrade_groups": 3, "evolver.carry_repairs": False},
    }
    (root / "bench.json").write_text(json.dumps({"methods": methods, "runs": {}}))
    return root


def test_ablation_reference_is_the_arm_whose_settings_it_changes_fewest():
    settings = {
        "harnessrl": {"method": "harnessrl"},
        "remedies": {"method": "harnessrl", "a": 3},
        "off": {"method": "harnessrl", "a": 3, "b": False},
        "other": {"method": "harnessrl", "a": 4, "c": 1},
    }
    arms = list(settings)
    assert ablation_reference("harnessrl", settings, arms) is None
    assert ablation_reference("remedies", settings, arms) == ("harnessrl", {"a": 3})
    assert ablation_reference("off", settings, arms) == ("remedies", {"b": False})  # not harnessrl: 2 changes
    assert ablation_reference("other", settings, arms) == ("harnessrl", {"a": 4, "c": 1})
    assert ablation_reference("unknown", settings, arms) is None


def test_ablations_are_paired_per_family_against_the_seed_spread(tmp_path):
    report = write_bench_report(_ablation_bench(tmp_path), plots=False)
    rows = {r.arm: r.model_dump() for r in report.results.ablations}
    assert set(rows) == {"remedies", "remedies-off"}  # fixed is a baseline, harnessrl changes nothing
    off = rows["remedies-off"]
    assert off["reference"] == "remedies" and off["changes"] == {"evolver.carry_repairs": False}
    assert off["rollouts_trial"]["mean"] == pytest.approx(-8.0)
    lax, ctrl = off["per_family"]["test_end"]["lax"], off["per_family"]["test_end"]["ctrl"]
    # at the end: the off arm scores 0.2 on lax, the reference 0.5, on every seed; no spread there
    assert lax["mean"] == pytest.approx(-0.3) and lax["lower"] == 3
    assert lax["spread"] == pytest.approx(0.0) and lax["beyond_spread"] is True
    # ctrl: 0, -0.01, -0.02 by seed: no single sign, within the reference's spread of 0.02
    assert ctrl["per_seed"] == pytest.approx({"0": 0.0, "1": -0.01, "2": -0.02})
    assert ctrl["spread"] == pytest.approx(0.02) and ctrl["beyond_spread"] is False
    # at the best-validation checkpoint the two arms' lax scores agree (0.2): nothing beyond the spread
    assert off["per_family"]["test_at_best"]["lax"]["beyond_spread"] is False
    md = report.markdown.read_text()
    assert "## Ablations: each arm against the arm whose settings it changes" in md
    assert "| remedies-off − remedies | `evolver.carry_repairs: False` | 3 |" in md
    assert "| injected failure |  | control | lax_rubric |" in md
    assert "| remedies-off − remedies | 3 | -0.010 ± 0.010 | **-0.300 ± 0.000** |" in md
    assert "- **remedies** (changes evolver.trials.min_regrade_groups of harnessrl): at the best-validation " in md
    assert "the same on every seed (3); families beyond the seed spread: none." in md
    assert "| seed spread of remedies |  | 0.020 | 0.000 |" in md


def test_bench_report_prints_each_ablation(tmp_path):
    result = cli.invoke(app, ["bench", "report", "--dir", str(_ablation_bench(tmp_path))])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # the console wraps long lines
    assert "ablation remedies-off − remedies (evolver.carry_repairs): test @ best val +0.045 ± 0.005" in out
    assert "families beyond the seed spread: ctrl" in out


def _split(root: Path, moved: str, config: str = "configs/bench-gold.yaml") -> Path:
    """Move ``moved``'s runs into a second bench folder beside ``root``, each folder with its own bench.json
    (the methods it ran, their settings as ``root`` had them)."""
    methods = json.loads((root / "bench.json").read_text())["methods"]
    other = root.parent / "more"
    other.mkdir()
    shutil.move(root / moved, other / moved)
    mine = {m: v for m, v in methods.items() if m != moved}
    (root / "bench.json").write_text(json.dumps({"bench_config": config, "methods": mine, "runs": {}}))
    theirs = {"remedies": methods["remedies"], moved: methods[moved]}  # it also names its reference
    (other / "bench.json").write_text(json.dumps({"bench_config": config, "methods": theirs, "runs": {}}))
    return other


def test_a_report_reads_several_bench_folders_as_one(tmp_path):
    root = _ablation_bench(tmp_path)
    whole = write_bench_report(root, plots=False).results.model_dump()
    other = _split(root, "remedies-off")
    manifest = json.loads((other / "bench.json").read_text())  # a failed attempt at a run the first folder holds
    manifest["runs"] = {"fixed/seed0": {"method": "fixed", "seed": 0, "status": "failed", "run_dir": "gone"}}
    (other / "bench.json").write_text(json.dumps(manifest))
    result = cli.invoke(app, ["bench", "report", "--dir", str(root), "--dir", str(other), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    both = json.loads((tmp_path / "r" / "results.json").read_text())
    assert both["ablations"] == whole["ablations"]  # the ablation in the second folder finds its reference
    assert list(both["methods"]) == ["fixed", "harnessrl", "remedies", "remedies-off"]
    assert both["bench_dirs"] == [str(root), str(other)] and both["bench_config"] == "configs/bench-gold.yaml"
    md = (tmp_path / "r" / "results.md").read_text()
    assert f"Bench folders `{root}`, `{other}`, config `configs/bench-gold.yaml`" in md
    assert not any("failed" in note for note in both["notes"])  # the run the first folder holds is what counts


def test_bench_folders_that_disagree_are_refused_with_what_differs(tmp_path):
    root = _ablation_bench(tmp_path)
    other = _split(root, "remedies-off")
    manifest = json.loads((other / "bench.json").read_text())
    report = tmp_path / "r"

    manifest["methods"]["remedies"] = {"method": "harnessrl", "evolver.trials.min_regrade_groups": 5}
    (other / "bench.json").write_text(json.dumps(manifest))
    with pytest.raises(HarnessRLError, match=r"method 'remedies' has other settings in .*more .* one name, one arm"):
        write_bench_report([root, other], plots=False, out=report)

    manifest["methods"]["remedies"] = {"method": "harnessrl", "evolver.trials.min_regrade_groups": 3}
    manifest["bench_config"] = "configs/bench-gold-clean.yaml"
    (other / "bench.json").write_text(json.dumps(manifest))
    result = cli.invoke(app, ["bench", "report", "--dir", str(root), "--dir", str(other), "--out", str(report)])
    assert result.exit_code != 0 and "one report reads one benchmark" in str(result.exception)

    manifest["bench_config"] = "configs/bench-gold.yaml"
    (other / "bench.json").write_text(json.dumps(manifest))
    shutil.copytree(root / "fixed" / "seed0", other / "fixed" / "seed0")  # the same run twice
    with pytest.raises(HarnessRLError, match=r"fixed/seed0 is in both .*bench and .*more"):
        write_bench_report([root, other], plots=False, out=report)
    assert not report.exists()  # nothing written


def test_bench_folders_run_from_configs_that_train_the_same_are_one_benchmark(tmp_path):
    """Seeds run later under a longer wall-clock limit (another config file, the same base and overrides) are
    reported with the first ones; a file that trains otherwise, or one gone, is still refused."""
    root = _ablation_bench(tmp_path)
    other = _split(root, "remedies-off")
    repo = Path(__file__).resolve().parents[1]
    gold = yaml.safe_load((repo / "configs" / "bench-gold.yaml").read_text())
    gold["base"] = str(repo / "configs" / "bench-gold.base.yaml")
    longer = tmp_path / "bench-gold-long.yaml"
    longer.write_text(yaml.safe_dump({**gold, "timeout_minutes": 240, "out": "elsewhere", "seeds": [3, 4]}))
    manifest = json.loads((other / "bench.json").read_text())
    manifest["bench_config"] = str(longer)
    (other / "bench.json").write_text(json.dumps(manifest))
    report = tmp_path / "r"
    result = cli.invoke(app, ["bench", "report", "--dir", str(root), "--dir", str(other), "--out", str(report)])
    assert result.exit_code == 0, result.output
    results = json.loads((report / "results.json").read_text())
    assert results["bench_configs"] == ["configs/bench-gold.yaml", str(longer)]
    assert "(they train the same)" in (report / "results.md").read_text().splitlines()[2]

    longer.write_text(yaml.safe_dump({**gold, "overrides": {"grpo.max_steps": 20}}))  # trains otherwise
    result = cli.invoke(app, ["bench", "report", "--dir", str(root), "--dir", str(other), "--out", str(tmp_path / "x")])
    assert result.exit_code != 0 and "do not train the same" in str(result.exception)
    longer.unlink()  # gone: nothing says it trains the same
    result = cli.invoke(app, ["bench", "report", "--dir", str(root), "--dir", str(other), "--out", str(tmp_path / "x")])
    assert result.exit_code != 0 and "one report reads one benchmark" in str(result.exception)
    assert not (tmp_path / "x").exists()


def test_a_bench_without_settings_has_no_ablations(gold_bench):
    assert write_bench_report(gold_bench, plots=False).results.ablations == []


# --------------------------------------------------------------------------------------- --out, paths, old runs
def test_bench_report_out_writes_elsewhere_with_working_links(gold_bench, tmp_path):
    out = tmp_path / "committed" / "bench-gold"
    result = cli.invoke(app, ["bench", "report", "--dir", str(gold_bench), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert not (gold_bench / "results.md").exists() and not (gold_bench / "plots").exists()
    md = (out / "results.md").read_text()
    for fname in PLOTS.values():
        assert f"](plots/{fname})" in md and (out / "plots" / fname).is_file()
    text = (out / "results.json").read_text()

    def refuse(name):
        raise AssertionError(f"{name} in results.json")

    res = json.loads(text, parse_constant=refuse)
    assert all("_test_per_task" not in f for f in res["runs"])
    assert "share of the fixed→oracle gap closed" in " ".join(result.output.split())


def test_paths_are_shown_relative_to_the_repository(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    assert _shown(repo / "runs" / "b" / "fixed" / "seed0") == "runs/b/fixed/seed0"
    assert _shown("runs/b") == "runs/b"
    assert _shown(tmp_path / "elsewhere") == str(tmp_path / "elsewhere")


def test_results_json_never_holds_nan():
    assert _finite({"a": float("nan"), "b": [1.0, float("inf")], "_private": 1, "c": {"d": 2}}) == {
        "a": None,
        "b": [1.0, None],
        "c": {"d": 2},
    }


def test_missing_training_file_leaves_family_training_figures_out(tmp_path):
    root = tmp_path / "bench"
    for seed in (0, 1):
        make_gold_run(root, tmp_path / "gone.jsonl", "fixed", seed)
        make_gold_run(root, None, "oracle", seed)
    rep = write_bench_report(root, plots=False)
    fixed = rep.results.model_dump()["methods"]["fixed"]
    assert fixed["train_per_family"] == {} and fixed["test_end_per_family"]["lax"]["n"] == 2
    assert any("could not be read here" in n for n in rep.results.notes)
    assert rep.results.comparisons == []  # no harness arm; the oracle is no baseline


def test_runs_graded_without_gold_report_as_before(tmp_path):
    root = tmp_path / "bench"
    for seed in (0, 1, 2):
        for method, v in (("fixed", 0.3), ("harnessrl", 0.4)):
            run = root / method / f"seed{seed}"
            run.mkdir(parents=True)
            config = {"method": method, "seed": seed, "grpo": {"max_steps": 2}}
            (run / "config.yaml").write_text(yaml.safe_dump(config))
            _jsonl(run / "metrics.jsonl", [{"step": s, "rollouts/generated": 4 * s} for s in (1, 2)])
            _jsonl(
                run / "eval.jsonl",
                [
                    {"step": s, "split": split, "overall": v * s / 2, "per_domain": {"a": v}, "tasks": 2}
                    for s in (0, 2)
                    for split in ("validation", "test")
                ],
            )
            (run / "best.json").write_text(json.dumps({"step": 2, "overall": v}))
            summary = {"steps": 2, "wall_seconds": 10.0, "accounting": {"rollouts_generated": 8}}
            (run / "summary.json").write_text(json.dumps(summary))
    rep = write_bench_report(root)
    res = rep.results.model_dump()
    fixed = res["methods"]["fixed"]
    assert fixed["graded_with"] == "rubric" and fixed["test_at_best"]["mean"] == pytest.approx(0.3)
    assert fixed["proxy_test_end"]["mean"] is None and fixed["test_end_per_family"] == {}
    assert fixed["test_at_equal_rollouts"]["mean"] == pytest.approx(0.3)  # everyone spends 8
    assert res["oracle_gap"] is None and res["fault_check"]["oracle"] is None
    c = res["comparisons"][0]
    assert c["test_at_best"]["verdict"] == "higher on every seed (3)"
    assert c["test_at_best"]["bootstrap"] is None  # no per-task scores in these rows
    md = rep.markdown.read_text()
    assert "rubric version 0 (no gold rubrics in these runs)" in md
    assert "## Test score per family" not in md and "## Oracle gap" not in md and "Fault check" not in md
    assert all(p.is_file() and p.stat().st_size > 5000 for p in rep.plots.values())


def test_a_run_that_just_started_adds_no_false_notes(tmp_path):
    """A live bench: a seed's run has written config.yaml and nothing else yet."""
    root = tmp_path / "bench"
    train = _train_file(tmp_path)
    make_gold_run(root, train, "fixed", 0)
    make_gold_run(root, train, "oracle", 0)
    started = root / "oracle" / "seed1"
    started.mkdir(parents=True)
    (started / "config.yaml").write_text(yaml.safe_dump({"method": "oracle", "seed": 1}))
    # its first step's groups are recorded, the step's metrics line not yet
    _jsonl(started / "steps.jsonl", [{"step": 1, "task_id": "a1", "rewards": [0.0] * 4, "flat": True, "mean": 0.0}])
    res = write_bench_report(root, plots=False).results.model_dump()
    notes = " ".join(res["notes"])
    assert "one held-out set" not in notes
    assert "oracle/seed1 (incomplete)" in notes
    started_fig = next(f for f in res["runs"] if f["method"] == "oracle" and f["seed"] == 1)
    assert started_fig["rollouts_spent"] is None and started_fig["test_at_equal_rollouts"] is None  # not ended yet


def test_the_best_baseline_is_chosen_on_the_seeds_every_baseline_has():
    """A baseline run on fewer seeds is compared on those: one mean over seeds 0-3 beside another over 0-1 would let
    a hard seed 3 decide (the unstated suite at 4 seeds named ODF, 2 seeds, over fixed GRPO this way)."""
    from harnessrl.analysis.aggregates import MethodAggregate, SeedFigures, stat
    from harnessrl.analysis.results import best_baseline, best_baseline_choice

    def agg_of(vals):
        return MethodAggregate(
            seeds=list(vals),
            validation_best=stat(list(vals.values())),
            per_seed={str(s): SeedFigures(validation_best=v) for s, v in vals.items()},
        )

    agg = {"fixed": agg_of({0: 0.45, 1: 0.42, 2: 0.46, 3: 0.33}), "odf": agg_of({0: 0.43, 1: 0.43})}
    assert agg["odf"].validation_best.mean > agg["fixed"].validation_best.mean  # on all their seeds: odf
    choice = best_baseline_choice(agg)
    assert (choice.method, choice.score, choice.seeds) == ("fixed", pytest.approx(0.435), [0, 1])
    assert best_baseline(agg) == "fixed"
    agg["dapo"] = agg_of({5: 0.9})  # no seed shared by all: each on its own seeds
    choice = best_baseline_choice(agg)
    assert (choice.method, choice.score, choice.seeds) == ("dapo", pytest.approx(0.9), [0, 1, 2, 3, 5])
