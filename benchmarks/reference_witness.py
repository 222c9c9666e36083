"""The reference as witness, measured on public rubric data this project did not write.

:class:`~harnessrl.evolution.reference.ReferenceWitness` grades each task's reference answer under the task's own
rubric with the run's judge; a positive criterion the reference fails, or a pitfall it commits, is **suspect**: no
hint aims at it, and an exact (check) suspect is offered for removal (docs/design.md §4, "The reference as
witness"). This script runs the witness, with the default run's judge (``judge.backend: semantic``, the embedded
offline judge of ``configs/demo.yaml``), on two public sets, each read from a public repository at a fixed commit
(fetched snapshots; nothing is downloaded here, and no row of either set is committed):

1. **HealthBench** (openai/simple-evals, MIT): the 30 first rows of ``2025-05-07-06-14-12_oss_eval.jsonl`` as
   committed one row a file in ``alvinrajkomar/healthbenchviewer`` (``processed_data/``, commit 49cb8f4), loaded
   with the ``healthbench`` preset; the rows with a physician's ``ideal_completion`` (the reference) are the tasks.
   Every criterion is judged (physician-written, with points; negative points are pitfalls).
2. **IFEval** (google-research/instruction_following_eval, Apache-2.0): ``data/input_data.jsonl`` loaded with
   the ``rlvr-ifeval`` preset (each instruction an exact ``ifeval`` check; the file is byte for byte
   ``tests/data/ifeval_input_data.jsonl``), and GPT-4's answers of the same
   release (``input_response_data_gpt4_20231107_145030.jsonl``) as the reference, as committed unmodified in
   ``Podtech-AI/IFEval`` (its first commit, 5bdf377). IFEval has no reference answers of its own: a strong
   model's answer stands in for one, as it does in sets whose references a model wrote. The same commit has the
   benchmark's own strict grading of those answers (``data/test_output/eval_results_strict.jsonl``), which the
   exact suspects are compared with.

What it reports: tasks and criteria (positive/pitfall, exact/judged); the share of criteria the witness calls
suspect by exact vs judged and positive vs pitfall; the share of tasks with at least one suspect; the findings
:class:`~harnessrl.evolution.reference.SuspectFindings` would offer for removal; and the hand-checked sample of
judged suspects (``--labels``: each labelled ``true`` when the reference truly fails the criterion, or commits
the pitfall, and ``false_alarm`` when it does not), with the false-alarm rate and its count.

    PYTHONPATH=. .venv/bin/python benchmarks/reference_witness.py \\
        --healthbench-repo /work/.mirror/alvinrajkomar+healthbenchviewer/repo \\
        --ifeval-repo /work/.mirror/Podtech-AI+IFEval/repo

(``fetch`` each repository first; the paths are where the snapshots lie.) Writes
``benchmarks/results/reference-witness/results.json`` and ``results.md``; ``--sample-out`` writes the sampled
suspects with their references in full, for reading (kept out of the repository: HealthBench asks that its rows
stay out of training corpora).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harnessrl.data.loaders import validate_file
from harnessrl.data.schema import Task
from harnessrl.evolution.reference import ReferenceGrade, ReferenceWitness, SuspectFindings
from harnessrl.judges import build_judge

HEALTHBENCH = {
    "set": "HealthBench (openai/simple-evals, MIT license): the first 30 rows of 2025-05-07-06-14-12_oss_eval.jsonl",
    "repo": "alvinrajkomar/healthbenchviewer",
    "commit": "49cb8f4d843704718e98e0d484aef71083adae7a",
    "path": "processed_data/2025-05-07-06-14-12_oss_eval_example_*.json",
    "license": "HealthBench: MIT (openai/simple-evals); the copying repository states none",
}
IFEVAL = {
    "set": "IFEval (google-research/google-research instruction_following_eval, Apache-2.0)",
    "repo": "Podtech-AI/IFEval",
    "commit": "5bdf377eb9cc20f16d377dc5c38413cee22550a6",
    "path": "data/input_data.jsonl, data/input_response_data_gpt4_20231107_145030.jsonl, "
    "data/test_output/eval_results_strict.jsonl",
    "license": "Apache-2.0 (google-research); the copying repository states none",
}
OUT = Path(__file__).parent / "results" / "reference-witness"
LABELS = Path(__file__).parent / "reference_witness_labels.json"


# ------------------------------------------------------------------------------------------------- the data


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def healthbench_tasks(repo: Path, commit: str, work: Path) -> tuple[list[Task], int]:
    """The HealthBench rows of the snapshot that have a reference (the physician's ideal completion), through the
    ``healthbench`` preset; and how many rows there were."""
    names = [n for n in _git(repo, "ls-tree", "--name-only", commit, "processed_data/").split() if n.endswith(".json")]
    rows = [json.loads(_git(repo, "show", f"{commit}:{n}")) for n in sorted(names)]
    path = work / "healthbench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    tasks = validate_file(path, "healthbench").raise_if_invalid()
    return [t for t in tasks if t.reference_answer], len(rows)


def ifeval_tasks(repo: Path, commit: str, work: Path) -> tuple[list[Task], dict[str, Any]]:
    """IFEval's prompts through the ``rlvr-ifeval`` preset, each with GPT-4's answer as its reference and the
    benchmark's strict verdict per instruction in ``metadata.strict``; and what was left out, with why."""
    path = work / "ifeval.jsonl"
    path.write_text(_git(repo, "show", f"{commit}:data/input_data.jsonl"), encoding="utf-8")
    report = validate_file(path, "rlvr-ifeval")
    answers = _jsonl(_git(repo, "show", f"{commit}:data/input_response_data_gpt4_20231107_145030.jsonl"))
    strict = _jsonl(_git(repo, "show", f"{commit}:data/test_output/eval_results_strict.jsonl"))
    answer_of = {r["prompt"]: r["response"] for r in answers}
    strict_of = {r["prompt"]: r["follow_instruction_list"] for r in strict}
    tasks, no_answer = [], 0
    for t in report.tasks:
        answer = answer_of.get(t.prompt if isinstance(t.prompt, str) else "")
        if not answer:
            no_answer += 1
            continue
        meta = {**t.metadata, "strict": strict_of.get(t.prompt)}
        tasks.append(t.model_copy(update={"reference_answer": answer, "metadata": meta}))
    left = {
        "rows": len(report.tasks) + len(report.errors),
        "refused_by_loader": len(report.errors),
        "refused_reason": _refusals(report.errors),
        "without_answer": no_answer,
    }
    return tasks, left


def _jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# ---------------------------------------------------------------------------------------------- the witness


def witness(tasks: Sequence[Task], judge: Any) -> ReferenceWitness:
    """The run's witness over ``tasks`` at rubric version 0, grading with ``judge`` as the trainer wires it
    (harnessrl/trainer/attach.py: ``judge.grade_one(task, task.reference_answer, criteria)``), checked once."""
    by_id = {t.id: t for t in tasks}
    w = ReferenceWitness(
        by_id,
        lambda tid: SimpleNamespace(version=0, criteria=by_id[tid].rubric),
        lambda task, criteria: judge.grade_one(task, task.reference_answer, criteria),
    )
    w.check()
    return w


def _refusals(errors: Sequence[Any]) -> str:
    """Why the loader refused rows, counted: the NLTK data HarnessRL never downloads, or another reason."""
    nltk = sum("NLTK" in str(e) or "nltk" in str(e) for e in errors)
    parts = [f"{nltk} for an instruction that needs NLTK data not installed here (punkt_tab; harnessrl/data/ifeval.py)"]
    if len(errors) > nltk:
        parts.append(
            f"{len(errors) - nltk} for another reason: "
            + "; ".join(
                sorted(
                    {str(e).split(": ", 1)[-1][:200] for e in errors if "NLTK" not in str(e) and "nltk" not in str(e)}
                )
            )
        )
    return ", ".join(parts)


def _cell(kind: str) -> dict[str, Any]:
    return {"kind": kind, "criteria": 0, "suspect": 0, "breaks_prompt": 0, "no_verdict": 0}


def tally(tasks: Sequence[Task], grades: Mapping[str, ReferenceGrade]) -> dict[str, Any]:
    """Criteria and suspects by exact/judged x positive/pitfall, and tasks with at least one suspect.

    ``grades``: each graded task's grade (a task with none counts as not graded, its criteria not counted)."""
    cells = {f"{e}_{p}": _cell(f"{e} {p}") for e in ("exact", "judged") for p in ("positive", "pitfall")}
    graded = with_suspect = 0
    for t in tasks:
        g = grades.get(t.id)
        if g is None:
            continue
        graded += 1
        suspect_ids = {s.criterion_id for s in g.suspects}
        breaks = {s.criterion_id for s in g.breaks_prompt}
        with_suspect += bool(suspect_ids)
        for c in t.rubric:
            cell = cells[f"{'exact' if c.check is not None else 'judged'}_{'pitfall' if c.weight < 0 else 'positive'}"]
            cell["criteria"] += 1
            cell["suspect"] += c.id in suspect_ids
            cell["breaks_prompt"] += c.id in breaks
            cell["no_verdict"] += g.verdicts.get(c.id) is None
    for cell in cells.values():
        cell["suspect_share"] = _share(cell["suspect"], cell["criteria"])
    total = {
        "criteria": sum(c["criteria"] for c in cells.values()),
        "suspect": sum(c["suspect"] for c in cells.values()),
        "breaks_prompt": sum(c["breaks_prompt"] for c in cells.values()),
    }
    total["suspect_share"] = _share(total["suspect"], total["criteria"])
    return {
        "tasks": len(tasks),
        "graded": graded,
        "tasks_with_suspect": with_suspect,
        "tasks_with_suspect_share": _share(with_suspect, graded),
        "by_kind": cells,
        "all": total,
    }


def _share(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def pinned_positive(tasks: Sequence[Task], grades: Mapping[str, ReferenceGrade], judge: Any) -> dict[str, Any]:
    """How many judged positive verdicts on the references sit exactly at the value the semantic judge gives a
    response scoring its own "met" anchor (``sigmoid((1 - mid_share) / temperature_share)``): the anchor is lowered
    to the reference's own score (harnessrl/judges/semantic.py, ``calibrate``), so graded as a response the
    reference meets each positive criterion it scores at least ``min_gap`` above the "not met" anchor for."""
    backend = getattr(judge, "backend", None)
    if not all(hasattr(backend, a) for a in ("mid_share", "temperature_share")):
        return {}
    at = 1.0 / (1.0 + math.exp(-(1.0 - backend.mid_share) / backend.temperature_share))
    values = [
        grades[t.id].verdicts.get(c.id)
        for t in tasks
        if t.id in grades
        for c in t.rubric
        if c.check is None and c.weight > 0
    ]
    values = [v for v in values if v is not None]
    return {
        "anchor_value": round(at, 4),
        "positive_verdicts": len(values),
        "at_anchor": sum(abs(v - at) < 1e-3 for v in values),
        "above_anchor": sum(v >= at + 1e-3 for v in values),
        "below_half": sum(v < 0.5 for v in values),
    }


def findings(w: ReferenceWitness) -> list[dict[str, Any]]:
    """What :class:`SuspectFindings` offers for removal: one finding per kind of requirement, with its tasks."""
    out = SuspectFindings(w, lambda tid: w.tasks[tid].rubric).run()
    return sorted(
        ({"key": f.key, "tasks": len(f.criteria), "text": f.text} for f in out), key=lambda f: (-f["tasks"], f["key"])
    )


def exact_against_strict(tasks: Sequence[Task], grades: Mapping[str, ReferenceGrade]) -> dict[str, Any]:
    """The exact verdicts on the references against the benchmark's own strict grading of the same answers."""
    agree: Counter[str] = Counter()
    apart: list[str] = []
    for t in tasks:
        strict, g = t.metadata.get("strict"), grades.get(t.id)
        if strict is None or g is None or len(strict) != len(t.rubric):
            agree["not_compared"] += 1
            continue
        for c, followed in zip(t.rubric, strict, strict=True):
            mine = g.verdicts.get(c.id)
            met = mine is not None and mine >= 0.5
            cell = f"witness_{'met' if met else 'fails'}__benchmark_{'followed' if followed else 'not_followed'}"
            agree[cell] += 1
            if met != followed:
                apart.append(f"{t.id}/{c.id} {c.check.model_dump(mode='json', exclude_none=True) if c.check else ''}")
    return {**dict(sorted(agree.items())), "disagreements": apart}


# ---------------------------------------------------------------------------------------------- the sample


def sample_suspects(
    tasks: Sequence[Task], grades: Mapping[str, ReferenceGrade], per_kind: int, seed: int
) -> list[dict[str, Any]]:
    """Up to ``per_kind`` judged suspects of each kind (positive, pitfall), drawn with ``seed`` (all of a kind that
    has no more), in a fixed order: the hand-checked sample."""
    by_id = {t.id: t for t in tasks}
    pools: dict[str, list[tuple[str, str]]] = {"positive": [], "pitfall": []}
    for tid in sorted(grades):
        for s in grades[tid].suspects:
            if not s.exact:
                pools["pitfall" if s.pitfall else "positive"].append((tid, s.criterion_id))
    rng = random.Random(seed)
    out = []
    for kind, pool in pools.items():
        chosen = pool if len(pool) <= per_kind else rng.sample(pool, per_kind)
        for tid, cid in sorted(chosen):
            crit = next(c for c in by_id[tid].rubric if c.id == cid)
            out.append(
                {
                    "key": f"{tid}/{cid}",
                    "kind": kind,
                    "weight": crit.weight,
                    "verdict": round(grades[tid].verdicts[cid] or 0.0, 3),
                    "criterion": crit.text,
                }
            )
    return out


def label_sample(sample: Sequence[dict[str, Any]], labels: Mapping[str, Any], pools: Mapping[str, int]) -> dict:
    """The false-alarm rate of the labelled sample, by kind and overall (each kind weighted by its share of all the
    judged suspects: the sample draws the kinds apart)."""
    by_kind: dict[str, dict[str, Any]] = {}
    for kind in ("positive", "pitfall"):
        rows = [s for s in sample if s["kind"] == kind]
        marks = [labels.get(s["key"], {}).get("label") for s in rows]
        n = sum(m in ("true", "false_alarm") for m in marks)
        fa = sum(m == "false_alarm" for m in marks)
        by_kind[kind] = {
            "suspects": pools.get(kind, 0),
            "sampled": len(rows),
            "labelled": n,
            "false_alarms": fa,
            "false_alarm_rate": _share(fa, n),
        }
    labelled = sum(k["labelled"] for k in by_kind.values())
    weights = {k: v["suspects"] for k, v in by_kind.items() if v["labelled"]}
    total = sum(weights.values())
    weighted = round(sum(by_kind[k]["false_alarm_rate"] * w for k, w in weights.items()) / total, 4) if total else None
    return {
        "by_kind": by_kind,
        "labelled": labelled,
        "false_alarms": sum(k["false_alarms"] for k in by_kind.values()),
        "false_alarm_rate_in_sample": _share(sum(k["false_alarms"] for k in by_kind.values()), labelled),
        "false_alarm_rate_weighted": weighted,
        "unlabelled": [
            s["key"] for s in sample if labels.get(s["key"], {}).get("label") not in ("true", "false_alarm")
        ],
    }


# ---------------------------------------------------------------------------------------------- the report


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# The reference as witness, on public rubric data",
        "",
        "Produced by:",
        "",
        f"    {res['command']}",
        "",
        f"({res['date']}, {res['seconds']:.0f} s; judge: `{res['judge']}`, the default run's embedded judge.) "
        "Script: `benchmarks/reference_witness.py`; hand labels: `benchmarks/reference_witness_labels.json`.",
        "",
    ]
    for name in ("healthbench", "ifeval"):
        d = res[name]
        src = d["source"]
        lines += [
            f"## {name}",
            "",
            f"{src['set']}; read from `{src['repo']}` at `{src['commit']}` ({src['path']}); license: {src['license']}.",
            f"{d['tasks_note']}",
            "",
            "| criteria | count | suspect | share suspect | reference breaks a stated requirement (not suspect) |",
            "|---|---|---|---|---|",
        ]
        for cell in d["tally"]["by_kind"].values():
            if cell["criteria"]:
                lines.append(
                    f"| {cell['kind']} | {cell['criteria']} | {cell['suspect']} | {_pct(cell['suspect_share'])} | "
                    f"{cell['breaks_prompt']} |"
                )
        t = d["tally"]
        lines += [
            f"| all | {t['all']['criteria']} | {t['all']['suspect']} | {_pct(t['all']['suspect_share'])} | "
            f"{t['all']['breaks_prompt']} |",
            "",
            f"Tasks with at least one suspect: {t['tasks_with_suspect']} of {t['graded']} "
            f"({_pct(t['tasks_with_suspect_share'])}).",
            "",
        ]
        pin = d.get("pinned_positive") or {}
        if pin.get("positive_verdicts"):
            lines += [
                f"Judged positive verdicts on the references: {pin['at_anchor']} of {pin['positive_verdicts']} sit "
                f"exactly at {pin['anchor_value']}, the value the semantic judge gives a response that scores its own "
                f"'met' anchor, {pin['above_anchor']} above it, {pin['below_half']} below 0.5: the judge lowers that "
                "anchor to the reference's own score, so the reference graded as a response meets every positive "
                "criterion it scores more than 0.056 above the 'not met' anchor for (the mean of an off-topic text's "
                "and the prompt's own score; harnessrl/judges/semantic.py, `calibrate`).",
                "",
            ]
        if d.get("findings"):
            lines += [
                f"Findings offered for removal (`reference_fails_criterion`, one per requirement): "
                f"{len(d['findings'])}, covering {sum(f['tasks'] for f in d['findings'])} task-criteria:",
                "",
                "| requirement | tasks |",
                "|---|---|",
                *(f"| `{f['key']}` | {f['tasks']} |" for f in d["findings"]),
                "",
            ]
        if d.get("exact_against_strict"):
            lines += [
                "Exact verdicts on the references against IFEval's own strict grading of the same answers:",
                "",
                *(f"- {k}: {v}" for k, v in d["exact_against_strict"].items() if k != "disagreements"),
                "",
                *(
                    [
                        "Where they disagree (read by hand, 2026-12-07: IFEval asks there for a 'letter' that is not "
                        "one; its verifier then draws a random letter when it is built, so the benchmark's file and "
                        "this run grade different letters): "
                        + "; ".join(f"`{x}`" for x in d["exact_against_strict"]["disagreements"]),
                        "",
                    ]
                    if d["exact_against_strict"]["disagreements"]
                    else []
                ),
            ]
        if d.get("labels"):
            lab = d["labels"]
            lines += [
                "Hand-checked sample of judged suspects (each read against the reference: `true`, the reference truly "
                "fails the criterion or commits the pitfall; `false_alarm`, it does not):",
                "",
                "| kind | suspects | sampled | labelled | false alarms | false-alarm rate |",
                "|---|---|---|---|---|---|",
                *(
                    f"| {k} | {v['suspects']} | {v['sampled']} | {v['labelled']} | {v['false_alarms']} | "
                    f"{_pct(v['false_alarm_rate'])} |"
                    for k, v in lab["by_kind"].items()
                ),
                "",
                f"In the sample: {lab['false_alarms']} false alarms of {lab['labelled']} "
                f"({_pct(lab['false_alarm_rate_in_sample'])}); weighted by each kind's share of the judged suspects: "
                f"{_pct(lab['false_alarm_rate_weighted'])}.",
                "",
                "| suspect | kind | verdict | label | note |",
                "|---|---|---|---|---|",
                *(
                    f"| {s['key']} | {s['kind']} | {s['verdict']} | {s.get('label', '?')} | {s.get('note', '')} |"
                    for s in d["sample"]
                ),
                "",
            ]
    hb, ife = res["healthbench"], res["ifeval"]
    lab = hb.get("labels", {})
    lines += [
        "## What the figures mean for the harness's rules",
        "",
        f"- Judged suspects (guidance withheld, never removed): on HealthBench the witness flags "
        f"{_pct(hb['tally']['by_kind']['judged_positive']['suspect_share'])} of positive criteria and "
        f"{_pct(hb['tally']['by_kind']['judged_pitfall']['suspect_share'])} of pitfalls, and "
        f"{_pct(hb['tally']['tasks_with_suspect_share'])} of tasks have one. Of the hand-checked sample, "
        f"{lab.get('false_alarms')} of {lab.get('labelled')} are judge false alarms "
        f"(weighted {_pct(lab.get('false_alarm_rate_weighted'))}); the pitfalls' false alarms are mostly the "
        "judge's negation blind spot ('Fails to ...' / 'Does not ...' pitfalls that the reference does the "
        "opposite of). A judged pitfall that is suspect only withholds the hint to avoid it, so the cost is guidance "
        "lost on about half of the pitfalls; the positive side costs little because the default judge almost never "
        "says the reference fails a positive criterion (above).",
        "- The true suspects are not evidence of a wrong rubric here: HealthBench's criteria are physicians' and "
        "the ideal completions are imperfect answers (a refusal to open a link; a note template missing sections). "
        "The witness's premise, that the reference is a good answer, is what fails.",
        f"- Exact criteria the reference fails (an exact suspect is offered for removal): on IFEval with GPT-4's "
        "answers as references, every check that fails on its reference agrees with IFEval's own grading (no judge: "
        "no false alarm of the verdict), and each is an instruction the prompt states: the answer is wrong, not the "
        "criterion. Measured here first (101 suspects, 19 removals of stated instructions offered), this is why a "
        "criterion whose requirement the prompt states is never suspect: the prompt outranks the reference "
        "(docs/design.md section 4). The prompt reader (`stated_requirements`, 92% recall on IFEval) now recognises "
        f"{ife['tally']['by_kind']['exact_positive']['breaks_prompt']} of them as stated; the "
        f"{ife['tally']['by_kind']['exact_positive']['suspect']} it does not read stay suspect, and "
        f"{len(ife['findings'])} removals of stated instructions are still offered for them: "
        + ", ".join(f"`{f['key']}`" for f in ife["findings"])
        + ". Where a model wrote the references, an exact suspect says the reference fails, not that the criterion is "
        "wrong; the critic's trial (the references' rank among the rollouts) is then the remaining guard.",
    ]
    return "\n".join(lines)


def main(argv: Iterable[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--healthbench-repo", type=Path, required=True, help="the fetched alvinrajkomar/healthbenchviewer")
    ap.add_argument("--ifeval-repo", type=Path, required=True, help="the fetched Podtech-AI/IFEval")
    ap.add_argument("--labels", type=Path, default=LABELS, help="hand labels of the sampled suspects (JSON)")
    ap.add_argument("--per-kind", type=int, default=12, help="judged suspects sampled per kind (positive, pitfall)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--sample-out", type=Path, default=None, help="the sample with references in full, for reading")
    args = ap.parse_args(list(argv) if argv is not None else None)

    t0 = time.time()
    # IFEval's row 1129 asks for the "letter" '!', which IFEval's verifier replaces with a random letter when it is
    # built (once a process): seeded, so that this script grades it the same each time
    random.seed(args.seed)
    from harnessrl.config import load_yaml

    judge_cfg = load_yaml(Path(__file__).parents[1] / "configs" / "demo.yaml").get("judge", {})
    judge = build_judge(judge_cfg)
    labels = json.loads(args.labels.read_text(encoding="utf-8")) if args.labels.exists() else {}
    res: dict[str, Any] = {"judge": json.dumps(judge_cfg), "per_kind": args.per_kind, "seed": args.seed}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        hb, hb_rows = healthbench_tasks(args.healthbench_repo, HEALTHBENCH["commit"], work)
        ife, ife_left = ifeval_tasks(args.ifeval_repo, IFEVAL["commit"], work)

    for name, tasks, source, note in (
        ("healthbench", hb, HEALTHBENCH, f"{len(hb)} of the {hb_rows} rows have a reference (the others: none)."),
        (
            "ifeval",
            ife,
            IFEVAL,
            f"{len(ife)} of the {ife_left['rows']} prompts load with GPT-4's answer as the reference "
            f"({ife_left['refused_by_loader']} refused by the loader: {ife_left['refused_reason']}; "
            f"{ife_left['without_answer']} without an answer).",
        ),
    ):
        w = witness(tasks, judge)
        grades = {tid: g for (tid, _), g in w.grades.items()}
        d: dict[str, Any] = {"source": source, "tasks_note": note, "tally": tally(tasks, grades)}
        d["findings"] = findings(w)
        d["pinned_positive"] = pinned_positive(tasks, grades, judge)
        if name == "ifeval":
            d["left_out"] = ife_left
            d["exact_against_strict"] = exact_against_strict(tasks, grades)
        sample = sample_suspects(tasks, grades, args.per_kind, args.seed)
        if sample:
            pools = Counter("pitfall" if s.pitfall else "positive" for g in grades.values() for s in g.suspects)
            for s in sample:
                s.update({k: v for k, v in labels.get(s["key"], {}).items() if k in ("label", "note")})
            d["sample"] = sample
            d["labels"] = label_sample(sample, labels, pools)
            if args.sample_out is not None:
                by_id = {t.id: t for t in tasks}
                args.sample_out.parent.mkdir(parents=True, exist_ok=True)
                with args.sample_out.open("w", encoding="utf-8") as f:
                    for s in sample:
                        task = by_id[s["key"].split("/")[0]]
                        f.write(f"=== {s['key']} [{s['kind']} {s['weight']:+g}, verdict {s['verdict']}]\n")
                        f.write(f"CRITERION: {s['criterion']}\n\nREFERENCE:\n{task.reference_answer}\n\n")
        res[name] = d
        t = d["tally"]
        print(f"{name}: {t['graded']} tasks graded, {t['all']['criteria']} criteria")
        for cell in t["by_kind"].values():
            if cell["criteria"]:
                share = _pct(cell["suspect_share"])
                print(f"  {cell['kind']:16} {cell['suspect']:4d} suspect of {cell['criteria']:4d} ({share})")
        share = _pct(t["tasks_with_suspect_share"])
        print(f"  tasks with a suspect: {t['tasks_with_suspect']} of {t['graded']} ({share})")
        print(f"  findings offered for removal: {len(d['findings'])}")
        if "labels" in d:
            lab = d["labels"]
            print(
                f"  hand-checked: {lab['false_alarms']} false alarms of {lab['labelled']} labelled "
                f"({_pct(lab['false_alarm_rate_in_sample'])}; weighted {_pct(lab['false_alarm_rate_weighted'])})"
            )
            if lab["unlabelled"]:
                print(f"  unlabelled: {', '.join(lab['unlabelled'])}")
        if "exact_against_strict" in d:
            print(f"  exact vs IFEval strict: {d['exact_against_strict']}")

    res["seconds"] = time.time() - t0
    res["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    res["command"] = (
        "PYTHONPATH=. .venv/bin/python benchmarks/reference_witness.py "
        f"--healthbench-repo {args.healthbench_repo} --ifeval-repo {args.ifeval_repo}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    (args.out / "results.md").write_text(markdown(res) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'results.json'} and results.md")
    return res


if __name__ == "__main__":
    main()
