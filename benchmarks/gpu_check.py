"""A prepared GPU check (issue 13, items 4 and 5): the real trainer on a bare GPU machine, against raw baselines.

A bare GPU machine has torch and transformers, no model weights, no hub and no package index, and takes
at most 64 MiB of files along. So this check never loads weights: it builds a *randomly initialised*
model of the embedded policy's architecture (SmolLM2-135M) from a ``config.json`` and the tokenizer's
files, which ``prepare`` copies out of the project's cache on a machine that has it (3.4 MiB)::

    .venv/bin/python benchmarks/gpu_check.py prepare --assets runs/gpu_check_assets [--wheels]
    # copy the repository's harnessrl/ and benchmarks/, runs/gpu_check_assets (and its wheels/) along; there:
    pip install --no-index --no-deps runs/gpu_check_assets/wheels/*.whl      # what torch + transformers lack
    python benchmarks/gpu_check.py run --assets runs/gpu_check_assets --device cuda --steps 3 --sizes demo,gpu \
        --generation-paths

``run`` saves the random model once (fp32, ≈540 MB, in a temporary directory) and trains each batch
shape for ``--steps`` steps through the real :func:`harnessrl.trainer.run.train`: the bundled tasks, the
``local-lm`` judge on the same random model (on the run's device unless ``--judge-device`` says
otherwise), memory off (its embedding model cannot be brought along), the rule-based evolver on over plain
GRPO (method ``harnessrl-grpo``: every step trains and times one batch of the shape), no evaluation. Shapes:
``demo`` (2 tasks x 4 completions x 48 tokens), ``gpu`` (16 x 8 x 256), or ``TxGxN`` (e.g. ``4x4x32``, a small
stand-in for ``gpu`` on a CPU).

A ``trainer_hook`` records, without changing what the trainer computes, each step's wall time
(``on_step_begin`` to ``on_step_end``), the trainer's ``model.generate`` calls (token ids, generation
config), the judge's forward batches while it grades the rollouts, and the batch the loss is computed
on. On CUDA it synchronises the device at the end of ``training_step``, at the optimizer step and at
the step's end, so that queued kernels of the update are charged to the update, not to the next step's
generation. The step's split comes from the run's ``metrics.jsonl`` (``time/generation``,
``time/judging``, ``time/scoring_other``, ``time/recording``, ``time/evolver``) and these clocks
(forward + backward, optimizer step).

After training, in the same process and on the same model objects, it measures the raw baselines of
the counted steps' batches (step 1 carries one-time costs: with more than one step the figures use
steps 2..N, and step 1's batch warms each baseline up, untimed):

- **raw generate**: ``model.generate`` on the same input ids with the same generation config;
- **raw judge forward**: the judge model's forward passes (``logits_to_keep=1``) on the same padded
  grading batches, nothing else (no prompt rendering, tokenization, caching, aggregation);
- **raw update**: TRL's ``compute_loss`` on the same batch, backward, gradient clipping and the run's own
  optimizer step, nothing else.

Then it states the goal of issue 13 item 5 per shape, with PASS/FAIL (it is meant for the ``gpu``
shape on a GPU; other lines are for information):

1. generation: the trainer's throughput (rows x decode steps per second) >= 0.9x raw ``generate``;
2. judging: ``time/judging`` <= 2x the raw judge forward;
3. step: a step's wall time (steps without an evolution point) <= 2x raw (generate + judge forward + update).

``--generation-paths`` then times one batch's ``generate`` (the first counted step's, exactly as many new
tokens as the shape's budget) down each of :data:`PATHS`: fp32; bf16 autocast around the fp32 model, a
region per forward pass (accelerate's mixed precision, what TRL's generation does) or one region around
the call (``generation.autocast: generate``, the default: each weight cast once); bf16 weights; a static
cache; and on CUDA a static cache with transformers' compiled decode step. For each: the first call
(warm-up, compilation included), a timed call, and from torch.profiler the kernel launches (aten ops on
a CPU) and device-busy time of one decode step. Wall time far above busy time says decoding is bound by
launching kernels, not by running them, so the path that launches fewer kernels a step wins whatever its
dtype. ``--set generation.autocast=forward`` (any ``dotted.key=value`` of the training config) trains
every shape with a setting changed, to compare inside the trainer.

``--json`` writes every figure. The wheels beyond torch and transformers that the trainer path imports
are :data:`WHEELS`; ``run`` checks them first and names what is missing; ``prepare --wheels`` downloads
them (``pip download --no-deps``, this interpreter's versions) next to the assets; ``run --list-dists``
prints the distributions the run really imported that torch and transformers do not bring, and
``run --as-bare`` hides every other installed distribution (as a bare machine lacks them), to keep
:data:`WHEELS` true. All of them come to ≈82 MiB for CPython 3.11, 64 MiB of it pyarrow and pandas
(``datasets`` imports both): ``prepare --exclude pyarrow,pandas`` fits in 64 MiB where the machine has those.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.metadata as md
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

DEFAULT_ASSETS = Path("runs/gpu_check_assets")
ASSET_MANIFEST = "gpu_check_assets.json"
MAX_CARRY_BYTES = 64 * 2**20
"""What a bare GPU machine takes along: the assets, the wheels and the project's source together."""

