"""How the split-share rule's looks are spent: power and false accepts, computed exactly (no model, no sampling).

The rule for the checks a candidate adds (:mod:`harnessrl.critic.power`, docs/design.md §4) looks again each time its
tasks have a new group graded, at most ``max_looks`` times, and splits the error over the looks. Today the split is
Bonferroni's, ``(1 - confidence) / max_looks`` at every look, with ``max_looks`` 3. On the gold bench at a92d7d6 the
`brief` family's 20-word check, broken by the policy at a rate near 0.75 (a true split share of 0.68, far above the
threshold 0.2), ended ``not_reliable`` after its three looks on two seeds of five (9 of 12 and 3 of 12 pooled
rollouts broken), and a finding refused so is closed. This script computes, for one group of ``G`` = 4 rollouts a
look, the chance that the rule has accepted by each look, for three ways of spending the error:

- ``bonferroni-3``: the rule as it is (each look at 0.1 / 3);
- ``bonferroni-8``: more looks, each at 0.1 / 8;
- ``halving-8``: look k at 0.1 / 2**k (0.05, 0.025, ...: the sum stays under 0.1, so the union bound holds),

and the false-accept rate at a true split share just below the threshold (break rate 0.95: s = 0.185).

    .venv/bin/python benchmarks/sequential_looks.py
"""

from __future__ import annotations

from collections.abc import Callable

from scipy.stats import binom

from harnessrl.critic.power import split_share, split_share_interval

ERROR = 0.1  # 1 - confidence, the rule's default
THRESHOLD = 0.2  # signal.min_effect["check_split_share"]
GROUP = 4

SCHEMES: dict[str, tuple[int, Callable[[int], float]]] = {
    "bonferroni-3": (3, lambda look: ERROR / 3),
    "bonferroni-8": (8, lambda look: ERROR / 8),
    "halving-8": (8, lambda look: ERROR / 2**look),
}


def accepted_by_look(rate: float, looks: int, alpha_at: Callable[[int], float], per_look: int = GROUP) -> list[float]:
    """P(accepted at or before look k), k = 1..looks, when each look adds ``per_look`` rollouts broken at ``rate``."""
    alive, accepted, out = {0: 1.0}, 0.0, []
    for look in range(1, looks + 1):
        grown: dict[int, float] = {}
        for k, w in alive.items():
            for j in range(per_look + 1):
                grown[k + j] = grown.get(k + j, 0.0) + w * float(binom.pmf(j, per_look, rate))
        alive = {}
        for k, w in grown.items():
            low, high = split_share_interval(k, look * per_look, GROUP, alpha_at(look))
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
    for name, (looks, alpha_at) in SCHEMES.items():
        cells = []
        for r in rates:
            by = accepted_by_look(r, looks, alpha_at)
            cells.append(f"look 1 {by[0]:.2f}, 3 {by[min(2, looks - 1)]:.2f}, {looks} {by[-1]:.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
