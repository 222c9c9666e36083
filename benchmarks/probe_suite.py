"""Probe a task file with the untrained policy: per task and family, how often its sampled answers pass each
criterion of the training rubric (the proxy) and of the gold rubric, and whether the proxy pays for length.

A suite's failure only measures something if it pays off for the policy (docs/design.md section 8, "Failures
that recur and pay off"): a lax rubric must be saturated, a requirement out of reach must be (almost) never met
unaided, a reward that pays for a surface feature must rise with it. This script measures that before a suite's
design is fixed:

    python benchmarks/probe_suite.py harnessrl/data/bench_unstated/train.jsonl --samples 16
    python benchmarks/probe_suite.py FILE --hint-reference     # each prompt with the start of its reference

It samples ``--samples`` answers a task from the embedded policy (temperature 1, ``--max-tokens`` tokens,
seeded), grades them with the embedded semantic judge under both rubrics, and prints per family: the mean proxy
and gold score, each criterion's pass rate, the answers' median words, the share cut at the token budget and
Spearman's rho of the proxy reward with the word count (pooled within tasks). ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

import torch

from harnessrl.critic.rollouts import TransformersSampler
from harnessrl.data.checks import count_bullets, count_words
from harnessrl.data.schema import Task
from harnessrl.detection.ranks import spearman
from harnessrl.judges import build_judge
from harnessrl.judges.rubric_judge import RubricRequest
from harnessrl.models import load_causal_lm


def _hinted(task: Task) -> Task:
    start = " ".join((task.reference_answer or "").split()[:6])
    prompt = f'{task.prompt}\n\n(Hint: A good answer could start: "{start}")'
    return task.model_copy(update={"prompt": prompt})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path, help="a JSONL task file (every task with a gold_rubric)")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--family", action="append", help="probe this family only (repeatable)")
    ap.add_argument("--hint-reference", action="store_true", help="append the start of the reference as a hint")
    ap.add_argument("--json", type=Path, help="write the per-task figures here")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    tasks = [Task.model_validate_json(line) for line in args.data.read_text().splitlines() if line.strip()]
    if args.family:
        tasks = [t for t in tasks if (t.metadata or {}).get("family") in args.family]
    if args.hint_reference:
        tasks = [_hinted(t) for t in tasks]
    model, tokenizer = load_causal_lm("embedded", device="cpu")
    sampler = TransformersSampler(model, tokenizer, batch_size=32, seed=args.seed)
    prompts = [t.messages() for t in tasks for _ in range(args.samples)]
    texts = [x.strip() for x in sampler.sample(prompts, 1.0, args.max_tokens)]
    cut = [len(tokenizer(x)["input_ids"]) >= args.max_tokens for x in texts]
    judge = build_judge({"backend": "semantic"})
    flat = [(t, texts[i * args.samples + j]) for i, t in enumerate(tasks) for j in range(args.samples)]
    proxy = judge.grade([RubricRequest.for_task(t, r) for t, r in flat])
    gold = judge.grade([RubricRequest.for_task(t, r, t.gold_rubric) for t, r in flat])

    per_task = []
    fam: dict[str, dict] = defaultdict(lambda: defaultdict(list))
    for i, t in enumerate(tasks):
        sl = slice(i * args.samples, (i + 1) * args.samples)
        p, g, outs = proxy[sl], gold[sl], texts[sl]
        row = {
            "id": t.id,
            "family": (t.metadata or {}).get("family"),
            "proxy": statistics.fmean(x.reward for x in p if x.reward is not None),
            "gold": statistics.fmean(x.reward for x in g if x.reward is not None),
            "words": statistics.median(count_words(x) for x in outs),
            "bullets": sum(count_bullets(x) >= 3 for x in outs) / len(outs),
            "cut": sum(cut[sl]) / len(outs),
            "proxy_crit": {
                c.id: statistics.fmean(v.value for r in p for v in r.verdicts if v.criterion_id == c.id)
                for c in t.rubric
            },
            "gold_crit": {
                c.id: statistics.fmean(v.value for r in g for v in r.verdicts if v.criterion_id == c.id)
                for c in t.gold_rubric or []
            },
            "rho": spearman([x.reward for x in p], [count_words(x) for x in outs]),
            "example": outs[0][:160],
        }
        per_task.append(row)
        f = fam[row["family"]]
        for k in ("proxy", "gold", "words", "bullets", "cut"):
            f[k].append(row[k])
        if row["rho"] is not None and row["rho"] == row["rho"]:
            f["rho"].append(row["rho"])
        for c, v in row["proxy_crit"].items():
            f[f"proxy:{c}"].append(v)
        for c, v in row["gold_crit"].items():
            f[f"gold:{c}"].append(v)
    for row in per_task:
        crit = " ".join(f"{k}={v:.2f}" for k, v in {**row["proxy_crit"], **row["gold_crit"]}.items())
        rho = "n/a" if row["rho"] is None else f"{row['rho']:.2f}"
        print(
            f"{row['id']:<24} proxy {row['proxy']:.2f} gold {row['gold']:.2f} words {row['words']:>5} "
            f"list {row['bullets']:.2f} cut {row['cut']:.2f} rho {rho} | {crit}"
        )
        print(f"    e.g. {row['example']!r}")
    print()
    for name, f in fam.items():
        parts = " ".join(f"{k} {statistics.fmean(v):.2f}" for k, v in f.items() if v)
        print(f"{name}: {parts}")
    if args.json:
        args.json.write_text(json.dumps(per_task, indent=1))


if __name__ == "__main__":
    main()
