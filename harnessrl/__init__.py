"""HarnessRL: rubric-based RL for language models with a training-time harness that co-evolves with the policy.

The public API, for a TRL script (docs/training.md, "From your own TRL script"; ``examples/trl_script.py``)::

    import harnessrl
    from trl import GRPOConfig

    tasks = harnessrl.load_hf_dataset(dataset, mapping={"prompt": "question", "rubric": "criteria"})
    harness = harnessrl.Harness(tasks)
    rubric = harnessrl.RubricReward(harnessrl.build_judge(), harness)
    trainer = harnessrl.HarnessGRPOTrainer(
        model="HuggingFaceTB/SmolLM2-135M-Instruct", args=GRPOConfig(...), harness=harness,
        reward_funcs=[rubric, my_format_reward],
    )
    harnessrl.attach_harness(trainer, evolver=harnessrl.EvolverSettings())  # detectors, memory, evolver
    trainer.train()

``harnessrl train`` builds its runs with the same names (:mod:`harnessrl.trainer.run`). The names load on
first use, so ``import harnessrl`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harnessrl.errors import ConfigError, DataValidationError, HarnessRLError, JudgeError, ResourceMissingError

__version__ = "0.1.0"

# name -> the module that defines it
_API = {
    "Task": "harnessrl.data",
    "Criterion": "harnessrl.data",
    "load_tasks": "harnessrl.data",
    "load_hf_dataset": "harnessrl.data",
    "data_path": "harnessrl.data",
    "load_causal_lm": "harnessrl.models",
    "Harness": "harnessrl.interfaces",
    "JudgeConfig": "harnessrl.judges",
    "build_judge": "harnessrl.judges",
    "DetectorConfig": "harnessrl.detection",
    "RubricReward": "harnessrl.trainer.rewards",
    "HarnessGRPOTrainer": "harnessrl.trainer.grpo_trainer",
    "harness_dataset": "harnessrl.trainer.grpo_trainer",
    "attach_harness": "harnessrl.trainer.attach",
    "HarnessAttachment": "harnessrl.trainer.attach",
    "EvolverSettings": "harnessrl.trainer.train_config",
    "MemoryConfig": "harnessrl.trainer.train_config",
    "TrainConfig": "harnessrl.trainer.train_config",
    "load_train_config": "harnessrl.trainer.train_config",
    "train": "harnessrl.trainer.run",
}

__all__ = [  # the errors, and every name of _API
    "ConfigError",
    "Criterion",
    "DataValidationError",
    "DetectorConfig",
    "EvolverSettings",
    "Harness",
    "HarnessAttachment",
    "HarnessGRPOTrainer",
    "HarnessRLError",
    "JudgeConfig",
    "JudgeError",
    "MemoryConfig",
    "ResourceMissingError",
    "RubricReward",
    "Task",
    "TrainConfig",
    "__version__",
    "attach_harness",
    "build_judge",
    "data_path",
    "harness_dataset",
    "load_causal_lm",
    "load_hf_dataset",
    "load_tasks",
    "load_train_config",
    "train",
]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'harnessrl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))


if TYPE_CHECKING:  # for type checkers and editors: the same names, imported eagerly
    from harnessrl.data import Criterion, Task, data_path, load_hf_dataset, load_tasks
    from harnessrl.detection import DetectorConfig
    from harnessrl.interfaces import Harness
    from harnessrl.judges import JudgeConfig, build_judge
    from harnessrl.models import load_causal_lm
    from harnessrl.trainer.attach import HarnessAttachment, attach_harness
    from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer, harness_dataset
    from harnessrl.trainer.rewards import RubricReward
    from harnessrl.trainer.run import train
    from harnessrl.trainer.train_config import EvolverSettings, MemoryConfig, TrainConfig, load_train_config
