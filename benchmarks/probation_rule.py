"""The probation rule's false-keep rate and power, computed exactly (no model, no sampling).

A candidate committed on probation (a hint of rollout guidance under ``trials.guidance_trial: in_group``, and always
a rubric edit that states its checks as a hint, ``EditRubric.guide_fraction``; docs/design.md §4) is kept or
reverted by :class:`~harnessrl.evolution.probation.ProbationTracker`: every ``look_groups`` guided groups of its
tasks, the share of them that give signal, its Clopper-Pearson interval (the error spent over ``max_looks`` looks)
against the share the same tasks' last ``BEFORE_GROUPS`` groups gave before it plus ``threshold``
(:func:`~harnessrl.critic.power.decide_share`). The before share is itself an estimate from a few groups, so the
rule is computed over both sources of chance:

- the true share of groups that give signal before the candidate, ``b``, and under it, ``q``;
- the before share as the tracker sees it: ``k0 / n0`` with ``k0 ~ Binomial(n0, b)``, ``n0`` = ``BEFORE_GROUPS``;
- the guided groups' signal, ``Binomial(look_groups, q)`` more hits at each look, decided at each look by
  ``decide_share`` on the cumulative counts (as the tracker calls it) until a look decides.

A **false keep** is keeping a candidate whose true effect ``q - b`` is below ``threshold`` (it does not raise the
signal share by the smallest effect worth a change); the rule's false-keep rate at ``b`` is the largest ``P(kept)``
over such ``q``, and ``P(kept)`` at ``q = b`` (no effect at all) is the placebo's. Power is ``P(kept)`` at
``q = b + threshold`` and above.

A rubric edit that states its checks as a hint (the checks' probation) is decided by the rule for added checks on
its guided groups' rollouts instead: of a group of ``G``, ``k`` guided members meet the checks at rate ``r_g`` and
the rest at ``r_u``; each look adds ``look_groups`` groups' broken counts, and
:func:`~harnessrl.critic.power.decide_split` decides on the cumulative counts. The true split share of such groups is
``1 - (1-r_g)**k (1-r_u)**(G-k) - r_g**k r_u**(G-k)``; a false keep is keeping one whose true split share is below
the checks' threshold (0.2), and a placebo is a hint that changes nothing (``r_g = r_u``).

The fade of a rubric's hint (``EditRubric.fade_to``) is decided by :func:`~harnessrl.critic.power.decide_met` on
the unguided members of the guided groups: they meet the checks at rate ``m``; each look (an evolution point) adds
the unguided rollouts cached since the last one, and the hint fades once the met rate is shown at or above the floor
(``signal.min_effect["hint_met_rate"]``, 0.5). A **false fade** is fading a hint whose unguided members meet the
checks less often than the floor.

    .venv/bin/python benchmarks/probation_rule.py
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from scipy.stats import binom

from harnessrl.critic import power
from harnessrl.critic.config import TrialConfig
from harnessrl.critic.signal import HINT_MET_RATE
from harnessrl.evolution.probation import BEFORE_GROUPS, ProbationRule

decide_share = functools.lru_cache(maxsize=None)(power.decide_share)
decide_split = functools.lru_cache(maxsize=None)(power.decide_split)
decide_met = functools.lru_cache(maxsize=None)(power.decide_met)

OUT = Path(__file__).parent / "results" / "probation-rule"


def p_kept(rule: ProbationRule, b: float, q: float, before_groups: int = BEFORE_GROUPS) -> dict[str, float]:
    """P(kept), P(reverted) and the expected guided groups until the decision, exactly, for true shares ``b`` (before)
    and ``q`` (under the candidate)."""
    kept = reverted = groups = 0.0
    for k0 in range(before_groups + 1):
        w0 = float(binom.pmf(k0, before_groups, b)) if before_groups else 1.0
        if w0 == 0:
            continue
        target = min(1.0, (k0 / before_groups if before_groups else 0.0) + rule.threshold)
        alive = np.zeros(1)
        alive[0] = 1.0  # P(h hits so far, still pending), by h
        for look in range(1, rule.max_looks + 1):
            n = look * rule.look_groups
            step = binom.pmf(np.arange(rule.look_groups + 1), rule.look_groups, q)
            nxt = np.convolve(alive, step)
            groups += w0 * float(nxt.sum()) * rule.look_groups
            still = np.zeros_like(nxt)
            for h, w in enumerate(nxt):
                if w == 0:
                    continue
                kind = decide_share(h, n, target, rule.confidence, look, rule.max_looks, rule.spending).kind
                if kind == "accepted":
                    kept += w0 * w
                elif kind == "pending":
                    still[h] = w
                else:
                    reverted += w0 * w
            alive = still
            if alive.sum() == 0:
                break
        reverted += w0 * float(alive.sum())  # cannot happen at the last look (pending ends there), kept for safety
    return {"kept": kept, "reverted": reverted, "guided_groups": groups}


def checks_kept(rule: ProbationRule, r_g: float, r_u: float, group: int = 4, guided: int = 2) -> dict[str, float]:
    """P(kept) and P(reverted) of a checks' probation, exactly: guided members meet the checks at ``r_g``, the rest at
    ``r_u`` (the rollouts of ``look_groups`` groups a look, pooled, by :func:`decide_split`)."""
    one = np.convolve(
        binom.pmf(np.arange(guided + 1), guided, 1 - r_g),
        binom.pmf(np.arange(group - guided + 1), group - guided, 1 - r_u),
    )  # broken rollouts of one group
    step = np.array([1.0])
    for _ in range(rule.look_groups):
        step = np.convolve(step, one)
    n = rule.look_groups * group

    def kind(b: int, look: int) -> str:
        return decide_split(
            b, look * n, group, rule.split_threshold, rule.confidence, look, rule.max_looks, rule.spending
        ).kind

    kept, reverted = sequential(step, rule.max_looks, kind)
    return {"kept": kept, "reverted": reverted}


def sequential(step: np.ndarray, max_looks: int, kind_at: Callable[[int, int], str]) -> tuple[float, float]:
    """P(accepted) and P(not accepted) of a sequential rule, exactly: each look adds counts distributed as ``step``
    (a pmf over 0..n), and ``kind_at(count so far, look)`` decides (accepted, pending, or a refusal)."""
    alive, accepted, refused = np.array([1.0]), 0.0, 0.0
    for look in range(1, max_looks + 1):
        nxt = np.convolve(alive, step)
        still = np.zeros_like(nxt)
        for k, w in enumerate(nxt):
            if w < 1e-15:
                continue
            kind = kind_at(k, look)
            if kind == "accepted":
                accepted += w
            elif kind == "pending":
                still[k] = w
            else:
                refused += w
        alive = still
    return accepted, refused + float(alive.sum())


def fade_p(trials: TrialConfig, m: float, per_look: int) -> dict[str, float]:
    """P(faded) and P(kept hint) of a fade, exactly: the unguided members meet the checks at ``m``, each look adds
    ``per_look`` of their rollouts, pooled (:func:`decide_met` against the floor)."""
    floor = trials.signal.threshold(HINT_MET_RATE)
    step = binom.pmf(np.arange(per_look + 1), per_look, m)

    def kind(k: int, look: int) -> str:
        return decide_met(
            k, look * per_look, floor, trials.confidence, look, trials.max_looks, trials.alpha_spending
        ).kind

    faded, kept = sequential(step, trials.max_looks, kind)
    return {"faded": faded, "kept": kept}


def fade_table(trials: TrialConfig) -> list[dict[str, float]]:
    return [
        {"met_rate": m, "per_look": n, **{k: round(v, 5) for k, v in fade_p(trials, m, n).items()}}
        for n in (2, 4, 8)
        for m in (0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0)
    ]


def false_fade(trials: TrialConfig, grid: int = 100) -> dict[str, float]:
    """The largest P(faded) over met rates below the floor, per rollouts a look."""
    floor = trials.signal.threshold(HINT_MET_RATE)
    out = {}
    for n in (2, 4, 8):
        ms = [float(m) for m in np.linspace(0.0, 1.0, grid + 1) if m < floor]
        p, at = max((fade_p(trials, m, n)["faded"], m) for m in ms)
        out[str(n)] = {"max_p_faded": round(p, 5), "at_met_rate": round(at, 3)}
    return out


def mixture_share(r_g: float, r_u: float, group: int = 4, guided: int = 2) -> float:
    """The true share of groups the checks split when guided members meet them at ``r_g`` and the rest at ``r_u``."""
    u = group - guided
    return 1 - (1 - r_g) ** guided * (1 - r_u) ** u - r_g**guided * r_u**u


def checks_table(rule: ProbationRule) -> list[dict[str, float]]:
    rows = []
    for r_u in (0.0, 0.05, 0.25):
        for r_g in (0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0):
            got = checks_kept(rule, r_g, r_u)
            rows.append(
                {
                    "r_guided": r_g,
                    "r_unguided": r_u,
                    "split_share": round(mixture_share(r_g, r_u), 4),
                    **{k: round(v, 5) for k, v in got.items()},
                }
            )
    return rows


def checks_false_keep(rule: ProbationRule, grid: int = 100) -> dict[str, float]:
    """The largest P(kept) over (r_g, r_u) on a grid whose true split share is below the checks' threshold, and the
    largest for a placebo (r_g = r_u)."""
    rs = np.linspace(0.0, 1.0, grid + 1)
    worst = (0.0, 0.0, 0.0)
    for r_g in rs:
        for r_u in rs[:: max(1, grid // 20)]:
            if mixture_share(r_g, r_u) >= rule.split_threshold:
                continue
            k = checks_kept(rule, float(r_g), float(r_u))["kept"]
            if k > worst[0]:
                worst = (k, float(r_g), float(r_u))
    placebo = max(
        (
            (checks_kept(rule, float(r), float(r))["kept"], float(r))
            for r in rs
            if mixture_share(r, r) < rule.split_threshold
        ),
        default=(0.0, 0.0),
    )
    return {
        "max_p_kept": round(worst[0], 5),
        "at_r_guided": round(worst[1], 3),
        "at_r_unguided": round(worst[2], 3),
        "placebo_max_p_kept": round(placebo[0], 5),
        "placebo_at_r": round(placebo[1], 3),
    }


def table(rule: ProbationRule, befores: Sequence[float], effects: Sequence[float]) -> list[dict[str, float]]:
    rows = []
    for b in befores:
        for d in effects:
            q = b + d
            if not 0.0 <= q <= 1.0:
                continue
            got = p_kept(rule, b, q)
            rows.append({"before": b, "under": round(q, 4), "effect": d, **{k: round(v, 5) for k, v in got.items()}})
    return rows


def false_keep(rule: ProbationRule, b: float, grid: int = 200) -> dict[str, float]:
    """The largest P(kept) over true shares ``q`` in ``[0, b + threshold)`` (effects below the one worth a change,
    harm included)."""
    top = min(1.0, b + rule.threshold)
    qs = [q for q in np.linspace(0.0, top, grid + 1)[:-1]]
    ps = [p_kept(rule, b, float(q))["kept"] for q in qs]
    i = int(np.argmax(ps))
    return {"before": b, "max_p_kept": round(ps[i], 5), "at_under": round(float(qs[i]), 4)}


def report(results: dict) -> str:
    r = results["rule"]
    lines = [
        "# The probation rule: false keeps and power, exact",
        "",
        "Produced by:",
        "",
        f"    {results['command']}",
        "",
        f"({results['when']}, {results['seconds']} s.) The rule: `harnessrl/evolution/probation.py` (threshold "
        f"{r['threshold']} over the share before, confidence {r['confidence']}, a look every {r['look_groups']} guided "
        f"groups, at most {r['max_looks']} looks, the error spent {r['spending']} over them, the share before from "
        f"the last {r['before_groups']} groups).",
        "",
        "## False-keep rate: the largest P(kept) over effects below the threshold (harm included)",
        "",
        "| true share before | max P(kept) | at true share under the candidate |",
        "|---|---|---|",
    ]
    lines += [f"| {x['before']:g} | {x['max_p_kept']:.2%} | {x['at_under']:g} |" for x in results["false_keep"]]
    lines += [
        "",
        "## P(kept) by true effect",
        "",
        "`effect` 0 is a placebo (a hint that changes nothing); `guided groups` the expected guided groups the "
        "probation trains before it is decided.",
        "",
        "| true share before | effect | P(kept) | P(reverted) | guided groups |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {x['before']:g} | {x['effect']:+g} | {x['kept']:.2%} | {x['reverted']:.2%} | {x['guided_groups']:.1f} |"
        for x in results["table"]
    ]
    c = results["checks_false_keep"]
    lines += [
        "",
        "## A rubric edit with its hint: decided by the rule for added checks on the guided groups' rollouts",
        "",
        f"Groups of 4, 2 guided members (the remedy's `guide_fraction` 0.5), a look every {r['look_groups']} groups "
        f"({4 * r['look_groups']} rollouts), split-share threshold {r['split_threshold']}.",
        "",
        f"False keep (true split share below {r['split_threshold']}): at most {c['max_p_kept']:.2%} (guided members "
        f"meet the checks at {c['at_r_guided']:g}, the rest at {c['at_r_unguided']:g}); a placebo hint (both at one "
        f"rate) at most {c['placebo_max_p_kept']:.2%} (at {c['placebo_at_r']:g}).",
        "",
        "| guided meet rate | unguided meet rate | true split share | P(kept) | P(reverted) |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {x['r_guided']:g} | {x['r_unguided']:g} | {x['split_share']:.3f} | {x['kept']:.2%} | {x['reverted']:.2%} |"
        for x in results["checks_table"]
    ]
    fade = results["fade"]
    lines += [
        "",
        "## The fade of a rubric's hint: decided on the unguided members' rollouts",
        "",
        f'Floor {fade["floor"]} (`signal.min_effect["hint_met_rate"]`), confidence {fade["confidence"]}, at most '
        f"{fade['max_looks']} looks ({fade['spending']}); `per look` is the unguided rollouts each look adds (2 a "
        "guided group of 4 at half guided). False fade (true met rate below the floor): "
        + "; ".join(
            f"{n} a look at most {x['max_p_faded']:.2%} (at {x['at_met_rate']:g})"
            for n, x in fade["false_fade"].items()
        )
        + ".",
        "",
        "| per look | unguided meet rate | P(faded) | P(hint kept) |",
        "|---|---|---|---|",
    ]
    lines += [f"| {x['per_look']} | {x['met_rate']:g} | {x['faded']:.2%} | {x['kept']:.2%} |" for x in fade["table"]]
    lines += ["", "## What this means", "", *results["meaning"], ""]
    return "\n".join(lines)


def meaning(results: dict) -> list[str]:
    fk = max(results["false_keep"], key=lambda x: x["max_p_kept"])
    placebo = max((x for x in results["table"] if x["effect"] == 0), key=lambda x: x["kept"])
    power = [x for x in results["table"] if x["before"] == 0 and x["effect"] in (0.25, 0.5)]
    c = results["checks_false_keep"]
    strong = next(x for x in results["checks_table"] if x["r_guided"] == 0.5 and x["r_unguided"] == 0.0)
    weak = next(x for x in results["checks_table"] if x["r_guided"] == 0.25 and x["r_unguided"] == 0.0)
    fade = results["fade"]
    f4 = {x["met_rate"]: x["faded"] for x in fade["table"] if x["per_look"] == 4}
    worst = max(fade["false_fade"].values(), key=lambda x: x["max_p_faded"])
    return [
        f"- The fade of a rubric's hint, at 4 unguided rollouts a look: faded with probability {f4[1.0]:.2%} when the "
        f"unguided members always meet the checks, {f4[0.9]:.2%} at 0.9, {f4[0.75]:.2%} at 0.75; a hint they meet "
        f"less often than the floor fades at most {worst['max_p_faded']:.2%} of the time "
        f"(at {worst['at_met_rate']:g}). "
        "The rule fades a hint only once the policy meets what it states nearly always without it.",
        f"- A rubric edit with its hint, decided on its guided groups' rollouts: when the guided half meets the checks "
        f"half the time and the rest never, it is kept with probability {strong['kept']:.2%} (the share-of-groups "
        f"rule: the row 'before 0, effect +0.5' below it); a quarter of the time, {weak['kept']:.2%}. It keeps one "
        f"whose true split share is below the threshold at most {c['max_p_kept']:.2%} of the time, a placebo at most "
        f"{c['placebo_max_p_kept']:.2%}.",
        f"- Over every share before on the grid, the rule keeps a candidate whose effect is below the threshold with "
        f"probability at most {fk['max_p_kept']:.2%} (share before {fk['before']:g}, true share under it "
        f"{fk['at_under']:g}); a placebo (no effect) at most {placebo['kept']:.2%} "
        f"(share before {placebo['before']:g}). "
        "The estimate of the share before, from a few groups, is where most of it comes from: a share before "
        "under-estimated lowers the target.",
        *(
            f"- From a share of 0 before (the lax rubric's flat groups, the case the rubric edit with a hint is for), "
            f"an effect of {x['effect']:g} is kept with probability {x['kept']:.2%} within {x['guided_groups']:.1f} "
            "guided groups on average."
            for x in power
        ),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    trials = TrialConfig()  # the defaults: both rules below read them
    rule = ProbationRule.of(trials)
    befores = [0.0, 0.125, 0.25, 0.5, 0.75]
    results = {
        "command": shlex.join(["python", "benchmarks/probation_rule.py", *(sys.argv[1:] if argv is None else argv)]),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rule": {
            "threshold": rule.threshold,
            "confidence": rule.confidence,
            "look_groups": rule.look_groups,
            "max_looks": rule.max_looks,
            "spending": rule.spending,
            "before_groups": BEFORE_GROUPS,
            "split_threshold": rule.split_threshold,
        },
        "false_keep": [false_keep(rule, b) for b in befores],
        "table": table(rule, befores, [-0.25, -0.125, 0.0, 0.125, 0.25, 0.375, 0.5]),
        "checks_table": checks_table(rule),
        "checks_false_keep": checks_false_keep(rule),
    }
    results["fade"] = {
        "floor": trials.signal.threshold(HINT_MET_RATE),
        "confidence": trials.confidence,
        "max_looks": trials.max_looks,
        "spending": trials.alpha_spending,
        "table": fade_table(trials),
        "false_fade": false_fade(trials),
    }
    results["seconds"] = round(time.perf_counter() - t0, 1)
    results["meaning"] = meaning(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    (args.out / "results.md").write_text(report(results), encoding="utf-8")
    print(report(results))


if __name__ == "__main__":
    main()
