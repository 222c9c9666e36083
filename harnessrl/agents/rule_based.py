"""The rule-based evolver model: no LLM, the same tool calls through the same graph, from the evidence.

:class:`RuleBasedChatModel` is a LangChain chat model whose "generation" is a decision procedure
over the conversation: it reads the facts of its task message (the fenced JSON block with the
failure, the attribution, the critic's last trial and the earlier attempts) and every tool result in
the history (``ToolMessage`` contents are JSON), and answers with the next tool call. It is bound like
any tool-calling model (``bind_tools`` returns a copy that knows the tools' names), so it is the
embedded, offline default of the evolver and a baseline for an LLM evolver.

Attribution (bound to ``submit_attribution``):

1. read ``query_memory`` (``what_worked`` for the failure's kind and text; ``task_history`` of the
   task) and ``get_harness_state`` for the task, in one turn;
2. start from the interface each failure kind is usually fixed by (uniformly low / a dead criterion →
   rollout_guidance; uniformly high, spurious length or feature, reference below policy, a saturated
   criterion, judge disagreement → rubric_criteria; a saturated *pitfall*, one every rollout commits
   → rollout_guidance);
3. let the memory overrule it: each update that worked on a failure of the same kind votes for its
   interface (2 when its outcome says the learning signal recovered, 1 when not measured yet, 0 when
   it did not recover); an interface allowed for the kind with at least 2 votes and more than the
   default's wins;
4. guidance already failed for the task (the flat group already had guided rollouts; guidance is in
   force and the task's recent groups are still flat and low; a guidance candidate for it was
   rejected) → task_sampling (park it);
5. submit the attribution with every fact used as an evidence line (errors of read tools included).

Proposal (bound to a builder): read ``inspect_rollouts`` (rubric, per-criterion verdicts, reference
answer, lengths) and ``get_harness_state`` once, then walk the ladder of templated candidates for
(failure kind, interface), taking the first one that applies, whose builder is bound and that was not
tried yet (each candidate's rationale ends with its template tag, so earlier attempts and builder
errors are read back from the conversation):

- uniformly low / dead criterion → ``set_guidance`` with a hint built from the failing criteria's text
  (positive criteria with mean verdict < 0.5), fraction 0.5 → on reject, the guided fraction rises by
  0.25 and the measurements decide the rest: a guided arm that still showed no spread also gets a more
  explicit hint (with the start of the reference answer) and temperature 1.3, one that helped keeps
  its hint → park the task (the fallback builder);
- uniformly high → ``edit_rubric`` adding a stricter judged criterion derived from the saturated
  criteria (mean verdict ≥ 0.9), weighted like the heaviest criterion → the same at twice the weight
  *in place of* the saturated criteria → retire the task;
- spurious length → ``edit_rubric`` adding a programmatic ``word_count`` pitfall (negative weight, half
  the rubric's positive weight) above ``length_margin`` (1.2) × the reference answer's word count (the
  policy's median without a reference) → on reject, looser (×1.25) when the trial says the reference
  answer lost score, else tighter (1.0 × the reference, twice the weight) → a judged padding pitfall;
- spurious feature → a pitfall against it (bullet count, repeated "!", keyword stuffing) → heavier →
  a judged padding pitfall;
- reference below policy → a length pitfall when the policy writes much longer than the reference,
  else a criterion asking for the reference's key points → the other one;
- saturated criterion → reword it stricter, grounded in the reference answer (its sentence closest to
  the criterion) → a harder criterion in its place → drop it. Never a reweight: a criterion every
  rollout passes adds the same to every reward of a group, so reweighting it is an affine change of
  the rewards that leaves GRPO's advantages as they were (the critic rejects it as "no effect on the
  learning signal"); saturated pitfall → guidance to avoid it;
- dead criterion (rubric_criteria) → add a criterion the policy can partly meet (a first step towards
  the dead one) → park the task;
- judge disagreement → reword the worst criterion to be explicitly checkable → reweight it down;
- task_sampling → park (uniformly low) or retire (uniformly high), then reweight to 0.3.

When no template is left it answers without a tool call, and the graph gives the failure up.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from harnessrl.agents.tool_loop import flat_args, result_json, result_text
from harnessrl.data.checks import count_words, words
from harnessrl.interfaces.guidance import RolloutGuidance
from harnessrl.interfaces.registry import allowed_interfaces, failure_hints, interface_classes
from harnessrl.interfaces.rubric import RubricCriteria
from harnessrl.interfaces.sampling import TaskSampling

__all__ = ["RuleBasedChatModel"]

SUBMIT = "submit_attribution"

# the built-in interfaces this module has a playbook for; which interfaces may answer which failure
# kind, and which is the first choice, come from the registry (each interface declares it)
SAMPLING, GUIDANCE, RUBRIC = TaskSampling.name, RolloutGuidance.name, RubricCriteria.name

_BULLET = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+\S", re.MULTILINE)
_JSON_BLOCK = re.compile(r"```json\s*\n(.*?)\n```", re.DOTALL)
_TAG = re.compile(r"\[rule-based: ([a-z_]+)\]")


def _words(text: str | None) -> int:
    return count_words(text or "")


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rsplit(" ", 1)[0] + "…"


def _excerpt(text: str, words: int) -> str:
    toks = text.split()
    return " ".join(toks[:words]) + (" …" if len(toks) > words else "")


def _sentence(text: str) -> str:
    text = text.strip().rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


# --------------------------------------------------------------------------------------------------
# reading the conversation


@dataclass
class _Result:
    name: str
    args: dict[str, Any]
    ok: bool
    data: Any
    text: str


class _History:
    """The facts of a conversation: the merged JSON blocks of its task messages and every tool result."""

    def __init__(self, messages: Sequence[BaseMessage]):
        self.context: dict[str, Any] = {}
        self.results: list[_Result] = []
        calls: dict[str, dict[str, Any]] = {}
        for m in messages:
            if isinstance(m, HumanMessage):
                text = m.content if isinstance(m.content, str) else json.dumps(m.content)
                for block in _JSON_BLOCK.findall(text):
                    try:
                        data = json.loads(block)
                    except ValueError:
                        continue
                    if isinstance(data, dict):
                        self.context.update(data)
            elif isinstance(m, AIMessage):
                for c in m.tool_calls:
                    calls[c.get("id") or ""] = c
            elif isinstance(m, ToolMessage):
                c = calls.get(m.tool_call_id, {})
                ok = m.status != "error"
                self.results.append(
                    _Result(
                        name=c.get("name") or m.name or "",
                        args=flat_args(c.get("args") or {}),
                        ok=ok,
                        data=result_json(m) if ok else None,
                        text=result_text(m),
                    )
                )

    def _match(self, name: str, match: dict[str, Any]) -> list[_Result]:
        return [r for r in self.results if r.name == name and all(r.args.get(k) == v for k, v in match.items())]

    def called(self, name: str, **match: Any) -> bool:
        return bool(self._match(name, match))

    def latest(self, name: str, **match: Any) -> Any:
        ok = [r.data for r in self._match(name, match) if r.ok and r.data is not None]
        return ok[-1] if ok else None

    def errors(self, name: str | None = None) -> list[_Result]:
        return [r for r in self.results if not r.ok and (name is None or r.name == name)]


def _items(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, dict):
        data = data.get("items", data.get("results", []))
    return [x for x in data or [] if isinstance(x, dict)]


def _task_view(data: Any) -> dict[str, Any]:
    task = data.get("task") if isinstance(data, dict) else None
    return task if isinstance(task, dict) else {}


def _guidance_rule(task: dict[str, Any]) -> dict[str, Any] | None:
    g = task.get("guidance")
    if isinstance(g, str) and g.strip():
        return {"text": g, "fraction": task.get("fraction", 0.5)}
    if isinstance(g, dict) and g.get("text") and (_num(g.get("fraction")) or 0) > 0:
        return g
    return None


# --------------------------------------------------------------------------------------------------
# the evidence a proposal is built from


@dataclass
class _Evidence:
    failure: dict[str, Any]
    rubric: list[dict[str, Any]]
    reference: str | None
    rollouts: list[dict[str, Any]]
    task: dict[str, Any]
    attempts: list[dict[str, Any]]
    trial: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)
    park_steps: int = 20
    length_margin: float = 1.2

    @property
    def ev(self) -> dict[str, Any]:
        return self.failure.get("evidence") or {}

    @property
    def task_id(self) -> str:
        return str(self.failure.get("task_id"))

    @property
    def positive(self) -> list[dict[str, Any]]:
        return [c for c in self.rubric if (_num(c.get("weight")) or 0) > 0]

    @property
    def sum_pos(self) -> float:
        return sum(_num(c.get("weight")) or 0 for c in self.positive) or 1.0

    @property
    def max_pos(self) -> float:
        return max((_num(c.get("weight")) or 0 for c in self.positive), default=1.0) or 1.0

    def criterion(self, cid: str | None) -> dict[str, Any] | None:
        return next((c for c in self.rubric if c.get("id") == cid), None)

    def criterion_means(self) -> dict[str, float]:
        sums: dict[str, list[float]] = {}
        for r in self.rollouts:
            verdicts = r.get("verdicts") or {}
            if isinstance(verdicts, list):
                verdicts = {
                    v.get("criterion_id") or v.get("id"): v.get("verdict", v.get("value", v.get("score")))
                    for v in verdicts
                    if isinstance(v, dict)
                }
            for cid, v in verdicts.items():
                if _num(v) is not None:
                    sums.setdefault(str(cid), []).append(float(v))
        return {cid: sum(vs) / len(vs) for cid, vs in sums.items() if vs}

    def policy_words(self) -> list[int]:
        out = []
        for r in self.rollouts:
            n = _num(r.get("length_words"))
            if n is None:
                toks = _num(r.get("length_tokens"))
                n = max(_words(r.get("completion")), round(0.75 * toks) if toks is not None else 0)
            if n:
                out.append(int(n))
        return out

    @property
    def ref_words(self) -> int | None:
        return _words(self.reference) or None

    def attempts_with(self, tool: str) -> list[dict[str, Any]]:
        return [a for a in self.attempts if a.get("tool") == tool]


def _w(x: float) -> float:
    return round(x, 3)


# --------------------------------------------------------------------------------------------------
# the templates: each returns (builder tool, arguments) or None when it does not apply

Option = Callable[["_Evidence"], tuple[str, dict[str, Any]] | None]


def _failing_hint(e: _Evidence) -> str | None:
    means = e.criterion_means()
    failing = [c for c in e.positive if means.get(str(c.get("id")), 0.0) < 0.5]
    if not failing:
        failing = e.positive
    failing = sorted(failing, key=lambda c: -(_num(c.get("weight")) or 0))
    texts = [_sentence(_clip(str(c.get("text", "")), 200)) for c in failing if c.get("text")]
    if not texts:
        return None
    return _clip("A good answer must meet each of these: " + "; ".join(texts) + ".", 600)


def _guide(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    hint = _failing_hint(e)
    if not hint:
        return None
    means = e.criterion_means()
    failing = [f"{c['id']} (mean verdict {means[c['id']]:.2f})" for c in e.positive if means.get(c.get("id"), 1) < 0.5]
    why = f"failing criteria {', '.join(failing)}" if failing else "the task's criteria"
    return "set_guidance", {
        "scope": "task",
        "target": e.task_id,
        "text": hint,
        "fraction": 0.5,
        "rationale": f"Every rollout fails alike ({e.failure.get('summary', 'uniformly low')}); a hint built from "
        f"{why} for half of each group should let some rollouts succeed, so the group becomes discriminative.",
    }


def _guide_more(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    prev = e.attempts_with("set_guidance")
    last = (prev[-1].get("payload") or {}) if prev else {}
    hint = last.get("text") or _failing_hint(e)
    if not hint:
        return None
    fraction = min(0.875, (_num(last.get("fraction")) or 0.5) + 0.25)
    trial = e.trial or {}
    spread = _num(trial.get("candidate"))
    metric = trial.get("metric", "metric")
    args: dict[str, Any] = {"scope": "task", "target": e.task_id, "text": hint, "fraction": fraction}
    if spread is None or spread <= 1e-6:
        if e.reference:
            args["text"] = _clip(f'{hint} A good answer could start: "{_excerpt(e.reference, 30)}"', 1000)
        args["temperature"] = 1.3
        why = (
            f"the guided arm still showed no spread ({metric} {spread}): a more explicit hint"
            + (" (with the start of the reference answer)" if e.reference else "")
            + ", a higher temperature and a larger guided share"
        )
    else:
        why = (
            f"the hint helped ({metric} {spread:.3f}, improvement {trial.get('improvement')}) but not surely "
            "enough: the same hint for a larger share of the group"
        )
    reason = trial.get("reason", "no reason")
    args["rationale"] = f"Revision after the critic's reject ({reason}): {why} ({fraction:g})."
    return "set_guidance", args


def _guide_criterion(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    crit = e.criterion(e.ev.get("criterion_id")) or {}
    text = e.ev.get("criterion_text") or crit.get("text")
    if not text:
        return _guide(e)
    return "set_guidance", {
        "scope": "task",
        "target": e.task_id,
        "text": _clip(f"Make sure your answer does this: {str(text).rstrip('.')}.", 600),
        "fraction": 0.5,
        "rationale": f"No rollout satisfies criterion {e.ev.get('criterion_id')} "
        f"(recent means {e.ev.get('recent_means')}); a hint quoting it for half of each group gives it signal.",
    }


def _avoid_hint(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    text = e.ev.get("criterion_text") or (e.criterion(e.ev.get("criterion_id")) or {}).get("text")
    if not text:
        return None
    return "set_guidance", {
        "scope": "task",
        "target": e.task_id,
        "text": _clip(f"Avoid this: {str(text).rstrip('.')}.", 600),
        "fraction": 0.5,
        "rationale": f"Every rollout commits pitfall {e.ev.get('criterion_id')} (recent means "
        f"{e.ev.get('recent_means')}); a hint to avoid it for half of each group makes the pitfall discriminate.",
    }


def _park(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    return "reweight_tasks", {
        "task_ids": [e.task_id],
        "action": "park",
        "park_steps": e.park_steps,
        "rationale": "The task is out of reach for the policy now"
        + (f" ({'; '.join(e.notes)})" if e.notes else " (guidance did not make its group discriminative)")
        + ": park it and spend the steps on tasks it can learn from.",
    }


def _retire(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    return "reweight_tasks", {
        "task_ids": [e.task_id],
        "action": "retire",
        "rationale": f"The task is solved ({e.failure.get('summary', 'uniformly high rewards')}) and a stricter rubric "
        "did not restore a spread: retire it.",
    }


def _demote(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    return "reweight_tasks", {
        "task_ids": [e.task_id],
        "action": "reweight",
        "weight": 0.3,
        "rationale": "The task teaches little now: sample it less (weight 0.3) rather than stop it.",
    }


def _saturated(e: _Evidence) -> list[dict[str, Any]]:
    means = e.criterion_means()
    sat = [c for c in e.positive if c.get("kind", "judged") == "judged" and means.get(str(c.get("id")), 0) >= 0.9]
    return sat or [c for c in e.positive if c.get("kind", "judged") == "judged"] or e.positive


def _stricter_text(crits: list[dict[str, Any]]) -> str:
    texts = [_sentence(str(c.get("text", ""))) for c in crits[:3] if c.get("text")]
    return _clip(
        "Goes beyond the basics on every point, with specific, concrete detail (a generic or passing mention "
        "does not count): " + "; ".join(texts) + ".",
        600,
    )


def _stricter(e: _Evidence, heavier: bool = False) -> tuple[str, dict[str, Any]] | None:
    sat = _saturated(e)
    if not sat:
        return None
    weight = e.max_pos * (2 if heavier else 1)
    args: dict[str, Any] = {
        "task_id": e.task_id,
        "add": [{"id": "stricter", "text": _stricter_text(sat), "weight": _w(weight)}],
    }
    ids = ", ".join(str(c.get("id")) for c in sat)
    why = f"every rollout passes {ids}; a stricter judged criterion derived from them (weight {_w(weight)})"
    if heavier:
        # in place of the saturated criteria, not beside them reweighted: a criterion every rollout passes only
        # shifts every reward alike (an affine change GRPO's advantages do not see)
        remove = [str(c["id"]) for c in sat if c.get("id") and c.get("id") in {x.get("id") for x in e.rubric}]
        if remove:
            args["remove"] = remove
            why += " in place of the saturated criteria, since the first one left the group flat"
    args["rationale"] = f"The rubric is too lax ({e.failure.get('summary', 'uniformly high')}): {why}."
    return "edit_rubric", args


def _length_limit(e: _Evidence, factor: float) -> tuple[int, str] | None:
    if e.ref_words:
        return math.ceil(factor * e.ref_words), f"{factor:g} × the reference answer's {e.ref_words} words"
    words = e.policy_words()
    if words:
        med = statistics.median(words)
        return math.ceil(med), f"the policy's median length ({med:g} words; the task has no reference answer)"
    return None


def _length_pitfall_args(e: _Evidence, limit: int, weight: float, why: str) -> tuple[str, dict[str, Any]]:
    return "edit_rubric", {
        "task_id": e.task_id,
        "add": [
            {
                "id": "length_pitfall",
                "text": f"The response is longer than {limit} words (padding instead of substance).",
                "weight": -_w(weight),
                "kind": "programmatic",
                "check": {"type": "word_count", "min": limit + 1},
            }
        ],
        "rationale": why,
    }


def _length_pitfall(e: _Evidence, margin: float | None = None) -> tuple[str, dict[str, Any]] | None:
    got = _length_limit(e, margin or e.length_margin)
    if got is None:
        return None
    limit, basis = got
    weight = 0.5 * e.sum_pos
    rho = e.ev.get("rho")
    return _length_pitfall_args(
        e,
        limit,
        weight,
        f"Reward rises with length (Spearman rho {rho} over {e.ev.get('n')} rollouts), so padding pays. A "
        f"word_count pitfall above {limit} words ({basis}) with weight -{_w(weight)} makes padding cost reward "
        "while an answer of the reference's length keeps its score.",
    )


def _previous_limit(e: _Evidence) -> int | None:
    for a in reversed(e.attempts_with("edit_rubric")):
        for c in (a.get("payload") or {}).get("add") or []:
            check = c.get("check") or {}
            if check.get("type") == "word_count" and _num(check.get("min")):
                return int(check["min"]) - 1
    return None


def _length_revise(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    prev = _previous_limit(e)
    trial = e.trial or {}
    reason = str(trial.get("reason") or "")
    measured = json.dumps(trial.get("measurements") or {}).lower()
    if prev is None:
        return _length_pitfall(e, 1.0)
    words = e.policy_words()
    if "reference" in reason.lower():
        limit = math.ceil(prev * 1.25)
        weight = 0.5 * e.sum_pos
        why = f"the trial says the reference answer lost score ({reason}); a looser limit ({prev} → {limit} words)"
    elif words and max(words) <= prev:
        limit = max(1, math.ceil(statistics.median(words)))
        weight = 0.5 * e.sum_pos
        why = f"no rollout was longer than {prev} words, so the pitfall never fired; the policy's median {limit}"
    else:
        base = e.ref_words or prev
        limit = min(prev - 1, math.ceil(1.0 * base)) if prev > 1 else prev
        weight = 1.0 * e.sum_pos
        why = f"the correlation did not fall enough ({reason or measured[:200]}); a tighter limit ({prev} → {limit})"
        why += f" at twice the weight (-{_w(weight)})"
    return _length_pitfall_args(e, limit, weight, f"Revision after the critic's reject: {why}.")


def _padding_pitfall(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    weight = 0.5 * e.sum_pos
    return "edit_rubric", {
        "task_id": e.task_id,
        "add": [
            {
                "id": "padding_pitfall",
                "text": "The response pads its length with repetition, filler or restated points instead of adding "
                "substance.",
                "weight": -_w(weight),
            }
        ],
        "rationale": "A length limit did not pass the critic; a judged pitfall against padding targets the hack "
        "itself rather than length.",
    }


def _feature_pitfall(e: _Evidence, heavier: bool = False) -> tuple[str, dict[str, Any]] | None:
    feature = str(e.ev.get("feature") or "")
    weight = (1.0 if heavier else 0.5) * e.sum_pos
    crit: dict[str, Any]
    if feature == "bullets":
        ref_bullets = len(_BULLET.findall(e.reference or ""))
        n = max(ref_bullets + 2, 4)
        crit = {
            "id": "bullet_pitfall",
            "text": f"The response uses more than {n - 1} bullet lines (list padding).",
            "kind": "programmatic",
            "check": {"type": "bullet_count", "min": n},
        }
    elif feature == "exclamations":
        crit = {
            "id": "exclamation_pitfall",
            "text": "The response uses more than one exclamation mark (hype instead of content).",
            "kind": "programmatic",
            "check": {"type": "regex", "pattern": "!.*!", "multiline": False},
        }
    elif feature:
        word = e.ev.get("word")
        what = f" (e.g. '{word}')" if word else ""
        crit = {
            "id": f"{re.sub(r'[^a-z0-9_]+', '_', feature.lower())}_pitfall",
            "text": f"The response games the grader through {feature.replace('_', ' ')}{what} instead of substance.",
        }
    else:
        return None
    crit["weight"] = -_w(weight)
    return "edit_rubric", {
        "task_id": e.task_id,
        "add": [crit],
        "rationale": f"Reward rises with {feature} (rho {e.ev.get('rho')}, partial given length "
        f"{e.ev.get('partial_rho_given_length')}): a pitfall against it with weight -{_w(weight)}.",
    }


def _reference_criterion(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    if not e.reference:
        return None
    weight = e.max_pos
    return "edit_rubric", {
        "task_id": e.task_id,
        "add": [
            {
                "id": "reference_points",
                "text": _clip(f'Covers the key points of this reference answer: "{_excerpt(e.reference, 60)}"', 900),
                "weight": _w(weight),
            }
        ],
        "rationale": f"The reference answer scores below the policy ({e.ev.get('reference_reward')} vs median "
        f"{e.ev.get('median_reward')}): a criterion for the reference's key points restores the order.",
    }


def _reference_length(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    words = e.policy_words()
    if not e.ref_words or not words:
        return None
    return _length_pitfall(e)


def _reference_first(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    words = e.policy_words()
    if e.ref_words and words and statistics.median(words) > 1.2 * e.ref_words:
        return _reference_length(e)
    return _reference_criterion(e)


def _reference_second(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    words = e.policy_words()
    if e.ref_words and words and statistics.median(words) > 1.2 * e.ref_words:
        return _reference_criterion(e)
    return _reference_length(e)


def _target_criterion(e: _Evidence) -> dict[str, Any] | None:
    cid = e.ev.get("criterion_id") or e.ev.get("worst_criterion")
    crit = e.criterion(cid)
    if crit is None and cid and e.ev.get("criterion_text"):
        crit = {"id": cid, "text": e.ev["criterion_text"], "weight": e.ev.get("weight")}
    return crit


def _reweight_down(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    crit = _target_criterion(e)
    w = _num((crit or {}).get("weight"))
    if not crit or w is None or w <= 0:
        return None
    new = _w(max(0.1, w * 0.5))
    if new == w:
        return None
    return "edit_rubric", {
        "task_id": e.task_id,
        "reweight": {str(crit["id"]): new},
        "rationale": f"Criterion {crit['id']} no longer tells responses apart ({e.failure.get('summary', '')}); "
        f"reweighting it {w:g} → {new:g} gives the criteria that still discriminate more of the reward.",
    }


def _reword(e: _Evidence, suffix: str, rationale: str) -> tuple[str, dict[str, Any]] | None:
    """Reword the failure's criterion by appending ``suffix``; ``rationale`` may use ``{id}``."""
    crit = _target_criterion(e)
    if not crit or not crit.get("text"):
        return None
    text = str(crit["text"]).rstrip(".")
    return "edit_rubric", {
        "task_id": e.task_id,
        "reword": {str(crit["id"]): _clip(f"{text}{suffix}", 600)},
        "rationale": rationale.format(id=crit["id"]),
    }


