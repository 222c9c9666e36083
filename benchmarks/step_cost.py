"""Where a training step's time goes, as ratios measured inside one run (issue 9, item 6).

The machines this runs on share their cores (docs/design.md §6: ≈33% steal was seen), so absolute seconds
move from run to run; ratios taken within one run are what this script reports. It runs a few real
steps of ``harnessrl.trainer.run.train`` (bundled training tasks, the semantic judge, memory on, no
evaluation) with light instrumentation attached through ``train``'s ``trainer_hook``, then measures
the raw backends on the same work, in the same process:

1. **Rollouts**: the trainer's generation throughput (its own ``time/generation`` metric) against a raw
   ``model.generate`` of the same prompt token ids (the exact ids TRL tokenized at each step), all
   ``tasks x G`` rows of a step in one batch as TRL does (split by sampling temperature as the harness
   does, when guidance sets several), same ``max_new_tokens``, ``do_sample`` at the run's
   temperature, ``top_k=0``, ``top_p`` of the run (1.0), in eval mode under ``no_grad``. The raw batch
   runs inside the same step, right before (even steps) or after (odd steps) the trainer's own
   generation, so both meet the same machine load; its time is taken out of every other figure.
   Tokens are counted as TRL counts completions, up to and including the first EOS ("useful");
   "computed" counts rows x decode steps (what the batch really costs: every row runs until the
   longest one stops, so the two samples' lengths matter less). The time TRL spends inside
   ``model.generate`` itself is shown too, so the wrapper's cost is visible.
2. **Judge**: a fresh ``RubricJudge`` (``build_judge({"backend": "semantic"})``) grades the raw
   generation's completions, one ``grade`` call per step's batch as training does, after a warm-up
   that fills the per-criterion anchors (as the training judge has them after a task's first step), so
   every timed (response, criterion) pair is a cache miss; against the judge's own encoder embedding
   the same responses' passages (``semantic.passages``) alone. Both in criteria/s and their ratio.
3. **Shares of a step** (from the run's ``metrics.jsonl``: ``time/generation``, ``time/judging``,
   ``time/scoring_other``, ``time/detectors``, ``time/memory``, ``time/evolver``; plus this script's
   clocks for the step's wall time, reference-answer grading, the forward/backward and optimizer
   step), as percentages of the step's wall time (``on_step_begin`` to ``on_step_end``: checkpoint
   saving and log writing are not in it).

Step 1 carries one-time costs (first ``generate``, first memory write, anchors of first-seen tasks):
with more than one step the figures use steps 2..N (step 1 warms the raw generation up as well).

    .venv/bin/python benchmarks/step_cost.py --steps 2 --g 2 --max-new-tokens 8          # smoke test (~1 min)
    .venv/bin/python benchmarks/step_cost.py --steps 6 --g 4 --tasks-per-step 2 \\
        --max-new-tokens 48 --out runs/step_cost.json                                    # the CPU measurement
    .venv/bin/python benchmarks/step_cost.py --method harnessrl --steps 12               # with the evolver

Nothing here changes the trainer or the judge: instance attributes wrap a few of their methods for
the run's duration. The raw batches draw from the same random generator, so the run's samples are not
those of an uninstrumented run (their cost is what is measured, not their content). Tiny settings (the
smoke test) only check that it works: a batch of a few rows is too short to rise above the noise of a
shared machine.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

SHARE_ROWS = (
    ("generation", "generation (rollouts)"),
    ("judging", "judging (rollouts)"),
    ("judging_references", "judging (reference answers)"),
    ("scoring_other", "other scoring (TRL: tokenize, logprobs, advantages)"),
    ("update_forward_backward", "update: forward + backward"),
    ("update_optimizer", "update: grad clip + optimizer step"),
    ("detectors", "harness: detectors"),
    ("memory", "harness: training memory"),
    ("evolver", "harness: evolver (points, trials)"),
    ("bookkeeping", "bookkeeping (step records, events, callbacks)"),
)


# --------------------------------------------------------------------------- instrumentation


class Probe:
    """``trainer_hook`` for ``train()``: wraps a few trainer methods (on the instance) to record each step's
    generation batches (prompt ids, rows, tokens, time in ``model.generate``) and clocks, and runs the raw
    ``model.generate`` of each batch right next to the trainer's own (before it on even steps, after it on
    odd ones), so both see the same machine load. The raw generation's time is taken out of the step's
    clocks; it is not in the trainer's ``time/generation``."""

    def __init__(self, max_new_tokens: int) -> None:
        self.max_new_tokens = max_new_tokens
        self.trainer: Any = None
        self.batches: list[dict[str, Any]] = []
        self.steps: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._rows: list[dict[str, Any]] | None = None
        self._current: dict[str, Any] | None = None
        self._marks: dict[str, float] = {}

    def __call__(self, trainer, run) -> None:
        self.trainer = trainer
        model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
        orig_rows = trainer.harness_rows
        orig_gen = trainer._generate_single_turn
        orig_generate = model.generate
        orig_step = trainer.training_step
        orig_record = trainer._record_step
        orig_reference = trainer.step_records.reference_reward

        def harness_rows(*a, **k):
            self._rows = orig_rows(*a, **k)
            return self._rows

        def generate_single_turn(prompt_ids, *a, **k):
            rows = self._rows if self._rows is not None and len(self._rows) == len(prompt_ids) else None
            batch: dict[str, Any] = {
                "step": trainer.state.global_step + 1,
                "prompt_ids": [list(p) for p in prompt_ids],
                "rows": [(r["task_id"], int(r["rubric_version"]), float(r["temperature"])) for r in rows or []],
                "generate_seconds": 0.0,
                "generate_calls": 0,
                "decode_row_tokens": 0,
            }
            raw_first = batch["step"] % 2 == 0
            if raw_first:
                self._raw(batch)
            self._current = batch
            try:
                completion_ids, logprobs = orig_gen(prompt_ids, *a, **k)
            finally:
                self._current = None
            if not raw_first:
                self._raw(batch)
            batch["tokens"] = sum(len(c) for c in completion_ids)
            self.batches.append(batch)
            return completion_ids, logprobs

        def generate(*a, **k):
            t0 = time.perf_counter()
            out = orig_generate(*a, **k)
            dt = time.perf_counter() - t0
            batch = self._current
            if batch is not None and "input_ids" in k and hasattr(out, "shape"):
                batch["generate_seconds"] += dt
                batch["generate_calls"] += 1
                batch["decode_row_tokens"] += out.shape[0] * (out.shape[1] - k["input_ids"].shape[1])
            return out

        def training_step(*a, **k):
            rec = self.steps[trainer.state.global_step + 1]
            t0 = time.perf_counter()
            try:
                return orig_step(*a, **k)
            finally:
                self._marks["training_step_end"] = time.perf_counter()
                rec["training_step"] += self._marks["training_step_end"] - t0

        def record_step(step, *a, **k):
            t0 = time.perf_counter()
            try:
                return orig_record(step, *a, **k)
            finally:
                self.steps[step]["record_step"] += time.perf_counter() - t0

        def reference_reward(*a, **k):
            t0 = time.perf_counter()
            try:
                return orig_reference(*a, **k)
            finally:
                self.steps[trainer.state.global_step + 1]["reference"] += time.perf_counter() - t0

        trainer.harness_rows = harness_rows
        trainer._generate_single_turn = generate_single_turn
        model.generate = generate
        trainer.training_step = training_step
        trainer._record_step = record_step
        trainer.step_records.reference_reward = reference_reward
        self._model, self._orig_generate = model, orig_generate
        trainer.add_callback(_Clock(self))  # last: the evolver's on_step_end runs inside the step's clock

    def _raw(self, batch: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        batch["raw"] = raw_generate(self.trainer, self._orig_generate, batch, self.max_new_tokens)
        self.steps[batch["step"]]["raw"] += time.perf_counter() - t0

    def restore(self) -> None:
        """Drop the wrapper of ``model.generate`` (the raw measurement calls the model's own)."""
        if getattr(self, "_model", None) is not None and "generate" in vars(self._model):
            del self._model.generate


class _Clock(TrainerCallback):
    """Each step's wall time (on_step_begin to on_step_end) and the optimizer step's share of it."""

    def __init__(self, probe: Probe):
        self.probe = probe

    def on_step_begin(self, args, state, control, **kwargs):
        self.probe.steps[state.global_step + 1]["t_begin"] = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kwargs):
        marks = self.probe._marks
        rec = self.probe.steps[state.global_step + 1]
        rec["update_optimizer"] += time.perf_counter() - marks.get("training_step_end", time.perf_counter())

    def on_step_end(self, args, state, control, **kwargs):
        rec = self.probe.steps[state.global_step]
        rec["wall"] = time.perf_counter() - rec["t_begin"] - rec["raw"]  # without the raw generation


