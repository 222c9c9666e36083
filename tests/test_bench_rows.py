"""``harnessrl bench report --rows``: a committed report's run rows merged with the runs of bench folders.

The runs are those of ``test_bench_gold_report`` (known gold scores per method, seed and step). A first bench
(fixed, dapo, oracle, harnessrl; seeds 0-2) is reported, then its run folders are dropped: only its
results.json is left, as for ``benchmarks/results/bench-gold``. Seeds 3 and 4 of the baselines are run into a
second folder, the harness arm for seeds 0-4 into a third; the report over the two folders and the rows pairs
every method over seeds 0-4.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from test_bench_gold_report import _train_file, make_gold_run
from typer.testing import CliRunner

from harnessrl.analysis.report import write_bench_report
from harnessrl.analysis.results import PER_GROUP, SCALARS
from harnessrl.cli import app
from harnessrl.errors import HarnessRLError

cli = CliRunner()
REPO = Path(__file__).resolve().parents[1]
CONFIG = "configs/bench-gold.yaml"
BASELINES = ("fixed", "dapo", "oracle")


def _bench(root: Path, train: Path, methods: tuple[str, ...], seeds: tuple[int, ...]) -> Path:
    for seed in seeds:
        for method in methods:
            make_gold_run(root, train, method, seed, trial=4 if method == "harnessrl" else 0)
    manifest = {"bench_config": CONFIG, "methods": {m: {"method": m} for m in methods}, "runs": {}}
    (root / "bench.json").write_text(json.dumps(manifest))
    return root


@pytest.fixture
def benches(tmp_path) -> dict[str, Path]:
    """``rows``: the committed results.json of seeds 0-2 (its folders gone); ``s34``: the baselines' seeds 3
    and 4; ``harness``: the harness arm, seeds 0-4."""
    train = _train_file(tmp_path)
    old = _bench(tmp_path / "old", train, (*BASELINES, "harnessrl"), (0, 1, 2))
    committed = tmp_path / "committed"
    write_bench_report(old, plots=False, out=committed)
    shutil.rmtree(old)
    return {
        "rows": committed / "results.json",
        "s34": _bench(tmp_path / "s34", train, BASELINES, (3, 4)),
        "harness": _bench(tmp_path / "harness", train, ("harnessrl",), (0, 1, 2, 3, 4)),
        "out": tmp_path / "report",
    }


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _report(b: dict[str, Path], *extra: str):
    args = ["bench", "report", "--dir", str(b["s34"]), "--dir", str(b["harness"]), "--rows", str(b["rows"])]
    return cli.invoke(app, [*args, "--out", str(b["out"]), *extra])


def test_rows_and_folders_pair_every_method_over_all_seeds(benches):
    result = _report(benches, "--rows-methods", "fixed,dapo,oracle")
    assert result.exit_code == 0, result.output
    res = json.loads((benches["out"] / "results.json").read_text())
    for method in (*BASELINES, "harnessrl"):
        assert res["methods"][method]["seeds"] == [0, 1, 2, 3, 4], method
    assert res["methods"]["fixed"]["test_end_per_family"]["lax"]["n"] == 5  # per-family tables: five seeds
    from_rows = {(f["method"], f["seed"]) for f in res["runs"] if f.get("rows_from")}
    assert from_rows == {(m, s) for m in BASELINES for s in (0, 1, 2)}

    comps = {c["baseline"]: c for c in res["comparisons"]}
    assert set(comps) == {"fixed", "dapo"} and comps["fixed"]["best_baseline"]
    end = comps["fixed"]["test_end"]  # per seed: (0.5 - 0.2) / 2 + 0.01 * seed / 2
    assert end["per_seed"] == pytest.approx({str(s): 0.15 + 0.005 * s for s in range(5)})
    half = 2.776 * end["std"] / math.sqrt(5)
    assert end["n"] == 5 and end["ci95"] == pytest.approx([0.16 - half, 0.16 + half])
    assert end["verdict"] == "higher on every seed (5)"
    assert end["bootstrap"]["seeds"] == [3, 4]  # the rows carry no per-task scores
    # equal rollouts: the rows' budget is recomputed against this report's runs of the seed (32 rollouts)
    eq = comps["fixed"]["test_at_equal_rollouts"]
    assert eq["n"] == 5 and eq["per_seed"] == pytest.approx({str(s): -0.05 + 0.005 * s for s in range(5)})
    # the oracle gap, paired by seed over all five
    lax = res["oracle_gap_paired"]["at"]["test_end"]["harnessrl"]["per_family"]["lax"]
    assert lax["per_seed"] == pytest.approx({str(s): 0.5 for s in range(5)})
    assert res["oracle_gap"]["at"]["test_end"]["per_family"]["lax"]["shares"]["harnessrl"] == pytest.approx(0.5)
    # the per-family curve: a row has step 0 and the end, not the step between
    curve = {p["step"]: p["n"] for p in res["family_curves"]["lax"]["fixed"]}
    assert curve == {0: 5, 2: 2, 4: 5}

    md = (benches["out"] / "results.md").read_text()
    assert (
        f"Bench folders `{benches['s34']}`, `{benches['harness']}`; run rows taken as they are from the committed "
        f"report `{benches['rows']}` (marked *row* in the runs table), config `{CONFIG}`" in md
    )
    assert "| harnessrl − fixed | test @ end | +0.160 |" in md and "(4 tasks, seeds 3, 4 only)" in md
    assert f"`{benches['rows'].parent.parent / 'old' / 'fixed' / 'seed0'}` (*row* of `{benches['rows']}`)" in md
    notes = res["notes"]
    assert any(
        n.startswith(f"Runs taken from the committed report `{benches['rows']}`") and "fixed seeds 0, 1, 2" in n
        for n in notes
    )
    assert (
        "Not in the rows of fixed seeds 0, 1, 2; dapo seeds 0, 1, 2: their per-task test scores, so the bootstrap "
        "over test tasks rests on the other seeds" in " ".join(notes)
    )
    assert (
        "Not in the rows of fixed seeds 0, 1, 2; oracle seeds 0, 1, 2: their per-family test scores between step 0 "
        "and the end" in " ".join(notes)
    )


def test_a_method_only_in_rows_is_drawn_in_the_per_family_gold_plot(benches, monkeypatch):
    """fixed GRPO only as committed rows beside a harness folder (how the gold bench pairs a new harness commit): the
    per-family gold plot draws it from its rows at step 0 and the end, dashed, instead of leaving it out."""
    from harnessrl.analysis import plots

    drawn: list[tuple[str, list[int]]] = []
    real = plots._row_line
    monkeypatch.setattr(
        plots,
        "_row_line",
        lambda ax, points, c, label: (drawn.append((label, [p.step for p in points])), real(ax, points, c, label)),
    )
    args = ["bench", "report", "--dir", str(benches["harness"]), "--rows", str(benches["rows"])]
    result = cli.invoke(app, [*args, "--rows-methods", "fixed", "--out", str(benches["out"])])
    assert result.exit_code == 0, result.output
    assert drawn and all(label.startswith("fixed (committed rows, n=3)") and steps == [0, 4] for label, steps in drawn)
    assert (
        "the per-family gold plot draws them at step 0 and the end, dashed"
        in (benches["out"] / "results.md").read_text()
    )


def test_a_method_and_seed_in_a_folder_and_in_the_rows_is_refused(benches):
    result = _report(benches)  # the rows' harnessrl seeds 0-2 are in the harness folder too
    assert result.exit_code != 0
    message = str(result.exception)
    assert "harnessrl/seed0 is in both" in message and str(benches["harness"]) in message
    assert str(benches["rows"]) in message and "--rows-methods" in message
    assert not benches["out"].exists()  # nothing written
    result = _report(benches, "--rows-methods", "fixed,odf")
    assert result.exit_code != 0 and "no row of odf" in str(result.exception)


def test_rows_of_another_bench_config_or_other_settings_are_refused(benches):
    rows, out = benches["rows"], benches["out"]
    folders, take = [benches["s34"], benches["harness"]], ["fixed", "dapo", "oracle"]

    _edit(rows, lambda d: d.update(bench_config="configs/bench-gold-clean.yaml"))
    with pytest.raises(HarnessRLError, match=r"bench-gold-clean.yaml.*one report reads one benchmark"):
        write_bench_report(folders, plots=False, out=out, rows=[rows], rows_methods=take)

    _edit(rows, lambda d: d.update(bench_config=CONFIG, method_settings={**d["method_settings"], "fixed": {"x": 1}}))
    with pytest.raises(
        HarnessRLError, match=r"method 'fixed' has other settings in .*results.json .*one name, one arm"
    ):
        write_bench_report(folders, plots=False, out=out, rows=[rows], rows_methods=take)

    # an older report records no settings: a method's trainer method must be all its folder settings say
    _edit(rows, lambda d: d.pop("method_settings"))
    _edit(benches["s34"] / "bench.json", lambda d: d["methods"]["dapo"].update({"dapo.max_resample": 2}))
    with pytest.raises(HarnessRLError, match=r"method 'dapo' has settings .* records no settings"):
        write_bench_report(folders, plots=False, out=out, rows=[rows], rows_methods=take)
    write_bench_report(folders, plots=False, out=out, rows=[rows], rows_methods=["fixed", "oracle"])  # dapo left out

    _edit(rows, lambda d: [r.update(max_steps=40) for r in d["runs"] if r["method"] == "fixed"])
    with pytest.raises(HarnessRLError, match=r"fixed/seed0 of .* ran 40 steps, the runs of fixed in the bench folders"):
        write_bench_report(folders, plots=False, out=out, rows=[rows], rows_methods=["fixed"])


def test_a_row_that_does_not_fit_the_figures_model_is_refused_naming_the_file_and_the_field(benches):
    rows, out = benches["rows"], benches["out"]
    seed0 = next(i for i, r in enumerate(json.loads(rows.read_text())["runs"]) if r["method"] == "fixed")
    _edit(rows, lambda d: d["runs"][seed0]["test_curve"][0].update(score="high"))
    with pytest.raises(HarnessRLError) as e:
        write_bench_report([], out=out, rows=[rows])
    msg = str(e.value)
    assert str(rows) in msg and f"run row {seed0} (fixed/seed0)" in msg
    assert "`test_curve.0.score`" in msg and "'high'" in msg and "--rows-methods" in msg
    _edit(rows, lambda d: d["runs"][seed0].pop("split"))  # a row without what every report records
    with pytest.raises(HarnessRLError, match=r"results.json \(row \d+\) has no split: not a bench report's"):
        write_bench_report([], out=out, rows=[rows])


def test_rows_alone_note_what_they_lack(benches):
    _edit(benches["rows"], lambda d: [r.pop("trial_costs") for r in d["runs"]])  # a report from before trial costs
    rep = write_bench_report([], out=benches["out"], rows=[benches["rows"]])
    notes = rep.results.notes
    assert rep.results.methods["harnessrl"].seeds == [0, 1, 2] and rep.plots == {}
    assert "Not in the rows of harnessrl seeds 0, 1, 2: their trial costs by remedy." in notes
    assert any(
        n.startswith("Not in the rows of harnessrl seeds 0, 1, 2: their events and trained groups") for n in notes
    )
    assert "No plots: they are drawn from the runs' own files, and no bench folder was given." in notes
    assert rep.results.family_repairs == {}  # from events: none without the run folders
    assert rep.markdown.read_text().startswith(
        f"# Benchmark results\n\nRun rows taken as they are from the committed report `{benches['rows']}`"
    )
    with pytest.raises(HarnessRLError, match="--out"):
        write_bench_report([], rows=[benches["rows"]])


def _close(a, b) -> bool:
    """Nested dicts and lists equal, numbers within 1e-9."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_close, a, b))
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return math.isclose(a, b, abs_tol=1e-9)
    return a == b