WHEELS: dict[str, str] = {
    # what harnessrl's training path imports itself
    "trl": "trl",
    "accelerate": "accelerate",
    "datasets": "datasets",
    "langgraph": "langgraph",
    "langchain-core": "langchain_core",
    "mcp": "mcp",
    "langchain-mcp-adapters": "langchain_mcp_adapters",
    "httpx": "httpx",
    # transformers 5 brings these through typer; a machine with an older transformers lacks them
    "pydantic": "pydantic",
    "pydantic-core": "pydantic_core",
    "annotated-types": "annotated_types",
    "typing-inspection": "typing_inspection",
    "rich": "rich",
    "markdown-it-py": "markdown_it",
    "mdurl": "mdurl",
    "pygments": "pygments",
    # their requirements that the run imports (pyjwt and tzdata are required but never imported here)
    "attrs": "attr",
    "certifi": "certifi",
    "charset-normalizer": "charset_normalizer",
    "dill": "dill",
    "distro": "distro",
    "httpcore": "httpcore",
    "httpx-sse": "httpx_sse",
    "jsonpatch": "jsonpatch",
    "jsonpointer": "jsonpointer",
    "jsonschema": "jsonschema",
    "jsonschema-specifications": "jsonschema_specifications",
    "langchain-protocol": "langchain_protocol",
    "langgraph-checkpoint": "langgraph.checkpoint",
    "langgraph-prebuilt": "langgraph.prebuilt",
    "langgraph-sdk": "langgraph_sdk",
    "langsmith": "langsmith",
    "multiprocess": "multiprocess",
    "orjson": "orjson",
    "ormsgpack": "ormsgpack",
    "pandas": "pandas",
    "psutil": "psutil",
    "pyarrow": "pyarrow",
    "pydantic-settings": "pydantic_settings",
    "python-dateutil": "dateutil",
    "python-dotenv": "dotenv",
    "python-multipart": "python_multipart",
    "referencing": "referencing",
    "requests": "requests",
    "requests-toolbelt": "requests_toolbelt",
    "rpds-py": "rpds",
    "sniffio": "sniffio",
    "sse-starlette": "sse_starlette",
    "starlette": "starlette",
    "tenacity": "tenacity",
    "urllib3": "urllib3",
    "uuid-utils": "uuid_utils",
    "uvicorn": "uvicorn",
    "websockets": "websockets",
    "xxhash": "xxhash",
    "zstandard": "zstandard",
}
"""Distributions (name -> a module it provides) the trainer path imports that torch and transformers do not
bring; from ``run --list-dists`` and checked by ``run --as-bare`` (see the module docstring)."""


@dataclass(frozen=True)
class Shape:
    """One batch shape: ``tasks`` groups of ``g`` completions of at most ``tokens`` tokens a step."""

    name: str
    tasks: int
    g: int
    tokens: int

    @property
    def rows(self) -> int:
        return self.tasks * self.g


NAMED_SHAPES = {"demo": Shape("demo", 2, 4, 48), "gpu": Shape("gpu", 16, 8, 256)}


def parse_shapes(text: str) -> list[Shape]:
    """``demo,gpu,4x4x32`` -> shapes (a ``TxGxN`` shape is tasks x completions x tokens)."""
    shapes = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part in NAMED_SHAPES:
            shapes.append(NAMED_SHAPES[part])
            continue
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", part)
        if not m or int(m[1]) < 1 or int(m[2]) < 2 or int(m[3]) < 1:
            raise ValueError(
                f"size {part!r}: use {', '.join(NAMED_SHAPES)} or TxGxN (tasks x completions x tokens, G >= 2)"
            )
        shapes.append(Shape(part, int(m[1]), int(m[2]), int(m[3])))
    if not shapes:
        raise ValueError("no sizes given")
    return shapes


# --------------------------------------------------------------------------- assets and wheels


def prepare_assets(dest: Path) -> list[Path]:
    """Write the embedded model's ``config.json`` and tokenizer files (no weights) into ``dest``.

    From the built cache entry when there is one, else straight from the packaged GGUF (its quantization
    config dropped)."""
    from transformers import AutoConfig

    from harnessrl import models

    dest.mkdir(parents=True, exist_ok=True)
    cached = models.cache_dir() / "models" / models.EMBEDDED_POLICY
    if (cached / "config.json").is_file():
        config, source = AutoConfig.from_pretrained(cached), str(cached)
    else:
        gguf = models.embedded_gguf_path()  # ResourceMissingError with the install command when absent
        config, source = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name), str(gguf)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(dest)
    models.embedded_tokenizer().save_pretrained(dest)
    files = sorted(p for p in dest.iterdir() if p.is_file() and p.name != ASSET_MANIFEST)
    manifest = {
        "model": models.EMBEDDED_POLICY,
        "source": source,
        "files": {p.name: p.stat().st_size for p in files},
        "note": "config and tokenizer only: benchmarks/gpu_check.py builds a randomly initialised model from them",
    }
    (dest / ASSET_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return files


def missing_wheels() -> list[str]:
    """The distributions of :data:`WHEELS` that this interpreter cannot import."""
    missing = []
    for dist, module in WHEELS.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # the parent of a dotted name is absent
            found = False
        if not found:
            missing.append(dist)
    return missing


def download_wheels(
    dest: Path, exclude: set[str] = frozenset(), also: list[str] = (), python_version: str | None = None
) -> list[Path]:
    """``pip download --no-deps`` :data:`WHEELS` but ``exclude``, and ``also``, at their installed versions."""
    unknown = {_norm(e) for e in exclude} - {_norm(d) for d in WHEELS}
    if unknown:
        raise SystemExit(f"--exclude names {sorted(unknown)}, which are not in the wheel list: {', '.join(WHEELS)}")
    dest.mkdir(parents=True, exist_ok=True)
    names = [d for d in WHEELS if _norm(d) not in {_norm(e) for e in exclude}] + list(also)
    specs = [f"{d}=={md.version(d)}" for d in names]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(dest), *specs]
    if python_version:
        cmd += ["--python-version", python_version]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return sorted(dest.glob("*.whl"), key=lambda w: w.stat().st_size)


