"""Rank statistics: average ranks, Spearman's rho (one pair or each row of a bootstrap) and its one-sided
p-value. The package's one rank correlation: the detectors and the critic both import it from here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["p_one_sided", "rank_rows", "spearman", "spearman_rows"]


def rank_rows(a: np.ndarray) -> np.ndarray:
    """1-based ranks along the last axis, ties sharing their average rank (``scipy.stats.rankdata`` of each row)."""
    a = np.asarray(a, dtype=float)
    n = a.shape[-1]
    order = np.argsort(a, axis=-1, kind="mergesort")
    s = np.take_along_axis(a, order, axis=-1)
    pos = np.broadcast_to(np.arange(n), a.shape)
    first = np.ones(a.shape, dtype=bool)  # the first of a run of equal values, in sorted order
    np.not_equal(s[..., 1:], s[..., :-1], out=first[..., 1:])
    last = np.ones(a.shape, dtype=bool)
    last[..., :-1] = first[..., 1:]
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=-1)
    end = np.flip(np.minimum.accumulate(np.flip(np.where(last, pos, n - 1), axis=-1), axis=-1), axis=-1)
    ranks = np.empty(a.shape, dtype=float)
    np.put_along_axis(ranks, order, (start + end) / 2.0 + 1.0, axis=-1)
    return ranks


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman rho of each row pair of two ``(..., n)`` arrays (average ranks for ties); NaN where a row is constant.

    The package's one rank correlation: the detectors' (one pair, :func:`spearman`) and the critic's (a
    bootstrap's resamples, one per row). rho is the centred ranks' cross sum over the root of the product of
    their sums of squares: exact sums of half-integers, so equal correlations come out equal."""
    rx, ry = rank_rows(x), rank_rows(y)
    rx -= rx.mean(axis=-1, keepdims=True)
    ry -= ry.mean(axis=-1, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=-1) * (ry * ry).sum(axis=-1))
    num = (rx * ry).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(den > 1e-12, num / np.where(den > 1e-12, den, 1.0), np.nan)
    return np.clip(rho, -1.0, 1.0)


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Spearman rank correlation (average ranks for ties); None when either side is constant or n < 2."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.size < 2 or xa.size != ya.size:
        return None
    rho = float(spearman_rows(xa, ya))
    return None if math.isnan(rho) else rho


def p_one_sided(rho: float, n: int, controls: int = 0) -> float | None:
    """One-sided p-value of a (partial) Spearman rho > 0 by Fisher's z (variance 1.06 / (n - 3 - controls))."""
    dof = n - 3 - controls
    if dof <= 0:
        return None
    z = math.atanh(min(max(rho, -0.999999), 0.999999)) * math.sqrt(dof / 1.06)
    return 0.5 * math.erfc(z / math.sqrt(2.0))
