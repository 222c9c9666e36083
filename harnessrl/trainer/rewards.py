"""Reward aggregation: per-criterion verdicts to one scalar, exactly as DESIGN.md §4 defines it.

    reward = (Σ_{w>0} w·v − Σ_{w<0} |w|·v) / Σ_{w>0} w,   clipped to [0, 1]

A *missing* verdict (``None``: the judge could not produce one) is never read as 0. The sums run over
the criteria that have a verdict; when the positive weight left is below ``min_coverage`` of the
rubric's positive weight, the reward itself is ``None`` and the rollout drops out of its group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harnessrl.data.schema import Criterion

__all__ = ["aggregate_reward"]


def aggregate_reward(
    rubric: Sequence[Criterion],
    verdicts: Mapping[str, float | None],
    min_coverage: float = 0.5,
) -> float | None:
    """Combine verdicts (criterion id -> value in [0, 1], or None when missing) into a reward.

    Args:
        rubric: the criteria the verdicts answer (pitfalls have negative weights).
        verdicts: one value per criterion id; an absent id counts as missing.
        min_coverage: share of the rubric's positive weight that must have verdicts.

    Returns:
        The reward in [0, 1], or None when too few positive criteria have a verdict.
    """
    total_pos = sum(c.weight for c in rubric if c.weight > 0)
    if total_pos <= 0:
        raise ValueError("rubric has no positive weight: the reward is undefined")
    gained = lost = covered = 0.0
    for c in rubric:
        v = verdicts.get(c.id)
        if v is None or v != v:  # missing (None, or a NaN that slipped through) is never read as 0
            continue
        v = min(1.0, max(0.0, float(v)))
        if c.weight > 0:
            gained += c.weight * v
            covered += c.weight
        else:
            lost += -c.weight * v
    if covered <= 0 or covered / total_pos < min_coverage:
        return None
    return min(1.0, max(0.0, (gained - lost) / covered))
