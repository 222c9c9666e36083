"""The training memory on Chroma: round trips, retrieval quality, idempotence, durability, server mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import helpers
import pytest

from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.memory.store import MiniLMEmbeddingFunction, TrainingMemory
from harnessrl.records.steps import GroupRecord, StepRecord


class DefaultEmbeddingUsed(AssertionError):
    pass


def _refuse(*args, **kwargs):
    raise DefaultEmbeddingUsed("Chroma's default embedding function was used (it downloads a model)")


def _refuse_call(self, input):  # Chroma checks an embedding function's __call__ signature
    _refuse()


@pytest.fixture(autouse=True)
def no_default_embedding(monkeypatch):
    """Every test in this file fails if Chroma's default embedding function is ever called."""
    from chromadb.api.types import DefaultEmbeddingFunction
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    monkeypatch.setattr(DefaultEmbeddingFunction, "__call__", _refuse_call)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "__call__", _refuse_call)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "__init__", _refuse)


@pytest.fixture(scope="module")
def ef():
    f = MiniLMEmbeddingFunction()
    f(["warm up"])  # loads the packaged model once for the module
    return f


@pytest.fixture
def mem(tmp_path, ef):
    m = TrainingMemory(tmp_path / "run", embedding_function=ef)
    yield m
    m.close()


def group(step, task, domain="medical", rewards=(0.1, 0.2, 0.3, 0.4), **kw):
    rewards = list(rewards)
    vals = [r for r in rewards if r is not None]
    mean = sum(vals) / len(vals) if vals else None
    std = (sum((r - mean) ** 2 for r in vals) / len(vals)) ** 0.5 if vals else None
    base = dict(
        step=step,
        task_id=task,
        domain=domain,
        rubric_version=0,
        rewards=rewards,
        mean=mean,
        std=std,
        flat=std is not None and std < 0.01,
        lengths=[100] * len(rewards),
        criterion_means={"c1": mean, "c2": None},
    )
    base.update(kw)
    return GroupRecord(**base)


def failure(kind, step, task, summary, domain="medical", **evidence):
    return {"kind": kind, "step": step, "task_id": task, "domain": domain, "evidence": evidence, "summary": summary}


# ---------------------------------------------------------------- steps


def test_steps_round_trip_filters_order_and_none(mem):
    for step in (3, 1, 2, 5):  # written out of order
        mem.add_step(
            StepRecord(step=step, groups=[group(step, "t1"), group(step, "t2", domain="writing")]),
            failures_by_task={"t1": ["nondiscriminative_low"]} if step in (2, 3) else None,
        )
    none_group = group(4, "t1", rewards=[None, None], guidance="think step by step", guided=1, reference_reward=0.9)
    mem.add_step(StepRecord(step=4, groups=[none_group]))
    assert mem.counts() == {"steps": 9, "failures": 0, "updates": 0}

    hist = mem.task_history("t1")
    assert [e.step for e in hist] == [1, 2, 3, 4, 5]
    assert {e.task_id for e in hist} == {"t1"}
    assert [e.step for e in mem.task_history("t1", last_n=2)] == [4, 5]
    assert [e.step for e in mem.task_history("t1", since_step=3)] == [3, 4, 5]
    assert [e.step for e in mem.task_history("t1", since_step=2, last_n=1)] == [5]
    assert mem.task_history("nope") == []

    e4 = hist[3]
    assert e4.mean is None and e4.std is None  # None survives (stored as an absent key)
    assert e4.rewards == [None, None] and hist[0].rewards == [0.1, 0.2, 0.3, 0.4]
    assert e4.guidance == "think step by step" and e4.guided == 1 and e4.reference_reward == 0.9
    e1 = hist[0]
    assert e1.mean == pytest.approx(0.25) and e1.guidance is None and e1.reference_reward is None
    assert e1.criterion_means == {"c1": pytest.approx(0.25), "c2": None}
    assert e1.mean_length == 100 and e1.domain == "medical" and not e1.flat
    assert [e.failures for e in hist] == [[], ["nondiscriminative_low"], ["nondiscriminative_low"], [], []]
    assert "failures: nondiscriminative low" in hist[1].summary

    # the failure flags are filterable metadata
    got = mem.collection("steps").get(where={"fail_nondiscriminative_low": True})
    assert sorted(got["ids"]) == ["2:t1", "3:t1"]
    assert [e.task_id for e in mem.steps_at(3)] == ["t1", "t2"]


