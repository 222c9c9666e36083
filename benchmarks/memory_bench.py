"""Training-memory latency: writes per step and per record, and retrieval p50/p95, at 10k and 100k records.

Builds an embedded store (``PersistentClient``) per size in a temporary directory, fills it with
synthetic but realistic training history (a pool of tasks over five domains, ``--batch`` tasks sampled
per step, G rewards per group drifting as the policy learns, flat groups, failure flags), then times:

- **add** (the normal path, embedding *included*): ``add_step`` of one step's ``--batch`` groups, and
  ``add_failure`` of one failure; and the same step write with precomputed embeddings (Chroma alone);
- **task_history** (metadata filter + sort, *no embedding*);
- **similar_failures**, **similar_tasks** (the normal path: embed the query text with MiniLM, then
  search; embedding time *included*), with the query embedding and the bare Chroma search also timed
  on their own.

Embedding 100k summaries with MiniLM on two CPUs takes longer than the run is worth, so the bulk fill
passes ``embeddings=`` to Chroma: the first ``--embed-pool`` records of each collection get their own
real MiniLM embedding; each later record reuses the real embedding of a pooled record of the same task
(step summaries of one task differ only in their numbers) or, for a failure, of the same kind (texts
differ in task, numbers and criterion), plus small noise, renormalised. Documents and metadata are each
record's own. The fill is not what is measured: every timed call embeds for real.

    .venv/bin/python benchmarks/memory_bench.py --records 10000 100000 --queries 200

Goal (issue): p95 query latency under 50 ms at 100k records.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from harnessrl.memory.store import MiniLMEmbeddingFunction, TrainingMemory
from harnessrl.records.steps import GroupRecord, StepRecord, group_stats

DOMAINS = ["medical", "science", "writing", "roleplay", "instruction_following"]
INTERFACES = ["task_sampling", "rollout_guidance", "rubric_criteria"]

FAILURE_TEMPLATES = {
    "nondiscriminative_low": [
        "Every rollout of {task} scores near zero (mean {mean:.2f}, std {std:.3f}): the policy cannot meet {crit}.",
        "All {g} rollouts of {task} fail {crit}; the group has no reward spread (std {std:.3f}).",
    ],
    "nondiscriminative_high": [
        "All rollouts of {task} get full marks (mean {mean:.2f}, std {std:.3f}): {crit} is too lax to discriminate.",
        "{task} is saturated: every response satisfies {crit}, so the group teaches nothing.",
    ],
    "spurious_length": [
        "Reward rises with response length on {task} (Spearman {rho:.2f} over {k} groups), whatever the content.",
        "Longer completions of {task} score higher (rank correlation {rho:.2f}); padding is being rewarded.",
    ],
    "criterion_saturated": ["Criterion {crit} of {task} has passed in every rollout for {k} steps."],
    "criterion_dead": ["Criterion {crit} of {task} has failed in every rollout for {k} steps."],
    "reference_below_policy": [
        "The reference answer of {task} scores {gap:.2f} below the policy's typical response under {crit}."
    ],
    "judge_disagreement": ["Re-grading {task} flips {flip:.0%} of the verdicts on {crit}: the judge is inconsistent."],
}
CRITERIA = [
    "the dosage criterion",
    "the 50-word limit",
    "the citation requirement",
    "the in-character tone criterion",
    "the step-by-step derivation criterion",
    "the safety caveat criterion",
    "the JSON format check",
    "the rhyme scheme criterion",
]
QUERY_FAILURES = {  # query text -> the failure kind it describes
    "longer answers get higher rewards regardless of their quality": "spurious_length",
    "every rollout fails the strict format requirement and scores zero": "nondiscriminative_low",
    "the rubric is too lenient, all responses get full marks": "nondiscriminative_high",
    "the judge gives inconsistent verdicts when grading the same answer again": "judge_disagreement",
    "the reference solution scores lower than the model's own answers": "reference_below_policy",
    "one criterion is never satisfied by any rollout": "criterion_dead",
}


class Synth:
    """Prefix-stable synthetic history: record i is the same whatever the total size."""

    def __init__(self, n_tasks: int, batch: int, g: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.tasks = [f"{DOMAINS[i % len(DOMAINS)]}-{i:05d}" for i in range(n_tasks)]
        self.domain = {t: DOMAINS[i % len(DOMAINS)] for i, t in enumerate(self.tasks)}
        self.difficulty = dict(zip(self.tasks, rng.beta(2, 2, n_tasks), strict=True))
        self.batch, self.g, self.seed = min(batch, n_tasks), g, seed

    def step(self, step: int) -> StepRecord:
        rng = np.random.default_rng([self.seed, step])
        groups = []
        for i in rng.choice(len(self.tasks), self.batch, replace=False):
            t = self.tasks[int(i)]
            p = float(np.clip(1 - self.difficulty[t] + step / 4000, 0.01, 0.99))
            if rng.random() < 0.2:  # a flat group: out of reach or solved
                rewards = [0.0 if p < 0.5 else 1.0] * self.g
            else:
                rewards = [float(x) for x in np.round(rng.beta(4 * p + 0.5, 4 * (1 - p) + 0.5, self.g), 3)]
            if rng.random() < 0.03:
                rewards[0] = None
            mean, std = group_stats(rewards)
            guided = int(rng.integers(1, self.g // 2 + 1)) if rng.random() < 0.1 else 0
            groups.append(
                GroupRecord(
                    step=step,
                    task_id=t,
                    domain=self.domain[t],
                    rubric_version=int(rng.integers(0, 3)),
                    guidance="Check each requirement before answering." if guided else None,
                    guided=guided,
                    rewards=rewards,
                    mean=mean,
                    std=std,
                    flat=std is not None and std < 0.01,
                    lengths=[int(x) for x in rng.integers(20, 600, self.g)],
                    criterion_means={f"c{j}": float(rng.random()) for j in range(4)},
                    reference_reward=float(rng.random()) if rng.random() < 0.5 else None,
                )
            )
        return StepRecord(step=step, groups=groups)

    def failures_of(self, rec: StepRecord) -> dict[str, list[str]]:
        rng = np.random.default_rng([self.seed, rec.step, 1])
        out: dict[str, list[str]] = {}
        for grp in rec.groups:
            kinds = []
            if grp.flat and grp.mean is not None:
                kinds.append("nondiscriminative_low" if grp.mean < 0.5 else "nondiscriminative_high")
            if rng.random() < 0.03:
                kinds.append("spurious_length")
            if kinds:
                out[grp.task_id] = kinds
        return out

    def failure(self, i: int) -> dict:
        rng = np.random.default_rng([self.seed, 10**9 + i])
        kind = str(rng.choice(list(FAILURE_TEMPLATES)))
        t = self.tasks[int(rng.integers(len(self.tasks)))]
        tmpl = FAILURE_TEMPLATES[kind][int(rng.integers(len(FAILURE_TEMPLATES[kind])))]
        ev = {
            "task": t,
            "mean": float(rng.random()),
            "std": float(rng.random() * 0.01),
            "rho": float(rng.uniform(0.4, 0.95)),
            "k": int(rng.integers(3, 12)),
            "g": self.g,
            "gap": float(rng.uniform(0.05, 0.5)),
            "flip": float(rng.uniform(0.2, 0.6)),
            "crit": str(rng.choice(CRITERIA)),
        }
        attributed = rng.random() < 0.2  # the evolver blamed an interface for a fifth of them
        return {
            "interface": str(rng.choice(INTERFACES)) if attributed else None,
            "kind": kind,
            "step": i // max(1, self.batch // 4),
            "task_id": t,
            "domain": self.domain[t],
            "evidence": {k: v for k, v in ev.items() if k != "task"},
            "summary": tmpl.format(**ev),
        }


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, q))


def fmt(name: str, xs: list[float], note: str = "") -> str:
    return f"  {name:<44} p50 {pct(xs, 50):8.2f} ms   p95 {pct(xs, 95):8.2f} ms   (n={len(xs)}){note}"


class FillEmbedder:
    """Real MiniLM embeddings for the pooled records (cached across sizes), same-task reuse + noise after."""

    def __init__(self, ef: MiniLMEmbeddingFunction, pool: int, noise: float = 0.02):
        self.ef, self.pool, self.noise = ef, pool, noise
        self.cache: dict[str, np.ndarray] = {}
        self.seconds = 0.0
        self.embedded = 0

    def real(self, docs: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(d for d in docs if d not in self.cache))
        if todo:
            t0 = time.perf_counter()
            for d, v in zip(todo, self.ef.encode(todo), strict=True):
                self.cache[d] = v
            self.seconds += time.perf_counter() - t0
            self.embedded += len(todo)
        return np.stack([self.cache[d] for d in docs])

    def fill(self, docs: list[str], keys: list[str], rng: np.random.Generator) -> np.ndarray:
        """Embeddings for records in order: real for the first ``pool``, then a same-key pooled one + noise."""
        n_real = min(self.pool, len(docs))
        out = np.empty((len(docs), 384), dtype=np.float32)
        out[:n_real] = self.real(docs[:n_real])
        by_key: dict[str, list[int]] = {}
        for i in range(n_real):
            by_key.setdefault(keys[i], []).append(i)
        missing = [i for i in range(n_real, len(docs)) if keys[i] not in by_key]
        if missing:
            out[missing] = self.real([docs[i] for i in missing])
        for i in range(n_real, len(docs)):
            if keys[i] in by_key:
                cands = by_key[keys[i]]
                v = out[cands[int(rng.integers(len(cands)))]] + rng.normal(0, self.noise, 384).astype(np.float32)
                out[i] = v / np.linalg.norm(v)
        return out


def bench(n: int, args, ef: MiniLMEmbeddingFunction, filler: FillEmbedder, root: Path) -> None:
    synth = Synth(args.tasks, args.batch, args.g, seed=args.seed)
    n_steps = -(-n // synth.batch)
    n_fail = int(n * args.failure_ratio)
    rng = np.random.default_rng([args.seed, n])
    print(
        f"\n=== {n:,} step records ({n_steps} steps x {synth.batch} groups, {args.tasks} tasks), "
        f"{n_fail:,} failures ===",
        flush=True,
    )
    mem = TrainingMemory(root / f"run-{n}", embedding_function=ef)

    # ---- bulk fill (embeddings precomputed; not what is measured)
    t0 = time.perf_counter()
    ids, docs, mds, keys = [], [], [], []
    for s in range(n_steps):
        rec = synth.step(s)
        fails = synth.failures_of(rec)
        ids += mem._step_ids(rec.groups)
        for grp in rec.groups:
            d, m = mem._step_record(grp, fails.get(grp.task_id, ()), None)
            docs.append(d)
            mds.append(m)
            keys.append(grp.task_id)
    ids, docs, mds, keys = ids[:n], docs[:n], mds[:n], keys[:n]
    fails = [synth.failure(i) for i in range(n_fail)]
    f_docs, f_mds = zip(*(mem._failure_record(f, None) for f in fails), strict=True) if fails else ((), ())
    f_ids = [mem.failure_id(f) for f in fails]
    gen_s = time.perf_counter() - t0
    e0, t0 = filler.seconds, time.perf_counter()
    emb = filler.fill(docs, keys, rng)
    f_emb = filler.fill(list(f_docs), [f["kind"] for f in fails], rng)
    emb_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    mem._upsert("steps", ids, docs, mds, emb)
    if fails:
        mem._upsert("failures", f_ids, list(f_docs), list(f_mds), f_emb)
    fill_s = time.perf_counter() - t0
    print(
        f"fill: generate {gen_s:.1f}s; MiniLM on fill texts {filler.seconds - e0:.1f}s "
        f"({filler.embedded:,} real embeddings so far, pool {filler.pool:,}/collection; rest same-task reuse + "
        f"noise; {emb_s:.1f}s with reuse); Chroma upsert of {n + n_fail:,} records {fill_s:.1f}s "
        f"({(n + n_fail) / fill_s:,.0f} records/s, embeddings given)",
        flush=True,
    )
    print(f"counts: {mem.counts()}", flush=True)

    # ---- adds (normal path)
    print("add latency (after the fill):")
    add_full, add_pre = [], []
    for j in range(args.add_steps):
        rec = synth.step(n_steps + j)
        t0 = time.perf_counter()
        mem.add_step(rec, synth.failures_of(rec))
        add_full.append(time.perf_counter() - t0)
    for j in range(args.add_steps):
        rec = synth.step(n_steps + args.add_steps + j)
        pre = ef.encode([g.summary() for g in rec.groups])
        t0 = time.perf_counter()
        mem.add_step(rec, None, embeddings=pre)
        add_pre.append(time.perf_counter() - t0)
    b = synth.batch
    print(fmt(f"add_step, {b} groups, MiniLM incl.", add_full))
    print(fmt("  per record", [x / b for x in add_full]))
    print(fmt(f"add_step, {b} groups, embeddings given (Chroma)", add_pre))
    print(fmt("  per record", [x / b for x in add_pre]))
    add_f = []
    for j in range(args.add_steps):
        f = synth.failure(n_fail + j)
        t0 = time.perf_counter()
        mem.add_failure(f)
        add_f.append(time.perf_counter() - t0)
    print(fmt("add_failure, one record, MiniLM incl.", add_f))

    # ---- queries
    qrng = np.random.default_rng([args.seed, n, 7])
    q_tasks = [synth.tasks[int(i)] for i in qrng.integers(0, args.tasks, args.queries)]
    q_texts = list(QUERY_FAILURES)
    q_fail = [q_texts[i % len(q_texts)] + f" (case {i})" for i in range(args.queries)]
    q_kind = [QUERY_FAILURES[q_texts[i % len(q_texts)]] for i in range(args.queries)]
    q_steps = [synth.step(10**6 + i).groups[0].summary() for i in range(args.queries)]

    t0 = time.perf_counter()
    mem.similar_failures(q_fail[0])
    mem.similar_tasks(q_steps[0])
    mem.task_history(q_tasks[0])
    print(f"queries (first call after the fill, warm-up, all three: {1000 * (time.perf_counter() - t0):.1f} ms):")

    def timed(fn, items):
        out, sizes = [], []
        for x in items:
            t0 = time.perf_counter()
            r = fn(x)
            out.append(time.perf_counter() - t0)
            sizes.append(len(r))
        return out, statistics.mean(sizes)

    lat, sz = timed(lambda t: mem.task_history(t), q_tasks)
    print(fmt("task_history(task), no embedding", lat, f"  ~{sz:.0f} records each"))
    lat, sz = timed(lambda t: mem.task_history(t, last_n=10), q_tasks)
    print(fmt("task_history(task, last_n=10), no embedding", lat))
    lat, _ = timed(lambda q: mem.similar_failures(q, n=5), q_fail)
    print(fmt("similar_failures(text, n=5), MiniLM incl.", lat))
    lat, _ = timed(
        lambda q: mem.similar_failures(q[1], kind=q[0], exclude_task=q[2], n=5),
        list(zip(q_kind, q_fail, q_tasks, strict=True)),
    )
    print(fmt("similar_failures(+its kind, exclude_task), MiniLM incl.", lat))
    lat, _ = timed(
        lambda q: mem.similar_failures(q[1], kind=q[0], n=5),
        [
            ("judge_disagreement" if q_kind[i] != "judge_disagreement" else "spurious_length", q)
            for i, q in enumerate(q_fail)
        ],
    )
    print(fmt("similar_failures(+unrelated kind) worst case", lat, "  (Chroma filters)"))
    lat, _ = timed(lambda q: mem.similar_failures(q, interface="rubric_criteria", n=5), q_fail)
    print(fmt("similar_failures(+interface), MiniLM incl.", lat))
    lat, sz = timed(lambda q: mem.similar_tasks(q, n=5), q_steps)
    print(fmt("similar_tasks(text, n=5), MiniLM incl.", lat, f"  ~{sz:.1f} tasks each"))
    lat, sz = timed(lambda q: mem.similar_tasks(q[1], exclude_task=q[0], n=5), list(zip(q_tasks, q_steps, strict=True)))
    print(fmt("similar_tasks(+exclude_task), MiniLM incl.", lat, f"  ~{sz:.1f} tasks each"))
    lat, _ = timed(lambda q: ef.encode([q]), q_fail)
    print(fmt("  of which: MiniLM embedding of one query", lat))
    qv = ef.encode(q_fail)
    col = mem.collection("failures")
    lat, _ = timed(lambda v: col.query(query_embeddings=[v], n_results=5)["ids"], list(qv))
    print(fmt("  Chroma search alone, failures, k=5", lat))
    col = mem.collection("steps")
    qv = ef.encode(q_steps)
    lat, _ = timed(lambda v: col.query(query_embeddings=[v], n_results=100)["ids"], list(qv))
    print(fmt("  Chroma search alone, steps, k=100", lat))
    size = sum(p.stat().st_size for p in (root / f"run-{n}").rglob("*") if p.is_file())
    print(f"store on disk: {size / 2**20:.0f} MiB", flush=True)
    mem.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, nargs="+", default=[10_000, 100_000], help="step records per run")
    ap.add_argument("--queries", type=int, default=200, help="queries timed per kind")
    ap.add_argument("--tasks", type=int, default=1000, help="task pool size")
    ap.add_argument("--batch", type=int, default=64, help="task groups per step")
    ap.add_argument("--g", type=int, default=8, help="rollouts per group")
    ap.add_argument("--failure-ratio", type=float, default=1.0, help="failure records per step record")
    ap.add_argument("--embed-pool", type=int, default=10_000, help="records per collection embedded for real")
    ap.add_argument("--add-steps", type=int, default=20, help="step writes timed after the fill")
    ap.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch threads for MiniLM (0: torch's default). With another CPU-heavy process on the machine, "
        "2 threads on 2 cores made one query embedding ~80x slower (~490 ms vs ~6 ms with 1 thread)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", type=Path, default=None, help="where to build the stores (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the stores afterwards")
    args = ap.parse_args()

    import torch

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    print(
        f"cpus {os.cpu_count()}, torch threads {torch.get_num_threads()}, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    ef = MiniLMEmbeddingFunction()
    t0 = time.perf_counter()
    ef(["warm up"])
    print(f"MiniLM loaded in {time.perf_counter() - t0:.1f}s", flush=True)
    filler = FillEmbedder(ef, args.embed_pool)
    root = Path(args.dir or tempfile.mkdtemp(prefix="memory-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        for n in args.records:
            t0 = time.perf_counter()
            bench(n, args, ef, filler, root)
            print(f"({time.perf_counter() - t0:.0f}s for this size)", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
