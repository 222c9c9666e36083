"""A bench's own files read in one place (records/bench_files.py), and a report's results.json read back whole."""

from __future__ import annotations

import json

import pytest

from harnessrl.analysis.results_file import BenchResults
from harnessrl.errors import HarnessRLError
from harnessrl.records.bench_files import BenchManifest, ManifestAttempt, read_bench_manifest, read_report_file


def test_a_bench_manifest_reads_its_runs_and_settings(tmp_path):
    path = tmp_path / "bench.json"
    assert read_bench_manifest(path) is None  # no bench.json: the folder's runs are read without it
    row = {"method": "fixed", "seed": 0, "run_dir": "runs/b/fixed/seed0", "status": "failed", "attempts": [{}]}
    path.write_text(
        json.dumps({"bench_config": "b.yaml", "methods": {"fixed": {"method": "fixed"}}, "runs": {"k": row}})
    )
    manifest = read_bench_manifest(path)
    assert manifest.bench_config == "b.yaml" and manifest.methods == {"fixed": {"method": "fixed"}}
    assert manifest.runs["k"].status == "failed" and manifest.runs["k"].attempts == [ManifestAttempt()]
    assert manifest.runs["k"].model_dump(mode="json") == row  # written back as it was read
    assert BenchManifest().runs == {} and BenchManifest().bench_configs == []


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "cannot be read as JSON"),
        ('{"runs": {"k": {"seed": "zero"}}}', r"not a bench manifest \(`runs.k.seed`"),
    ],
)
def test_a_bad_bench_manifest_names_the_file_and_the_field(tmp_path, text, said):
    path = tmp_path / "bench.json"
    path.write_text(text)
    with pytest.raises(HarnessRLError, match=said) as e:
        read_bench_manifest(path)
    assert str(path) in str(e.value)


def test_a_report_file_gives_its_rows_or_says_why_not(tmp_path):
    path = tmp_path / "results.json"
    with pytest.raises(HarnessRLError, match=r"not a readable results\.json"):
        read_report_file(path)
    path.write_text(json.dumps({"table": {}}))  # another command's results.json
    with pytest.raises(HarnessRLError, match="no `runs` list"):
        read_report_file(path)
    assert read_report_file(path, runs_required=False).runs is None
    path.write_text(json.dumps({"runs": [1], "methods": {"fixed": {}}}))
    with pytest.raises(HarnessRLError, match=r"results.json: not a bench report's results.json \(`runs.0`"):
        read_report_file(path)
    path.write_text(json.dumps({"runs": [{"method": "fixed"}], "bench_config": "b.yaml", "methods": {"fixed": {}}}))
    report = read_report_file(path)
    assert report.runs == [{"method": "fixed"}] and report.method_settings is None and list(report.methods) == ["fixed"]


def test_an_old_results_json_reads_with_its_later_sections_empty():
    """A report from before several folders, ablations or the paired gap: those read empty, the one folder listed."""
    old = {"bench_dir": "runs/b", "generated": "then", "methods": {"fixed": {"seeds": [0]}}, "runs": []}
    results = BenchResults.read(old, "old/results.json")
    assert results.bench_dirs == ["runs/b"] and results.ablations == [] and results.oracle_gap_paired is None
    assert results.best_baseline_by == "test_at_best"  # reports before validation chose on the test score
    assert results.methods["fixed"].test_at_best.n == 0 and results.methods["fixed"].test_at_best.mean is None
    with pytest.raises(HarnessRLError, match=r"old/results.json: not a bench report's results.json \(`methods.fixed"):
        BenchResults.read({**old, "methods": {"fixed": {"seeds": "zero"}}}, "old/results.json")
