"""The gold bench's comparisons read again with more answers a test task: how much of a paired difference's spread
over seeds is the evaluation's sampling, and what is left when it is made small.

The bench grades each run's best checkpoint on its test tasks with the run's ``eval.completions`` sampled answers a
task (4 on the gold bench). This grades the same checkpoints as the run evaluates (``harnessrl eval``: its
decoding and eval judge, gold with rubric version 0 beside it) with ``--completions`` answers a task instead,
then pairs every method against ``--against`` by seed, at both sample sizes, overall and per family, with the
bench report's 95% t-interval over seeds. It also gives each checkpoint's change from the bench's score to the
new one (the evaluation noise the bench's figure carried).

Resumable: a checkpoint already graded (an ``eval.jsonl`` row of ``harnessrl eval`` on the test split at that many
answers a task, of the whole split, of that checkpoint) is not graded again. ``--rows`` takes the graded
checkpoints of an earlier reading's ``results.json`` as they are, for runs whose folders are gone (the baseline a
new arm is paired with, graded once).

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/eval_precision.py --dir /work/runs/df-h0 ... --dir /work/runs/pd-4 \
        --against dapo --completions 16 --out benchmarks/results/eval-precision
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

from harnessrl.analysis.results import stat, t_interval
from harnessrl.errors import HarnessRLError
from harnessrl.records.run_dir import read_json_file, read_jsonl
from harnessrl.trainer.checkpoint_eval import best_checkpoint
from harnessrl.trainer.run import evaluate_run
from harnessrl.trainer.train_config import load_run_config


def find_runs(dirs: list[Path]) -> dict[str, dict[int, Path]]:
    """``method -> seed -> run directory`` under bench output folders (``DIR/<method>/seed<N>``)."""
    runs: dict[str, dict[int, Path]] = {}
    for d in dirs:
        found = sorted(p for p in d.glob("*/seed*") if (p / "best.json").exists())
        if not found:
            raise HarnessRLError(f"{d}: no finished run (no <method>/seed<N>/best.json under it)")
        for p in found:
            seed = int(p.name.removeprefix("seed"))
            if seed in runs.setdefault(p.parent.name, {}):
                raise HarnessRLError(
                    f"{p.parent.name} seed {seed} is in two folders: {runs[p.parent.name][seed]} and {p}"
                )
            runs[p.parent.name][seed] = p
    return runs


def _scores(s: dict[str, Any]) -> dict[str, Any]:
    return {"overall": s["overall"], "per_family": s.get("per_family") or {}}


def bench_score(run: Path) -> dict[str, Any]:
    """The bench's test score at the best checkpoint (``best.json``) and the checkpoint's path."""
    best = json.loads((run / "best.json").read_text(encoding="utf-8"))
    if not best.get("test"):
        raise HarnessRLError(f"{run}/best.json has no test scores: was the run evaluated on a test split?")
    return {
        **_scores(best["test"]),
        "step": best["step"],
        # the untrained policy where it scored best (no checkpoint saved); "best" left to fail loudly if missing
        "checkpoint": best.get("checkpoint") or best_checkpoint(run) or str(run / "checkpoints/best"),
    }


def read_rows(paths: list[Path], completions: int) -> tuple[dict[str, dict[int, dict[str, Any]]], set[int]]:
    """``method -> seed -> entry`` from earlier readings' ``results.json`` (this script's), each entry marked with
    the file it came from, and the bench's answers a task those readings paired with; they must have been graded at
    ``completions`` answers a task."""
    table: dict[str, dict[int, dict[str, Any]]] = {}
    bench_answers: set[int] = set()
    for path in paths:
        res = read_json_file(path)
        if res is None:
            raise HarnessRLError(f"--rows {path}: no such file; give a results.json this script wrote")
        if not isinstance(res, dict) or not isinstance(res.get("table"), dict) or "completions" not in res:
            raise HarnessRLError(
                f"--rows {path}: not a results.json of benchmarks/eval_precision.py (it has no 'table' and "
                "'completions')"
            )
        if res["completions"] != completions:
            raise HarnessRLError(
                f"--rows {path}: graded at {res['completions']} answers a task, this reading at {completions}: "
                f"pass --completions {res['completions']}, or grade those runs again"
            )
        if res.get("bench_completions") is not None:
            bench_answers.add(res["bench_completions"])
        for method, seeds in res["table"].items():
            for seed, entry in seeds.items():
                if not isinstance(entry, dict) or not {"bench", "precise"} <= entry.keys():
                    raise HarnessRLError(f"--rows {path}: {method} seed {seed} has no 'bench' and 'precise' scores")
                if int(seed) in table.setdefault(method, {}):
                    raise HarnessRLError(
                        f"--rows: {method} seed {seed} is in two files: {table[method][int(seed)]['row']} and {path}"
                    )
                table[method][int(seed)] = {**entry, "row": str(path)}
    return table, bench_answers


def precise_score(run: Path, checkpoint: str, completions: int) -> dict[str, Any]:
    """The test score of ``checkpoint`` at ``completions`` answers a task: read back when ``harnessrl eval`` wrote
    it before, else graded now."""

    def done() -> dict[str, Any] | None:
        rows = read_jsonl(run / "eval.jsonl") if (run / "eval.jsonl").exists() else []
        for r in reversed(rows):
            if (
                r.get("source") == "harnessrl eval"
                and r.get("split") == "test"
                and r.get("completions_per_task") == completions
                and r.get("selection") is None
                and Path(r.get("checkpoint", "")).name == Path(checkpoint).name
            ):
                return r
        return None

    row = done()
    if row is None:
        print(f"grading {checkpoint} at {completions} answers a task", file=sys.stderr, flush=True)
        evaluate_run(run, Path(checkpoint).name, completions=completions, splits=["test"])
        row = done()
    assert row is not None
    return {**_scores(row), "seconds": row.get("seconds"), "sampling_se": row.get("sampling_se")}


def _paired(a: dict[int, float | None], b: dict[int, float | None]) -> dict[str, Any]:
    seeds = sorted(s for s in a.keys() & b.keys() if a[s] is not None and b[s] is not None)
    diffs = {s: a[s] - b[s] for s in seeds}  # type: ignore[operator]
    st = stat(list(diffs.values()))
    return {**dict(st), "ci95": t_interval(st), "per_seed": diffs, "higher": sum(d > 0 for d in diffs.values())}


def compare(table: dict[str, dict[int, dict[str, Any]]], against: str) -> dict[str, Any]:
    """Each method against ``against``, paired by seed, at the bench's answers and at the new number."""
    if against not in table:
        raise HarnessRLError(f"--against {against!r}: no runs of it; methods found: {', '.join(table)}")
    out: dict[str, Any] = {}
    base = table[against]
    for method, seeds in table.items():
        if method == against:
            continue
        entry: dict[str, Any] = {}
        for size in ("bench", "precise"):
            overall = _paired(
                {s: r[size]["overall"] for s, r in seeds.items()}, {s: r[size]["overall"] for s, r in base.items()}
            )
            families = sorted({f for r in [*seeds.values(), *base.values()] for f in r[size]["per_family"]})
            per_family = {
                f: _paired(
                    {s: r[size]["per_family"].get(f) for s, r in seeds.items()},
                    {s: r[size]["per_family"].get(f) for s, r in base.items()},
                )
                for f in families
            }
            entry[size] = {"overall": overall, "per_family": per_family}
        out[method] = entry
    return out