def _requirement_closure(roots: list[str]) -> set[str]:
    """Installed distributions ``roots`` pull in (their requirements without extras, recursively)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = [_norm(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for line in reqs:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            todo.append(_norm(req.name))
    return seen


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _harnessrl_dists() -> set[str]:
    """harnessrl and the installed plug-ins of its interfaces (entry points: they are found by metadata,
    which hiding their modules cannot take away)."""
    plugins = {_norm(ep.dist.name) for ep in md.entry_points(group="harnessrl.interfaces") if ep.dist is not None}
    return {"harnessrl"} | plugins


def hide_all_but(allowed: set[str]) -> list[str]:
    """Make every installed distribution outside ``allowed`` (and the requirement closure of torch and
    transformers) unimportable in this process, as on a bare machine: the path finder no longer finds
    its top-level modules (``import`` fails, ``find_spec`` says absent; their metadata stays readable).
    Returns the hidden names."""
    keep = _requirement_closure(["torch", "transformers"]) | {_norm(a) for a in allowed} | _harnessrl_dists()
    hidden = {
        top
        for top, dists in md.packages_distributions().items()
        if top not in sys.modules and top not in sys.stdlib_module_names and not any(_norm(d) in keep for d in dists)
    }
    sys.meta_path[:] = [_HidingFinder(f, hidden) if f is PathFinder else f for f in sys.meta_path]
    importlib.invalidate_caches()
    return sorted(hidden)


class _HidingFinder:
    """The path finder, blind to some top-level names."""

    def __init__(self, finder: Any, hidden: set[str]):
        self.finder, self.hidden = finder, hidden

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.partition(".")[0] in self.hidden:
            return None
        return self.finder.find_spec(fullname, path, target)

    def __getattr__(self, name: str) -> Any:  # invalidate_caches, find_distributions
        return getattr(self.finder, name)


def imported_distributions(before: set[str]) -> dict[str, str]:
    """Distributions (name -> version) of the modules imported since ``before`` (a ``set(sys.modules)``)
    that torch, transformers and harnessrl (with its interface plug-ins) do not bring."""
    owners = md.packages_distributions()
    base = _requirement_closure(["torch", "transformers"]) | _harnessrl_dists()
    found: dict[str, str] = {}
    for mod in set(sys.modules) - before:
        for dist in owners.get(mod.split(".")[0], []):
            if _norm(dist) not in base:
                found[_norm(dist)] = md.version(dist)
    return dict(sorted(found.items()))


# --------------------------------------------------------------------------- the model


def build_random_model(assets: Path, out: Path, seed: int, overrides: dict[str, Any]) -> dict[str, Any]:
    """Save a randomly initialised model of ``assets/config.json`` (with ``overrides``) and the tokenizer
    files into ``out``, a directory ``config.model`` and ``judge.model`` can name."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(assets)
    for k, v in overrides.items():
        setattr(config, k, v)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for f in assets.iterdir():
        if f.is_file() and f.name not in ("config.json", ASSET_MANIFEST):
            shutil.copy2(f, out / f.name)
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "architecture": type(model).__name__,
        "build_seconds": time.perf_counter() - t0,
    }


# --------------------------------------------------------------------------- instrumentation


@dataclass
class StepClock:
    wall: float = 0.0
    training_step: float = 0.0
    optimizer: float = 0.0
    generate_calls: list[dict[str, Any]] = field(default_factory=list)
    judge_batches: list[list[list[int]]] = field(default_factory=list)
    judge_forward_seconds: float = 0.0
    loss_inputs: Any = None


class Probe:
    """``trainer_hook`` for :func:`~harnessrl.trainer.run.train` (see the module docstring). It wraps a few
    methods on the instances (never the classes) and adds a callback that runs last."""

    def __init__(self, device: str):
        self.device = device
        self.steps: dict[int, StepClock] = defaultdict(StepClock)
        self.trainer: Any = None
        self.model: Any = None
        self.judge_model: Any = None
        self.orig_generate: Any = None
        self._phase: str | None = None
        self._marks: dict[str, float] = {}

    def sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def _step(self) -> StepClock:
        return self.steps[self.trainer.state.global_step + 1]

    def __call__(self, trainer, run) -> None:
        from transformers import TrainerCallback

        self.trainer = trainer
        self.model = model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
        self.orig_generate = orig_generate = model.generate
        orig_score = trainer._score_rows
        orig_prepare = trainer._prepare_inputs
        orig_training_step = trainer.training_step
        backend = trainer.rubric_reward.judge.backend
        orig_p_yes = getattr(backend, "p_yes", None)
        if orig_p_yes is None:
            raise SystemExit(f"the judge backend {backend.name!r} has no p_yes: this check needs the local-lm judge")
        self.judge_model = backend.model

        def score_rows(*a, **k):
            self._phase = "rollouts"
            try:
                return orig_score(*a, **k)
            finally:
                self._phase = None

        def generate(*a, **k):
            if self._phase != "rollouts" or "input_ids" not in k:
                return orig_generate(*a, **k)
            t0 = time.perf_counter()
            out = orig_generate(*a, **k)
            self.sync()
            seconds = time.perf_counter() - t0
            self._step().generate_calls.append(  # references, not copies: nothing here adds to the step
                {
                    "input_ids": k["input_ids"],
                    "attention_mask": k["attention_mask"],
                    "generation_config": copy.deepcopy(k.get("generation_config")),
                    "model_generation_config": copy.deepcopy(model.generation_config),
                    "training": model.training,
                    "decoded": out.shape[0] * (out.shape[1] - k["input_ids"].shape[1]),
                    "seconds": seconds,
                }
            )
            return out

        def p_yes(batch):
            if self._phase != "rollouts":
                return orig_p_yes(batch)
            t0 = time.perf_counter()
            try:
                return orig_p_yes(batch)
            finally:
                rec = self._step()
                rec.judge_forward_seconds += time.perf_counter() - t0
                rec.judge_batches.append(batch)

        def prepare_inputs(*a, **k):
            inputs = orig_prepare(*a, **k)
            if trainer.model.training:
                self._step().loss_inputs = inputs
            return inputs

        def training_step(*a, **k):
            rec = self._step()
            t0 = time.perf_counter()
            try:
                return orig_training_step(*a, **k)
            finally:
                self.sync()
                self._marks["training_step_end"] = time.perf_counter()
                rec.training_step += self._marks["training_step_end"] - t0

        probe = self

        class Clock(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                probe.sync()
                probe._marks["step_begin"] = time.perf_counter()

            def on_optimizer_step(self, args, state, control, **kwargs):
                probe.sync()
                now = time.perf_counter()
                probe.steps[state.global_step + 1].optimizer += now - probe._marks.get("training_step_end", now)

            def on_step_end(self, args, state, control, **kwargs):
                probe.sync()
                probe.steps[state.global_step].wall = time.perf_counter() - probe._marks["step_begin"]

        trainer._score_rows = score_rows
        model.generate = generate
        backend.p_yes = p_yes
        trainer._prepare_inputs = prepare_inputs
        trainer.training_step = training_step
        trainer.add_callback(Clock())  # last: an evolution point (on_step_end) runs inside the step's clock

    def restore(self) -> None:
        """Drop the instance wrappers the raw baselines must not go through."""
        for obj, name in ((self.model, "generate"), (self.trainer.rubric_reward.judge.backend, "p_yes")):
            if obj is not None and name in vars(obj):
                delattr(obj, name)


# --------------------------------------------------------------------------- raw baselines


def raw_generate(probe: Probe, call: dict[str, Any]) -> tuple[float, int]:
    """One of the trainer's ``model.generate`` calls again, alone, in the precision the trainer generated
    in (``generation.autocast``): (seconds, rows x decode steps)."""
    import torch

    from harnessrl.models import generation_precision

    model = probe.model
    dev = next(model.parameters()).device
    saved, was_training = model.generation_config, model.training
    model.train(call["training"])
    if call["model_generation_config"] is not None:
        model.generation_config = copy.deepcopy(call["model_generation_config"])
    try:
        ids, mask = call["input_ids"].to(dev), call["attention_mask"].to(dev)
        probe.sync()
        t0 = time.perf_counter()
        with torch.no_grad(), generation_precision(model, probe.trainer.generation.autocast):
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=call["generation_config"])
        probe.sync()
        seconds = time.perf_counter() - t0
    finally:
        model.generation_config = saved
        model.train(was_training)
    return seconds, out.shape[0] * (out.shape[1] - ids.shape[1])


