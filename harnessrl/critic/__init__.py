"""The just-in-time critic: trials of candidate harness updates on the frozen policy, and their verdicts.

``trials`` is the entry point (each interface says how it is measured:
:meth:`harnessrl.interfaces.Interface.trial`), one module per recipe (``regrade``, ``rollout_arms``,
``moved_draws``), ``stats`` the bootstrap and the measures, ``budget`` what a trial may spend,
``acceptance`` the rule that decides on the numbers, ``signal`` what may be measured (the trainer's
advantages and their invariances), ``rollouts`` fresh rollouts of the frozen policy, ``protocols`` what
the critic reads from the harness and the policy. The graph's critic node (:mod:`harnessrl.agents.critic_node`)
only asks for a trial over the tools and routes on its verdict.
"""

from harnessrl.critic.acceptance import Measured, decide
from harnessrl.critic.config import TrialConfig
from harnessrl.critic.protocols import HarnessView, PolicySampler
from harnessrl.critic.rollouts import TransformersSampler, VLLMSampler
from harnessrl.critic.signal import AdvantageSpec, SignalConfig
from harnessrl.critic.trials import FrozenPolicyTrials, Trial, TrialHarness
from harnessrl.records.trials import TrialCost, TrialResult

__all__ = [
    "AdvantageSpec",
    "FrozenPolicyTrials",
    "HarnessView",
    "Measured",
    "PolicySampler",
    "SignalConfig",
    "TransformersSampler",
    "Trial",
    "TrialConfig",
    "TrialCost",
    "TrialHarness",
    "TrialResult",
    "VLLMSampler",
    "decide",
]
