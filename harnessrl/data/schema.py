"""The task schema: a prompt, an optional reference answer, and a rubric of weighted criteria.

A criterion is either *judged* (natural-language text graded by a judge backend) or *programmatic*
(the same kind of text, plus a typed ``check`` evaluated in code). A negative weight makes it a
pitfall: satisfying it lowers the reward. The rubric stored on a task is version 0, the dataset's;
the rubric-criteria interface versions its own edits and never changes this one.

A task may also carry a ``gold_rubric``: what the prompt truly asks (exact checks wherever the request
is formal). It is for evaluation only: a run strips it from every task it trains on before the harness,
the tool server, the memory or the evolver see them (:meth:`Task.without_gold`), and scores held-out
tasks with it, so that an evaluation never shares the failure of the rubric the harness may repair.

Each text field has a size limit, so that a file with a runaway field (a whole document pasted into one cell) is
refused with its line instead of being trained on: the prompt :data:`MAX_PROMPT_CHARS` (all its turns together),
the reference answer :data:`MAX_REFERENCE_CHARS`, a criterion's text :data:`MAX_CRITERION_CHARS`. They are far
above what a policy's context or a judge's prompt holds; a task that needs more is not one this trainer can use.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harnessrl.data.checks import Check

__all__ = [
    "MAX_CRITERION_CHARS",
    "MAX_PROMPT_CHARS",
    "MAX_REFERENCE_CHARS",
    "ChatMessage",
    "Criterion",
    "Task",
    "prompt_text",
    "task_group",
]

MAX_PROMPT_CHARS = 200_000
"""The longest prompt, in characters, all its chat turns together (about 50,000 tokens)."""
MAX_REFERENCE_CHARS = 100_000
"""The longest reference answer, in characters (the judge reads it beside a response)."""
MAX_CRITERION_CHARS = 10_000
"""The longest criterion text, in characters (rubric and gold rubric)."""


def _within(value: str, limit: int, name: str, fix: str = "shorten it") -> str:
    """``value``, or a ValueError (the loaders put the field and the line before it) when it is over ``limit``."""
    if len(value) > limit:
        raise ValueError(
            f"{len(value):,} characters long, over the limit of {limit:,} (harnessrl.data.schema.{name}): {fix}"
        )
    return value


class ChatMessage(BaseModel):
    """One chat turn of a prompt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class Criterion(BaseModel):
    """One rubric criterion: what a good response does (weight > 0) or must not do (weight < 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    text: str
    weight: float
    kind: Literal["judged", "programmatic"] = "judged"
    check: Check | None = None

    @model_validator(mode="before")
    @classmethod
    def _infer_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and "kind" not in data and data.get("check") is not None:
            data = {**data, "kind": "programmatic"}
        return data

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("criterion text is blank: say in words what the response must (not) do")
        return _within(v.strip(), MAX_CRITERION_CHARS, "MAX_CRITERION_CHARS")

    @field_validator("weight", mode="before")
    @classmethod
    def _weight_number(cls, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            raise ValueError(f"weight {v!r} is not a number")
        try:
            w = float(v)
        except ValueError:
            raise ValueError(f"weight {v!r} is not a number") from None
        if w != w or w in (float("inf"), float("-inf")):
            raise ValueError(f"weight {v!r} is not a finite number")
        if w == 0:
            raise ValueError("weight is 0: use a positive weight, or a negative one for a pitfall")
        return w

    @model_validator(mode="after")
    def _kind_matches_check(self):
        if self.kind == "programmatic" and self.check is None:
            raise ValueError('a programmatic criterion needs a \'check\' (e.g. {"type": "word_count", "max": 80})')
        if self.kind == "judged" and self.check is not None:
            raise ValueError("a judged criterion has no 'check': drop it, or set kind to 'programmatic'")
        return self

    @property
    def is_pitfall(self) -> bool:
        return self.weight < 0


class Task(BaseModel):
    """One open-ended task with its rubric (version 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    domain: str = Field(min_length=1)
    prompt: str | list[ChatMessage]
    reference_answer: str | None = None
    rubric: list[Criterion]
    gold_rubric: list[Criterion] | None = Field(
        default=None,
        description="What the prompt truly asks, for evaluation only (never seen by the harness); null: none.",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("prompt")
    @classmethod
    def _prompt_not_empty(cls, v: str | list[ChatMessage]) -> str | list[ChatMessage]:
        if isinstance(v, str):
            if not v.strip():
                raise ValueError("prompt is empty")
            return _within(v, MAX_PROMPT_CHARS, "MAX_PROMPT_CHARS")
        if not v or not any(m.role == "user" and m.content.strip() for m in v):
            raise ValueError("prompt has no non-empty user message")
        _within("".join(m.content for m in v), MAX_PROMPT_CHARS, "MAX_PROMPT_CHARS", "shorten its turns")
        return v

    @field_validator("reference_answer")
    @classmethod
    def _blank_reference_is_none(cls, v: str | None) -> str | None:
        if not v or not v.strip():
            return None
        return _within(v, MAX_REFERENCE_CHARS, "MAX_REFERENCE_CHARS", "shorten it, or leave it out (it is optional)")

    @field_validator("rubric", "gold_rubric")
    @classmethod
    def _rubric_sound(cls, v: list[Criterion] | None, info) -> list[Criterion] | None:
        if v is None:
            return v
        name = "rubric" if info.field_name == "rubric" else "gold rubric"
        if not v:
            hint = "" if name == "rubric" else " (or drop gold_rubric)"
            raise ValueError(f"{name} is empty: give at least one criterion with a positive weight{hint}")
        if not any(c.weight > 0 for c in v):
            raise ValueError(f"{name} has no criterion with a positive weight: the reward would be undefined")
        seen: set[str] = set()
        for c in v:
            if c.id in seen:
                raise ValueError(f"criterion id {c.id!r} appears twice in the {name}")
            seen.add(c.id)
        return v

    def without_gold(self) -> Task:
        """This task as training sees it: no gold rubric (the harness must never read what evaluation grades)."""
        return self if self.gold_rubric is None else self.model_copy(update={"gold_rubric": None})

    def trained_on_gold(self) -> Task:
        """This task with its gold rubric as the rubric it trains on (the oracle's view), gold stripped;
        a task without a gold rubric keeps its own."""
        if self.gold_rubric is None:
            return self
        return self.model_copy(update={"rubric": list(self.gold_rubric), "gold_rubric": None})

    def messages(self) -> list[dict[str, str]]:
        """The prompt as chat messages (a text prompt becomes one user turn)."""
        if isinstance(self.prompt, str):
            return [{"role": "user", "content": self.prompt}]
        return [m.model_dump() for m in self.prompt]


def prompt_text(prompt: str | list[ChatMessage] | list[dict[str, str]]) -> str:
    """A prompt as plain text, for judges and embeddings (chat turns joined with their roles)."""
    if isinstance(prompt, str):
        return prompt
    turns = [m if isinstance(m, dict) else m.model_dump() for m in prompt]
    if len(turns) == 1:
        return turns[0]["content"]
    return "\n".join(f"{t['role']}: {t['content']}" for t in turns)


def task_group(task: Task) -> str:
    """The group of the data a task belongs to, for repairs that reach a whole group (docs/design.md §4):
    ``family:<name>`` from ``metadata.family`` (our suites), else ``tag:<tag>`` from the first of
    ``metadata.tags`` or ``metadata.example_tags`` (HealthBench's ``theme:…``; RaR and RubricHub keep their
    source as the domain), else ``domain:<domain>``."""
    meta = task.metadata or {}
    if meta.get("family") is not None:
        return f"family:{meta['family']}"
    for name in ("tags", "example_tags"):
        tags = meta.get(name)
        if isinstance(tags, list) and tags and isinstance(tags[0], str):
            return f"tag:{tags[0]}"
    return f"domain:{task.domain}"