# --------------------------------------------------------------------------- the run


def run_training(args: argparse.Namespace, run_dir: Path, probe: Probe):
    from rich.console import Console

    from harnessrl.records.run_dir import RunDir
    from harnessrl.trainer.run import train
    from harnessrl.trainer.train_config import TrainConfig

    config = TrainConfig.model_validate(
        {
            "run_dir": str(run_dir),
            "model": args.model,
            "device": args.device,
            "method": args.method,
            "seed": args.seed,
            "data": {"train": "bundled", "validation": None, "test": None},
            "grpo": {
                "num_generations": args.g,
                "tasks_per_step": args.tasks_per_step,
                "max_completion_length": args.max_new_tokens,
                "max_steps": args.steps,
                "save_steps": args.steps,
                "save_total_limit": 1,
            },
        }
    )
    summary = train(config, console=Console(stderr=True), trainer_hook=probe)
    metrics = [m for m in RunDir(run_dir, create=False).read("metrics.jsonl") if "time/generation" in m]
    return config, summary, {int(m["step"]): m for m in metrics}


def counted_steps(n_steps: int) -> list[int]:
    """Steps the figures use: 2..N (step 1 carries one-time costs), or step 1 alone for a one-step run."""
    return list(range(2, n_steps + 1)) if n_steps > 1 else [1]