def test_upsert_is_idempotent_and_replaces(mem):
    rec = StepRecord(step=7, groups=[group(7, "t1"), group(7, "t2")])
    assert mem.add_step(rec) == ["7:t1", "7:t2"]
    mem.add_step(rec, {"t1": ["spurious_length"]})  # a retried write after a crash
    assert mem.count("steps") == 2
    assert mem.task_history("t1")[0].failures == ["spurious_length"]
    # a rewrite drops values the new version lacks instead of keeping stale ones
    mem.add_step(StepRecord(step=7, groups=[group(7, "t1", rewards=[None])]))
    e = mem.task_history("t1")[0]
    assert e.mean is None and e.failures == []
    assert mem.collection("steps").get(where={"fail_spurious_length": True})["ids"] == []
    # the same task drawn twice in one step: two records with deterministic ids
    assert mem.add_step(StepRecord(step=8, groups=[group(8, "t3"), group(8, "t3")])) == ["8:t3", "8:t3#1"]
    # a group DAPO dropped is stored too, marked as not trained
    dropped = group(9, "t4").model_copy(update={"trained": False})
    assert mem.add_step(StepRecord(step=9, groups=[group(9, "t3")], discarded=[dropped])) == ["9:t3", "9:t4"]
    assert [e.trained for e in mem.steps_at(9)] == [True, False]
    assert "dropped before the update" in mem.task_history("t4")[0].summary

    f = failure("nondiscriminative_high", 7, "t1", "every rollout gets full marks", mean=1.0)
    fid = mem.add_failure(f)
    assert mem.add_failure(dict(f)) == fid
    assert mem.count("failures") == 1

    kw = dict(step=7, payload={"interface": "task_sampling", "task_ids": ["t1"], "action": "retire"})
    mem.add_candidate("c-1", **kw)
    mem.add_candidate("c-1", **kw)
    assert mem.count("updates") == 1


def test_similar_tasks_finds_the_related_task_across_tasks(mem):
    texts = {
        "med-dose": "Explain the correct paediatric dosage of paracetamol for a child with fever.",
        "poem": "Write a sonnet about autumn leaves falling in a quiet park.",
        "physics": "Derive the period of a simple pendulum from Newton's second law.",
        "roleplay": "You are a pirate captain; greet the new crew members in character.",
    }
    for step in range(1, 4):
        mem.add_step(
            StepRecord(step=step, groups=[group(step, t, domain=t) for t in texts]),
            task_texts=texts,
        )
    query = "How much acetaminophen can a toddler safely take for a high temperature?"
    hits = mem.similar_tasks(query, n=3)
    assert hits[0].task_id == "med-dose"
    assert len({h.task_id for h in hits}) == len(hits) == 3  # one entry per task
    assert all(0 <= h.similarity <= 1 for h in hits)
    assert hits[0].similarity > hits[1].similarity
    mem.scan_limit = 2  # the first neighbours hold one task only: the rest comes from Chroma's filter
    assert [h.task_id for h in mem.similar_tasks(query, n=4)] == [h.task_id for h in hits] + [
        ({*texts} - {h.task_id for h in hits}).pop()
    ]
    mem.scan_limit = 500
    hits = mem.similar_tasks("a poem about the fall season", n=2, exclude_task="poem")
    assert "poem" not in {h.task_id for h in hits}
    assert [h.task_id for h in mem.similar_tasks("anything", n=5, domain="physics")] == ["physics"]


