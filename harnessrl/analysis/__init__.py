"""A bench's analysis: per-run figures, tables and plots, read from each run through the run record."""

from harnessrl.analysis.report import BenchReport, print_results, write_bench_report

__all__ = ["BenchReport", "print_results", "write_bench_report"]