# --------------------------------------------------------------------------- 1. rollouts


def _completion_lengths(ids, eos: set[int]) -> list[int]:
    """Per row: tokens up to and including the first EOS (as TRL keeps them), else all."""
    out = []
    for row in ids.tolist():
        n = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
        out.append(n)
    return out


def raw_generate(trainer, generate, batch: dict[str, Any], max_new_tokens: int) -> dict[str, Any]:
    """A plain ``model.generate`` (``generate``, the model's own) of a step's prompt ids with TRL's
    settings, all rows in one batch (one per sampling temperature, as the harness splits them)."""
    import copy

    import torch
    from transformers import GenerationConfig

    model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
    tok = trainer.processing_class
    tok = getattr(tok, "tokenizer", tok)
    pad = tok.pad_token_id
    eos = list(trainer.eos_token_ids)
    prompts = batch["prompt_ids"]
    temps = [r[2] for r in batch["rows"]] or [trainer.temperature] * len(prompts)
    device = trainer.accelerator.device
    texts: list[str] = [""] * len(prompts)
    tokens = decode_row_tokens = calls = 0
    seconds = 0.0
    was_training = model.training
    saved = model.generation_config
    model.eval()
    try:
        for temp in sorted(set(temps)):
            idx = [i for i, t in enumerate(temps) if t == temp]
            width = max(len(prompts[i]) for i in idx)
            input_ids = torch.full((len(idx), width), pad, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for j, i in enumerate(idx):  # left padding, as TRL pads
                input_ids[j, width - len(prompts[i]) :] = torch.tensor(prompts[i])
                mask[j, width - len(prompts[i]) :] = 1
            cfg = GenerationConfig(
                max_new_tokens=max_new_tokens,
                do_sample=True,
                temperature=temp,
                top_k=0,
                top_p=trainer.top_p,
                pad_token_id=pad,
                bos_token_id=tok.bos_token_id,
                eos_token_id=eos,
            )
            # the model's own generation_config must not fill in what equals a global default (TRL does the same)
            model.generation_config = copy.deepcopy(cfg)
            t0 = time.perf_counter()
            with torch.no_grad():
                out = generate(input_ids=input_ids.to(device), attention_mask=mask.to(device), generation_config=cfg)
            completion = out[:, width:].cpu()  # the copy to the CPU waits for the device
            seconds += time.perf_counter() - t0
            calls += 1
            lengths = _completion_lengths(completion, set(eos))
            tokens += sum(lengths)
            decode_row_tokens += completion.shape[0] * completion.shape[1]
            for j, i in enumerate(idx):
                texts[i] = tok.decode(completion[j, : lengths[j]].tolist(), skip_special_tokens=True)
    finally:
        model.generation_config = saved
        model.train(was_training)
    return {
        "seconds": seconds,
        "tokens": tokens,
        "decode_row_tokens": decode_row_tokens,
        "calls": calls,
        "texts": texts,
    }


def rollout_figures(probe: Probe, metrics: dict[int, dict], steps: list[int]) -> dict:
    batches = [b for b in probe.batches if b["step"] in steps]
    if not batches:
        raise SystemExit("no generation batch was recorded in the counted steps: nothing to compare")
    raws = [b["raw"] for b in batches]
    gen_s = sum(metrics[s]["time/generation"] for s in steps if s in metrics)
    inner_s = sum(b["generate_seconds"] for b in batches)
    tr_tok = sum(b["tokens"] for b in batches)
    tr_rows = sum(b["decode_row_tokens"] for b in batches)
    raw_s = sum(r["seconds"] for r in raws)
    raw_tok = sum(r["tokens"] for r in raws)
    raw_rows = sum(r["decode_row_tokens"] for r in raws)

    def rate(n, s):
        return n / s if s > 0 else None

    fig = {
        "batches": len(batches),
        "rows_per_batch": len(batches[0]["prompt_ids"]),
        "prompt_tokens_max": max(len(p) for b in batches for p in b["prompt_ids"]),
        "trainer": {
            "seconds": gen_s,
            "generate_seconds": inner_s,
            "generate_calls": sum(b["generate_calls"] for b in batches),
            "tokens": tr_tok,
            "computed_row_tokens": tr_rows,
            "tokens_per_s": rate(tr_tok, gen_s),
            "computed_per_s": rate(tr_rows, gen_s),
        },
        "raw": {
            "seconds": raw_s,
            "generate_calls": sum(r["calls"] for r in raws),
            "tokens": raw_tok,
            "computed_row_tokens": raw_rows,
            "tokens_per_s": rate(raw_tok, raw_s),
            "computed_per_s": rate(raw_rows, raw_s),
        },
        "per_batch": [
            {
                "step": b["step"],
                "order": "raw first" if b["step"] % 2 == 0 else "trainer first",
                "trainer_seconds": metrics.get(b["step"], {}).get("time/generation"),
                "trainer_generate_seconds": b["generate_seconds"],
                "trainer_tokens": b["tokens"],
                "raw_seconds": b["raw"]["seconds"],
                "raw_tokens": b["raw"]["tokens"],
            }
            for b in batches
        ],
    }
    t, r = fig["trainer"], fig["raw"]
    fig["ratio_tokens_per_s"] = (
        t["tokens_per_s"] / r["tokens_per_s"] if t["tokens_per_s"] and r["tokens_per_s"] else None
    )
    fig["ratio_computed_per_s"] = (
        t["computed_per_s"] / r["computed_per_s"] if t["computed_per_s"] and r["computed_per_s"] else None
    )
    fig["generate_share_of_trainer_generation"] = inner_s / gen_s if gen_s > 0 else None
    # padding waste: rows keep decoding until the batch's longest completion stops
    fig["trainer_useful_share"] = tr_tok / tr_rows if tr_rows else None
    fig["_texts"] = [(b, raw["texts"]) for b, raw in zip(batches, raws, strict=True)]
    return fig


# --------------------------------------------------------------------------- 2. judge


def judge_figures(trainer, fresh: list[tuple[dict[str, Any], list[str]]]) -> dict:
    """A fresh semantic judge on fresh responses (one grade call per step batch) vs its encoder alone."""
    from harnessrl.judges import RubricRequest, build_judge
    from harnessrl.judges.semantic import passages

    harness = trainer.harness
    t0 = time.perf_counter()
    judge = build_judge({"backend": "semantic"})
    load_s = time.perf_counter() - t0

    def requests(rows, texts):
        out = []
        for (tid, version, _), text in zip(rows, texts, strict=True):
            rubric = harness.rubrics.criteria_at(tid, version)
            out.append(RubricRequest.for_task(harness.tasks[tid], text, rubric))
        return out

    # warm-up: the anchors of every (task, rubric version) and the criteria's vectors, as the training
    # judge holds them after a task's first step; the timed responses below are all new to the judge
    fresh = [(b, texts) for b, texts in fresh if b["rows"]]  # batches whose rows (tasks) were recorded
    keys = sorted({(tid, v) for b, _ in fresh for tid, v, _ in b["rows"]})
    warm = [(tid, v, 0.0) for tid, v in keys]
    t0 = time.perf_counter()
    judge.grade(requests(warm, ["(warm-up)"] * len(warm)))
    warm_s = time.perf_counter() - t0
    judge.stats.snapshot_and_reset()

    embedder = getattr(judge.backend, "embedder", None)
    encode = embedder.encode
    inside = {"seconds": 0.0, "texts": 0}

    def timed_encode(texts):
        t = time.perf_counter()
        try:
            return encode(texts)
        finally:
            inside["seconds"] += time.perf_counter() - t
            inside["texts"] += len(texts)

    embedder.encode = timed_encode
    judge_s = enc_s = 0.0
    enc_texts = pairs = 0
    hits = 0.0
    try:
        for i, (batch, texts) in enumerate(fresh):
            reqs = requests(batch["rows"], texts)
            psg = list(dict.fromkeys(p for t in dict.fromkeys(texts) for p in passages(t)))

            def run_judge(reqs=reqs):
                t = time.perf_counter()
                judge.grade(reqs)
                return time.perf_counter() - t

            def run_encoder(psg=psg):
                t = time.perf_counter()
                encode(psg)
                return time.perf_counter() - t

            if i % 2:  # alternate the order, so that drifting machine load hits both alike
                enc_s += run_encoder()
                judge_s += run_judge()
            else:
                judge_s += run_judge()
                enc_s += run_encoder()
            enc_texts += len(psg)
            stats = judge.stats.snapshot_and_reset()
            pairs += int(stats["judge/calls"])
            hits += stats["judge/cache_hit_rate"]
    finally:
        del embedder.encode
    return {
        "pairs": pairs,
        "responses": sum(len(t) for _, t in fresh),
        "passages": enc_texts,
        "cache_hit_rate": hits / max(1, len(fresh)),
        "judge_seconds": judge_s,
        "judge_encode_seconds": inside["seconds"],
        "judge_encoded_texts": inside["texts"],
        "encoder_seconds": enc_s,
        "judge_criteria_per_s": pairs / judge_s if judge_s > 0 else None,
        "encoder_criteria_per_s": pairs / enc_s if enc_s > 0 else None,
        "ratio": enc_s / judge_s if judge_s > 0 else None,
        "warmup_seconds": warm_s,
        "warmup_rubrics": len(keys),
        "load_seconds": load_s,
        "in_training": {},
    }


def training_judge(probe: Probe, metrics: dict[int, dict], steps: list[int]) -> dict:
    """The training judge at the counted steps, from metrics.jsonl: its pairs and time/judging, which also
    pay the anchors of every (task, rubric version) seen there for the first time."""
    seen: set[tuple[str, int]] = set()
    first = 0
    for b in sorted(probe.batches, key=lambda b: b["step"]):
        keys = {(tid, v) for tid, v, _ in b["rows"]}
        if b["step"] in steps:
            first += len(keys - seen)
        seen |= keys
    pairs = sum(float(metrics.get(s, {}).get("judge/calls") or 0) for s in steps)
    seconds = sum(float(metrics.get(s, {}).get("time/judging") or 0) for s in steps)
    return {
        "pairs": pairs,
        "seconds": seconds,
        "criteria_per_s": pairs / seconds if seconds > 0 else None,
        "first_seen_rubrics": first,
    }


# --------------------------------------------------------------------------- 3. shares


def step_shares(probe: Probe, metrics: dict[int, dict], steps: list[int]) -> dict:
    def m(step, key):
        v = metrics.get(step, {}).get(key)
        return float(v) if isinstance(v, int | float) else 0.0

    totals: dict[str, float] = defaultdict(float)
    wall = 0.0
    for s in steps:
        rec = probe.steps[s]
        scored = m(s, "time/generation") + m(s, "time/judging") + m(s, "time/scoring_other")
        parts = {
            "generation": m(s, "time/generation"),
            "judging": m(s, "time/judging"),
            "judging_references": rec["reference"],
            # the raw generation ran inside TRL's scoring, so the trainer's time/scoring_other holds it too
            "scoring_other": max(0.0, m(s, "time/scoring_other") - rec["raw"]),
            # training_step = TRL's generation and scoring + the step record (references, listeners) + fwd/bwd
            "update_forward_backward": max(0.0, rec["training_step"] - scored - rec["record_step"]),
            "update_optimizer": rec["update_optimizer"],
            "detectors": m(s, "time/detectors"),
            "memory": m(s, "time/memory"),
            "evolver": m(s, "time/evolver"),
        }
        parts["bookkeeping"] = max(0.0, rec["wall"] - sum(parts.values()))
        for k, v in parts.items():
            totals[k] += v
        wall += rec["wall"]
    shares = {k: (totals[k] / wall if wall > 0 else None) for k, _ in SHARE_ROWS}
    groups = {
        "generation": ("generation",),
        "judging": ("judging", "judging_references"),
        "other scoring": ("scoring_other",),
        "update": ("update_forward_backward", "update_optimizer"),
        "harness": ("detectors", "memory", "evolver"),
        "bookkeeping": ("bookkeeping",),
    }
    return {
        "steps": steps,
        "wall_seconds": wall,
        "seconds": dict(totals),
        "shares": shares,
        "groups": {g: sum(totals[k] for k in ks) / wall if wall > 0 else None for g, ks in groups.items()},
    }


# --------------------------------------------------------------------------- report


def _f(v, spec=".1f", none="n/a"):
    return none if v is None else format(v, spec)


def report(config, rollouts: dict, judge: dict, shares: dict, evolver_points: int) -> None:
    steps = shares["steps"]
    n = len(steps)
    print()
    print(
        f"step cost: model {config.model}, method {config.method}, {config.grpo.tasks_per_step} tasks x "
        f"G {config.grpo.num_generations}, max_new_tokens {config.grpo.max_completion_length}, "
        f"temperature {config.grpo.temperature}; counted steps {steps[0]}..{steps[-1]} ({n})"
    )
    print("Ratios are the figures to compare; seconds are this run's only (shared, noisy machine).")

    t, r = rollouts["trainer"], rollouts["raw"]
    print(
        f"\n1. Rollouts ({rollouts['batches']} batches of {rollouts['rows_per_batch']} rows, "
        f"prompts up to {rollouts['prompt_tokens_max']} tokens)"
    )
    print(f"   {'':34} {'seconds':>8} {'tokens':>7} {'tok/s':>8} {'rows x steps/s':>15} {'generate calls':>15}")
    print(
        f"   {'trainer (time/generation)':34} {t['seconds']:8.2f} {t['tokens']:7d} {_f(t['tokens_per_s']):>8} "
        f"{_f(t['computed_per_s']):>15} {t['generate_calls']:15d}"
    )
    print(
        f"   {'raw model.generate':34} {r['seconds']:8.2f} {r['tokens']:7d} {_f(r['tokens_per_s']):>8} "
        f"{_f(r['computed_per_s']):>15} {r['generate_calls']:15d}"
    )
    print(
        f"   trainer / raw: {_f(rollouts['ratio_tokens_per_s'], '.2f')} (useful tok/s), "
        f"{_f(rollouts['ratio_computed_per_s'], '.2f')} (rows x decode steps per s)"
    )
    print(
        f"   time inside model.generate: {_f(rollouts['generate_share_of_trainer_generation'], '.1%')} of the "
        "trainer's generation time"
    )
    print(
        f"   useful share of the trainer's decoding (tokens / rows x decode steps): "
        f"{_f(rollouts['trainer_useful_share'], '.1%')} (the rest is rows waiting for the batch's longest)"
    )

    print(
        f"\n2. Judge: {judge['pairs']} (response, criterion) pairs, {judge['responses']} fresh responses, "
        f"{judge['passages']} passages; cache hit rate {judge['cache_hit_rate']:.0%}"
    )
    print(f"   {'':34} {'seconds':>8} {'criteria/s':>11}")
    print(
        f"   {'RubricJudge(semantic).grade':34} {judge['judge_seconds']:8.2f} {_f(judge['judge_criteria_per_s']):>11}"
    )
    print(f"   {'MiniLM encoder alone':34} {judge['encoder_seconds']:8.2f} {_f(judge['encoder_criteria_per_s']):>11}")
    print(
        f"   judge / encoder throughput: {_f(judge['ratio'], '.2f')}; inside the judge the encoder took "
        f"{_f(judge['judge_encode_seconds'] / judge['judge_seconds'] if judge['judge_seconds'] else None, '.1%')} "
        f"({judge['judge_encoded_texts']} texts embedded)"
    )
    print(
        f"   (warm-up: anchors of {judge['warmup_rubrics']} rubrics in {judge['warmup_seconds']:.2f} s, "
        "a cost the training judge pays at a task's first step)"
    )
    tj = judge["in_training"]
    print(
        f"   the training judge at the counted steps: {tj['pairs']:.0f} pairs in {tj['seconds']:.2f} s = "
        f"{_f(tj['criteria_per_s'])} criteria/s, anchors of {tj['first_seen_rubrics']} first-seen rubrics included"
    )

    print(
        f"\n3. Shares of a step (wall {shares['wall_seconds'] / n:.2f} s/step over {n} step(s); "
        f"evolution points in the run: {evolver_points})"
    )
    for key, label in SHARE_ROWS:
        print(f"   {label:52} {shares['seconds'][key] / n:7.2f} s {_f(shares['shares'][key], '6.1%', '   n/a')}")
    print("   " + ", ".join(f"{g} {_f(v, '.1%')}" for g, v in shares["groups"].items()))


def _public(d: dict) -> dict:
    return {k: v for k, v in d.items() if not k.startswith("_")}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=6, help="training steps (step 1 is not counted when > 1)")
    p.add_argument("--g", type=int, default=4, help="completions per task (GRPO group size)")
    p.add_argument("--tasks-per-step", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--method", choices=("fixed", "harnessrl"), default="fixed")
    p.add_argument("--model", default="embedded", help="'embedded' (SmolLM2-135M-Instruct), a hub id or a path")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = p.parse_args(argv)
    if args.steps < 1 or args.g < 2 or args.tasks_per_step < 1 or args.max_new_tokens < 1:
        p.error("need --steps >= 1, --g >= 2, --tasks-per-step >= 1, --max-new-tokens >= 1")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    probe = Probe(args.max_new_tokens)
    with tempfile.TemporaryDirectory(prefix="step_cost-") as tmp:
        t0 = time.perf_counter()
        config, summary, metrics = run_training(args, Path(tmp) / "run", probe)
        train_s = time.perf_counter() - t0
        probe.restore()
        steps = counted_steps(summary.steps)
        shares = step_shares(probe, metrics, steps)
        rollouts = rollout_figures(probe, metrics, steps)
        judge = judge_figures(probe.trainer, rollouts["_texts"])
        judge["in_training"] = training_judge(probe, metrics, steps)
    points = summary.extra.evolver.points
    report(config, rollouts, judge, shares, points)
    figures = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "train_seconds": train_s,
        "rollouts": _public(rollouts),
        "judge": judge,
        "step": shares,
        "evolution_points": points,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.out}")
    return figures


if __name__ == "__main__":
    main()
