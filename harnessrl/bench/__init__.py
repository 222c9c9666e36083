"""Benchmarks of methods x seeds through the same trainer: run them (resumably) and report the evidence."""

from harnessrl.bench.config import BUILTIN_METHODS, BenchConfig, load_bench_config
from harnessrl.bench.report import write_bench_report
from harnessrl.bench.runner import plan_jobs, run_bench

__all__ = ["BUILTIN_METHODS", "BenchConfig", "load_bench_config", "plan_jobs", "run_bench", "write_bench_report"]
