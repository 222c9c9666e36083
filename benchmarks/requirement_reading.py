"""How well ``stated_requirements`` reads what a prompt states, measured on IFEval's labelled prompts.

IFEval (google-research ``instruction_following_eval/data/input_data.jsonl``, committed as
``tests/data/ifeval_input_data.jsonl``) labels each of its 541 prompts with the instructions it states, as
verifier ids and arguments. :func:`harnessrl.interfaces.induction.stated_requirements` reads a prompt into
checks; each check is turned into the IFEval instructions it states (:func:`as_instructions`: an ``ifeval``
check is its own id and arguments, a native check goes through the one table :data:`NATIVE_AS_IFEVAL`) and
matched one to one against the prompt's labels: same id, same arguments (as the verifier reads them).

- **Expressible**: a labelled instruction the check library can grade here: its IFEval id needs no absent NLTK
  data, and its verifier builds with exactly the labelled arguments (two labels name a "letter" outside a-z,
  '#' and '!', which the verifier replaces by a random letter). Recall and precision are over these ids.
- **Recall**: labelled expressible instructions matched by a proposed one / all labelled expressible ones.
- **Precision**: proposed instructions with an expressible id that match a label / all proposed with such an id.
  Proposals on a non-expressible id (a native sentence count states ``length_constraints:number_sentences``,
  which needs NLTK data here) and proposals no IFEval id states (``starts_with``) are counted apart, and a strict
  precision over every proposal is reported too.

The rules were tuned on the development half (rows with an even ``key``) only; the held-out half (odd ``key``)
is reported beside it.

    .venv/bin/python benchmarks/requirement_reading.py
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from harnessrl.data import ifeval
from harnessrl.data.checks import Check, InstructionFollowing
from harnessrl.interfaces.induction import stated_requirements

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "ifeval_input_data.jsonl"
OUT = ROOT / "benchmarks" / "results" / "requirement-reading"

Instruction = tuple[str, dict[str, Any]]  # an IFEval id and its arguments


def _bound(iid: str, key: str, check: Any) -> list[Instruction]:
    """A native ``min``/``max`` count as IFEval's relations: at least min, less than max + 1."""
    out: list[Instruction] = []
    if check.min is not None:
        out.append((iid, {key: check.min, "relation": "at least"}))
    if check.max is not None:
        out.append((iid, {key: check.max + 1, "relation": "less than"}))
    return out


NATIVE_AS_IFEVAL: dict[str, Callable[[Any], list[Instruction] | None]] = {
    # not_contains [","]: no commas. not_contains [words]: each word fewer than once (IFEval's keywords:frequency
    # searches the keyword anywhere, case-insensitively, as not_contains does; keywords:forbidden_words looks for
    # whole words only, so it is not this check)
    "not_contains": lambda c: (
        [("punctuation:no_comma", {})]
        if c.phrases == [","]
        else [("keywords:frequency", {"keyword": w, "frequency": 1, "relation": "less than"}) for w in c.phrases]
    ),
    # contains [words] (all of them): keywords:existence, which searches each keyword case-insensitively
    "contains": lambda c: [("keywords:existence", {"keywords": list(c.phrases)})] if c.mode == "all" else None,
    # word_count min/max: number_words at least min / less than max + 1
    "word_count": lambda c: _bound("length_constraints:number_words", "num_words", c),
    # sentence_count min/max: number_sentences (an id that needs NLTK data here: counted apart)
    "sentence_count": lambda c: _bound("length_constraints:number_sentences", "num_sentences", c),
    "letter_case": lambda c: [
        ("change_case:english_lowercase" if c.case == "lower" else "change_case:english_capital", {})
    ],
    "json": lambda c: [("detectable_format:json_format", {})],
    "ends_with": lambda c: [("startend:end_checker", {"end_phrase": c.text})],
    # bullet_count min == max == n: exactly n bullets
    "bullet_count": lambda c: (
        [("detectable_format:number_bullet_lists", {"num_bullets": c.max})] if c.min == c.max else None
    ),
    # starts_with: no IFEval instruction states it (None: counted apart)
    "starts_with": lambda c: None,
}
"""A native check as the IFEval instructions it states exactly (None: no IFEval instruction states it)."""


def as_instructions(check: Check) -> list[Instruction] | None:
    """The IFEval instructions a proposed check states, or None when no IFEval instruction states it."""
    if isinstance(check, InstructionFollowing):
        return [(check.instruction_id, dict(check.kwargs))]
    native = NATIVE_AS_IFEVAL.get(check.type)
    return native(check) if native else None


_FOLDED = {"end_phrase", "prompt_to_repeat", "first_word", "keyword", "postscript_marker", "letter"}