def noise(table: dict[str, dict[int, dict[str, Any]]], bench_answers: int, answers: int) -> dict[str, Any]:
    """The sampling noise a score at ``bench_answers`` answers a task carries, two ways:

    - from each checkpoint's change from the bench's score to the precise one: the two are independent draws, so
      the change's variance is the sum of both sampling variances, the precise one ``bench_answers / answers`` of
      the bench's;
    - from the answers' spread within each task (``sampling_se`` of the precise rows, scaled to
      ``bench_answers``).

    A paired difference of two runs carries about sqrt(2) times it."""
    changes = [r["precise"]["overall"] - r["bench"]["overall"] for seeds in table.values() for r in seeds.values()]
    st = stat(changes)
    sd = st.std
    from_change = sd / math.sqrt(1 + bench_answers / answers) if sd is not None else None
    ses = [r["precise"].get("sampling_se") for seeds in table.values() for r in seeds.values()]
    ses = [v for v in ses if v is not None]
    from_spread = math.sqrt(statistics.fmean(v * v for v in ses) * answers / bench_answers) if ses else None
    return {
        "change": dict(st),
        "bench_sampling_sd_from_change": from_change,
        "bench_sampling_se_from_spread": from_spread,
        "precise_sampling_se_mean": statistics.fmean(ses) if ses else None,
        "paired_difference_sampling_sd": (from_spread or from_change or 0.0) * math.sqrt(2) or None,
    }


def _fmt(d: dict[str, Any]) -> str:
    ci = d.get("ci95")
    if d.get("mean") is None:
        return "n/a"
    sd = f" ± {d['std']:.3f}" if d.get("std") is not None else ""
    inter = f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""
    return f"{d['mean']:+.3f}{sd}{inter} ({d['higher']}/{d['n']} higher)"


