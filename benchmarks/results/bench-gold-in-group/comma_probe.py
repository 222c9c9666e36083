"""Evaluate runs' final checkpoints on one family's test tasks with more sampled answers than the bench.

The bench grades 4 answers per test task (16 a seed on a family of 4 tasks); this scores the same tasks as the
run's own evaluation does (its decoding, its eval judge, gold with rubric version 0 beside it:
``evaluate_policy`` with ``eval_decoding``), only with N answers per task, so a family's difference between two
runs can be told from the noise of 16. Nothing is written into the run directories.

    python benchmarks/results/bench-gold-in-group/comma_probe.py 32 nocomma RUN_DIR ...

For ``nocomma`` the gold rubric is 1 x topic + 2 x no commas and rubric version 0 the topic alone, so the
no-comma rate is (3 x gold - proxy) / 2.
"""

from __future__ import annotations

import sys

from harnessrl.judges import build_judge
from harnessrl.models import load_causal_lm
from harnessrl.records.run_dir import RunDir
from harnessrl.trainer.evaluation import eval_decoding, evaluate_policy, resolve_grade_with
from harnessrl.trainer.run import _device, _on_device, load_run_tasks
from harnessrl.trainer.train_config import load_train_config


def main(completions: int, family: str, run_dirs: list[str]) -> None:
    for run_dir in run_dirs:
        run = RunDir(run_dir, create=False)
        config = load_train_config(run.config)
        splits = load_run_tasks(config).eval_splits
        tasks = [t for t in splits["test"] if t.metadata.get("family") == family]
        if not tasks:
            raise SystemExit(f"{run_dir}: no test task of family {family!r}")
        device = _device(config)
        model, tokenizer = load_causal_lm(str(run.checkpoints / "final"), device=device)
        judge = build_judge(_on_device(config.eval_judge, device))
        result = evaluate_policy(
            model,
            tokenizer,
            tasks,
            judge,
            step=-1,
            split="test",
            grade_with=resolve_grade_with(config.eval.grade_with, splits),
            **{**eval_decoding(config), "completions": completions},
        )
        gold, proxy = result.overall, result.proxy.overall if result.proxy else None
        print(f"{run_dir} answers {len(tasks) * completions} gold {gold:.3f} proxy {proxy:.3f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3:])
