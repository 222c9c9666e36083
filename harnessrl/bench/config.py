"""A benchmark's settings: one base training config, methods as named overrides, seeds, an output folder.

A bench config resolves into one complete training config per (method, seed) before anything runs,
so a typo in any method fails at once instead of after an hour of the other runs. A method is only a
name for a set of ``key.sub: value`` overrides of the base config; the built-in ones select the trainer's
``method`` setting (one per training method of :mod:`harnessrl.trainer.methods`), and a config may add more
(``harnessrl-llm`` for the evolver on an LLM) or redefine them.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from harnessrl.config import apply_overrides, load_yaml
from harnessrl.errors import ConfigError
from harnessrl.records.bench_files import Settings
from harnessrl.trainer.methods import RENAMED_METHODS, default_bench_methods, method_names, method_spec

__all__ = [
    "RESERVED_NAMES",
    "BenchConfig",
    "apply_overrides",
    "builtin_methods",
    "load_bench_config",
    "resolve_train_config",
    "same_benchmark",
]

TrainSettings = dict[str, JsonValue]
"""A training config as the mapping its YAML holds (nested sections; what `harnessrl train` validates)."""


def builtin_methods() -> dict[str, Settings]:
    """The predefined methods: each training method of :data:`~harnessrl.trainer.methods.METHOD_TABLE` under its
    own name, its only override the run config's ``method``. A bench config's ``method_settings`` may add methods
    or replace these."""
    return {name: {"method": name} for name in method_names()}


RESERVED_NAMES = frozenset({"plots", "logs", "configs"})
"""Names a method cannot take: they are folders of the bench output next to the methods' folders."""

_METHOD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SET_BY_BENCH = ("run_dir", "seed")


def _check_method_name(name: str) -> str:
    if not _METHOD_NAME.match(name):
        raise ValueError(
            f"method name {name!r} must start with a letter or digit and use only letters, digits, '.', '_' or '-' "
            "(it names the method's folder)"
        )
    if name in RESERVED_NAMES:
        raise ValueError(f"method name {name!r} is reserved for a folder of the bench output; choose another")
    return name


def _check_overrides(overrides: Settings, where: str) -> Settings:
    for key in overrides:
        if not key or any(not part for part in key.split(".")):
            raise ValueError(f"{where}: {key!r} is not a setting; write keys like grpo.max_steps")
        if key.split(".")[0] in _SET_BY_BENCH:
            raise ValueError(f"{where}: {key!r} is set by the bench for each run: use the bench's 'out' and 'seeds'")
    return overrides