def markdown(res: dict[str, Any]) -> str:
    k, kb = res["completions"], res["bench_completions"]
    lines = [
        f"# The gold bench's best checkpoints graded at {k} answers a test task (the bench: {kb})",
        "",
        f"Command: `{res['command']}`",
        "",
        "## Gold test score per seed",
        "",
        f"| method | seed | step | at {kb} answers | at {k} answers | change |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for method, seeds in res["table"].items():
        for seed, r in sorted(seeds.items()):
            b, p = r["bench"]["overall"], r["precise"]["overall"]
            name = f"{method} (*row*)" if r.get("row") else method
            lines.append(f"| {name} | {seed} | {r['bench']['step']} | {b:.3f} | {p:.3f} | {p - b:+.3f} |")
    rows = sorted({r["row"] for seeds in res["table"].values() for r in seeds.values() if r.get("row")})
    if rows:
        lines += ["", "*row*: graded earlier, taken as it is from " + ", ".join(f"`{r}`" for r in rows) + "."]
    for method, entry in res["comparisons"].items():
        lines += [
            "",
            f"## {method} − {res['against']}, paired by seed (mean ± sd over seeds, 95% t-interval)",
            "",
            f"| | at {kb} answers (the bench) | at {k} answers |",
            "|---|---:|---:|",
            f"| **overall** | {_fmt(entry['bench']['overall'])} | {_fmt(entry['precise']['overall'])} |",
        ]
        for f in entry["precise"]["per_family"]:
            lines.append(
                f"| {f} | {_fmt(entry['bench']['per_family'][f])} | {_fmt(entry['precise']['per_family'][f])} |"
            )
    n = res["noise"]
    if n["change"].get("std") is not None:
        spread = n["bench_sampling_se_from_spread"]
        lines += [
            "",
            "## The evaluation's sampling noise",
            "",
            f"A checkpoint's score moved from {kb} to {k} answers a task by {n['change']['mean']:+.3f} on average, sd "
            f"{n['change']['std']:.3f} over {n['change']['n']} checkpoints: a score at {kb} answers carries a sampling "
            f"sd of about {n['bench_sampling_sd_from_change']:.3f} by that change"
            + (
                f", and {spread:.3f} by the answers' spread within each task (at {k} answers: "
                f"{n['precise_sampling_se_mean']:.3f})"
                if spread is not None
                else ""
            )
            + f". A paired difference of two runs at {kb} answers carries about "
            f"{n['paired_difference_sampling_sd']:.3f} of it.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, action="append", default=[], help="A bench output folder; repeat.")
    ap.add_argument(
        "--rows",
        type=Path,
        action="append",
        default=[],
        help="An earlier reading's results.json whose graded checkpoints are taken as they are; repeat.",
    )
    ap.add_argument("--against", required=True, help="The method every other one is paired against (e.g. dapo).")
    ap.add_argument("--completions", type=int, default=16, help="Answers a test task (default 16).")
    ap.add_argument("--out", type=Path, required=True, help="Where results.json and results.md go.")
    args = ap.parse_args(argv)
    if args.completions < 1:
        ap.error("--completions must be at least 1")
    if not args.dir and not args.rows:
        ap.error("give at least one --dir (or --rows)")
    runs = find_runs(args.dir) if args.dir else {}
    table, bench_answers = read_rows(args.rows, args.completions)
    for method, seeds in runs.items():
        for seed, run in seeds.items():
            if seed in table.get(method, {}):
                raise HarnessRLError(
                    f"{method} seed {seed} is both a run ({run}) and a row ({table[method][seed]['row']})"
                )
    for method, seeds in runs.items():
        for seed, run in sorted(seeds.items()):
            bench = bench_score(run)
            bench_answers.add(load_run_config(run / "config.yaml").eval.completions)
            table.setdefault(method, {})[seed] = {
                "run": str(run),
                "bench": bench,
                "precise": precise_score(run, bench["checkpoint"], args.completions),
            }
    if len(bench_answers) != 1:
        raise HarnessRLError(f"the runs were evaluated with different eval.completions: {sorted(bench_answers)}")
    (kb,) = bench_answers
    res = {
        "command": shlex.join(
            ["python", "benchmarks/eval_precision.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "completions": args.completions,
        "bench_completions": kb,
        "against": args.against,
        "table": table,
        "comparisons": compare(table, args.against),
        "noise": noise(table, kb, args.completions),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(res, indent=1, default=str) + "\n", encoding="utf-8")
    (args.out / "results.md").write_text(markdown(res), encoding="utf-8")
    print(markdown(res))


if __name__ == "__main__":
    try:
        main()
    except HarnessRLError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
