"""How many arms have been scored on a test split: the count a bench claim is read against (docs/design.md §8, "Rules
for every bench claim").

A test split read by many arms against the same baseline rows gives a maximum over arms, not an estimate. So every
bench report counts the arms ever scored on its test split: the methods of each committed report
(``benchmarks/results/<name>/results.json``) whose runs were graded on the same test tasks. The test tasks of a report
are the families its runs were scored on (a suite's test split is the set of its families' test tasks; a clean variant
reads the same split), so reports are matched by that set.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from harnessrl.analysis.figures import RunFigures
from harnessrl.errors import HarnessRLError
from harnessrl.records.bench_files import read_report_file

__all__ = ["arms_scored", "split_families"]

logger = logging.getLogger(__name__)


def split_families(runs: Iterable[RunFigures]) -> frozenset[str]:
    """The families a report's runs were scored on at test (the fingerprint of their test split)."""
    return frozenset(f for r in runs for f in (r.test_at_best_per_family or {}))


def arms_scored(reports: Path, families: frozenset[str], own: Sequence[str] = (), own_name: str | None = None):
    """Every arm scored on the test split of ``families``: each method name, with the committed reports (folders of
    ``reports``) that scored it, ``own`` (this report's methods, under ``own_name``) included. A report that cannot be
    read is left out with a warning (it is evidence, not a reason to fail the report being written)."""
    arms: dict[str, list[str]] = {m: [own_name] for m in own} if own_name else {}
    if not families:
        return arms
    for path in sorted(reports.glob("*/results.json")):
        if own_name is not None and path.parent.name == own_name:
            continue
        try:
            data = read_report_file(path, runs_required=False)
            runs = [RunFigures.from_row(r, str(path), i) for i, r in enumerate(data.runs or [])]
        except HarnessRLError as e:
            logger.warning("%s cannot be read (%s): its arms are not counted", path, e)
            continue
        if split_families(runs) != families:
            continue
        for method in data.methods:
            arms.setdefault(method, []).append(path.parent.name)
    return arms
