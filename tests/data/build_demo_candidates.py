"""Rebuild the demo's saturated-criterion reweights from their rollouts, as a test fixture.

Issue "the critic must measure what GRPO learns from": three of the six updates ``make demo`` (seed 0)
committed before the critic measured advantages were reweights of a criterion every rollout passed
(if-004 c2 1 -> 0.5, wri-009 c3 5 -> 2.5, wri-001 c4 3 -> 1.5). This script reads such a run directory
(run with the critic of that time, keeping its rollout files) and writes, for each of those candidates, the
task, the candidate, the cached rollouts its trial re-graded (text and verdicts), the reference answer's
verdicts (graded here with the semantic judge) and what the old trial measured, to
``tests/data/demo_saturated_reweights.json``; ``tests/test_signal.py`` replays them through today's critic.

    python tests/data/build_demo_candidates.py RUN_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harnessrl.data import bundled_path, load_tasks
from harnessrl.judges import build_judge

WANTED = {("if-004", "c2"), ("wri-009", "c3"), ("wri-001", "c4")}


def main(run_dir: str) -> None:
    run = Path(run_dir)
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines() if line.strip()]
    proposals = {e["candidate_id"]: e for e in events if e.get("kind") == "proposal"}
    tasks = {t.id: t for t in load_tasks(bundled_path("train"))}
    judge = build_judge({"backend": "semantic"})
    out = []
    for e in events:
        if e.get("kind") != "commit":
            continue
        prop = proposals[e["candidate_id"]]
        update = prop["update"]
        key = (update.get("task_id"), next(iter(update.get("reweight") or {}), None))
        if key not in WANTED or update.get("add") or update.get("reword") or update.get("remove"):
            continue
        assert prop["preview"]["rubric_version_now"] == 0, "the fixture assumes the dataset's rubric"
        trial = next(
            t["result"] for t in events if t.get("kind") == "trial" and t.get("candidate_id") == e["candidate_id"]
        )
        task = tasks[key[0]]
        rollouts = []
        for step in trial["measurements"]["steps"]:
            path = run / "rollouts" / f"step_{step:06d}.jsonl"
            rollouts += [r for r in map(json.loads, path.read_text().splitlines()) if r["task_id"] == task.id]
        assert len(rollouts) == trial["measurements"]["n_rollouts"], "rollout files do not match the trial"
        ref = judge.grade_one(task, task.reference_answer, task.rubric)
        out.append(
            {
                "task": task.model_dump(mode="json"),
                "candidate_id": e["candidate_id"],
                "update": {k: v for k, v in update.items() if k != "interface"},
                "failure_id": e.get("failure_id"),
                "rollouts": rollouts,
                "reference_verdicts": {v.criterion_id: v.value for v in ref.verdicts},
                "old_trial": {k: trial[k] for k in ("metric", "baseline", "candidate", "accepted", "reason")},
            }
        )
    dest = Path(__file__).with_name("demo_saturated_reweights.json")
    dest.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(out)} candidates -> {dest}")


if __name__ == "__main__":
    main(sys.argv[1])