class BenchConfig(BaseModel):
    """Methods x seeds on one base training config; each run in ``<out>/<method>/seed<k>``."""

    model_config = ConfigDict(extra="forbid")

    base: str | TrainSettings = Field(
        description="The training config every run starts from: a YAML path (relative to the bench config's "
        "folder) or its settings inline. Paths inside it are read as `harnessrl train` reads them."
    )
    overrides: Settings = Field(
        default_factory=dict, description="key.sub -> value, applied to every run after the base."
    )
    method_settings: dict[str, Settings] = Field(
        default_factory=dict,
        description="method name -> its overrides (key.sub -> value). Predefined: "
        + ", ".join(f"{k} = {v}" for k, v in builtin_methods().items())
        + "; an entry with one of these names replaces it.",
    )
    methods: list[str] = Field(
        default_factory=lambda: list(default_bench_methods()),
        min_length=1,
        description="The methods to run, in order (default: every training method but those that need a suite "
        "with gold rubrics).",
    )
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1, description="Seeds of every method.")
    out: str = Field(default="runs/bench", description="Output folder: <out>/<method>/seed<k>, bench.json, results.")
    timeout_minutes: float | None = Field(
        default=None, gt=0, description="Stop a run that takes longer (recorded as failed); null: no limit."
    )
    keep_resume_checkpoints: bool = Field(
        default=False,
        description="Keep a finished run's checkpoints/checkpoint-<step> folders (model and optimizer state "
        "to resume from; ≈1.6 GB each for the 135M policy, full-parameter). false: delete them once the run "
        "is done, keeping checkpoints/best and checkpoints/final.",
    )
    _folder: Path | None = PrivateAttr(default=None)

    @field_validator("overrides")
    @classmethod
    def _valid_overrides(cls, v: Settings) -> Settings:
        return _check_overrides(v, "overrides")

    @field_validator("method_settings")
    @classmethod
    def _valid_method_settings(cls, v: dict[str, Settings]) -> dict[str, Settings]:
        for name, overrides in v.items():
            _check_method_name(name)
            _check_overrides(overrides or {}, f"method_settings.{name}")
        return {name: dict(overrides or {}) for name, overrides in v.items()}

    @field_validator("seeds")
    @classmethod
    def _valid_seeds(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"seeds {v} repeat a seed; list each once")
        if any(s < 0 for s in v):
            raise ValueError(f"seeds {v}: seeds must be 0 or more")
        return v

    @model_validator(mode="after")
    def _valid_methods(self) -> BenchConfig:
        known = self.known_methods()
        for name in self.methods:
            if name not in known and name in RENAMED_METHODS:
                method_spec(name)  # the ValueError that names the method's name now
            if name not in known:
                raise ValueError(
                    f"unknown method {name!r}; known: {', '.join(known)} (declare others in method_settings)"
                )
        if len(set(self.methods)) != len(self.methods):
            raise ValueError(f"methods {self.methods} name a method twice; list each once")
        return self

    # ----------------------------------------------------------------------------------- derived
    def known_methods(self) -> dict[str, Settings]:
        """Every method this config can run: the built-ins, then its own ``method_settings``."""
        return {**builtin_methods(), **self.method_settings}

    @property
    def out_path(self) -> Path:
        return Path(self.out)

    def run_dir(self, method: str, seed: int) -> Path:
        return self.out_path / method / f"seed{seed}"

    def base_settings(self) -> TrainSettings:
        """The base training config as a dict (read from its file when ``base`` is a path)."""
        if isinstance(self.base, dict):
            return copy.deepcopy(self.base)
        path = Path(self.base)
        if not path.is_absolute() and self._folder is not None:
            path = self._folder / path
        return load_yaml(path)

    def trains(self) -> TrainSettings:
        """What every run of this bench trains from, before its method's settings: the base training config with
        the bench's overrides. Two configs that agree on it are one benchmark, whatever else differs (where
        results go, which methods and seeds, the wall-clock limit, keeping checkpoints: how the runs are run)."""
        return apply_overrides(self.base_settings(), self.overrides)

    def select(self, methods: list[str] | None = None, seeds: list[int] | None = None, out: str | None = None):
        """A copy restricted to some methods or seeds, or writing elsewhere (validated like the file)."""
        data = self.model_dump()
        if methods is not None:
            data["methods"] = methods
        if seeds is not None:
            data["seeds"] = seeds
        if out is not None:
            data["out"] = str(out)
        cfg = _validate(data, "the command line's selection")
        cfg._folder = self._folder
        return cfg


def resolve_train_config(cfg: BenchConfig, method: str, seed: int) -> TrainSettings:
    """The training settings of one run: base, then the bench's overrides, the method's, seed and run_dir."""
    data = apply_overrides(cfg.base_settings(), cfg.overrides)
    data = apply_overrides(data, cfg.known_methods()[method])
    data["seed"] = seed
    data["run_dir"] = str(cfg.run_dir(method, seed))
    # every run of the bench starts from the same policy: its evaluation before training is done once
    evaluation = data.setdefault("eval", {})
    if isinstance(evaluation, dict) and "base_cache" not in evaluation:
        evaluation["base_cache"] = str(cfg.out_path / "base_eval")
    return data


def _explain(err: ValidationError) -> str:
    lines = []
    for e in err.errors(include_url=False):
        where = ".".join(str(p) for p in e["loc"]) or "bench config"
        if e["type"] == "extra_forbidden":
            lines.append(
                f"  {where}: unknown setting (valid: {', '.join(BenchConfig.model_fields)}; see configs/bench-cpu.yaml)"
            )
        else:
            lines.append(f"  {where}: {e['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


def _validate(data: Any, source: str) -> BenchConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a bench config is a mapping of settings, got {type(data).__name__}")
    try:
        return BenchConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{source} has invalid settings:\n{_explain(e)}") from None


def same_benchmark(a: str | Path, b: str | Path) -> bool:
    """Whether the bench configs at ``a`` and ``b`` (paths as a bench's manifest records them, read from here)
    are one benchmark: the same file, or two files that train the same (:meth:`BenchConfig.trains`); a method's
    settings are compared apart, per method. False where either cannot be read."""
    if str(a) == str(b):
        return True
    try:
        return load_bench_config(a).trains() == load_bench_config(b).trains()
    except ConfigError:  # a file gone or unreadable: nothing says they train the same
        return False


def load_bench_config(path: str | Path) -> BenchConfig:
    """Read and validate a bench config YAML (a relative ``base`` path is read from the file's folder)."""
    path = Path(path)
    cfg = _validate(load_yaml(path), str(path))
    cfg._folder = path.parent
    if isinstance(cfg.base, str):
        base = Path(cfg.base) if Path(cfg.base).is_absolute() else path.parent / cfg.base
        if not base.is_file():
            raise ConfigError(
                f"{path}: base {cfg.base!r} not found (looked for {base}; a relative path is read from "
                "the bench config's folder)"
            )
    return cfg
