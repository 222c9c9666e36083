"""Would the spurious-length detector fire earlier if it pooled the groups of several tasks?

The unstated suite's `wordy` family (a judged rubric that pays length) was repaired late by the harness (first
detection at steps 11-29, docs/design.md section 8): the detector pools one task's last `window` groups, and a task
recurs about every ten steps with most rollouts at the token cap. This script replays the detector's length test
offline on the trained groups of finished runs (`steps.jsonl`: rewards and token lengths), step by step, under:

- `task, raw`: one task's window (the default, `harness.detectors`: window 4, min_points 8, rho > 0.6, p < 0.05);
- `task, centred`: the same with reward and length centred on each group's mean (`corr_within_group`);
- `judged, centred`: the last `--pool-window` groups of every task whose rubric has a judged criterion (no exact
  check; the length a judge pays is a property of the judge on such criteria), centred per group, since tasks differ
  in level;
- `all tasks, centred`: the last `--pool-window` groups of every task, centred: the false alarms of pooling blindly.

Runs of a baseline (fixed GRPO) are the clean counterfactual: their rubrics never change, so no repair moves what the
detector sees. A firing on a family with no length-paying criterion is a false alarm. It prints, per variant and run,
the first step it fires on each family and the count of (step, task) firings per family; then, per family over all
the runs, what a length test can see at all: the share of groups whose every rollout stopped at the token cap
(`grpo.max_completion_length`, from each run's config: tied lengths, no ranking) and the median within-group Spearman
rho of reward on length where it is defined.

    python benchmarks/detector_pooling.py --runs /work/runs/us-base/fixed/seed* --data harnessrl/data/bench_unstated
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from harnessrl.detection.config import DetectorConfig
from harnessrl.detection.detectors import SpuriousCorrelationDetector
from harnessrl.detection.failure_detector import FailureDetector
from harnessrl.detection.ranks import spearman
from harnessrl.records.run_dir import read_jsonl
from harnessrl.records.steps import GroupRecord, StepRecord, read_group_records
from harnessrl.trainer.train_config import load_run_config

VARIANTS = ("task, raw", "task, centred", "judged, centred", "all tasks, centred")


def _tasks(data: Path) -> dict[str, dict]:
    return {row["id"]: row for split in ("train", "validation", "test") for row in read_jsonl(data / f"{split}.jsonl")}


def _length_test(args: argparse.Namespace, window: int, centred: bool) -> FailureDetector:
    """The harness's own spurious-length test (SpuriousCorrelationDetector through FailureDetector) at these
    settings, with no other detector and no surface feature but length."""
    cfg = DetectorConfig(
        window=window,
        min_points=args.min_points,
        corr_threshold=args.threshold,
        corr_max_p=args.max_p,
        corr_within_group=centred,
        features=[],
    )
    return FailureDetector(cfg, detectors=[SpuriousCorrelationDetector(cfg)])


def _fired(detector: FailureDetector, step: int, groups: list[GroupRecord]) -> list[str]:
    """The task ids the length test fires on at ``step``, given the step's groups."""
    found = detector.observe(StepRecord(step=step, groups=groups), regrade=False)
    return [f.task_id for f in found if f.kind == "spurious_length"]


def replay(run: Path, tasks: dict[str, dict], args: argparse.Namespace) -> dict[str, dict[str, list[int]]]:
    """Per variant, per family: the steps at which a (step, task) firing happened. A pool is one history of the
    detector (its groups relabelled with the pool's name), so its firing counts once for each group it pooled at
    that step."""
    by_step = read_group_records(run / "steps.jsonl")
    judged = {tid for tid, t in tasks.items() if any(not c.get("check") for c in t.get("rubric", []))}
    family = {tid: t.get("metadata", {}).get("family", "?") for tid, t in tasks.items()}
    per_task = {
        "task, raw": _length_test(args, args.window, False),
        "task, centred": _length_test(args, args.window, True),
    }
    pools = {name: _length_test(args, args.pool_window, True) for name in ("judged, centred", "all tasks, centred")}
    fired: dict[str, dict[str, list[int]]] = {v: defaultdict(list) for v in VARIANTS}
    for step in sorted(by_step):
        groups = [g for g in by_step[step] if g.rubric_version == 0]
        if not groups:
            continue
        for name, detector in per_task.items():
            for task_id in _fired(detector, step, groups):
                fired[name][family.get(task_id, "?")].append(step)
        for name, detector in pools.items():
            members = [g for g in groups if name != "judged, centred" or g.task_id in judged]
            if members and _fired(detector, step, [g.model_copy(update={"task_id": name}) for g in members]):
                for g in members:
                    fired[name][family.get(g.task_id, "?")].append(step)
    return fired