def canonical(iid: str, kwargs: dict[str, Any]) -> tuple:
    """An instruction as its verifier reads it, hashable: the verifiers strip and lower-case phrases and match
    keywords case-insensitively (a keyword list is a set); a keyword required at least once is
    ``keywords:existence``, as the two verifiers agree on every response."""
    args = {k: v for k, v in kwargs.items() if v is not None}
    if iid == "keywords:frequency" and args.get("relation") == "at least" and int(args.get("frequency", 0)) == 1:
        iid, args = "keywords:existence", {"keywords": [args["keyword"]]}
    out = []
    for name, value in sorted(args.items()):
        if name in ("keywords", "forbidden_words"):
            value = tuple(sorted({str(w).strip().lower() for w in value}))
        elif name in _FOLDED:
            value = str(value).strip().lower()
        elif name == "section_spliter":
            value = str(value).strip()
        elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        out.append((name, value))
    return (iid, tuple(out))


def expressible(iid: str, kwargs: dict[str, Any]) -> bool:
    """Whether the check library grades this instruction here: its verifier needs no absent NLTK data, takes the
    arguments, and keeps them (IFEval's verifier replaces a letter outside a-z with a random one)."""
    return _expressible(iid, json.dumps(kwargs, sort_keys=True))


@functools.cache
def _expressible(iid: str, kwargs_json: str) -> bool:
    try:
        typed = ifeval.check_instruction(iid, json.loads(kwargs_json))
    except ValueError:
        return False
    kept = ifeval.verifier(iid, typed).get_instruction_args() or {}
    return canonical(iid, kept) == canonical(iid, typed)