def test_the_committed_gold_reports_rows_reproduce_its_tables(tmp_path):
    committed = REPO / "benchmarks" / "results" / "bench-gold"
    before = json.loads((committed / "results.json").read_text())
    rep = write_bench_report([], plots=False, out=tmp_path, rows=[committed / "results.json"])
    after = rep.results.model_dump()
    assert list(after["methods"]) == list(before["methods"])
    newer = ("test_at_best_se", "test_end_se")  # figures the committed report predates: its rows have none
    for method, agg in before["methods"].items():
        mine = after["methods"][method]
        assert mine["seeds"] == agg["seeds"]
        for key in newer:
            assert mine[key]["n"] == 0 and all(seed[key] is None for seed in mine["per_seed"].values())
            for seed in mine["per_seed"].values():
                del seed[key]
        for key in (*SCALARS, *PER_GROUP, "per_seed", "train_per_family", "harness_decisions"):
            if key not in newer:
                assert _close(mine[key], agg[key]), (method, key)
    for old, new in zip(before["comparisons"], after["comparisons"], strict=True):
        assert (new["harness"], new["baseline"]) == (old["harness"], old["baseline"])
        assert new["test_at_best"]["per_seed"] == pytest.approx(old["test_at_best"]["per_seed"])
        assert new["test_at_best"]["ci95"] == pytest.approx(old["test_at_best"]["ci95"])
    # newer reports say whether their oracle is plain GRPO (this one's is: the same-trainer oracle came later)
    assert after["oracle_gap"].pop("plain") is True
    assert _close(after["oracle_gap"], before["oracle_gap"]) and _close(after["fault_check"], before["fault_check"])

    def table(md: str) -> str:
        return md[md.index("## Scores per method") : md.index("## Learning signal and cost")]

    assert table(rep.markdown.read_text()) == table((committed / "results.md").read_text())
