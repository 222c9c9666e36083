"""Sample answers to the `nocomma` test prompts from final checkpoints; print the no-comma and topic rates.

The bench grades 16 answers a seed on this family (4 test prompts x 4); this draws N per prompt, so a
difference between two runs can be told from the noise of 16. It uses the chat template with no system
prompt, temperature 1, 64 new tokens, torch seed 0 per checkpoint:

    python benchmarks/results/bench-gold-in-group/comma_probe.py 32 RUN/checkpoints/final ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

TEST = Path(__file__).resolve().parents[3] / "harnessrl" / "data" / "bench_gold" / "test.jsonl"


def main(n: int, checkpoints: list[str]) -> None:
    torch.set_num_threads(2)
    with TEST.open() as f:
        tasks = [json.loads(line) for line in f]
    tasks = [t for t in tasks if t["metadata"]["family"] == "nocomma"]
    for ckpt in checkpoints:
        tok = AutoTokenizer.from_pretrained(ckpt)
        model = AutoModelForCausalLM.from_pretrained(ckpt, torch_dtype=torch.float32).eval()
        torch.manual_seed(0)
        no_comma = topic = total = 0
        for task in tasks:
            messages = [{"role": "user", "content": task["prompt"]}]
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)[
                "input_ids"
            ]
            with torch.no_grad():
                out = model.generate(
                    ids.repeat(n, 1),
                    do_sample=True,
                    temperature=1.0,
                    top_p=1.0,
                    top_k=0,
                    max_new_tokens=64,
                    pad_token_id=tok.eos_token_id,
                )
            phrases = next(c for c in task["gold_rubric"] if c["id"] == "topic")["check"]["phrases"]
            for seq in out:
                text = tok.decode(seq[ids.shape[1] :], skip_special_tokens=True)
                no_comma += "," not in text
                topic += any(p.lower() in text.lower() for p in phrases)
                total += 1
        print(f"{ckpt} n {total} no-comma {no_comma / total:.3f} topic {topic / total:.3f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
