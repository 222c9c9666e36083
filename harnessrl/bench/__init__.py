"""Benchmarks of methods x seeds through the same trainer: run them, resumably (their analysis: harnessrl.analysis)."""

from harnessrl.bench.config import BenchConfig, builtin_methods, load_bench_config
from harnessrl.bench.runner import plan_jobs, run_bench

__all__ = ["BenchConfig", "builtin_methods", "load_bench_config", "plan_jobs", "run_bench"]