def _reword_stricter(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    return _reword(
        e,
        ", with specific, concrete detail (a passing mention does not count).",
        "Criterion {id} is judged loosely (every rollout passes it); reworded stricter.",
    )


def _reword_checkable(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    return _reword(
        e,
        " (count it only when the response states it explicitly).",
        f"The judge disagrees with itself on criterion {{id}} (mean |Δ| {e.ev.get('mean_abs_delta')}); "
        "reworded to be explicitly checkable.",
    )


_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "with",
        "by",
        "as",
        "is",
        "are",
        "be",
        "it",
        "its",
        "this",
        "that",
        "response",
        "answer",
        "mentions",
        "explains",
        "describes",
        "gives",
        "states",
        "includes",
    ]
)


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in words(text) if len(w) > 2 and w.lower() not in _STOP}


def _grounding(e: _Evidence, crit: dict[str, Any]) -> str | None:
    """The reference answer's sentence that shares the most content words with the criterion."""
    if not e.reference:
        return None
    want = _content_words(str(crit.get("text", "")))
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", e.reference) if len(s.split()) >= 4]
    if not sentences:
        return None
    best = max(sentences, key=lambda s: len(want & _content_words(s)))
    return _clip(best, 300)


def _reword_grounded(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    """A saturated criterion, reworded stricter and grounded in what the reference answer actually says."""
    crit = _target_criterion(e)
    if not crit or not crit.get("text") or crit.get("check") or crit.get("kind") == "programmatic":
        return None  # a programmatic check's verdict does not depend on its wording
    quote = _grounding(e, crit)
    if quote is None:
        return _reword_stricter(e)
    text = str(crit["text"]).rstrip(".")
    return "edit_rubric", {
        "task_id": e.task_id,
        "reword": {str(crit["id"]): _clip(f'{text}, as specifically as the reference answer does: "{quote}"', 600)},
        "rationale": f"Every rollout passes criterion {crit['id']} ({e.failure.get('summary', 'saturated')}), so it "
        "adds the same to every reward and nothing to the advantage; reworded stricter, grounded in the "
        "reference answer's own sentence, so that only rollouts that say it as specifically pass.",
    }


def _replace_harder(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    """A harder criterion in the saturated one's place, at its weight."""
    crit = _target_criterion(e)
    w = _num((crit or {}).get("weight"))
    if not crit or not crit.get("text") or w is None or w <= 0:
        return None
    cid = str(crit["id"])
    args: dict[str, Any] = {
        "task_id": e.task_id,
        "add": [{"id": f"{cid}_strict", "text": _stricter_text([crit]), "weight": _w(w)}],
        "rationale": f"Criterion {cid} is saturated and a stricter wording did not pass the critic: a harder "
        f"criterion in its place (weight {w:g}), so this part of the rubric tells rollouts apart again.",
    }
    if crit.get("id") in {c.get("id") for c in e.rubric}:
        args["remove"] = [cid]
    return "edit_rubric", args


def _drop_saturated(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    """Drop the saturated criterion: what it adds to a group's rewards beyond a constant is judge noise."""
    crit = _target_criterion(e)
    if not crit or crit.get("id") not in {c.get("id") for c in e.rubric}:
        return None
    if not [c for c in e.positive if c.get("id") != crit.get("id")]:
        return None  # the rubric needs a positive criterion left
    return "edit_rubric", {
        "task_id": e.task_id,
        "remove": [str(crit["id"])],
        "rationale": f"Criterion {crit['id']} stays saturated and no stricter version passed the critic: what it "
        "adds to a group's rewards beyond a constant is the judge's noise, so drop it.",
    }


def _partial_criterion(e: _Evidence) -> tuple[str, dict[str, Any]] | None:
    """A dead criterion: add one the policy can partly meet now, a first step towards it."""
    crit = _target_criterion(e)
    w = _num((crit or {}).get("weight"))
    if not crit or not crit.get("text") or w is None or w <= 0:
        return None
    text = _sentence(_clip(str(crit["text"]), 300))
    return "edit_rubric", {
        "task_id": e.task_id,
        "add": [
            {
                "id": f"{crit['id']}_partial",
                "text": f"Makes a clear start on this, even if incomplete: {text}.",
                "weight": _w(max(0.1, 0.5 * w)),
            }
        ],
        "rationale": f"No rollout meets criterion {crit['id']} (recent means {e.ev.get('recent_means')}), so it "
        "adds nothing to the advantage; a criterion the policy can partly meet now gives the group a spread "
        "towards it.",
    }


_GUIDANCE: list[tuple[str, Option]] = [("guide", _guide), ("guide_more", _guide_more), ("park", _park)]
_LADDERS: dict[tuple[str, str], list[tuple[str, Option]]] = {
    ("non_discriminative_low", GUIDANCE): _GUIDANCE,
    ("non_discriminative_low", SAMPLING): [("park", _park), ("demote", _demote)],
    ("non_discriminative_high", RUBRIC): [
        ("stricter", _stricter),
        ("stricter_more", lambda e: _stricter(e, heavier=True)),
        ("retire", _retire),
    ],
    ("non_discriminative_high", SAMPLING): [("retire", _retire), ("demote", _demote)],
    ("spurious_length", RUBRIC): [
        ("length_pitfall", _length_pitfall),
        ("length_revise", _length_revise),
        ("padding_pitfall", _padding_pitfall),
    ],
    ("spurious_feature", RUBRIC): [
        ("feature_pitfall", _feature_pitfall),
        ("feature_heavier", lambda e: _feature_pitfall(e, heavier=True)),
        ("padding_pitfall", _padding_pitfall),
    ],
    ("reference_below_policy", RUBRIC): [
        ("reference_first", _reference_first),
        ("reference_second", _reference_second),
        ("length_revise", _length_revise),
    ],
    ("criterion_saturated", RUBRIC): [
        ("reword_grounded", _reword_grounded),
        ("replace_harder", _replace_harder),
        ("drop", _drop_saturated),
    ],
    ("criterion_saturated", GUIDANCE): [("avoid", _avoid_hint), ("guide_more", _guide_more), ("park", _park)],
    ("criterion_saturated", SAMPLING): [("demote", _demote), ("retire", _retire)],
    ("criterion_dead", GUIDANCE): [
        ("guide_criterion", _guide_criterion),
        ("guide_more", _guide_more),
        ("park", _park),
    ],
    ("criterion_dead", RUBRIC): [("partial", _partial_criterion), ("park", _park)],
    ("criterion_dead", SAMPLING): [("park", _park), ("demote", _demote)],
    ("judge_disagreement", RUBRIC): [
        ("reword_checkable", _reword_checkable),
        ("reweight_down", _reweight_down),
    ],
}
_BY_INTERFACE: dict[str, list[tuple[str, Option]]] = {
    GUIDANCE: _GUIDANCE,
    RUBRIC: [("stricter", _stricter), ("retire", _retire)],
    SAMPLING: [("demote", _demote), ("park", _park)],
}


# --------------------------------------------------------------------------------------------------
# the model


class RuleBasedChatModel(BaseChatModel):
    """A chat model that decides by rules instead of sampling text (see the module docstring for them).

    Attributes:
        tool_specs: the tools it is bound to (OpenAI format); set by ``bind_tools``.
        park_steps: how long a parked task stays parked.
        length_margin: the word_count pitfall's limit as a multiple of the reference answer's words.
    """

    tool_specs: list[dict[str, Any]] = Field(default_factory=list)
    interfaces: list[str] = Field(default_factory=list, description="Dotted paths of interfaces beyond the registered.")
    park_steps: int = Field(default=20, ge=1)
    length_margin: float = Field(default=1.2, gt=1)

    @property
    def _llm_type(self) -> str:
        return "harnessrl-rule-based"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RuleBasedChatModel:
        """A copy bound to ``tools`` (it calls only tools it is bound to)."""
        return self.model_copy(update={"tool_specs": [convert_to_openai_tool(t) for t in tools]})

    @property
    def tool_names(self) -> set[str]:
        return {s["function"]["name"] for s in self.tool_specs}

    @property
    def _builder_tools(self) -> set[str]:
        return {c.builder_tool for c in interface_classes(self.interfaces).values()}

    # -------------------------------------------------------------- generation

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.decide(messages))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._generate(messages, stop)

    def decide(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """The next answer for ``messages``: a tool call, or a plain text when there is nothing to call."""
        history = _History(messages)
        names = self.tool_names
        if SUBMIT in names:
            return self._attribute(history, names)
        if names & self._builder_tools:
            return self._propose(history, names)
        return AIMessage(content=f"RuleBasedChatModel has no rule for the tools {sorted(names)}.")

    @staticmethod
    def _calls(calls: list[tuple[str, dict[str, Any]]], content: str = "") -> AIMessage:
        return AIMessage(
            content=content,
            tool_calls=[{"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:16]}"} for name, args in calls],
        )

    # -------------------------------------------------------------- attribution

    def _failure(self, h: _History) -> dict[str, Any] | None:
        failure = h.context.get("failure")
        if isinstance(failure, dict):
            return failure
        listed = h.latest("get_failures")
        failures = listed.get("failures") if isinstance(listed, dict) else listed
        return failures[0] if isinstance(failures, list) and failures and isinstance(failures[0], dict) else None

    def _attribute(self, h: _History, names: set[str]) -> AIMessage:
        failure = self._failure(h)
        if failure is None:
            if "get_failures" in names and not h.called("get_failures"):
                return self._calls([("get_failures", {"limit": 1})])
            return AIMessage(content="No failure to attribute.")
        kind = str(failure.get("kind") or "")
        task_id = str(failure.get("task_id") or "")
        summary = str(failure.get("summary") or kind.replace("_", " "))
        reads: list[tuple[str, dict[str, Any]]] = []
        if "query_memory" in names:
            if not h.called("query_memory", mode="what_worked"):
                reads.append(("query_memory", {"mode": "what_worked", "text": summary, "kind": kind, "n": 5}))
            if not h.called("query_memory", mode="task_history"):
                reads.append(("query_memory", {"mode": "task_history", "task_id": task_id, "n": 5}))
        if "get_harness_state" in names and not h.called("get_harness_state"):
            reads.append(("get_harness_state", {"task_id": task_id}))
        if reads:
            return self._calls(reads, content="Reading the memory and the harness state before attributing.")
        interface, rationale, evidence = self._decide_interface(h, failure)
        return self._calls(
            [
                (
                    SUBMIT,
                    {
                        "failure_id": str(failure.get("failure_id")),
                        "task_id": task_id,
                        "interface": interface,
                        "rationale": rationale,
                        "evidence": evidence,
                    },
                )
            ]
        )

    def _decide_interface(self, h: _History, failure: dict[str, Any]) -> tuple[str, str, list[str]]:
        kind = str(failure.get("kind") or "")
        ev = failure.get("evidence") or {}
        task_id = str(failure.get("task_id") or "")
        evidence = [f"{kind} at step {failure.get('step')}: {failure.get('summary', '')}".strip()]
        default = failure_hints(self.interfaces).get(kind) or str(failure.get("interface_hint") or RUBRIC)
        if kind == "criterion_saturated" and (ev.get("pitfall") or (_num(ev.get("weight")) or 0) < 0):
            default = GUIDANCE
            evidence.append(f"criterion {ev.get('criterion_id')} is a pitfall every rollout commits")
        allowed = set(allowed_interfaces(self.interfaces).get(kind, (default,)))
        interface, why = default, f"{kind.replace('_', ' ')} is usually fixed through {default}"
        for r in h.errors():
            evidence.append(f"{r.name} failed: {_clip(r.text, 160)}")

        votes: Counter[str] = Counter()
        for item in _items(h.latest("query_memory", mode="what_worked")):
            if item.get("failure_kind") not in (None, kind) or not item.get("interface"):
                continue
            recovered = (item.get("outcome") or {}).get("recovered")
            votes[item["interface"]] += 0 if recovered is False else 2 if recovered is True else 1
            evidence.append(
                f"memory {item.get('id')}: {item.get('interface')} update {item.get('verdict')} on task "
                f"{item.get('task_id')} (recovered: {recovered})"
            )
        best = max((i for i in votes if i in allowed), key=lambda i: votes[i], default=None)
        if best and best != interface and votes[best] >= 2 and votes[best] > votes[interface]:
            interface = best
            why = f"updates of {best} fixed similar {kind} failures before ({votes[best]} votes vs {votes[default]})"

        if interface == GUIDANCE and SAMPLING in allowed:
            failed = self._guidance_failed(h, failure, task_id)
            if failed:
                evidence.extend(failed)
                interface = SAMPLING
                why = "guidance already failed for this task, so it is out of reach for now"
        rationale = f"{why}; chose {interface}."
        return interface, rationale[:1].upper() + rationale[1:], evidence

    def _guidance_failed(self, h: _History, failure: dict[str, Any], task_id: str) -> list[str]:
        out = []
        ev = failure.get("evidence") or {}
        guided = _num(ev.get("guided")) or 0
        if failure.get("kind") in ("non_discriminative_low", "criterion_dead") and guided > 0:
            out.append(f"the flat group already had {guided:g} guided rollout(s)")
        rule = _guidance_rule(_task_view(h.latest("get_harness_state")))
        for item in _items(h.latest("query_memory", mode="task_history")):
            if item.get("task_id") not in (None, task_id):
                continue
            if item.get("interface") == GUIDANCE and item.get("verdict") == "rejected":
                out.append(f"memory {item.get('id')}: a guidance candidate for this task was rejected")
            elif (_num(item.get("guided")) or 0) > 0 and item.get("flat") and (_num(item.get("mean")) or 0) < 0.3:
                out.append(f"step {item.get('step')}: {item.get('guided')} guided rollouts, still flat and low")
        if rule and out:
            out.append(f"guidance in force: {_clip(str(rule.get('text')), 120)!r} (fraction {rule.get('fraction')})")
        return out

    # -------------------------------------------------------------- proposal

    def _propose(self, h: _History, names: set[str]) -> AIMessage:
        failure = self._failure(h)
        if failure is None:
            return AIMessage(content="No failure to propose for.")
        task_id = str(failure.get("task_id") or "")
        reads: list[tuple[str, dict[str, Any]]] = []
        if "inspect_rollouts" in names and not h.called("inspect_rollouts"):
            reads.append(("inspect_rollouts", {"task_id": task_id, "steps": 2, "limit": 16}))
        if "get_harness_state" in names and not h.called("get_harness_state"):
            reads.append(("get_harness_state", {"task_id": task_id}))
        if reads:
            return self._calls(reads, content="Reading the rollouts and the harness state before proposing.")
        evidence = self._evidence(h, failure)
        attribution = h.context.get("attribution") or {}
        kind = str(failure.get("kind") or "")
        interface = str(attribution.get("interface") or failure_hints(self.interfaces).get(kind, RUBRIC))
        ladder = (
            _LADDERS.get((kind, interface)) or _BY_INTERFACE.get(interface) or self._plugin_ladder(interface, evidence)
        )
        tried = self._tried(h)
        for tag, option in ladder:
            if tag in tried:
                continue
            built = option(evidence)
            if built is None or built[0] not in names:
                continue
            tool, args = built
            args = {**args, "failure_id": str(failure.get("failure_id"))}
            args["rationale"] = f"{args.get('rationale', '').strip()} [rule-based: {tag}]"
            return self._calls([(tool, args)])
        done = ", ".join(sorted(tried)) or "none"
        return AIMessage(content=f"No further candidate for {kind} via {interface} (tried: {done}).")

    def _plugin_ladder(self, interface: str, e: _Evidence) -> list[tuple[str, Option]]:
        """A plug-in interface's own suggestions (its ``suggest``), as a ladder of its builder's calls."""
        cls = interface_classes(self.interfaces).get(interface)
        if cls is None:
            return []
        ladder: list[tuple[str, Option]] = []
        for label, args in cls.suggest(e.failure, e.task):
            ladder.append((label, lambda _e, args=args: (cls.builder_tool, dict(args))))
        return ladder

    def _tried(self, h: _History) -> set[str]:
        tags = set()
        builders = self._builder_tools
        for a in h.context.get("attempts") or []:
            tags.update(_TAG.findall(str((a.get("payload") or {}).get("rationale") or "")))
        for r in h.results:
            if r.name in builders:
                tags.update(_TAG.findall(str(r.args.get("rationale") or "")))
        return tags

    def _evidence(self, h: _History, failure: dict[str, Any]) -> _Evidence:
        data = h.latest("inspect_rollouts")
        data = data if isinstance(data, dict) else {}
        task = _task_view(h.latest("get_harness_state"))
        rubric = data.get("rubric") or task.get("rubric") or []
        if isinstance(rubric, dict):
            rubric = rubric.get("criteria") or []
        trial = h.context.get("trial")
        return _Evidence(
            failure=failure,
            rubric=[c for c in rubric if isinstance(c, dict)],
            reference=data.get("reference_answer") or None,
            rollouts=[r for r in data.get("rollouts") or [] if isinstance(r, dict)],
            task=task,
            attempts=[a for a in h.context.get("attempts") or [] if isinstance(a, dict)],
            trial=trial if isinstance(trial, dict) else None,
            notes=[n for n in (h.context.get("attribution") or {}).get("evidence") or [] if "guid" in str(n)][:3],
            park_steps=self.park_steps,
            length_margin=self.length_margin,
        )
