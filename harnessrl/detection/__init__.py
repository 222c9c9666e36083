"""Reward-failure detection: the detectors, and the step monitor that runs them after every step."""

from harnessrl.detection.config import DetectorConfig
from harnessrl.detection.failure_detector import FailureDetector
from harnessrl.detection.monitor import StepMonitor

__all__ = ["DetectorConfig", "FailureDetector", "StepMonitor"]
