"""Reward-failure detection: the detectors, and the step monitor that runs them after every step."""

from harnessrl.detection.detectors import DetectorConfig, FailureDetector
from harnessrl.detection.monitor import StepMonitor

__all__ = ["DetectorConfig", "FailureDetector", "StepMonitor"]
