"""A trial's statistics: each group under the baseline and the candidate, its bootstrap, and the measures on it.

Every metric here has the invariances of the trainer's advantages (:mod:`harnessrl.critic.signal`,
docs/design.md §4): the share of groups that give signal, whether a targeted criterion tells rollouts
apart, |Spearman rho| of reward with a feature, the reference answer's rank. A :class:`Side` is one side
(baseline or candidate) of a group, with what the measures need per rollout; a :class:`Group` pairs the
two sides and says how to resample them (paired strata: the same rollouts under both, resampled with the
same indices; unpaired strata: independent draws, resampled independently). The measures work on sides
whose arrays carry leading bootstrap dimensions, so a resample of every group is one array operation.

The bootstrap is seeded (``TrialConfig.seed``); a recipe's numbers with their resampled differences
become a :class:`~harnessrl.critic.acceptance.Measured` with its percentile interval
(:func:`~harnessrl.critic.acceptance.percentile_interval`), and the acceptance rule stays in
:mod:`harnessrl.critic.acceptance`. The rank correlation is the package's one
(:func:`~harnessrl.detection.ranks.spearman_rows`, as the detectors use it). The few helpers at the
end write numbers and texts into a trial's measurements.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harnessrl.critic.acceptance import Measured, percentile_interval
from harnessrl.critic.budget import Rejected
from harnessrl.critic.config import TrialConfig
from harnessrl.critic.signal import CRITERION_SIGNAL, TRL_STD_EPS, noise_floor
from harnessrl.data.schema import Criterion
from harnessrl.detection.features import SURFACE_FEATURES
from harnessrl.detection.ranks import spearman_rows
from harnessrl.judges.rubric_judge import GradeResult
from harnessrl.records.measurements import SideVerdicts, TrialMeasurements

__all__ = [
    "Group",
    "Side",
    "abs_spearman",
    "abs_spearman_rows",
    "clip_example",
    "correlation_fall",
    "mean_reward_std",
    "median",
    "nan_if_none",
    "none_if_nan",
    "reference_rank_rows",
    "resample_indices",
    "rounded",
    "rounded_all",
    "row_std",
    "share_verdict",
    "surface_feature",
    "verdict_row",
]

EXAMPLE_CHARS = 240
"""Completion text kept per example in the measurements."""


# ---------------------------------------------------------------------------------------------- groups
@dataclass
class Side:
    """One side (baseline or candidate) of a group: what the learning-signal statistics need per rollout.

    ``noise_var``: the rollout's reward noise variance under the rubric that graded it (the group's
    floor is the root mean of it, :func:`~harnessrl.critic.signal.noise_floor`); ``targets``: the
    verdicts of the criteria a criterion-signal trial targets, one column each (NaN: missing)."""

    rewards: np.ndarray
    noise_var: np.ndarray
    targets: np.ndarray
    eps: float = 0.0  # the trainer's flat-group eps: below it a group is flat whatever the noise model says

    @classmethod
    def graded(
        cls,
        rewards: np.ndarray,
        rows: Sequence[dict[str, float | None]],
        rubric: Sequence[Criterion],
        noise: float,
        targets: Sequence[str] = (),
        eps: float = 0.0,
    ) -> Side:
        var = np.array([noise_floor(rubric, [row], noise) ** 2 for row in rows], dtype=float)
        t = np.array([[nan_if_none(row.get(cid)) for cid in targets] for row in rows], dtype=float)
        return cls(np.asarray(rewards, dtype=float), var, t.reshape(len(rows), -1), eps)

    def take(self, idx: np.ndarray) -> Side:
        return Side(self.rewards[idx], self.noise_var[idx], self.targets[idx], self.eps)

    def gives_signal(self) -> np.ndarray:
        """Whether each row of rollouts gives signal: Bessel std of the rewards above the judge's noise
        floor and above the trainer's flat-group eps (rewards (..., n): one verdict per leading index)."""
        std = row_std(self.rewards)
        ok = ~np.isnan(self.rewards)
        floor = np.sqrt(np.where(ok, self.noise_var, 0.0).sum(axis=-1) / np.maximum(ok.sum(axis=-1), 1))
        return np.nan_to_num(std, nan=0.0) > np.maximum(floor, max(self.eps, TRL_STD_EPS))

    def criterion_signal(self, noise: float) -> np.ndarray:
        """Whether any targeted criterion tells each row of rollouts apart beyond its own verdict noise."""
        t = np.moveaxis(self.targets, -1, 0)  # (k, ..., n)
        if t.shape[0] == 0:
            return np.zeros(self.rewards.shape[:-1], dtype=bool)
        std = np.nan_to_num(row_std(t), nan=0.0)
        ok = ~np.isnan(t)
        tv = np.where(ok, t, 0.0)
        v_noise = (noise * 4.0 * tv * (1.0 - tv)) ** 2
        floor = np.sqrt(np.where(ok, v_noise, 0.0).sum(axis=-1) / np.maximum(ok.sum(axis=-1), 1))
        return (std > np.maximum(floor, max(self.eps, TRL_STD_EPS))).any(axis=0)

    def floor(self) -> float:
        """The group's noise floor: the root mean of its rewarded rollouts' noise variances."""
        ok = ~np.isnan(self.rewards)
        return float(np.sqrt(self.noise_var[ok].mean())) if ok.any() else 0.0