def raw_judge_forward(probe: Probe, batches: list[list[list[int]]]) -> float:
    """The judge model's forward passes over a step's grading batches (padded beforehand), alone."""
    import inspect

    import torch

    model = probe.judge_model
    dev = next(model.parameters()).device
    params = inspect.signature(model.forward).parameters
    pad = probe.trainer.rubric_reward.judge.backend.pad_id
    prepared = []
    for batch in batches:
        width = max(len(x) for x in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, x in enumerate(batch):
            ids[r, width - len(x) :] = torch.tensor(x, dtype=torch.long)
            mask[r, width - len(x) :] = 1
        kwargs: dict[str, Any] = {"input_ids": ids.to(dev), "attention_mask": mask.to(dev)}
        if "position_ids" in params:
            kwargs["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0).to(dev)
        if "logits_to_keep" in params:
            kwargs["logits_to_keep"] = 1
        prepared.append(kwargs)
    probe.sync()
    t0 = time.perf_counter()
    with torch.inference_mode():
        for kwargs in prepared:
            model(**kwargs).logits[:, -1, :].float()
    probe.sync()
    return time.perf_counter() - t0


def raw_update(probe: Probe, inputs: Any) -> float:
    """TRL's loss on a step's batch, backward, clipping and the run's optimizer step, alone."""
    tr = probe.trainer
    model = tr.model_wrapped
    model.train()
    probe.sync()
    t0 = time.perf_counter()
    with tr.compute_loss_context_manager():
        loss = tr.compute_loss(model, inputs)
    tr.accelerator.backward(loss)
    if tr.args.max_grad_norm and tr.args.max_grad_norm > 0:
        tr.accelerator.clip_grad_norm_(model.parameters(), tr.args.max_grad_norm)
    tr.optimizer.step()
    tr.optimizer.zero_grad()
    probe.sync()
    return time.perf_counter() - t0


def counted_steps(n: int) -> list[int]:
    """Steps the figures use: 2..N (step 1 carries one-time costs), or step 1 alone for a one-step run."""
    return list(range(2, n + 1)) if n > 1 else [1]


def measure_raw(probe: Probe, steps: list[int]) -> dict[int, dict[str, float]]:
    """Each counted step's raw generate, judge forward and update, after one untimed warm-up of each."""
    first = probe.steps[1]
    for call in first.generate_calls[:1]:
        raw_generate(probe, call)
    if first.judge_batches:
        raw_judge_forward(probe, first.judge_batches[:1])
    if first.loss_inputs is not None:
        raw_update(probe, first.loss_inputs)
    out: dict[int, dict[str, float]] = {}
    for s in steps:
        rec = probe.steps[s]
        gen = [raw_generate(probe, c) for c in rec.generate_calls]
        out[s] = {
            "generate_seconds": sum(g[0] for g in gen),
            "generate_decoded": float(sum(g[1] for g in gen)),
            "judge_forward_seconds": raw_judge_forward(probe, rec.judge_batches) if rec.judge_batches else 0.0,
            "update_seconds": raw_update(probe, rec.loss_inputs) if rec.loss_inputs is not None else 0.0,
        }
    return out


# --------------------------------------------------------------------------- generation paths

PATHS: dict[str, dict[str, Any]] = {
    "fp32": {"dtype": "float32", "autocast": "never", "cache": None, "compile": False},
    "bf16 autocast per forward": {"dtype": "float32", "autocast": "forward", "cache": None, "compile": False},
    "bf16 autocast per generate": {"dtype": "float32", "autocast": "generate", "cache": None, "compile": False},
    "bf16 weights": {"dtype": "bfloat16", "autocast": "never", "cache": None, "compile": False},
    "fp32 static cache": {"dtype": "float32", "autocast": "never", "cache": "static", "compile": False},
    "fp32 static + compile": {"dtype": "float32", "autocast": "never", "cache": "static", "compile": True},
    "bf16 static + compile": {"dtype": "bfloat16", "autocast": "never", "cache": "static", "compile": True},
}
"""Ways to run the same ``generate`` (``--generation-paths``): the weights' dtype; bf16 autocast around an
fp32 model, a region per forward pass (accelerate's mixed precision: ``generation.autocast: forward``,
what TRL's generation does) or one region around the call (``generate``, the default); bf16 weights; a
static cache; transformers' compiled decode step (CUDA only: transformers compiles on GPUs alone). On a
bf16 run's model the autocast paths go through :func:`harnessrl.models.generation_precision`, the
trainer's own code; an fp32 run's model has no accelerate wrapper, so they are reproduced around it."""


@contextlib.contextmanager
def _autocast_per_forward(model: Any, device_type: str):
    """Each forward pass of ``model`` its own bf16 autocast region, as accelerate's mixed precision wraps it
    (for a model of an fp32 run, which has no such wrapper; a bf16 run's model is measured as it is)."""
    import torch

    before = vars(model).get("forward")
    model.forward = torch.autocast(device_type, dtype=torch.bfloat16)(model.forward)
    try:
        yield
    finally:
        if before is None:
            del model.forward
        else:
            model.forward = before


def _path_model(probe: Probe, model_dir: Path, dtype: str) -> Any:
    """The trainer's own model for fp32 paths; a bf16 copy loaded from the saved random model otherwise."""
    import torch
    from transformers import AutoModelForCausalLM

    if dtype == "float32":
        return probe.model
    dev = next(probe.model.parameters()).device
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).to(dev).eval()


def _path_generate(probe: Probe, model: Any, call: dict[str, Any], path: dict[str, Any], new_tokens: int):
    """One ``generate`` of ``call``'s batch down ``path``, exactly ``new_tokens`` decode steps (min = max,
    so every path decodes the same number of tokens whatever the random model samples)."""
    import torch

    from harnessrl.models import generation_precision

    dev = next(model.parameters()).device
    config = copy.deepcopy(call["generation_config"])
    config.max_new_tokens = config.min_new_tokens = new_tokens
    config.cache_implementation = path["cache"]
    config.disable_compile = not path["compile"]
    mode = path["autocast"]
    with torch.no_grad(), contextlib.ExitStack() as stack:
        if "_original_forward" in vars(model):  # a bf16 run's own model: the trainer's code path, as it is
            stack.enter_context(generation_precision(model, mode))
        elif mode == "forward":  # an fp32 run (no accelerate wrapper): each forward its own region, as one
            stack.enter_context(_autocast_per_forward(model, dev.type))
        elif mode == "generate":
            stack.enter_context(torch.autocast(dev.type, dtype=torch.bfloat16))
        return model.generate(
            input_ids=call["input_ids"].to(dev), attention_mask=call["attention_mask"].to(dev), generation_config=config
        )


def _launches(probe: Probe, model: Any, call: dict[str, Any], path: dict[str, Any], new_tokens: int):
    """(kernel launches or aten ops, device-busy seconds) of one short ``generate``, by torch.profiler, after an
    unprofiled one of the same length (a static cache's shape, hence a compiled step, follows the length)."""
    from torch.profiler import ProfilerActivity, profile

    _path_generate(probe, model, call, path, new_tokens)
    probe.sync()
    cuda = probe.device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        _path_generate(probe, model, call, path, new_tokens)
        probe.sync()
    events = prof.events()
    if cuda:
        launches = sum(1 for e in events if "LaunchKernel" in e.name)
        busy = sum(e.device_time_total for e in events if e.device_type.name == "CUDA") / 1e6
    else:  # no launches on a CPU: the aten operators dispatched, every level
        launches, busy = sum(1 for e in events if e.name.startswith("aten::")), 0.0
    return launches, busy


def measure_paths(probe: Probe, model_dir: Path, call: dict[str, Any], new_tokens: int) -> list[dict[str, Any]]:
    """Each of :data:`PATHS` on one of the trainer's generate calls: the first call (warm-up, compilation
    included), a timed call, and the kernel launches (aten ops on a CPU) and device-busy time per decode
    step, from profiles of ``1 + k`` and ``1`` new tokens (their difference over k: the prefill drops out).
    A path that fails (a compiler missing, memory) is reported with its error; the others still run."""
    rows = call["input_ids"].shape[0]
    k = min(8, max(1, new_tokens - 1))
    out = []
    for name, path in PATHS.items():
        if path["compile"] and probe.device != "cuda":
            continue
        model = None
        try:
            model = _path_model(probe, model_dir, path["dtype"])
            probe.sync()
            t0 = time.perf_counter()
            _path_generate(probe, model, call, path, new_tokens)
            probe.sync()
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            _path_generate(probe, model, call, path, new_tokens)
            probe.sync()
            seconds = time.perf_counter() - t0
            long, short = _launches(probe, model, call, path, 1 + k), _launches(probe, model, call, path, 1)
        except Exception as e:  # one path's failure must not lose the others' figures
            out.append({"path": name, **path, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            continue
        finally:
            if model is not None and model is not probe.model:
                del model
                if probe.device == "cuda":
                    import torch

                    torch.cuda.empty_cache()
        out.append(
            {
                "path": name,
                **path,
                "first_seconds": first,
                "seconds": seconds,
                "tokens_per_second": rows * new_tokens / seconds,
                "wall_per_decode_step_ms": 1e3 * seconds / new_tokens,
                "launches_per_decode_step": (long[0] - short[0]) / k,
                "device_busy_per_decode_step_ms": 1e3 * (long[1] - short[1]) / k,
            }
        )
    return out


def report_paths(paths: list[dict[str, Any]], device: str, rows: int, prompt: int, new_tokens: int) -> None:
    unit = "kernel launches" if device == "cuda" else "aten ops"
    print(
        f"   generation paths on the batch of the first counted step ({rows} rows, {prompt} prompt tokens, "
        f"{new_tokens} new tokens each; first call = warm-up incl. compilation):"
    )
    print(
        f"     {'path':27} {'first s':>8} {'s':>7} {'tok/s':>9} {'x fp32':>7} {unit + '/step':>20} "
        f"{'busy ms/step':>13} {'wall ms/step':>13}"
    )
    base = next((p.get("tokens_per_second") for p in paths if p["path"] == "fp32"), None)
    for p in paths:
        if "error" in p:
            print(f"     {p['path']:27} failed: {p['error']}")
            continue
        print(
            f"     {p['path']:27} {p['first_seconds']:8.2f} {p['seconds']:7.2f} {p['tokens_per_second']:9.0f} "
            f"{_f(p['tokens_per_second'] / base if base else None):>7} {p['launches_per_decode_step']:20.0f} "
            f"{_f(p['device_busy_per_decode_step_ms'] if device == 'cuda' else None):>13} "
            f"{p['wall_per_decode_step_ms']:13.2f}"
        )
    if device == "cuda":
        print(
            "     (busy ms/step far below wall ms/step: decoding waits on the host launching kernels, so a path "
            "that launches more kernels a step is slower even when each kernel is cheaper)"
        )


# --------------------------------------------------------------------------- one shape


def shape_config(shape: Shape, run_dir: Path, model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The training config of one shape (see the module docstring)."""
    return {
        "run_dir": str(run_dir),
        "model": str(model_dir),
        "device": args.device,
        "method": "harnessrl-grpo",  # the evolver over plain GRPO: one batch a step (DAPO's refill would vary it)
        "seed": args.seed,
        "data": {"train": "bundled", "validation": None, "test": None},
        "judge": {
            "backend": "local-lm",
            "model": str(model_dir),
            "device": args.judge_device or args.device,
            "batch_size": args.judge_batch_size,
        },
        "grpo": {
            "num_generations": shape.g,
            "tasks_per_step": shape.tasks,
            "max_completion_length": shape.tokens,
            "max_steps": args.steps,
            "save_steps": 10**6,
            "save_total_limit": 1,
        },
        "harness": {"memory": {"enabled": False}},
        "evolver": {"backend": "rule-based", "every_steps": args.evolver_every},
        "eval": {"before_training": False, "every_steps": None},
    }


def apply_settings(config: dict[str, Any], settings: list[tuple[str, Any]]) -> dict[str, Any]:
    """``config`` with each ``(dotted.key, value)`` of ``--set`` put in (e.g. ``generation.autocast``)."""
    for key, value in settings:
        *parents, leaf = key.split(".")
        node = config
        for name in parents:
            node = node.setdefault(name, {})
            if not isinstance(node, dict):
                raise SystemExit(f"--set {key}: {name} is not a section of the training config")
        node[leaf] = value
    return config


def run_shape(shape: Shape, work: Path, model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Train one shape for ``args.steps`` steps with the probe, then measure the raw baselines."""
    from rich.console import Console

    from harnessrl.records.run_dir import RunDir
    from harnessrl.trainer.run import train
    from harnessrl.trainer.train_config import TrainConfig

    run_dir = work / f"run-{shape.name}"
    config = TrainConfig.model_validate(apply_settings(shape_config(shape, run_dir, model_dir, args), args.set))
    probe = Probe(args.device)
    t0 = time.perf_counter()
    summary = train(config, overwrite=True, console=Console(stderr=True), trainer_hook=probe)
    train_seconds = time.perf_counter() - t0
    probe.restore()
    metrics = {int(m["step"]): m for m in RunDir(run_dir, create=False).read("metrics.jsonl") if "time/generation" in m}
    steps = counted_steps(summary.steps)
    raw = measure_raw(probe, steps)
    judge_model = probe.judge_model
    figures = split_and_goals(probe, metrics, raw, steps)
    if args.generation_paths and probe.steps[steps[0]].generate_calls:
        call = probe.steps[steps[0]].generate_calls[0]
        figures["generation_paths"] = measure_paths(probe, model_dir, call, shape.tokens)
        figures["generation_paths_batch"] = {
            "rows": int(call["input_ids"].shape[0]),
            "prompt_tokens": int(call["input_ids"].shape[1]),
            "new_tokens": shape.tokens,
        }
    figures.update(
        {
            "shape": shape.__dict__,
            "steps_trained": summary.steps,
            "train_seconds": train_seconds,
            "evolution_points": summary.extra.evolver.points,
            "summary_timings": dict(summary.timings),
            "policy_device": str(next(probe.model.parameters()).device),
            "judge_device": str(next(judge_model.parameters()).device),
            "bf16": bool(probe.trainer.args.bf16),
            "generation": config.generation.model_dump(include={"backend", "autocast", "cache", "compile"}),
        }
    )
    return figures


def _m(metrics: dict[int, dict], step: int, key: str) -> float:
    v = metrics.get(step, {}).get(key)
    return float(v) if isinstance(v, int | float) else 0.0


def split_and_goals(
    probe: Probe, metrics: dict[int, dict], raw: dict[int, dict[str, float]], steps: list[int]
) -> dict[str, Any]:
    """Per counted step: the split of the step, the raw baselines and the three goals' ratios."""
    rows = []
    for s in steps:
        rec = probe.steps[s]
        gen, judging = _m(metrics, s, "time/generation"), _m(metrics, s, "time/judging")
        scoring_other, recording = _m(metrics, s, "time/scoring_other"), _m(metrics, s, "time/recording")
        evolver = _m(metrics, s, "time/evolver")
        fwd_bwd = max(0.0, rec.training_step - gen - judging - scoring_other - recording)
        parts = {
            "generation": gen,
            "judging": judging,
            "update": fwd_bwd + rec.optimizer,
            "harness": recording + evolver,
            "other": scoring_other,
        }
        parts["rest"] = max(0.0, rec.wall - sum(parts.values()))
        r = raw[s]
        decoded = sum(c["decoded"] for c in rec.generate_calls)
        rows.append(
            {
                "step": s,
                "wall": rec.wall,
                "parts": parts,
                "update_forward_backward": fwd_bwd,
                "update_optimizer": rec.optimizer,
                "harness_recording": recording,
                "harness_evolver": evolver,
                "evolution_point": evolver > 0,
                "trainer_generate_inside": sum(c["seconds"] for c in rec.generate_calls),
                "decoded": decoded,
                "judge_pairs": sum(len(b) for b in rec.judge_batches),
                "judge_prompt_tokens_mean": statistics.fmean(len(x) for b in rec.judge_batches for x in b)
                if rec.judge_batches
                else 0.0,
                "judge_forward_inside": rec.judge_forward_seconds,
                "raw": r,
            }
        )
    plain = [r for r in rows if not r["evolution_point"]] or rows

    def total(rs, f):
        return sum(f(r) for r in rs)

    gen_s = total(rows, lambda r: r["parts"]["generation"])
    raw_gen_s = total(rows, lambda r: r["raw"]["generate_seconds"])
    trainer_tput = total(rows, lambda r: r["decoded"]) / gen_s if gen_s else None
    raw_tput = total(rows, lambda r: r["raw"]["generate_decoded"]) / raw_gen_s if raw_gen_s else None
    judging_s = total(rows, lambda r: r["parts"]["judging"])
    raw_judge_s = total(rows, lambda r: r["raw"]["judge_forward_seconds"])
    step_s = total(plain, lambda r: r["wall"]) / len(plain)
    raw_sum = total(
        plain,
        lambda r: r["raw"]["generate_seconds"] + r["raw"]["judge_forward_seconds"] + r["raw"]["update_seconds"],
    ) / len(plain)
    goals = [
        _goal(
            "generation >= 0.9x raw generate throughput",
            trainer_tput / raw_tput if trainer_tput and raw_tput else None,
            lambda v: v >= 0.9,
            f"{_f(trainer_tput, '.0f')} vs {_f(raw_tput, '.0f')} tok/s (rows x decode steps)",
        ),
        _goal(
            "judging <= 2x raw judge forward",
            judging_s / raw_judge_s if raw_judge_s else None,
            lambda v: v <= 2.0,
            f"{judging_s / len(rows):.2f} s vs {raw_judge_s / len(rows):.2f} s a step",
        ),
        _goal(
            "step <= 2x raw (generate + judge forward + update)",
            step_s / raw_sum if raw_sum else None,
            lambda v: v <= 2.0,
            f"{step_s:.2f} s vs {raw_sum:.2f} s a step ({len(plain)} step(s) without an evolution point)",
        ),
    ]
    return {"counted_steps": steps, "steps": rows, "goals": goals}


def _goal(name: str, ratio: float | None, ok, detail: str) -> dict[str, Any]:
    verdict = "n/a" if ratio is None else ("PASS" if ok(ratio) else "FAIL")
    return {"goal": name, "ratio": ratio, "verdict": verdict, "detail": detail}


# --------------------------------------------------------------------------- report


def _f(v, spec=".2f", none="n/a") -> str:
    return none if v is None else format(v, spec)


def device_line(device: str) -> str:
    import torch
    import transformers

    if device == "cuda":
        where = f"cuda: {torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"
    else:
        where = f"cpu: {torch.get_num_threads()} torch thread(s), {os.cpu_count()} core(s) visible"
    return f"ran on {where}; torch {torch.__version__}, transformers {transformers.__version__}"


def report_shape(fig: dict[str, Any], goal_shape: bool, device: str) -> None:
    rows = fig["steps"]
    n = len(rows)
    sh = fig["shape"]
    print(
        f"\n== {sh['name']}: {sh['tasks']} tasks x {sh['g']} completions x {sh['tokens']} tokens; "
        f"{fig['steps_trained']} steps trained in {fig['train_seconds']:.1f} s, counted steps "
        f"{fig['counted_steps'][0]}..{fig['counted_steps'][-1]}; evolution points {fig['evolution_points']}"
    )
    gen = ", ".join(f"{k} {v}" for k, v in fig["generation"].items())
    print(
        f"   policy on {fig['policy_device']} (bf16 autocast {fig['bf16']}; generation: {gen}), "
        f"local-lm judge on {fig['judge_device']}"
    )
    print(f"   {'step':>4} {'wall s':>7} " + " ".join(f"{k:>10}" for k in rows[0]["parts"]))
    for r in rows:
        mark = "  (evolution point)" if r["evolution_point"] else ""
        print(f"   {r['step']:>4} {r['wall']:7.2f} " + " ".join(f"{v:10.2f}" for v in r["parts"].values()) + mark)
    wall = sum(r["wall"] for r in rows)
    shares = {k: sum(r["parts"][k] for r in rows) / wall if wall else 0.0 for k in rows[0]["parts"]}
    print("   share " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()))
    print(
        "   (update = forward + backward + optimizer step; harness = step records, reference grading, detectors "
        "(time/recording) + evolver; other = TRL's tokenizing, logprobs, advantages (time/scoring_other); "
        "rest = callbacks, logging)"
    )
    per = lambda f: sum(f(r) for r in rows) / n  # noqa: E731
    print("   raw baselines a step (same batches, same run):")
    print(
        f"     generate      {per(lambda r: r['raw']['generate_seconds']):7.2f} s   trainer's generation "
        f"{per(lambda r: r['parts']['generation']):7.2f} s (inside model.generate "
        f"{per(lambda r: r['trainer_generate_inside']):.2f} s), {per(lambda r: r['decoded']):.0f} rows x decode steps"
    )
    print(
        f"     judge forward {per(lambda r: r['raw']['judge_forward_seconds']):7.2f} s   trainer's judging "
        f"{per(lambda r: r['parts']['judging']):7.2f} s (inside the forward "
        f"{per(lambda r: r['judge_forward_inside']):.2f} s), {per(lambda r: r['judge_pairs']):.0f} pairs of "
        f"{per(lambda r: r['judge_prompt_tokens_mean']):.0f} tokens"
    )
    print(
        f"     update        {per(lambda r: r['raw']['update_seconds']):7.2f} s   trainer's update "
        f"{per(lambda r: r['parts']['update']):7.2f} s"
    )
    if fig.get("generation_paths"):
        b = fig["generation_paths_batch"]
        report_paths(fig["generation_paths"], device, b["rows"], b["prompt_tokens"], b["new_tokens"])
    scope = "the goal's shape" if goal_shape and device == "cuda" else "for information: the goal is for gpu on cuda"
    print(f"   goals of issue 13 item 5 ({scope}):")
    for g in fig["goals"]:
        print(f"     {g['verdict']:4}  {g['goal']:52} ratio {_f(g['ratio'])}  ({g['detail']})")


# --------------------------------------------------------------------------- CLI


def _override(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r}: use key=value (e.g. num_hidden_layers=2)")
    try:
        return key.strip(), json.loads(value)
    except ValueError:  # a bare word: a string (static, cuda, ...)
        return key.strip(), value


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="write the config and tokenizer files (and, with --wheels, the wheels)")
    prep.add_argument("--assets", type=Path, default=DEFAULT_ASSETS)
    prep.add_argument("--wheels", action="store_true", help="pip download the wheels of WHEELS into ASSETS/wheels")
    prep.add_argument("--python-version", default=None, help="the GPU machine's Python, e.g. 3.12 (default: this one)")
    prep.add_argument(
        "--exclude", type=_names, default=[], help="wheels the GPU machine has already, e.g. pyarrow,pandas"
    )
    prep.add_argument(
        "--also", type=_names, default=[], help="more installed distributions to bring, e.g. transformers"
    )

    run = sub.add_parser("run", help="train each size a few steps and compare with the raw baselines")
    run.add_argument("--assets", type=Path, default=DEFAULT_ASSETS)
    run.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    run.add_argument("--judge-device", choices=("cuda", "cpu"), default=None, help="default: --device")
    run.add_argument("--judge-batch-size", type=int, default=32)
    run.add_argument("--steps", type=int, default=3, help="training steps a size (step 1 is not counted when > 1)")
    run.add_argument("--sizes", default="demo,gpu", help="demo, gpu or TxGxN (tasks x completions x tokens)")
    run.add_argument("--evolver-every", type=int, default=5, help="evolver.every_steps (no point at the last step)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument(
        "--model-override",
        type=_override,
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="change the model config, e.g. num_hidden_layers=2 (for quick tries; the check is for the real one)",
    )
    run.add_argument(
        "--set",
        type=_override,
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="change the training config, e.g. generation.autocast=never or generation.cache=static",
    )
    run.add_argument(
        "--generation-paths",
        action="store_true",
        help="also time one batch's generate down each of PATHS (dtype, autocast, static cache, compile)",
    )
    run.add_argument("--work-dir", type=Path, default=None, help="default: a temporary directory, removed after")
    run.add_argument("--json", type=Path, default=None, help="write every figure here")
    run.add_argument("--list-dists", action="store_true", help="print the distributions the run imported")
    run.add_argument(
        "--as-bare",
        action="store_true",
        help="hide every installed distribution but torch's, transformers' and WHEELS (checks that WHEELS is enough)",
    )
    args = p.parse_args(argv)
    if args.command == "run":
        try:
            args.shapes = parse_shapes(args.sizes)
        except ValueError as e:
            p.error(str(e))
        if args.steps < 1 or args.judge_batch_size < 1 or args.evolver_every < 1:
            p.error("--steps, --judge-batch-size and --evolver-every must be at least 1")
    return args


def cmd_prepare(args: argparse.Namespace) -> None:
    files = prepare_assets(args.assets)
    total = sum(f.stat().st_size for f in files)
    print(f"assets in {args.assets}: " + ", ".join(f"{f.name} ({f.stat().st_size / 1e3:.0f} kB)" for f in files))
    wheels: list[Path] = []
    if args.wheels:
        wheels = download_wheels(args.assets / "wheels", set(args.exclude), args.also, args.python_version)
        for w in wheels:
            print(f"  {w.stat().st_size / 2**20:6.2f} MiB  {w.name}")
        total += sum(w.stat().st_size for w in wheels)
    source = sum(
        f.stat().st_size
        for d in ("harnessrl", "benchmarks")
        for f in Path(d).rglob("*")
        if f.is_file() and "__pycache__" not in f.parts
    )
    print(
        f"to carry: {total / 2**20:.1f} MiB of assets{' and wheels' if wheels else ''} + {source / 2**20:.1f} MiB "
        f"of source (harnessrl/, benchmarks/); a bare GPU machine takes {MAX_CARRY_BYTES / 2**20:.0f} MiB"
    )
    over = total + source - MAX_CARRY_BYTES
    if over > 0:
        largest = ", ".join(f"{w.name.split('-')[0]} {w.stat().st_size / 2**20:.1f} MiB" for w in wheels[::-1][:3])
        raise SystemExit(
            f"{over / 2**20:.1f} MiB too much to carry (largest wheels: {largest}): prepare again with --exclude "
            "naming those the GPU machine already has (`run` names any that are missing there)"
        )


def cmd_run(args: argparse.Namespace) -> dict[str, Any]:
    # nothing may reach a hub or a tracing endpoint: a bare GPU machine has no network to wait for
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ.setdefault(var, "1")
    os.environ["LANGSMITH_TRACING"] = os.environ["LANGCHAIN_TRACING_V2"] = "false"
    before = set(sys.modules)
    if args.as_bare:
        hidden = hide_all_but(set(WHEELS))
        print(f"as on a bare machine: {len(hidden)} modules of other installed distributions hidden")
    missing = missing_wheels()
    if missing:
        raise SystemExit(
            f"missing wheels: {', '.join(missing)}. Bring them along (`gpu_check.py prepare --wheels` writes them "
            "into ASSETS/wheels) and `pip install --no-index --no-deps ASSETS/wheels/*.whl`"
        )
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda, but torch sees no GPU: use --device cpu (with small --sizes)")
    if not (args.assets / "config.json").is_file():
        try:
            prepare_assets(args.assets)
        except Exception as e:  # no cache and no GGUF here
            raise SystemExit(
                f"{args.assets} has no config.json and it cannot be prepared here ({e}): run "
                "`benchmarks/gpu_check.py prepare --assets DIR` where the project's cache is, and bring DIR along"
            ) from e
    print(device_line(args.device))
    figures: dict[str, Any] = {"device": device_line(args.device), "settings": {}, "shapes": {}}
    figures["settings"] = {
        k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("shapes",)
    }
    with contextlib.ExitStack() as stack:
        if args.work_dir is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gpu_check-")))
        else:
            work = args.work_dir
            work.mkdir(parents=True, exist_ok=True)
        model_dir = work / "random-model"
        built = build_random_model(args.assets, model_dir, args.seed, dict(args.model_override))
        print(
            f"random {built['architecture']} from {args.assets / 'config.json'}: {built['parameters'] / 1e6:.1f}M "
            f"parameters (saved in {built['build_seconds']:.1f} s); judge: local-lm on the same model; memory off; "
            "rule-based evolver on"
        )
        figures["model"] = built
        for shape in args.shapes:
            fig = run_shape(shape, work, model_dir, args)
            figures["shapes"][shape.name] = fig
            report_shape(fig, shape.name == "gpu", args.device)
    print(
        "\ngoal (issue 13 item 5), on the gpu shape on a GPU: generation >= 0.9x raw generate throughput, "
        "judging <= 2x raw judge forward, step <= 2x raw (generate + judge forward + update)"
    )
    if args.list_dists:
        dists = imported_distributions(before)
        figures["imported_distributions"] = dists
        print("\ndistributions the run imported beyond torch, transformers and harnessrl:")
        for name, version in dists.items():
            print(f"  {name}=={version}{'' if name in {_norm(d) for d in WHEELS} else '   (not in WHEELS)'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"figures written to {args.json}")
    return figures


def main(argv: list[str] | None = None) -> Any:
    args = parse_args(argv)
    return cmd_prepare(args) if args.command == "prepare" else cmd_run(args)


if __name__ == "__main__":
    main()
