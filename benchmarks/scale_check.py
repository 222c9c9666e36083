"""A prepared GPU check of the harness at scale (issue 31 item 4): FSDP2, vLLM colocate and vLLM server.

Each part trains a randomly initialised ~0.7B model (the embedded policy's architecture, widened: hidden 1536,
24 layers; built from ``config.json`` and the tokenizer that ``gpu_check.py prepare`` copies, no weights
carried) for a few steps through ``harnessrl train`` with the rule-based evolver on (trials unbounded, so they
generate) and an evaluation before training (mean of 2 sampled completions on the bundled validation split),
then compares with the raw engine on the same GPU:

- ``config PART``: write the training config of a part (``fsdp2``, ``colocate``, ``server``);
- ``raw``: time the raw engine: ``model.generate`` (bf16, one GPU) and, where vLLM is installed,
  ``vllm.LLM.generate``, on R prompts x T new tokens;
- ``report``: from each part's run directory, the median step time (steps without an evolution point), the
  trials' seconds per fresh rollout and the evaluation's, beside the raw engine's seconds per rollout.

``benchmarks/gpu_check_scale.sh`` runs it all in one command (launch lines, the server's start and stop). It is
written for a GPU machine; on a CPU only ``config``, ``raw --device cpu`` at a small size and ``report`` run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_check import DEFAULT_ASSETS, build_random_model  # the assets and their one model builder

MODEL_SHAPE = {
    "hidden_size": 1536,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 12,
    "num_key_value_heads": 4,
}
"""≈0.68B parameters over the SmolLM2 vocabulary (tied embeddings)."""

PARTS = ("fsdp2", "colocate", "server")


def part_config(part: str, model_dir: Path, run_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The training config of one part: the same tasks, shape, evolver and evaluation; only generation differs."""
    generation: dict[str, Any] = {"backend": "transformers"}
    if part == "colocate":
        generation = {"backend": "vllm", "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3}
    elif part == "server":
        generation = {"backend": "vllm", "vllm_mode": "server", "vllm_server_base_url": args.server_url,
                      "vllm_server_timeout_s": 600}  # fmt: skip
    return {
        "run_dir": str(run_dir),
        "model": str(model_dir),
        "device": args.device,
        "seed": 0,
        "data": {"train": "bundled", "validation": "bundled", "test": None},
        "judge": {"backend": "local-lm", "model": str(model_dir), "batch_size": 32},
        "grpo": {
            "num_generations": args.g,
            "tasks_per_step": args.tasks,
            "max_completion_length": args.tokens,
            "max_steps": args.steps,
            "save_steps": 10**6,
            "save_total_limit": 1,
        },
        "generation": generation,
        "harness": {"memory": {"enabled": False}},
        "evolver": {
            "backend": "rule-based",
            "every_steps": 2,
            "trials": {"max_rollout_share": None, "max_new_tokens": args.tokens},
        },
        "eval": {
            "before_training": True,
            "every_steps": None,
            "completions": 2,
            "batch_size": 8,
            "max_new_tokens": args.tokens,
        },
    }


def raw_engine(model_dir: Path, device: str, rows: int, tokens: int) -> dict[str, Any]:
    """Seconds per rollout of the raw engines on ``rows`` chat prompts x ``tokens`` new tokens (``min_new_tokens``
    keeps the count fixed): transformers ``generate`` (bf16 on a GPU), and vLLM where it is installed."""
    import importlib.util

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    texts = [
        tok.apply_chat_template([{"role": "user", "content": f"Question {i}: say something."}], tokenize=False,
                                add_generation_prompt=True)
        for i in range(rows)
    ]  # fmt: skip
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device).eval()
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    kwargs = {"max_new_tokens": tokens, "min_new_tokens": tokens, "do_sample": True, "top_k": 0, "top_p": 1.0}
    out: dict[str, Any] = {"rows": rows, "tokens": tokens, "device": device}
    with torch.inference_mode():
        model.generate(**enc, **{**kwargs, "max_new_tokens": 4, "min_new_tokens": 4})  # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.generate(**enc, **kwargs)
        if device == "cuda":
            torch.cuda.synchronize()
    out["transformers_s_per_rollout"] = (time.perf_counter() - t0) / rows
    del model
    if device == "cuda" and importlib.util.find_spec("vllm") is not None:
        from vllm import LLM, SamplingParams

        llm = LLM(model=str(model_dir), gpu_memory_utilization=0.3, dtype="bfloat16", enforce_eager=False)
        params = SamplingParams(max_tokens=tokens, min_tokens=tokens, temperature=1.0)
        llm.generate(texts[:2], params, use_tqdm=False)
        t0 = time.perf_counter()
        llm.generate(texts, params, use_tqdm=False)
        out["vllm_s_per_rollout"] = (time.perf_counter() - t0) / rows
    else:
        out["vllm_s_per_rollout"] = None
    return out