# ---------------------------------------------------------------- failures

FAILURES = [
    failure(
        "spurious_length",
        10,
        "essay-1",
        "Reward rises with response length: longer answers score higher regardless of their content.",
        domain="writing",
        spearman=0.71,
    ),
    failure(
        "nondiscriminative_low",
        11,
        "ifeval-3",
        "Every rollout fails the strict 50-word limit, so all rewards are zero.",
        domain="instruction_following",
        mean=0.0,
        std=0.0,
    ),
    failure(
        "nondiscriminative_high",
        12,
        "sci-2",
        "All rollouts satisfy the lax rubric and receive full marks; no spread remains.",
        domain="science",
        mean=1.0,
    ),
    failure(
        "judge_disagreement",
        13,
        "med-4",
        "The judge gives different verdicts when re-grading the same response twice.",
        domain="medical",
        flip_rate=0.4,
    ),
    failure(
        "reference_below_policy",
        14,
        "rp-1",
        "The reference answer scores below the policy's typical response under this rubric.",
        domain="roleplay",
        gap=0.2,
    ),
]


def test_failures_round_trip_and_similarity(mem):
    ids = mem.add_failures(FAILURES)
    mem.set_failure_interface(ids[0], "rubric_criteria")
    mem.add_failure(
        failure("spurious_length", 20, "essay-2", "Scores climb as completions get longer.", domain="writing"),
        interface="rubric_criteria",
    )
    assert mem.count("failures") == 6

    rows = mem.failures(task_id="ifeval-3")
    assert len(rows) == 1 and rows[0].evidence == {"mean": 0.0, "std": 0.0} and rows[0].interface is None
    assert rows[0].step == 11 and rows[0].domain == "instruction_following"
    assert [r.step for r in mem.failures(since_step=13)] == [13, 14, 20]
    assert [r.task_id for r in mem.failures(interface="rubric_criteria")] == ["essay-1", "essay-2"]

    cases = {
        "longer completions get better grades no matter what they actually say": "spurious_length",
        "the grader is inconsistent between repeated evaluations of one answer": "judge_disagreement",
        "nothing passes the tight word count constraint, every score is 0": "nondiscriminative_low",
        "the rubric is too lenient so every rollout earns full marks": "nondiscriminative_high",
    }
    for query, kind in cases.items():
        hits = mem.similar_failures(query, n=3)
        assert hits[0].kind == kind, (query, [(h.kind, h.similarity) for h in hits])
        assert hits[0].similarity >= hits[-1].similarity

    q = "longer completions get better grades no matter what they actually say"
    hits = mem.similar_failures(q, exclude_task="essay-1", n=5)
    assert hits[0].task_id == "essay-2" and "essay-1" not in {h.task_id for h in hits}
    assert {h.kind for h in mem.similar_failures(q, kind="judge_disagreement")} == {"judge_disagreement"}
    assert {h.task_id for h in mem.similar_failures(q, interface="rubric_criteria", n=5)} == {"essay-1", "essay-2"}


