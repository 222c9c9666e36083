"""benchmarks/eval_precision.py: bench runs' best checkpoints read again at more answers a task, paired by seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import load_script

from harnessrl.errors import HarnessRLError
from harnessrl.records.run_dir import RunDir
from harnessrl.trainer.train_config import TrainConfig

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "eval_precision.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(SCRIPT)


def _run(root: Path, method: str, seed: int, bench4: float, precise16: float | None) -> Path:
    """A finished bench run as the script reads it: config (eval.completions 4), best.json, and, when
    ``precise16`` is given, the row `harnessrl eval --completions 16 --split test` leaves."""
    run = RunDir(root / method / f"seed{seed}")
    run.write_config(TrainConfig.model_validate({"run_dir": str(run.path), "eval": {"completions": 4}}))
    ckpt = str(run.checkpoints / "best")
    best = {
        "step": 40,
        "overall": 0.5,
        "test": {"overall": bench4, "per_family": {"brief": bench4}},
        "checkpoint": ckpt,
    }
    (run.path / "best.json").write_text(json.dumps(best), encoding="utf-8")
    rows = [{"step": 40, "split": "test", "overall": 0.1, "per_family": {"brief": 0.1}}]  # the training's own
    if precise16 is not None:
        row = {"split": "test", "source": "harnessrl eval", "checkpoint": ckpt, "selection": None, "sampling_se": 0.02}
        rows.append(
            {**row, "step": 40, "overall": precise16, "per_family": {"brief": precise16}, "completions_per_task": 16}
        )
        # a subset, and another number of answers: neither is the row asked for
        rows.append({**row, "step": 40, "overall": 0.0, "completions_per_task": 16, "selection": {"families": ["x"]}})
        rows.append({**row, "step": 40, "overall": 0.0, "completions_per_task": 32})
    for r in rows:
        run.append("eval.jsonl", r)
    return run.path


def test_pairs_by_seed_at_both_sizes_and_reads_back_what_was_graded(bench, tmp_path):
    for seed, (h4, h16, d4, d16) in enumerate(
        [(0.60, 0.55, 0.50, 0.52), (0.50, 0.56, 0.55, 0.51), (0.58, 0.57, 0.45, 0.50)]
    ):
        _run(tmp_path / f"h{seed}", "harnessrl", seed, h4, h16)
        _run(tmp_path / f"d{seed}", "dapo", seed, d4, d16)
    out = tmp_path / "out"
    bench.main(
        [
            *(a for s in range(3) for a in ("--dir", str(tmp_path / f"h{s}"), "--dir", str(tmp_path / f"d{s}"))),
            "--against",
            "dapo",
            "--out",
            str(out),
        ]
    )
    res = json.loads((out / "results.json").read_text())
    assert res["completions"] == 16 and res["bench_completions"] == 4
    cmp = res["comparisons"]["harnessrl"]
    assert cmp["bench"]["overall"]["per_seed"] == pytest.approx({"0": 0.10, "1": -0.05, "2": 0.13})
    assert cmp["precise"]["overall"]["per_seed"] == pytest.approx({"0": 0.03, "1": 0.05, "2": 0.07})
    assert cmp["precise"]["overall"]["mean"] == pytest.approx(0.05) and cmp["precise"]["overall"]["higher"] == 3
    lo, hi = cmp["precise"]["overall"]["ci95"]
    assert 0 < lo < 0.05 < hi  # 4.303 * 0.02 / sqrt(3) either side
    assert cmp["precise"]["per_family"]["brief"]["mean"] == pytest.approx(0.05)
    changes = [-0.05, 0.06, -0.01, 0.02, -0.04, 0.05]
    assert res["noise"]["change"]["mean"] == pytest.approx(sum(changes) / 6)
    # the answers' spread: 0.02 at 16 answers is 0.04 at 4; a paired difference sqrt(2) times that
    assert res["noise"]["bench_sampling_se_from_spread"] == pytest.approx(0.04)
    assert res["noise"]["paired_difference_sampling_sd"] == pytest.approx(0.04 * 2**0.5)
    md = (out / "results.md").read_text()
    assert "harnessrl − dapo" in md and "| harnessrl | 0 | 40 | 0.600 | 0.550 | -0.050 |" in md


def test_a_run_whose_best_was_the_untrained_policy_is_read_at_base(bench, tmp_path):
    """Validation never rose above step 0: best.json names no checkpoint, and the best is the policy before training
    (`harnessrl eval --checkpoint base`), whose row is read back by that name."""
    run = RunDir(_run(tmp_path, "odf", 3, 0.40, None))
    best = json.loads((run.path / "best.json").read_text())
    (run.path / "best.json").write_text(json.dumps({**best, "step": 0, "checkpoint": None}))
    row = {"split": "test", "source": "harnessrl eval", "checkpoint": "base", "selection": None, "step": 0}
    run.append("eval.jsonl", {**row, "overall": 0.41, "per_family": {"brief": 0.41}, "completions_per_task": 16})
    scored = bench.bench_score(run.path)
    assert scored["step"] == 0 and scored["checkpoint"] == "base"
    assert bench.precise_score(run.path, scored["checkpoint"], 16)["overall"] == 0.41  # read back, not graded


def test_errors_say_what_is_missing(bench, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(HarnessRLError, match="no finished run"):
        bench.find_runs([tmp_path / "empty"])
    _run(tmp_path / "a", "dapo", 0, 0.5, 0.5)
    _run(tmp_path / "b", "dapo", 0, 0.5, 0.5)
    with pytest.raises(HarnessRLError, match="dapo seed 0 is in two folders"):
        bench.find_runs([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(HarnessRLError, match="--against 'fixed': no runs of it; methods found: dapo"):
        bench.main(["--dir", str(tmp_path / "a"), "--against", "fixed", "--out", str(tmp_path / "o")])


def test_rows_of_an_earlier_reading_stand_for_runs_whose_folders_are_gone(bench, tmp_path):
    for seed, (d4, d16) in enumerate([(0.50, 0.52), (0.55, 0.51)]):
        _run(tmp_path / f"d{seed}", "dapo", seed, d4, d16)
    first = tmp_path / "first"
    bench.main(
        [*(a for s in range(2) for a in ("--dir", str(tmp_path / f"d{s}"))), "--against", "dapo", "--out", str(first)]
    )
    for seed, (a4, a16) in enumerate([(0.60, 0.56), (0.58, 0.57)]):
        _run(tmp_path / f"a{seed}", "arm", seed, a4, a16)
    out = tmp_path / "second"
    rows = str(first / "results.json")
    args = [*(a for s in range(2) for a in ("--dir", str(tmp_path / f"a{s}"))), "--rows", rows, "--against", "dapo"]
    bench.main([*args, "--out", str(out)])
    res = json.loads((out / "results.json").read_text())
    cmp = res["comparisons"]["arm"]
    assert cmp["precise"]["overall"]["per_seed"] == pytest.approx({"0": 0.04, "1": 0.06})
    assert cmp["bench"]["overall"]["per_seed"] == pytest.approx({"0": 0.10, "1": 0.03})
    assert res["table"]["dapo"]["0"]["row"] == rows and "row" not in res["table"]["arm"]["0"]
    md = (out / "results.md").read_text()
    assert "| dapo (*row*) | 0 | 40 | 0.500 | 0.520 | +0.020 |" in md and f"`{rows}`" in md
    # the rows' folders may be gone: nothing is read from them
    for s in range(2):
        for p in sorted((tmp_path / f"d{s}").rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
    bench.main([*args, "--out", str(tmp_path / "third")])
    assert json.loads((tmp_path / "third" / "results.json").read_text())["comparisons"] == res["comparisons"]


def test_rows_that_cannot_stand_say_why(bench, tmp_path):
    _run(tmp_path / "d0", "dapo", 0, 0.5, 0.5)
    first = tmp_path / "first"
    bench.main(["--dir", str(tmp_path / "d0"), "--against", "dapo", "--out", str(first)])
    rows = first / "results.json"
    with pytest.raises(HarnessRLError, match="graded at 16 answers a task, this reading at 32: pass --completions 16"):
        bench.main(["--rows", str(rows), "--completions", "32", "--against", "dapo", "--out", str(tmp_path / "o")])
    with pytest.raises(HarnessRLError, match="dapo seed 0 is both a run"):
        bench.main(
            ["--dir", str(tmp_path / "d0"), "--rows", str(rows), "--against", "dapo", "--out", str(tmp_path / "o")]
        )
    with pytest.raises(HarnessRLError, match="dapo seed 0 is in two files"):
        bench.main(["--rows", str(rows), "--rows", str(rows), "--against", "dapo", "--out", str(tmp_path / "o")])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(HarnessRLError, match="cannot be read as JSON"):
        bench.main(["--rows", str(bad), "--against", "dapo", "--out", str(tmp_path / "o")])
    bad.write_text('{"table": {}}', encoding="utf-8")
    with pytest.raises(HarnessRLError, match=r"not a results\.json of benchmarks/eval_precision\.py"):
        bench.main(["--rows", str(bad), "--against", "dapo", "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit):
        bench.main(["--against", "dapo", "--out", str(tmp_path / "o")])
