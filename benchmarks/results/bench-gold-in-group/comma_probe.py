"""Evaluate runs' final checkpoints on one family's test tasks with more sampled answers than the bench.

The bench grades 4 answers per test task (16 a seed on a family of 4 tasks); this scores the same tasks as the
run's own evaluation does (its decoding, its eval judge, gold with rubric version 0 beside it), only with N
answers per task, so a family's difference between two runs can be told from the noise of 16. It is
``harnessrl eval --checkpoint final --split test --family F --completions N`` on each run (a row each in the
run's ``eval.jsonl``, source ``harnessrl eval``, outside the training curve), printed one line a run:

    python benchmarks/results/bench-gold-in-group/comma_probe.py 32 nocomma RUN_DIR ...

For ``nocomma`` the gold rubric is 1 x topic + 2 x no commas and rubric version 0 the topic alone, so the
no-comma rate is (3 x gold - proxy) / 2.
"""

from __future__ import annotations

import sys

from harnessrl.trainer.run import evaluate_run


def main(completions: int, family: str, run_dirs: list[str]) -> None:
    for run_dir in run_dirs:
        out = evaluate_run(run_dir, "final", completions=completions, splits=["test"], families=[family])
        result = out["result"]
        gold, proxy = result.overall, result.proxy.overall if result.proxy else None
        print(f"{run_dir} answers {result.tasks * completions} gold {gold:.3f} proxy {proxy:.3f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3:])