@pytest.mark.parametrize("scan_limit", [500, 2])  # 2: the first neighbours rarely match, Chroma filters
def test_filtered_search_agrees_with_chromas_own_filter(mem, ef, scan_limit):
    from harnessrl.memory.filters import MetaFilter, at_least, equals, is_in, not_equal

    mem.scan_limit = scan_limit
    mem.add_failures(FAILURES)
    extra = [failure("spurious_length", 30 + i, f"essay-{i}", f"Longer essays score higher ({i})") for i in range(4)]
    mem.add_failures(extra, interface="rubric_criteria")
    q = "longer completions get better grades no matter what they actually say"
    (qv,) = ef([q])
    col = mem.collection("failures")
    for kw, where in [
        ({"kind": "judge_disagreement"}, {"kind": "judge_disagreement"}),
        ({"exclude_task": "essay-1"}, {"task_id": {"$ne": "essay-1"}}),
        ({"interface": "rubric_criteria", "exclude_task": "essay-0"}, None),
        ({"kind": "spurious_length", "domain": "medical"}, None),
    ]:
        where = (
            where
            or MetaFilter.of(
                equals("interface", kw["interface"]) if "interface" in kw else None,
                equals("kind", kw["kind"]) if "kind" in kw else None,
                equals("domain", kw["domain"]) if "domain" in kw else None,
                not_equal("task_id", kw["exclude_task"]) if "exclude_task" in kw else None,
            ).where()
        )
        want = col.query(query_embeddings=[qv], n_results=3, where=where)["ids"][0]
        assert [h.id for h in mem.similar_failures(q, n=3, **kw)] == want, kw

    # the Python evaluation of a filter is Chroma's, absent keys included
    mem.add_step(StepRecord(step=1, groups=[group(1, "t1"), group(1, "t2", rewards=[None])]), {"t1": ["x_y"]})
    mem.add_step(StepRecord(step=2, groups=[group(2, "t1", guidance="g", guided=2)]))
    got = mem.collection("steps").get(include=["metadatas"])
    for where in [
        MetaFilter.of(equals("task_id", "t1")),
        MetaFilter.of(not_equal("task_id", "t1")),
        MetaFilter.of(at_least("mean", 0.2)),
        MetaFilter.of(not_equal("guidance", "g")),
        MetaFilter.of(equals("fail_x_y", True)),
        MetaFilter.of(is_in("task_id", ["t1", "t2"]), at_least("step", 2)),
    ]:
        want = set(mem.collection("steps").get(where=where.where())["ids"])
        assert {i for i, m in zip(got["ids"], got["metadatas"], strict=True) if where.matches(m)} == want, where
    assert MetaFilter.of(is_in("task_id", ["t1"]), at_least("step", 2)).where() == {
        "$and": [{"task_id": {"$in": ["t1"]}}, {"step": {"$gte": 2}}]
    }


def test_failure_from_a_pydantic_model_keeps_extra_fields(mem):
    from pydantic import BaseModel

    class Failure(BaseModel):
        kind: str
        step: int
        task_id: str
        domain: str
        evidence: dict
        summary: str
        severity: float = 0.5

    f = Failure(kind="criterion_dead", step=3, task_id="t9", domain="science", evidence={"c": "c2"}, summary="dead")
    fid = mem.add_failure(f)
    assert fid.startswith("3:t9:criterion_dead:")
    (row,) = mem.failures()
    assert row.extra == {"severity": 0.5} and row.evidence == {"c": "c2"}


# ---------------------------------------------------------------- update candidates