def part_figures(run_dir: Path) -> dict[str, Any]:
    """A part's figures from its run directory: median step time without an evolution point, the trials' and
    the evaluation's seconds per rollout, and whether the ranks agreed on every harness version."""
    metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines() if x.strip()]
    steps = [m for m in metrics if "time/generation" in m]
    points = {e["step"] for e in events if e.get("kind") == "evolution_point"}
    times = [(b["time"] - a["time"], b["step"]) for a, b in itertools.pairwise(steps)]
    plain = [t for t, step in times if step not in points]
    trials = [e["result"] for e in events if e.get("kind") == "trial" and "result" in e]
    generated = [t for t in trials if t["cost"]["rollouts"]]
    evals = [json.loads(x) for x in (run_dir / "eval.jsonl").read_text().splitlines() if x.strip()]
    ranks = sorted((run_dir / "ranks").glob("rank*.points.jsonl")) if (run_dir / "ranks").exists() else []
    views = [[{**json.loads(x), "rank": 0} for x in p.read_text().splitlines()] for p in ranks]
    return {
        "steps": len(steps),
        "step_s_median": statistics.median(plain) if plain else None,
        "trials": len(trials),
        "trial_rollouts": sum(t["cost"]["rollouts"] for t in generated),
        "trial_s_per_rollout": (
            sum(t["cost"]["seconds"] for t in generated) / sum(t["cost"]["rollouts"] for t in generated)
            if generated
            else None
        ),
        "eval": [{"step": e["step"], "overall": e["overall"], "seconds": e["seconds"]} for e in evals],
        "eval_s_per_rollout": (
            evals[0]["seconds"] / (evals[0]["tasks"] * evals[0]["completions_per_task"]) if evals else None
        ),
        "commits": sum(e.get("kind") == "commit" for e in events),
        "ranks_agree": all(v == views[0] for v in views) if views else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--tasks", type=int, default=8, help="tasks per step")
    p.add_argument("--g", type=int, default=8, help="completions per task")
    p.add_argument("--tokens", type=int, default=128, help="completion tokens")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--server-url", default="http://127.0.0.1:8000")
    sub = p.add_subparsers(dest="command", required=True)
    model = sub.add_parser("model", help="build the random ~0.7B model from the assets")
    model.add_argument("--assets", type=Path, default=DEFAULT_ASSETS)
    model.add_argument("--out", type=Path, required=True)
    model.add_argument("--override", action="append", default=[], metavar="KEY=JSON", help="e.g. num_hidden_layers=1")
    cfg = sub.add_parser("config", help="write a part's training config")
    cfg.add_argument("part", choices=PARTS)
    cfg.add_argument("--model", type=Path, required=True)
    cfg.add_argument("--run-dir", type=Path, required=True)
    cfg.add_argument("--out", type=Path, required=True)
    raw = sub.add_parser("raw", help="time the raw engines")
    raw.add_argument("--model", type=Path, required=True)
    raw.add_argument("--json", type=Path, required=True)
    rep = sub.add_parser("report", help="every part's figures beside the raw engine's")
    rep.add_argument("--raw", type=Path, required=True)
    rep.add_argument("--run", action="append", default=[], metavar="PART=RUN_DIR")
    rep.add_argument("--json", type=Path, required=True)
    args = p.parse_args(argv)
    if args.command == "model":
        overrides = {**MODEL_SHAPE, **{k: json.loads(v) for k, v in (o.split("=", 1) for o in args.override)}}
        print(json.dumps(build_random_model(args.assets, args.out, 0, overrides)))
    elif args.command == "config":
        import yaml

        args.out.write_text(yaml.safe_dump(part_config(args.part, args.model, args.run_dir, args)))
    elif args.command == "raw":
        args.json.write_text(json.dumps(raw_engine(args.model, args.device, args.tasks * args.g, args.tokens)))
    else:
        figures = {"raw": json.loads(args.raw.read_text())}
        for item in args.run:
            part, run_dir = item.split("=", 1)
            figures[part] = part_figures(Path(run_dir)) if Path(run_dir, "metrics.jsonl").exists() else "no run"
        args.json.write_text(json.dumps(figures, indent=2))
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