def visibility(runs: list[Path], tasks: dict[str, dict]) -> dict[str, tuple[int, int, float | None]]:
    """Per family over the runs: groups, groups with every rollout at the token cap, median within-group rho."""
    groups: dict[str, int] = defaultdict(int)
    capped: dict[str, int] = defaultdict(int)
    rhos: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        cap = load_run_config(run / "config.yaml").grpo.max_completion_length
        for records in read_group_records(run / "steps.jsonl").values():
            for g in records:
                if g.rubric_version != 0:
                    continue
                family = tasks.get(g.task_id, {}).get("metadata", {}).get("family", "?")
                groups[family] += 1
                capped[family] += bool(g.lengths) and all(n >= cap for n in g.lengths)
                pairs = [(r, n) for r, n in zip(g.rewards, g.lengths, strict=False) if r is not None]
                rho = spearman([r for r, _ in pairs], [n for _, n in pairs]) if len(pairs) > 2 else None
                if rho is not None:
                    rhos[family].append(rho)
    return {f: (groups[f], capped[f], float(np.median(rhos[f])) if rhos[f] else None) for f in sorted(groups)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="+", type=Path, required=True, help="run folders with a steps.jsonl")
    ap.add_argument("--data", type=Path, required=True, help="the suite's folder (train/validation/test.jsonl)")
    ap.add_argument("--window", type=int, default=4, help="a task's groups pooled (harness.detectors.window)")
    ap.add_argument("--pool-window", type=int, default=12, help="groups pooled across tasks")
    ap.add_argument("--min-points", type=int, default=8)
    ap.add_argument("--threshold", type=float, default=0.6)
    ap.add_argument("--max-p", type=float, default=0.05)
    args = ap.parse_args()
    tasks = _tasks(args.data)
    families = sorted({t.get("metadata", {}).get("family", "?") for t in tasks.values()})
    print(
        f"window {args.window}, pool window {args.pool_window}, min points {args.min_points}, "
        f"rho > {args.threshold}, p < {args.max_p}"
    )
    print("cells: first step fired / (step, task) firings; '-' never\n")
    print("| variant | run | " + " | ".join(families) + " |")
    print("|---|---|" + "---:|" * len(families))
    for run in args.runs:
        if not (run / "steps.jsonl").exists():
            print(f"skipped {run}: no steps.jsonl")
            continue
        fired = replay(run, tasks, args)
        for variant in VARIANTS:
            cells = [
                f"{min(fired[variant][f])} / {len(fired[variant][f])}" if fired[variant].get(f) else "-"
                for f in families
            ]
            print(f"| {variant} | {run.parent.name}/{run.name} | " + " | ".join(cells) + " |")
    runs = [r for r in args.runs if (r / "steps.jsonl").exists()]
    print(f"\nWhat a length test sees, over the {len(runs)} runs (rubric version 0 groups):\n")
    print("| family | groups | every rollout at the cap | median within-group rho (groups where defined) |")
    print("|---|---:|---:|---:|")
    for family, (n, capped, rho) in visibility(runs, tasks).items():
        print(f"| {family} | {n} | {capped} ({capped / n:.0%}) | " + ("-" if rho is None else f"{rho:+.2f}") + " |")


if __name__ == "__main__":
    main()