def test_what_worked_returns_only_accepted_updates_with_outcomes(mem):
    flen, flow, fjudge = FAILURES[0], FAILURES[1], FAILURES[3]
    pitfall = {
        "interface": "rubric_criteria",
        "task_id": "essay-1",
        "add": [{"id": "p1", "text": "Penalise padding", "weight": -1}],
        "rationale": "a pitfall against padding",
    }
    hint = {
        "interface": "rollout_guidance",
        "target": "ifeval-3",
        "text": "count your words",
        "fraction": 0.5,
        "rationale": "guide part of the group",
    }
    c1 = mem.add_candidate("c1", step=10, payload=pitfall, failure=flen, attribution="judge rewards length")
    assert c1.verdict == "proposed" and c1.task_id == "essay-1" and c1.failure_kind == "spurious_length"
    assert c1.rationale == "a pitfall against padding" and c1.failure_ids == [mem.failure_id(flen)]
    mem.update_candidate("c1", verdict="accepted", trials={"corr_before": 0.71, "corr_after": 0.1, "n": 16})
    mem.update_candidate("c1", verdict="committed", applied_step=11)
    mem.record_outcome("c1", {"recovered": True, "std_before": 0.02, "std_after": 0.2, "steps": 3})

    mem.add_candidate("c2", step=10, payload={**pitfall, "rationale": "reweight"}, failure=flen, verdict="rejected")
    mem.add_candidate("c3", step=11, payload=hint, failure=flow, verdict="accepted", trials=[{"mean": 0.3}])
    mem.add_candidate("c4", step=13, payload=hint | {"target": "med-4"}, failure=fjudge)  # still proposed

    hits = mem.what_worked("longer responses are scored higher whatever they contain", n=5)
    assert [h.id for h in hits] == ["c1", "c3"]  # no rejected, no proposed
    top = hits[0]
    assert top.verdict == "committed" and top.applied_step == 11
    assert top.trials == {"corr_before": 0.71, "corr_after": 0.1, "n": 16}
    assert top.outcome == {"recovered": True, "std_before": 0.02, "std_after": 0.2, "steps": 3}
    assert top.payload["add"][0]["id"] == "p1" and top.attribution == "judge rewards length"
    assert hits[1].outcome is None and hits[1].trials == [{"mean": 0.3}]

    assert [h.id for h in mem.what_worked("anything", with_outcome=True)] == ["c1"]
    assert [h.id for h in mem.what_worked("anything", interface="rollout_guidance")] == ["c3"]
    assert [h.id for h in mem.what_worked("anything", kind="nondiscriminative_low")] == ["c3"]
    assert [h.id for h in mem.what_worked("anything", exclude_task="essay-1")] == ["c3"]
    assert [c.id for c in mem.candidates(task_id="essay-1")] == ["c1", "c2"]
    assert [c.id for c in mem.candidates(verdict=["rejected", "proposed"])] == ["c2", "c4"]
    assert mem.candidate("c4").task_id == "med-4" and mem.candidate("zzz") is None
    with pytest.raises(HarnessRLError, match="no update candidate"):
        mem.record_outcome("zzz", {"recovered": False})


def test_candidate_from_pydantic_update(mem):
    from harnessrl.interfaces import ReweightTasks

    upd = ReweightTasks(task_ids=["t5"], action="park", park_steps=4, rationale="out of reach")
    c = mem.add_candidate("cand-park", step=2, payload=upd, failure_text="always zero", task_id="t5")
    assert c.interface == "task_sampling" and c.task_id == "t5" and c.rationale == "out of reach"
    # the memory does not read an update's payload for its task: the caller (the tool service) names it
    assert mem.add_candidate("cand-2", step=2, payload=upd, failure_text="always zero").task_id is None
    assert mem.candidate("cand-park").payload["park_steps"] == 4
    with pytest.raises(ValueError, match="interface"):
        mem.add_candidate("bad", step=1, payload={"x": 1})


def test_candidates_come_in_the_order_they_were_stored(mem):
    # ids are random within a step (c{step}-{hex}): a revision stored after its parent is listed after it,
    # so the evolver's task_history (the last n) keeps the newest
    for cid in ["c2-ffff", "c2-0000", "c1-9999", "c2-8888"]:
        mem.add_candidate(cid, step=int(cid[1]), payload={"interface": "task_sampling"}, task_id="t1")
    assert [c.id for c in mem.candidates(task_id="t1")] == ["c1-9999", "c2-ffff", "c2-0000", "c2-8888"]
    mem.update_candidate("c2-ffff", verdict="rejected")  # a later change keeps its place
    assert [c.id for c in mem.candidates()][1] == "c2-ffff"


# ---------------------------------------------------------------- the embedding function


