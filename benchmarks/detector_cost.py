"""Cost of the failure detectors per training step, against the step time.

Feeds :class:`harnessrl.detection.failure_detector.FailureDetector` synthetic steps of realistic size (task
groups per step x group size G, completions of a few dozen to a few hundred words with bullet lines,
exclamation marks and repeated words, per-criterion means, a reference reward) and times only
``observe`` (window bookkeeping, surface features from the texts, every detector). By default each
task comes back every step (the pool is as large as a step), so every window is full and every
correlation is computed: the worst case. Re-grading is off (its cost is the judge's, not ours).

    .venv/bin/python benchmarks/detector_cost.py                      # 2/16/64/256 groups x G 4/8/16
    .venv/bin/python benchmarks/detector_cost.py --groups 64 --g 8 --steps 50 --step-seconds 30
    .venv/bin/python benchmarks/detector_cost.py --groups 64 --g 8 --steps 10 --budget-ms 250   # PASS / FAIL

Goal (issue): detectors under 1% of the step time. ``--budget-ms`` marks each size whose mean step is over the
budget and exits 1 if any is: the speed check that tests/test_detectors.py once asserted (64 tasks x G=8 under
250 ms a step), kept here because a wall-clock bound in the default tests fails on a loaded machine. Run it on an
idle one.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from harnessrl.detection import DetectorConfig, FailureDetector
from harnessrl.records.steps import GroupRecord, RolloutRecord, StepRecord, group_stats

_VOCAB_TEXT = (
    "the patient should drink water regularly because hydration supports kidney function and energy levels "
    "a balanced answer explains mechanisms cites evidence considers risks and suggests next steps clearly"
)
_VOCAB = _VOCAB_TEXT.split()


def make_texts(rng: np.random.Generator, n: int, max_words: int) -> list[tuple[str, int]]:
    """A pool of completions (text, token count) with varied length and surface features."""
    out = []
    for _ in range(n):
        words = int(rng.integers(10, max_words + 1))
        body = " ".join(rng.choice(_VOCAB, words))
        lines = [body[i : i + 80] for i in range(0, len(body), 80)]
        for j in range(len(lines)):
            if rng.random() < 0.3:
                lines[j] = "- " + lines[j]
            if rng.random() < 0.1:
                lines[j] += "!"
        out.append(("\n".join(lines), int(words * 1.3)))
    return out


def make_step(
    rng: np.random.Generator, step: int, n_groups: int, g: int, pool: int, texts: list[tuple[str, int]]
) -> tuple[StepRecord, list[RolloutRecord]]:
    task_ids = rng.choice(pool, n_groups, replace=False) if pool >= n_groups else rng.integers(0, pool, n_groups)
    groups, rollouts = [], []
    for t in task_ids:
        tid = f"task-{int(t)}"
        picks = rng.integers(0, len(texts), g)
        rewards: list[float | None] = [float(x) for x in rng.random(g)]
        if rng.random() < 0.05:
            rewards[0] = None
        for m, (p, r) in enumerate(zip(picks, rewards, strict=True)):
            text, n_tok = texts[int(p)]
            text = f"{text}\n(case {step}.{tid}.{m})"  # every completion unique, as in training: no dedup gain
            rollouts.append(
                RolloutRecord(
                    step=step,
                    task_id=tid,
                    member=m,
                    guided=False,
                    rubric_version=0,
                    temperature=1.0,
                    completion=text,
                    length_tokens=n_tok,
                    length_words=len(text.split()),
                    reward=r,
                    verdicts={"c1": r, "c2": 1.0},
                )
            )
        mean, std = group_stats(rewards)
        groups.append(
            GroupRecord(
                step=step,
                task_id=tid,
                domain="medical",
                rubric_version=0,
                rewards=rewards,
                mean=mean,
                std=std,
                flat=std is not None and std < 0.02,
                lengths=[texts[int(p)][1] for p in picks],
                criterion_means={"c1": mean, "c2": 1.0, "c3": float(rng.random())},
            )
        )
    return StepRecord(step=step, groups=groups), rollouts


def bench(
    n_groups: int, g: int, steps: int, pool: int, max_words: int, features: list[str] | None = None, seed: int = 0
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    texts = make_texts(rng, 300, max_words)
    cfg = DetectorConfig() if features is None else DetectorConfig(features=features)
    det = FailureDetector(cfg, reference_reward=lambda tid, v: 0.5)
    times, n_failures = [], 0
    for s in range(steps):
        record, rollouts = make_step(rng, s, n_groups, g, pool, texts)
        t0 = time.perf_counter()
        failures = det.observe(record, rollouts)
        times.append(time.perf_counter() - t0)
        n_failures += len(failures)
    ms = [t * 1000 for t in times]
    return {
        "mean_ms": statistics.fmean(ms),
        "p95_ms": float(np.percentile(ms, 95)),
        "max_ms": max(ms),
        "failures_per_step": n_failures / steps,
        "reported_ms": 1000 * det.seconds / steps,  # the detector's own clock, for comparison
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, nargs="+", default=[2, 16, 64, 256], help="task groups per step")
    ap.add_argument("--g", type=int, nargs="+", default=[4, 8, 16], help="group sizes G")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--pool-factor", type=float, default=1.0, help="task pool = factor x groups (1: worst case)")
    ap.add_argument("--max-words", type=int, default=300, help="longest synthetic completion, in words")
    ap.add_argument("--step-seconds", type=float, default=13.2, help="step time to compare with (demo, CPU)")
    ap.add_argument("--features", nargs="*", default=None, help="surface features to test (default: DetectorConfig's)")
    ap.add_argument(
        "--budget-ms", type=float, default=None, help="mark sizes whose mean ms a step is above this; exit 1 if any"
    )
    args = ap.parse_args(argv)

    feats = DetectorConfig().features if args.features is None else args.features
    print(
        f"FailureDetector.observe per step: {args.steps} steps, completions 10-{args.max_words} words, "
        f"pool {args.pool_factor:g} x groups, features length+{feats}, vs a {args.step_seconds:g} s step"
    )
    head = ("groups", "G", "rollouts", "mean ms", "p95 ms", "max ms", "us/rollout", "% step", "fail/step")
    widths = (6, 3, 8, 9, 8, 8, 10, 8, 9)
    if args.budget_ms is not None:
        head, widths = (*head, "budget"), (*widths, 6)
    over = []
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
    for n_groups in args.groups:
        for g in args.g:
            pool = max(n_groups, round(n_groups * args.pool_factor))
            r = bench(n_groups, g, args.steps, pool, args.max_words, args.features)
            pct = 100 * r["mean_ms"] / 1000 / args.step_seconds
            print(
                f"{n_groups:>6} {g:>3} {n_groups * g:>8} {r['mean_ms']:>9.2f} {r['p95_ms']:>8.2f} "
                f"{r['max_ms']:>8.2f} {1000 * r['mean_ms'] / (n_groups * g):>10.1f} {pct:>7.3f}% "
                f"{r['failures_per_step']:>9.2f}" + _verdict(r["mean_ms"], args.budget_ms),
                flush=True,
            )
            if args.budget_ms is not None and r["mean_ms"] > args.budget_ms:
                over.append(f"{n_groups} groups x G={g}: {r['mean_ms']:.1f} ms")
    if over:
        print(f"FAIL: over the budget of {args.budget_ms:g} ms a step: {'; '.join(over)}")
        return 1
    if args.budget_ms is not None:
        print(f"PASS: every size under {args.budget_ms:g} ms a step")
    return 0


def _verdict(mean_ms: float, budget_ms: float | None) -> str:
    if budget_ms is None:
        return ""
    return f" {'PASS' if mean_ms <= budget_ms else 'FAIL':>6}"


if __name__ == "__main__":
    raise SystemExit(main())
