"""Training: TRL's GRPOTrainer with the harness wired in, judges, rewards, evaluation, the evolver's tools.

Submodules import torch and TRL; import what you need from them directly (``harnessrl.trainer.run``,
``harnessrl.judges``, ...): this package's own import stays light.
"""

__all__: list[str] = []