@dataclass
class Group:
    """One group under the baseline and the candidate, and how to resample it.

    ``strata``: (baseline indices, candidate indices, paired). Paired strata are the same rollouts on
    both sides (equal length; resampled with the same indices); unpaired ones are independent draws,
    resampled independently."""

    base: Side
    cand: Side
    strata: list[tuple[np.ndarray, np.ndarray, bool]]
    unchanged: bool = False  # paired, and the candidate leaves its advantages as they were

    @classmethod
    def paired(cls, base: Side, cand: Side) -> Group:
        idx = np.arange(base.rewards.size)
        return cls(base, cand, [(idx, idx, True)])

    def resample(self, rng: np.random.Generator, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
        """Bootstrap indices into each side, shape (n_boot, n_side)."""
        bs, cs = [], []
        for b_idx, c_idx, paired in self.strata:
            if paired:
                if b_idx.size:
                    k = resample_indices(rng, b_idx.size, n_boot)
                    bs.append(b_idx[k])
                    cs.append(c_idx[k])
                continue
            if b_idx.size:
                bs.append(b_idx[resample_indices(rng, b_idx.size, n_boot)])
            if c_idx.size:
                cs.append(c_idx[resample_indices(rng, c_idx.size, n_boot)])
        empty = np.zeros((n_boot, 0), dtype=int)
        return (np.concatenate(bs, axis=1) if bs else empty), (np.concatenate(cs, axis=1) if cs else empty)


def resample_indices(rng: np.random.Generator, n: int, n_boot: int) -> np.ndarray:
    """``n_boot`` bootstrap resamples of ``n`` items: indices, shape (n_boot, n)."""
    return rng.integers(0, n, size=(n_boot, n))


def row_std(x: np.ndarray) -> np.ndarray:
    """Bessel std of each row along the last axis, ignoring NaN (NaN with fewer than 2 values)."""
    ok = ~np.isnan(x)
    n = ok.sum(axis=-1)
    filled = np.where(ok, x, 0.0)
    mean = filled.sum(axis=-1) / np.maximum(n, 1)
    dev = np.where(ok, x - mean[..., None], 0.0)
    var = (dev * dev).sum(axis=-1) / np.maximum(n - 1, 1)
    return np.where(n >= 2, np.sqrt(var), np.nan)


def mean_reward_std(sides: Sequence[Side]) -> float:
    """The mean of the sides' (population) reward stds: the raw spread a rescaling can inflate."""
    return float(np.mean([np.nanstd(s.rewards) for s in sides]))


# ---------------------------------------------------------------------------------------------- measures
def share_verdict(
    groups: list[Group], metric: str, config: TrialConfig, rng: np.random.Generator, m: TrialMeasurements
) -> Measured:
    """Share of groups that give signal (or whose targeted criteria discriminate), baseline vs
    candidate, with a bootstrap over each group's rollouts; the per-group verdicts go into ``m``
    (``<metric>_per_group``: ``signal_share_per_group``, ``criterion_signal_per_group``, or a plug-in metric's, kept
    as an extra field)."""
    if not groups:
        raise Rejected("no group has 2 or more rewards under both the baseline and the candidate")
    noise = config.signal.verdict_noise

    def stat(side: Side) -> np.ndarray:
        return side.criterion_signal(noise) if metric == CRITERION_SIGNAL else side.gives_signal()

    # a group whose advantages the candidate leaves as they were keeps its status: a rescaling that lifts
    # a flat group's raw spread over a threshold is no new signal
    point_b = [bool(stat(g.base)) for g in groups]
    point_c = [pb if g.unchanged else bool(stat(g.cand)) for g, pb in zip(groups, point_b, strict=True)]
    n_boot = config.bootstrap
    boot_b = np.zeros(n_boot)
    boot_c = np.zeros(n_boot)
    for g in groups:
        ib, ic = g.resample(rng, n_boot)
        sb = stat(g.base.take(ib))
        boot_b += sb
        boot_c += sb if g.unchanged else stat(g.cand.take(ic))
    setattr(m, f"{metric}_per_group", SideVerdicts(baseline=point_b, candidate=point_c))
    m.group_std_baseline = rounded_all([float(np.nanstd(g.base.rewards)) for g in groups])
    m.group_std_candidate = rounded_all([float(np.nanstd(g.cand.rewards)) for g in groups])
    diffs = (boot_c - boot_b) / len(groups)
    got = Measured(baseline=float(np.mean(point_b)), candidate=float(np.mean(point_c)))
    return percentile_interval(got, diffs, config.confidence)


def abs_spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|Spearman rho| of each row pair of two (B, n) arrays (average ranks for ties; 0 where a row is constant)."""
    return np.abs(np.nan_to_num(spearman_rows(x, y), nan=0.0))


def abs_spearman(x: np.ndarray, y: np.ndarray) -> float:
    """|Spearman rho| of one pair of arrays (0 where either is constant)."""
    return float(abs_spearman_rows(x, y))


def correlation_fall(
    base: tuple[np.ndarray, np.ndarray],
    cand: tuple[np.ndarray, np.ndarray],
    config: TrialConfig,
    rng: np.random.Generator,
    paired: bool,
) -> Measured:
    """|Spearman rho| of reward with a feature, baseline vs candidate (each a (rewards, feature) pair), and the
    bootstrap interval of its fall (``improvement`` = baseline - candidate). ``paired``: the same rollouts on
    both sides, resampled with the same indices; otherwise each side is resampled on its own."""
    (rb, fb), (rc, fc) = base, cand
    ib = resample_indices(rng, rb.size, config.bootstrap)
    ic = ib if paired else resample_indices(rng, rc.size, config.bootstrap)
    diffs = abs_spearman_rows(rb[ib], fb[ib]) - abs_spearman_rows(rc[ic], fc[ic])
    got = Measured(baseline=abs_spearman(rb, fb), candidate=abs_spearman(rc, fc))
    got.improvement = got.baseline - got.candidate
    return percentile_interval(got, diffs, config.confidence)


def reference_rank_rows(reference: float, policy: np.ndarray) -> np.ndarray:
    """:func:`~harnessrl.critic.signal.reference_rank` of each row of a (B, n) array."""
    return ((reference > policy).sum(axis=1) + 0.5 * (reference == policy).sum(axis=1)) / policy.shape[1]


def surface_feature(name: str) -> Callable[[str], float]:
    """The text feature a ``rho_reward_<name>`` metric correlates with (``length``: words); rejects the trial
    for a name the detectors do not know."""
    fn = SURFACE_FEATURES["words"] if name == "length" else SURFACE_FEATURES.get(name)
    if fn is None:
        raise Rejected(f"unknown surface feature {name!r}; known: {sorted(SURFACE_FEATURES)}")
    return fn


# ---------------------------------------------------------------------------------------------- measurements
def rounded(x: float | None, nd: int = 4) -> float | None:
    """A measured number as the measurements keep it: ``nd`` decimals (None stays None)."""
    return None if x is None else round(float(x), nd)


def rounded_all(xs: Sequence[float | None]) -> list[float | None]:
    return [rounded(x) for x in xs]


def nan_if_none(x: float | None) -> float:
    return np.nan if x is None else float(x)


def none_if_nan(a: np.ndarray) -> list[float | None]:
    return [None if np.isnan(v) else float(v) for v in a]


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def verdict_row(result: GradeResult) -> dict[str, float | None]:
    """``{criterion id: verdict}`` of one graded response."""
    return {v.criterion_id: v.value for v in result.verdicts}


def clip_example(text: str) -> str:
    """A completion as an example in the measurements: at most :data:`EXAMPLE_CHARS` characters."""
    return text if len(text) <= EXAMPLE_CHARS else text[: EXAMPLE_CHARS - 1] + "…"
