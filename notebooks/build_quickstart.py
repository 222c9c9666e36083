"""Builds ``notebooks/quickstart.ipynb`` from the cells below: ``python notebooks/build_quickstart.py``.

The notebook is kept as this script so that a change to it is a readable diff, and the committed
``.ipynb`` carries no outputs (tests/test_notebook.py checks both, and executes the notebook).
"""

from __future__ import annotations

import sys
from pathlib import Path
from textwrap import dedent

import nbformat

NOTEBOOK = Path(__file__).with_name("quickstart.ipynb")

CELLS: list[tuple[str, str]] = [
    (
        "markdown",
        """
        # HarnessRL quickstart

        Trains SmolLM2-135M-Instruct (the embedded policy) with TRL's GRPO for a few steps on the bundled
        Rubric-Mix sample, graded by the embedded semantic judge, while the rule-based evolver watches the
        rewards and changes the harness (task sampling, rollout guidance, rubric criteria) only after
        measuring each change on the frozen policy. Everything runs offline on a CPU; the defaults below
        take about 5–10 minutes on two cores.

        Then it lists what the harness decided (`events.jsonl`, `harness.json`), shows the run's plots,
        and tells one reward failure's story from the training memory.

        The settings come from environment variables, with these defaults:

        | variable | default | what |
        |---|---|---|
        | `HARNESSRL_NB_STEPS` | 10 | training steps |
        | `HARNESSRL_NB_EVOLVE_EVERY` | 3 | an evolution point every N steps (when there are new failures) |
        | `HARNESSRL_NB_HELDOUT_PER_DOMAIN` | 1 | held-out tasks a domain, scored before and after training (0: none) |
        | `HARNESSRL_NB_RUN_DIR` | `runs/quickstart` | the run directory (overwritten) |

        The test suite (`tests/test_notebook.py`) executes this notebook with 3 steps, an evolution point
        every 2 steps and no held-out evaluation.
        """,
    ),
    (
        "code",
        """
        import json
        import os
        import warnings
        from pathlib import Path

        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedded model and judge need no download
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


        def quiet_transformers() -> None:
            # as `harnessrl train` does: no progress bars or warnings from transformers (and tqdm's
            # warning that ipywidgets is missing, which it is without harm)
            warnings.filterwarnings("ignore", message="IProgress not found")
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\\..*")
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()


        quiet_transformers()


        def repo_root() -> Path:
            here = Path.cwd().resolve()
            for path in [here, *here.parents]:
                if (path / "configs" / "demo.yaml").exists():
                    return path
            raise FileNotFoundError(f"no configs/demo.yaml in {here} or above: open this notebook in a HarnessRL clone")


        ROOT = repo_root()
        STEPS = int(os.environ.get("HARNESSRL_NB_STEPS", "10"))
        EVOLVE_EVERY = int(os.environ.get("HARNESSRL_NB_EVOLVE_EVERY", "3"))
        HELDOUT_PER_DOMAIN = int(os.environ.get("HARNESSRL_NB_HELDOUT_PER_DOMAIN", "1"))
        RUN_DIR = Path(os.environ.get("HARNESSRL_NB_RUN_DIR", ROOT / "runs" / "quickstart")).resolve()
        print(f"{STEPS} steps, evolution every {EVOLVE_EVERY}, held-out {HELDOUT_PER_DOMAIN} a domain -> {RUN_DIR}")
        """,
    ),
    (
        "markdown",
        """
        ## 1. The configuration

        `configs/demo.yaml` is the main job's configuration (`make demo`); the overrides below are what
        `harnessrl train -c configs/demo.yaml -s key=value` would pass. Misspelt keys are errors that name the key.
        """,
    ),
    (
        "code",
        """
        from harnessrl.trainer.train_config import load_train_config

        overrides = [
            f"run_dir={json.dumps(str(RUN_DIR))}",  # a JSON string is YAML, whatever the path holds
            f"grpo.max_steps={STEPS}",
            f"evolver.every_steps={EVOLVE_EVERY}",
            "eval.every_steps=null",  # held-out evaluation before and after training only
        ]
        if HELDOUT_PER_DOMAIN:
            overrides += [
                f"data.validation_per_domain={HELDOUT_PER_DOMAIN}",
                f"data.test_per_domain={HELDOUT_PER_DOMAIN}",
            ]
        else:
            overrides += ["data.validation=null", "data.test=null"]
        config = load_train_config(ROOT / "configs" / "demo.yaml", overrides)
        print(*overrides, sep="\\n")
        print(f"model {config.model}, judge {config.judge.backend}, method {config.method} ({config.evolver.backend})")
        print(config.grpo.model_dump_json(include={"num_generations", "tasks_per_step", "max_completion_length"}))
        """,
    ),
    (
        "markdown",
        """
        ## 2. Train

        `harnessrl.trainer.run.train` is what `harnessrl train` runs; `write_report` writes `plots/` and
        `report.html`. (Inside Jupyter's event loop the evolution points run their graph in a worker thread.)
        """,
    ),
    (
        "code",
        """
        from rich.console import Console

        from harnessrl.trainer.run import train
        from harnessrl.trainer.run_report import print_summary, write_report

        console = Console(force_jupyter=False, force_terminal=False, width=110)  # plain text in the cell
        summary = train(config, overwrite=True, console=console)
        report = write_report(summary.run_dir)
        print_summary(summary, console)
        print(f"report: {report}")
        """,
    ),
    (
        "markdown",
        """
        ## 3. What the harness decided

        `events.jsonl` is the run's decision trace. At each evolution point the **attributor** blames a
        failure on an interface, the **proposer** builds a candidate update (`proposal`), the **critic**
        measures it on the frozen policy (`trial`) and decides (`verdict`); an accepted candidate is
        committed (`commit`) and applies from the next step. A rejected one goes back to the proposer
        with the measurements (`give_up` when no revision is left).
        """,
    ),
    (
        "code",
        """
        import pandas as pd
        from IPython.display import HTML, Image, display

        from harnessrl.records.run_dir import RunDir

        run = RunDir(RUN_DIR, create=False)
        events = run.read("events.jsonl")
        DECISIONS = ("attribution", "proposal", "trial", "verdict", "commit", "give_up", "evolution_point")


        def compact(update: dict | None) -> dict:
            # an update without its rationale and its empty fields
            return {k: v for k, v in (update or {}).items() if k != "rationale" and v not in (None, [], {}, "")}


        def task_of(e: dict) -> str:
            if e.get("task_id"):
                return e["task_id"]
            parts = str(e.get("failure_id") or "").split(":")  # "{step}:{task}:{kind}:{hash}"
            return parts[1] if len(parts) > 2 else ""


        def measured(trial: dict) -> str:
            # what a critic trial measured on the frozen policy, and what it cost
            cost = trial.get("cost") or {}
            return (
                f"{trial.get('metric')} {trial.get('baseline')} -> {trial.get('candidate')} (interval "
                f"[{trial.get('ci_low')}, {trial.get('ci_high')}], smallest effect {trial.get('threshold')}; cost: "
                f"{cost.get('rollouts')} rollouts, {cost.get('judge_calls')} judge calls, {cost.get('seconds')} s)"
            )


        def detail(e: dict) -> str:
            kind = e["kind"]
            if kind == "attribution":
                return f"{e.get('failure_kind')} -> {e.get('interface')}: {e.get('rationale', '')}"
            if kind == "proposal":
                return (e.get("update") or {}).get("rationale", "")
            if kind == "trial":
                result = e.get("result") or {}
                return f"{'accepted' if result.get('accepted') else 'rejected'}: {measured(result)}"
            if kind == "verdict":
                return e.get("reason", "")
            if kind == "commit":
                return f"{e['interface']} version {e.get('version')}, applies from step {e.get('applies_from_step')}"
            if kind == "give_up":
                return e.get("reason", "")
            return f"{e.get('handled')} failure(s) handled, {e.get('committed')} committed in {e.get('seconds'):.0f} s"


        rows = [
            {
                "step": e["step"],
                "kind": e["kind"],
                "task": task_of(e),
                "interface": e.get("interface") or "",
                "candidate": e.get("candidate_id") or "",
                "detail": detail(e),
            }
            for e in events
            if e["kind"] in DECISIONS
        ]
        failures = [e for e in events if e["kind"] == "failure"]
        print(f"{len(failures)} reward failure(s) detected; {len(rows)} decision event(s)")
        decisions = pd.DataFrame(rows, columns=["step", "kind", "task", "interface", "candidate", "detail"])
        with pd.option_context("display.max_colwidth", 240, "display.max_rows", 200):
            display(decisions)
        """,
    ),
    (
        "markdown",
        """
        `harness.json` holds each interface's state and its versions: version 0 is the dataset's own
        harness, and every commit adds one version with the update and the candidate it came from.
        """,
    ),
    (
        "code",
        """
        from harnessrl.records.run_record import read_harness_file

        harness = read_harness_file(run.harness)  # the run's files are read through harnessrl.records
        print("versions:", harness["versions"])
        history = [
            {
                "interface": name,
                "version": h.get("version"),
                "from step": h.get("step"),
                "candidate": h.get("candidate_id"),
                "update": json.dumps(compact(h.get("update"))),
            }
            for name in harness["versions"]
            for h in (harness.get(name) or {}).get("history", [])
        ]
        with pd.option_context("display.max_colwidth", 240):
            display(pd.DataFrame(history, columns=["interface", "version", "from step", "candidate", "update"]))
        """,
    ),
    (
        "markdown",
        """
        ## 4. The plots

        Reward and its spread, the share of groups with no learning signal (all low / all high), completion
        length and the held-out score: the same images as in `report.html`.
        """,
    ),
    (
        "code",
        """
        for png in sorted(run.plots.glob("*.png")):
            print(png.name)
            display(Image(filename=str(png)))
        """,
    ),
    (
        "markdown",
        """
        ## 5. One failure's story, from the training memory

        The training memory (Chroma, in `run_dir/memory`) keeps every detected failure with its evidence
        and every candidate update with the critic's measurements, its verdict and, once measured, its
        outcome (did the task's learning signal recover after the commit). This is what the evolver
        queries (`query_memory`) at later evolution points. We pick the failure that the most candidates
        answered, a committed one first.
        """,
    ),
    (
        "code",
        """
        from harnessrl.memory.store import TrainingMemory

        with TrainingMemory(RUN_DIR) as memory:
            stored_failures = memory.failures()
            candidates = memory.candidates()
        print(f"memory: {len(stored_failures)} failure(s), {len(candidates)} candidate update(s)")
        with pd.option_context("display.max_colwidth", 240):
            display(
                pd.DataFrame(
                    [(f.step, f.kind, f.task_id, f.interface, f.summary) for f in stored_failures],
                    columns=["step", "kind", "task", "attributed to", "summary"],
                )
            )
        answers = {f.id: [c for c in candidates if f.id in c.failure_ids] for f in stored_failures}
        handled = [f for f in stored_failures if answers[f.id]]
        story = max(
            handled,
            key=lambda f: (any(c.verdict == "committed" for c in answers[f.id]), len(answers[f.id])),
            default=None,
        )
        if story is None:
            print("No failure was handled by the evolver in this run: train more steps, or evolve more often.")
        """,
    ),
    (
        "code",
        """
        if story is not None:
            print(f"Failure {story.id}: {story.summary}")
            print(f"  evidence: {json.dumps(story.evidence)}")
            first = answers[story.id][0]
            print(f"  attributed to {story.interface}: {first.attribution}")
            for c in sorted(answers[story.id], key=lambda c: (c.revision, c.step, c.id)):
                print(f"\\nCandidate {c.id} ({c.interface}, revision {c.revision}) -> {c.verdict.upper()}")
                print(f"  why: {c.rationale}")
                print(f"  update: {json.dumps(compact(c.payload))[:600]}")
                for trial in c.trials or []:
                    print(f"  trial on the frozen policy: {measured(trial)}")
                    print(f"  verdict: {trial.get('reason')}")
                if c.verdict == "committed":
                    outcome = json.dumps(c.outcome) if c.outcome else "not measured yet"
                    print(f"  applied from step {c.applied_step}; outcome: {outcome}")
        """,
    ),
    (
        "markdown",
        """
        The report tells the same story from `events.jsonl` (`report.html` has one per handled failure),
        with the task's learning signal before and after a commit:
        """,
    ),
    (
        "code",
        """
        from harnessrl.records.run_record import RunRecord
        from harnessrl.trainer.run_report import update_stories

        if story is not None:
            record = RunRecord.load(RUN_DIR)  # the run, typed: each event's fields are its kind's model
            mine = [e for e in record.events if getattr(e.payload(), "failure_id", None) == story.id]
            display(HTML(update_stories(mine, record.groups)))
        """,
    ),
    (
        "markdown",
        """
        ## Next

        - The full demo: `make demo` (40 steps, held-out evaluation; `runs/demo/report.html`).
        - A real judge: `configs/judge-openai.yaml` (any OpenAI-compatible server); an LLM evolver:
          `evolver.backend: llm` (see docs/harness.md, "The evolver's LLM").
        - The fixed-harness baseline through the same code path: the override `evolver.enabled=false`.
        """,
    ),
]


def build() -> nbformat.NotebookNode:
    """The quickstart notebook, without outputs."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for i, (kind, source) in enumerate(CELLS):
        make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        nb.cells.append(make(dedent(source).strip("\n"), id=f"cell-{i:02d}"))
    nbformat.validate(nb)
    return nb


def main() -> None:
    nbformat.write(build(), NOTEBOOK)
    sys.stdout.write(f"wrote {NOTEBOOK}\n")


if __name__ == "__main__":
    main()
