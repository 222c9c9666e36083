"""Test only: ``harnessrl train`` under accelerate's FSDP on a CPU, which accelerate 1.16 does not offer.

accelerate turns FSDP on for GPU-type runs only: on a CPU with an FSDP plugin it prepares DDP and says nothing
(docs/design.md §6). torch's FSDP2 itself works on a CPU over gloo, and accelerate prepares it there once its
state says FSDP: this launcher says so (in this process only) whenever the trainer passed an FSDP plugin, then
runs ``harnessrl`` with the given arguments. It writes what the trainer really trained
(``$HARNESSRL_FSDP_REPORT``: whether FSDP was on, the parameters' type) after its first training step.

    torchrun --nproc_per_node 2 tests/fsdp_cpu_launch.py train --config run.yaml
"""

from __future__ import annotations

import json
import os
import runpy
import sys

from accelerate.state import AcceleratorState
from accelerate.utils import DistributedType

_original_init = AcceleratorState.__init__
_plugin: list = []


def _init_with_fsdp_on_cpu(self, *args, **kwargs):
    _original_init(self, *args, **kwargs)
    if kwargs.get("fsdp_plugin") is not None and not _plugin:
        _plugin.append(kwargs["fsdp_plugin"])
    if _plugin and self.distributed_type == DistributedType.MULTI_CPU:  # re-merged from PartialState: set again
        self.distributed_type = DistributedType.FSDP
        self.fsdp_plugin = _plugin[0]


def _report_after_first_step():
    from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer

    step = HarnessGRPOTrainer.training_step

    def training_step(self, *args, **kwargs):
        out = step(self, *args, **kwargs)
        report = os.environ.get("HARNESSRL_FSDP_REPORT")
        if report and not os.path.exists(f"{report}.{self.accelerator.process_index}"):
            with open(f"{report}.{self.accelerator.process_index}", "w") as f:
                json.dump({"is_fsdp_enabled": self.is_fsdp_enabled, "fsdp_version": self._dist.fsdp_version,
                           "parameters": type(next(self.model_wrapped.parameters())).__name__}, f)  # fmt: skip
        return out

    HarnessGRPOTrainer.training_step = training_step


AcceleratorState.__init__ = _init_with_fsdp_on_cpu
_report_after_first_step()
sys.argv = ["harnessrl", *sys.argv[1:]]
runpy.run_module("harnessrl.cli", run_name="__main__")
