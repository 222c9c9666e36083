"""The noise behind the critic's defaults: the judge's own noise, and the metrics' spread with no change at all.

Measured on the embedded defaults (SmolLM2-135M-Instruct rollouts, the semantic judge, the bundled tasks):

1. **Verdict noise** (``evolver.trials.signal.verdict_noise``): every rollout is rewritten in ways that keep
   its meaning (the first two sentences swapped, the sentences joined by line breaks, an "Answer:" prefix)
   and re-graded. The change of each judged verdict is compared with the model's ``verdict_noise * 4 v (1-v)``;
   the printed estimate is the RMS change over the RMS of ``4 v (1 - v)``.
2. **Advantage noise** (``advantage_tolerance``): the largest change of any rollout's advantage (TRL's group
   scaling) when one rollout of its group is replaced by a rewrite: what the judge's noise alone does to the
   learning signal, against which "no effect" is judged.
3. **A/A spread of the metrics** (``min_effect``): two arms of G fresh rollouts of the *same* prompts per task;
   the difference between the arms of the share of groups that give signal, of |Spearman rho(reward,
   length)| and of the reference answer's rank, over the tasks; a trial's improvement should exceed what such
   a null pair shows.

    .venv/bin/python benchmarks/critic_noise.py --tasks 12 --g 8
"""

from __future__ import annotations

import argparse
import re
import time

import numpy as np

from harnessrl.critic.rollouts import TransformersSampler
from harnessrl.critic.signal import AdvantageSpec, advantages, gives_signal, noise_floor, reference_rank
from harnessrl.data import bundled_path, load_tasks
from harnessrl.detection.ranks import spearman
from harnessrl.judges import RubricRequest, build_judge
from harnessrl.models import load_causal_lm

_SENT = re.compile(r"(?<=[.!?])\s+")


