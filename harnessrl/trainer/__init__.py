"""Training: TRL's GRPOTrainer with the harness wired in, the reward function, the run, evaluation, the report.

Submodules import torch and TRL; import what you need from them directly (``harnessrl.trainer.run``,
``harnessrl.trainer.train_config``, ...): this package's own import stays light.
"""

__all__: list[str] = []
