"""The report's number and table formatting: a figure, a seed-aggregated figure (mean ± std, n), an
interval, a pair, a markdown table, and the :class:`Column` a per-method table is declared with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harnessrl.analysis.aggregates import MethodAggregate, Stat


def _num(v: float | None, digits: int = 3, pct: bool = False, signed: bool = False) -> str:
    if v is None:
        return "n/a"
    if pct:
        return f"{v:+.1%}" if signed else f"{v:.1%}"
    if digits == 0:
        return f"{v:+,.0f}" if signed else f"{v:,.0f}"
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def _stat(
    st: Stat | None,
    seeds: int | None = None,
    digits: int = 3,
    pct: bool = False,
    scale: float = 1.0,
    signed: bool = False,
) -> str:
    """``mean ± std`` (n shown when fewer seeds than the method has have the figure)."""
    if st is None or st.mean is None:
        return "n/a"
    text = _num(st.mean * scale, digits, pct, signed)
    if st.std is not None:
        text += f" ± {_num(st.std * scale, digits, pct)}"
    if seeds is None or st.n != seeds:
        text += f" (n={st.n})"
    return text


@dataclass(frozen=True)
class Column:
    """One column of a per-method table: its header, the aggregated figure, and how it is shown."""

    header: str
    figure: str
    digits: int = 3
    pct: bool = False
    scale: float = 1.0


def _stat_cells(a: MethodAggregate, columns: Sequence[Column]) -> list[str]:
    """A method's aggregated figures (``a``) as the cells of ``columns``."""
    n = len(a.seeds)
    return [_stat(a.figure(c.figure), n, digits=c.digits, pct=c.pct, scale=c.scale) for c in columns]


def _interval(lo_hi: list[float] | None, digits: int = 3) -> str:
    return "n/a" if not lo_hi else f"[{_num(lo_hi[0], digits, signed=True)}, {_num(lo_hi[1], digits, signed=True)}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|",
    ]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _pair(a: float | None, b: float | None, pct: bool = False) -> str:
    return f"{_num(a, 2, pct)} / {_num(b, 2, pct)}"