def rewrites(text: str) -> list[str]:
    """Meaning-preserving rewrites of a response."""
    sents = [s for s in _SENT.split(text.strip()) if s]
    out = ["Answer: " + text.strip(), "\n".join(sents)]
    if len(sents) >= 2:
        out.append(" ".join([sents[1], sents[0], *sents[2:]]))
    return [o for o in out if o != text]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=12, help="tasks (judged criteria, a reference), across domains")
    ap.add_argument("--g", type=int, default=8, help="rollouts per arm")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verdict-noise", type=float, default=0.1, help="for the noise floors printed in 1. and 3.")
    args = ap.parse_args()

    tasks = [
        t for t in load_tasks(bundled_path("train")) if t.reference_answer and any(c.check is None for c in t.rubric)
    ]
    by_domain: dict[str, list] = {}
    for t in tasks:
        by_domain.setdefault(t.domain, []).append(t)
    picked = []
    while len(picked) < args.tasks and any(by_domain.values()):
        for d in sorted(by_domain):
            if by_domain[d] and len(picked) < args.tasks:
                picked.append(by_domain[d].pop(0))

    t0 = time.perf_counter()
    model, tok = load_causal_lm("embedded")
    judge = build_judge({"backend": "semantic"})
    sampler = TransformersSampler(model, tok, batch_size=2 * args.g, seed=args.seed)
    spec = AdvantageSpec("group", args.g)

    dv, slope, adv_change = [], [], []
    share_diff, rho_diff, rank_diff = [], [], []
    floors, stds = [], []
    for task in picked:
        prompts = [task.messages()] * (2 * args.g)
        texts = sampler.sample(prompts, 1.0, args.max_new_tokens)
        reqs = [RubricRequest.for_task(task, t, task.rubric) for t in texts]
        graded = judge.grade(reqs)
        ref = judge.grade_one(task, task.reference_answer, task.rubric).reward
        rewards = np.array([np.nan if g.reward is None else g.reward for g in graded])
        rows = [{v.criterion_id: v.value for v in g.verdicts} for g in graded]
        arms = [slice(0, args.g), slice(args.g, 2 * args.g)]
        sig, rho, rank = [], [], []
        for arm in arms:
            r = rewards[arm]
            floor = noise_floor(task.rubric, rows[arm], args.verdict_noise)
            floors.append(floor)
            stds.append(float(np.nanstd(r, ddof=1)))
            sig.append(gives_signal(r, floor))
            lengths = np.array([len(t.split()) for t in texts[arm]], dtype=float)
            rr = spearman(r, lengths)
            rho.append(0.0 if rr is None else abs(rr))
            rank.append(reference_rank(ref, r) if ref is not None else np.nan)
        share_diff.append(float(sig[1]) - float(sig[0]))
        rho_diff.append(rho[1] - rho[0])
        rank_diff.append(rank[1] - rank[0])

        # judge noise on meaning-preserving rewrites
        judged = {c.id for c in task.rubric if c.check is None}
        for i, text in enumerate(texts[: args.g]):
            for alt in rewrites(text):
                res = judge.grade_one(task, alt, task.rubric)
                for v in res.verdicts:
                    if v.criterion_id in judged and v.value is not None and rows[i].get(v.criterion_id) is not None:
                        v0 = rows[i][v.criterion_id]
                        dv.append(v.value - v0)
                        slope.append(4 * v0 * (1 - v0))
                if res.reward is not None and not np.isnan(rewards[i]):
                    alt_r = rewards[: args.g].copy()
                    alt_r[i] = res.reward
                    a0, a1 = advantages([rewards[: args.g]], spec)[0], advantages([alt_r], spec)[0]
                    adv_change.append(float(np.max(np.abs(a1 - a0))))
    dv, slope = np.array(dv), np.array(slope)
    sigma_v = float(np.sqrt(np.mean(dv**2)) / max(1e-9, np.sqrt(np.mean(slope**2))))
    adv_change = np.array(adv_change)

    def pct(a, q):
        a = np.abs(np.array(a, dtype=float))
        a = a[~np.isnan(a)]
        return float(np.quantile(a, q)) if a.size else float("nan")

    print(f"tasks {len(picked)}, {args.g} rollouts per arm, 2 arms, {time.perf_counter() - t0:.0f} s")
    print("\n1. verdict noise (semantic judge, meaning-preserving rewrites)")
    print(
        f"   verdict changes: {dv.size}; RMS |dv| {np.sqrt(np.mean(dv**2)):.4f}; "
        f"median |dv| {np.median(np.abs(dv)):.4f}"
    )
    print(f"   RMS 4v(1-v) {np.sqrt(np.mean(slope**2)):.3f} -> verdict_noise estimate {sigma_v:.3f}")
    print(
        f"   group reward std median {np.median(stds):.4f}; "
        f"noise floor (verdict_noise {args.verdict_noise:g}) median {np.median(floors):.4f}"
    )
    print("\n2. advantage change from judge noise alone (one rollout of a group rewritten)")
    print(
        f"   max |dA| per rewrite: median {np.median(adv_change):.3f}, 10th pct {np.quantile(adv_change, 0.1):.3f}, "
        f"90th pct {np.quantile(adv_change, 0.9):.3f}; share below 0.05: {np.mean(adv_change < 0.05):.2f}"
    )
    print("\n3. A/A spread (two arms of the same prompts, per task): |difference|")
    print(f"   signal share: mean {np.mean(np.abs(share_diff)):.3f}, 90th pct {pct(share_diff, 0.9):.3f}")
    print(f"   |rho(reward, length)|: mean {np.mean(np.abs(rho_diff)):.3f}, 90th pct {pct(rho_diff, 0.9):.3f}")
    print(f"   reference rank: mean {np.nanmean(np.abs(rank_diff)):.3f}, 90th pct {pct(rank_diff, 0.9):.3f}")
    print(
        f"   share of groups that give signal (verdict_noise {args.verdict_noise:g}): "
        f"{np.mean([f < s for f, s in zip(floors, stds, strict=True)]):.2f}"
    )


if __name__ == "__main__":
    main()
