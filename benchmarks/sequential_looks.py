"""How the split-share rule's looks are spent: power and false accepts, computed exactly (no model, no sampling).

The rule for the checks a candidate adds (:mod:`harnessrl.critic.power`, docs/design.md §4) looks again each time its
tasks have a new group graded, at most ``max_looks`` times, and spends the error ``1 - confidence`` over the looks
(:func:`~harnessrl.critic.power.look_alpha`). Until 2026-12-03 the split was Bonferroni's, ``(1 - confidence) / 3``
at each of 3 looks; on the gold bench at a92d7d6 the `brief` family's 20-word check, broken by the policy at a rate
near 0.75 (a true split share of 0.68, far above the threshold 0.2), ended ``not_reliable`` after its three looks
on two seeds of five (9 of 12 and 3 of 12 pooled rollouts broken), and a finding refused so is closed. This script
computes, for one group of ``G`` = 4 rollouts a look, the chance that the rule has accepted by each look, for three
ways of spending the error:

- ``equal-3``: each of 3 looks at 0.1 / 3 (the rule before);
- ``equal-8``: more looks, each at 0.1 / 8;
- ``halving-8``: the default now: look k at 0.1 / 2**k (0.05, 0.025, ...), the eighth what is left (0.1 / 128),

and the false-accept rate at a true split share just below the threshold (break rate 0.95: s = 0.185).

    .venv/bin/python benchmarks/sequential_looks.py
"""

from __future__ import annotations

from scipy.stats import binom

from harnessrl.critic.power import Spending, look_alpha, split_share, split_share_interval

CONFIDENCE = 0.9  # the rule's default
THRESHOLD = 0.2  # signal.min_effect["check_split_share"]
GROUP = 4

SCHEMES: dict[str, tuple[int, Spending]] = {
    "equal-3": (3, "equal"),
    "equal-8": (8, "equal"),
    "halving-8": (8, "halving"),
}


def accepted_by_look(rate: float, looks: int, spending: Spending, per_look: int = GROUP) -> list[float]:
    """P(accepted at or before look k), k = 1..looks, when each look adds ``per_look`` rollouts broken at ``rate``."""
    alive, accepted, out = {0: 1.0}, 0.0, []
    for look in range(1, looks + 1):
        grown: dict[int, float] = {}
        for k, w in alive.items():
            for j in range(per_look + 1):
                grown[k + j] = grown.get(k + j, 0.0) + w * float(binom.pmf(j, per_look, rate))
        alive = {}
        for k, w in grown.items():
            low, high = split_share_interval(k, look * per_look, GROUP, look_alpha(CONFIDENCE, look, looks, spending))
            if low >= THRESHOLD:
                accepted += w
            elif high >= THRESHOLD:
                alive[k] = w  # pending: looked at again
        out.append(accepted)
    return out


def main() -> None:
    print("P(accepted by look k), one group of 4 rollouts a look; columns: break rate (true split share)")
    rates = (0.5, 0.75, 0.85, 0.95)
    print("| scheme | " + " | ".join(f"{r:g} (s={split_share(r, GROUP):.2f})" for r in rates) + " |")
    print("|---|" + "---:|" * len(rates))
    for name, (looks, spending) in SCHEMES.items():
        cells = []
        for r in rates:
            by = accepted_by_look(r, looks, spending)
            cells.append(f"look 1 {by[0]:.2f}, 3 {by[min(2, looks - 1)]:.2f}, {looks} {by[-1]:.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
