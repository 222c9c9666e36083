"""HarnessRL: rubric-based RL for language models with a training-time harness that co-evolves with the policy."""

from harnessrl.errors import ConfigError, DataValidationError, HarnessRLError, JudgeError, ResourceMissingError

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DataValidationError",
    "HarnessRLError",
    "JudgeError",
    "ResourceMissingError",
    "__version__",
]