def test_default_embedding_function_is_never_used(tmp_path, ef):
    import chromadb
    from chromadb.config import Settings

    # the guard works: a collection made without an embedding function hits Chroma's default
    raw = chromadb.PersistentClient(path=str(tmp_path / "raw"), settings=Settings(anonymized_telemetry=False))
    with pytest.raises(DefaultEmbeddingUsed):
        raw.get_or_create_collection("plain").add(ids=["a"], documents=["hello"])
    raw.close()

    with TrainingMemory(tmp_path / "run", embedding_function=ef) as m:
        m.add_step(StepRecord(step=1, groups=[group(1, "t1")]))
        m.add_failure(FAILURES[0])
        assert m.similar_failures("length", n=1)
        assert m.collection("steps").configuration["embedding_function"].name() == "harnessrl-minilm-l6-v2"
        assert m.collection("steps").configuration["hnsw"]["space"] == "cosine"

    # reopened carelessly (no embedding function): the persisted config rebuilds ours, not the default
    client = chromadb.PersistentClient(
        path=str(tmp_path / "run" / "memory"), settings=Settings(anonymized_telemetry=False)
    )
    col = client.get_collection("harnessrl-failures")
    res = col.query(query_texts=["longer answers score higher"], n_results=1)
    assert res["ids"][0] == [TrainingMemory.failure_id(FAILURES[0])]
    client.close()


def test_embedding_function_matches_the_packaged_model(ef):
    import numpy as np

    from harnessrl.memory.embedding import get_embedder

    (v,) = ef(["a sentence"])
    assert np.allclose(v, get_embedder().encode(["a sentence"])[0])
    assert MiniLMEmbeddingFunction.build_from_config(ef.get_config()).get_config() == {"device": "cpu"}


# ---------------------------------------------------------------- durability

WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from harnessrl.memory.store import TrainingMemory
    from harnessrl.records.steps import GroupRecord, StepRecord
    m = TrainingMemory(sys.argv[1])
    for step in range(1, 6):
        groups = [GroupRecord(step=step, task_id=f"t{i}", domain="d", rubric_version=0, rewards=[0.0, 1.0],
                              mean=0.5, std=0.5, flat=False, lengths=[3, 4], criterion_means={}) for i in range(3)]
        m.add_step(StepRecord(step=step, groups=groups), {"t0": ["spurious_length"]})
    m.add_failure({"kind": "spurious_length", "step": 5, "task_id": "t0", "domain": "d",
                   "evidence": {"rho": 0.8}, "summary": "reward grows with length"})
    m.add_candidate("c1", step=5, payload={"interface": "task_sampling", "task_ids": ["t0"], "action": "retire"},
                    verdict="accepted")
    m.record_outcome("c1", {"recovered": True})
    print("written", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # no close, no atexit: a crashed trainer
    """
)


def test_records_survive_a_killed_process(tmp_path, ef):
    """A trainer killed right after its writes (SIGKILL: no close, no atexit) loses nothing."""
    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-c", WRITER, str(run)], capture_output=True, text=True, timeout=120, env=os.environ
    )
    assert "written" in proc.stdout, proc.stderr[-2000:]
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]

    with TrainingMemory(run, embedding_function=ef) as m:
        assert m.counts() == {"steps": 15, "failures": 1, "updates": 1}
        assert [e.step for e in m.task_history("t0")] == [1, 2, 3, 4, 5]
        assert m.task_history("t0")[0].failures == ["spurious_length"]
        assert m.similar_failures("longer responses get higher rewards")[0].evidence == {"rho": 0.8}
        (c,) = m.what_worked("length")
        assert c.outcome == {"recovered": True}
        m.add_step(StepRecord(step=6, groups=[group(6, "t0")]))  # and the store is writable again
        assert m.count("steps") == 16
    run.rename(tmp_path / "renamed")  # a moved or renamed run directory still finds its memory
    with TrainingMemory(tmp_path / "renamed", embedding_function=ef) as m:
        assert m.counts() == {"steps": 16, "failures": 1, "updates": 1}


# ---------------------------------------------------------------- a real Chroma server


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    with helpers.chroma_server(tmp_path_factory.mktemp("chroma") / "data") as url:
        yield url


def test_http_client_against_a_real_server(chroma_server, ef, tmp_path):
    a = TrainingMemory(tmp_path / "run-a", url=chroma_server, embedding_function=ef)
    b = TrainingMemory(url=chroma_server, namespace="run b/other", embedding_function=ef)
    assert (a.namespace, b.namespace) == ("run-a", "run-b-other")
    assert not (tmp_path / "run-a" / "memory").exists()  # nothing embedded when a server is used

    a.add_step(StepRecord(step=2, groups=[group(2, "t1"), group(2, "t2")]), {"t1": ["nondiscriminative_low"]})
    a.add_step(StepRecord(step=1, groups=[group(1, "t1", rewards=[None])]))
    a.add_failures(FAILURES)
    a.add_candidate("c1", step=2, payload={"interface": "task_sampling", "task_ids": ["t1"], "action": "retire"})
    a.update_candidate("c1", verdict="accepted", trials={"delta": 0.3})
    a.record_outcome("c1", {"recovered": False})
    b.add_step(StepRecord(step=1, groups=[group(1, "t1")]))

    assert a.counts() == {"steps": 3, "failures": 5, "updates": 1}
    assert b.counts() == {"steps": 1, "failures": 0, "updates": 0}  # namespaces do not mix
    hist = a.task_history("t1")
    assert [e.step for e in hist] == [1, 2] and hist[0].mean is None and hist[1].failures == ["nondiscriminative_low"]
    hits = a.similar_failures("the grader is inconsistent between repeated evaluations of one answer", n=2)
    assert hits[0].kind == "judge_disagreement"
    (c,) = a.what_worked("anything")
    assert c.outcome == {"recovered": False} and c.trials == {"delta": 0.3}
    a.close()
    b.close()

    again = TrainingMemory(tmp_path / "run-a", url=chroma_server, embedding_function=ef)
    assert again.counts() == {"steps": 3, "failures": 5, "updates": 1}
    again.close()


def test_unreachable_server_is_a_config_error(ef):
    url = f"http://127.0.0.1:{helpers.free_port()}"
    with pytest.raises(ConfigError, match="chroma run"):
        TrainingMemory(url=url, embedding_function=ef)
    with pytest.raises(ConfigError, match="not an http"):
        TrainingMemory(url="ftp://x:1", embedding_function=ef)


def test_needs_a_location(ef):
    with pytest.raises(ConfigError):
        TrainingMemory(embedding_function=ef)


def test_payload_json_round_trips_unicode(mem):
    payload = {
        "interface": "rollout_guidance",
        "target": "t1",
        "text": "Réponds en français — « précis »",
        "fraction": 1,
    }
    mem.add_candidate("u", step=1, payload=payload, failure_text="x")
    assert mem.candidate("u").payload == payload
    assert json.loads(mem.collection("updates").get(ids=["u"])["metadatas"][0]["payload"]) == payload


def test_what_worked_ranks_measured_recoveries_first(mem):
    flen = FAILURES[0]
    payload = {"interface": "rubric_criteria", "task_id": "essay-1", "remove": ["c1"], "rationale": "x"}
    for cid, outcome in (("worse", {"recovered": False}), ("unknown", None), ("better", {"recovered": True})):
        mem.add_candidate(cid, step=10, payload=payload, failure=flen, verdict="committed")
        if outcome is not None:
            mem.record_outcome(cid, outcome)
    assert [h.id for h in mem.what_worked(flen["summary"], n=3)] == ["better", "unknown", "worse"]


def test_a_candidate_without_a_failure_is_filed_under_the_task_its_interface_changes(tmp_path, mem):
    from helpers import build, fruit_world

    world = fruit_world(tmp_path / "run", memory=mem)
    guidance = {"scope": "task", "target": "fruit", "text": "Think of bananas.", "fraction": 0.5}
    cand = build(world.service, "rollout_guidance", **guidance)
    assert mem.candidate(cand.candidate_id).task_id == "fruit"
