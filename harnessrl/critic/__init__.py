"""The just-in-time critic: the trial kit on the frozen policy, the acceptance rule, the learning-signal measures.

``trials`` measures a candidate harness update with the recipe its interface picks (each interface
says how it is measured: :meth:`harnessrl.interfaces.Interface.trial`), ``acceptance`` decides on
the numbers, ``signal`` holds what may be measured (the trainer's advantages and their invariances),
``rollouts`` draws fresh rollouts of the frozen policy. The graph's critic node
(:mod:`harnessrl.agents.critic`) only asks for a trial over the tools and routes on its verdict.
"""

from harnessrl.critic.acceptance import Measured, decide
from harnessrl.critic.rollouts import TransformersSampler, VLLMSampler
from harnessrl.critic.signal import AdvantageSpec, SignalConfig
from harnessrl.critic.trials import (
    FrozenPolicyTrials,
    PolicySampler,
    Trial,
    TrialConfig,
    TrialCost,
    TrialResult,
)

__all__ = [
    "AdvantageSpec",
    "FrozenPolicyTrials",
    "Measured",
    "PolicySampler",
    "SignalConfig",
    "TransformersSampler",
    "Trial",
    "TrialConfig",
    "TrialCost",
    "TrialResult",
    "VLLMSampler",
    "decide",
]