def load(path: Path = DATA) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def score(rows: Iterable[dict[str, Any]], read: Callable[[str], list] = stated_requirements) -> dict[str, Any]:
    """Recall and precision of ``read`` over ``rows`` (IFEval rows), overall and per instruction id."""
    per: dict[str, Counter] = {}
    apart: Counter = Counter()
    misses: list[dict[str, Any]] = []
    wrong: list[dict[str, Any]] = []
    unmatched_native: Counter = Counter()

    def tally(iid: str) -> Counter:
        return per.setdefault(iid, Counter())

    for row in rows:
        labels = []
        for iid, kwargs in zip(row["instruction_id_list"], row["kwargs"], strict=True):
            ok = expressible(iid, kwargs)
            labels.append({"id": iid, "kwargs": kwargs, "canon": canonical(iid, kwargs), "ok": ok, "hit": False})
            tally(iid)["labels" if ok else "labels_not_expressible"] += 1
        for check, _text in read(row["prompt"]):
            stated = as_instructions(check)
            if stated is None:
                apart["no_ifeval_counterpart"] += 1
                unmatched_native[check.type] += 1
                continue
            for iid, kwargs in stated:
                ok = expressible(iid, kwargs)
                key = canonical(iid, kwargs)
                match = next((lab for lab in labels if not lab["hit"] and lab["canon"] == key), None)
                if match is not None:
                    match["hit"] = True
                if ok:
                    tally(iid)["proposed"] += 1
                    tally(iid)["correct"] += match is not None
                    if match is None:
                        wrong.append({"key": row["key"], "proposed": [iid, kwargs], "check": check.written()})
                else:
                    apart["proposed_not_expressible"] += 1
                    apart["proposed_not_expressible_correct"] += match is not None
                    tally(iid)["proposed_not_expressible"] += 1
                    tally(iid)["correct_not_expressible"] += match is not None
        for lab in labels:
            if lab["ok"]:
                tally(lab["id"])["recalled"] += lab["hit"]
                if not lab["hit"]:
                    misses.append({"key": row["key"], "label": [lab["id"], lab["kwargs"]]})

    total = Counter()
    for counts in per.values():
        total.update(counts)
    proposed_all = total["proposed"] + apart["proposed_not_expressible"] + apart["no_ifeval_counterpart"]
    correct_all = total["correct"] + apart["proposed_not_expressible_correct"]
    return {
        "labels": total["labels"],
        "labels_not_expressible": total["labels_not_expressible"],
        "recalled": total["recalled"],
        "proposed": total["proposed"],
        "correct": total["correct"],
        "recall": _ratio(total["recalled"], total["labels"]),
        "precision": _ratio(total["correct"], total["proposed"]),
        "strict_precision": _ratio(correct_all, proposed_all),
        "apart": dict(apart),
        "no_ifeval_counterpart_by_type": dict(unmatched_native),
        "per_id": {
            iid: {
                **dict(c),
                "recall": _ratio(c["recalled"], c["labels"]),
                "precision": _ratio(c["correct"], c["proposed"]),
            }
            for iid, c in sorted(per.items())
        },
        "misses": misses,
        "wrong": wrong,
    }


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def split(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The development half (even ``key``: the rules were tuned on it) and the held-out half (odd ``key``)."""
    return {
        "dev (even key)": [r for r in rows if r["key"] % 2 == 0],
        "held-out (odd key)": [r for r in rows if r["key"] % 2 == 1],
        "all": list(rows),
    }


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


FIRST_HELD_OUT = "recall 87.2% (361/414), precision 96.3% (361/375), at commit 75b1d7a"
"""The held-out half's figures when it was first measured, after the rules had been tuned on the development half."""
BEFORE = "recall 12.4% (94/755), precision 78.3% (94/120), strict precision 77.4%"
"""The reading before these rules (commit 4db2212), scored by this script on all 541 rows."""


def markdown(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "# Reading a prompt's stated requirements: `stated_requirements` on IFEval",
        "",
        "Produced by `.venv/bin/python benchmarks/requirement_reading.py` over IFEval's 541 labelled prompts",
        "(`tests/data/ifeval_input_data.jsonl`, google-research `instruction_following_eval`, Apache-2.0).",
        "",
        "**How it was tuned.** The rules were written and tuned on the **development half (even `key`) only**,",
        "reading its prompts, misses and wrong proposals. The **held-out half (odd `key`)** was never read: no",
        f"held-out prompt, miss or wrong proposal. It was first measured after the tuning: {FIRST_HELD_OUT}.",
        "After that its overall and per-id figures (this table) were seen, and further rules were written from",
        "hand-written paraphrases of each instruction and from the IFEval verifiers' own instruction templates",
        "(checked on the development half), not from held-out prompts. `results.json` lists the development",
        "half's misses and wrong proposals only, so that the held-out half stays unread.",
        "",
        "Recall and precision are over the *expressible* instructions: those the check library grades here",
        "(every IFEval id but `length_constraints:number_sentences` and `change_case:capital_word_frequency`,",
        "whose verifiers need NLTK data that is absent; and not the two labels whose 'letter' ('#', '!') the",
        "verifier would replace by a random one). A proposal is correct when it states a labelled instruction of",
        "its prompt with the same arguments (native checks through the table `NATIVE_AS_IFEVAL` of the script).",
        "Strict precision counts every proposal, including native sentence counts (an NLTK id) and",
        "`starts_with` (no IFEval id).",
        "",
        "| set | labelled (expressible) | recalled | recall | proposed | correct | precision | strict precision |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['labels']} | {r['recalled']} | {_pct(r['recall'])} | {r['proposed']} | {r['correct']} | "
            f"{_pct(r['precision'])} | {_pct(r['strict_precision'])} |"
        )
    lines += [
        "",
        "Counted apart (all rows): {proposed_not_expressible} proposals on a non-expressible id (native sentence "
        "counts, which state `length_constraints:number_sentences`: {proposed_not_expressible_correct} of them match "
        "one of its {sentences} labels), and {no_ifeval_counterpart} that no IFEval id states ({by_type}).".format(
            sentences=results["all"]["per_id"]
            .get("length_constraints:number_sentences", {})
            .get("labels_not_expressible", 0),
            by_type=", ".join(f"{k} {v}" for k, v in sorted(results["all"]["no_ifeval_counterpart_by_type"].items()))
            or "none",
            **{"proposed_not_expressible": 0, "proposed_not_expressible_correct": 0, "no_ifeval_counterpart": 0}
            | results["all"]["apart"],
        ),
        "",
        f"Before these rules (commit 4db2212) the same scoring gave, on all rows: {BEFORE}.",
        "",
        "Most of the development half's remaining misses and wrong proposals are readings of the prompt that",
        "IFEval labels otherwise (e.g. key 1174 asks for the letter o 'at least 6 times', labelled 'less than 6';",
        "key 30 asks for lower case, labelled as a second quotation; key 2602 asks for 'less than 100 words',",
        "unlabelled; key 2392 asks for JSON, unlabelled); see `results.json`.",
        "",
        "## Per instruction id",
        "",
        "| id | dev recall | dev precision | held-out recall | held-out precision | labels (all) | not expressible |",
        "|---|---|---|---|---|---|---|",
    ]
    dev, held, every = (results[k]["per_id"] for k in ("dev (even key)", "held-out (odd key)", "all"))
    for iid in sorted(every):
        d, h, a = dev.get(iid, {}), held.get(iid, {}), every[iid]
        lines.append(
            f"| `{iid}` | {_pct(d.get('recall'))} ({d.get('recalled', 0)}/{d.get('labels', 0)}) | "
            f"{_pct(d.get('precision'))} ({d.get('correct', 0)}/{d.get('proposed', 0)}) | "
            f"{_pct(h.get('recall'))} ({h.get('recalled', 0)}/{h.get('labels', 0)}) | "
            f"{_pct(h.get('precision'))} ({h.get('correct', 0)}/{h.get('proposed', 0)}) | "
            f"{a.get('labels', 0) + a.get('labels_not_expressible', 0)} | {a.get('labels_not_expressible', 0)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--show", choices=["misses", "wrong"], help="print the dev half's misses or wrong proposals")
    args = parser.parse_args(argv)
    rows = load(args.data)
    results = {name: score(part) for name, part in split(rows).items()}
    for name in ("held-out (odd key)", "all"):  # the held-out half's misses stay unread
        results[name].pop("misses")
        results[name].pop("wrong")
    for name, r in results.items():
        print(
            f"{name:20s} recall {_pct(r['recall'])} ({r['recalled']}/{r['labels']})  "
            f"precision {_pct(r['precision'])} ({r['correct']}/{r['proposed']})  strict {_pct(r['strict_precision'])}"
        )
    if args.show:
        for item in results["dev (even key)"][args.show]:
            print(json.dumps(item, ensure_ascii=False))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (args.out / "results.md").write_text(markdown(results), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
