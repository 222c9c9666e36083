"""The ``harnessrl`` command: data validation, grading with the judge, training, benchmarks, the settings.

Each command parses its options and calls the module that does the work (the judge bench:
:mod:`harnessrl.judges.bench`; the method bench: :mod:`harnessrl.bench`).

Later subcommands (train, eval, report, evolver) plug into the same typer app.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harnessrl.data.loaders import FILE_FORMATS
from harnessrl.errors import HarnessRLError, RowError

__all__ = ["app", "main"]

app = typer.Typer(
    name="harnessrl",
    help="Rubric-based RL with a training-time harness that co-evolves with the policy.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
data_app = typer.Typer(help="Check and locate task data.", no_args_is_help=True)
bench_app = typer.Typer(help="Measure speed and quality; every command prints its figures.", no_args_is_help=True)
config_app = typer.Typer(
    help="The settings: their reference page, and the values a run config resolves to.", no_args_is_help=True
)
app.add_typer(data_app, name="data")
app.add_typer(bench_app, name="bench")
app.add_typer(config_app, name="config")

console = Console()
err_console = Console(stderr=True)

FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        help=f"{' | '.join(FILE_FORMATS)}: our JSONL, or a public rubric set in its own layout (a preset)",
    ),
]


_verbose = False


@app.callback()
def _root(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug details.")] = False) -> None:
    global _verbose
    _verbose = verbose
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _quiet_transformers() -> None:
    """Without --verbose, silence transformers' progress bars and warnings. Only the commands that load
    models call it: importing transformers takes seconds, and `harnessrl evolver` must run without it."""
    if _verbose:
        return
    import warnings

    from transformers.utils import logging as hf_logging

    # transformers 5 renamed gradient checkpointing; TRL still calls the old names every step
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\..*")

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


# ------------------------------------------------------------------------------------------- data
def _print_row_errors(source: Path, errors: Sequence[RowError], valid: int, then: str, note: str | None = None) -> None:
    """Each bad row of a data file (tasks or judge labels) on stderr, then how many rows were good; ``note``: how
    the file was read (the layout ``--format auto`` took it for), said first."""
    err_console.print(f"[bold red]{escape(str(source))}: {len(errors)} invalid row(s)[/]")
    if note:
        err_console.print(f"  [yellow]{escape(note)}[/]", highlight=False, soft_wrap=True)
    for e in errors:
        # one unwrapped line per bad row (grep-able); the row's text is escaped, the mark is markup
        err_console.print(f"  [red]✗[/] {escape(str(e))}", highlight=False, soft_wrap=True)
    err_console.print(f"{valid} row(s) were valid. {then}", highlight=False)


@data_app.command("validate")
def data_validate(
    file: Annotated[Path, typer.Argument(help="Task file: JSONL (ours, or a preset's layout) or parquet.")],
    fmt: FormatOpt = "auto",
    domain: Annotated[str | None, typer.Option(help="Domain for rows that name none.")] = None,
) -> None:
    """Check every row; print each bad row with its line number, or a summary of a good file."""
    from harnessrl.data.loaders import validate_file

    report = validate_file(file, fmt, default_domain=domain)  # type: ignore[arg-type]
    if report.errors:
        _print_row_errors(
            file, report.errors, len(report.tasks), "Fix the rows above and validate again.", report.format_note
        )
        raise typer.Exit(1)
    s = report.summary()
    console.print(f"[bold green]✓ {file}[/]: {s['tasks']} valid tasks (format: {report.format})")
    table = Table(title="Tasks per domain")
    table.add_column("domain")
    table.add_column("tasks", justify="right")
    for d, n in s["domains"].items():
        table.add_row(d, str(n))
    console.print(table)
    cpt = s["criteria_per_task"]
    console.print(
        f"criteria: {s['criteria']} (per task min {cpt['min']} / mean {cpt['mean']} / max {cpt['max']}), "
        f"pitfalls {s['pitfall_share']:.1%}, programmatic {s['programmatic_share']:.1%}, "
        f"tasks with a reference answer: {s['with_reference']}"
    )


@data_app.command("path")
def data_path() -> None:
    """Print where the bundled Rubric-Mix sample lies."""
    from harnessrl.data import bundled_path

    for split in ("train", "heldout"):
        console.print(f"{split}: {bundled_path(split)}", highlight=False)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ judge
def _judge_config(backend: str | None, model: str | None, base_url: str | None, config: Path | None):
    from harnessrl.config import load_yaml
    from harnessrl.judges import JudgeConfig

    data: dict = {}
    if config:
        raw = load_yaml(config)
        data = dict(raw.get("judge", raw))
    for key, val in (("backend", backend), ("model", model), ("base_url", base_url)):
        if val is not None:
            data[key] = val
    return JudgeConfig.model_validate(data)


def _read_responses(path: Path) -> list[tuple[str | None, str]]:
    """(task_id or None, response) from a JSONL of {"response", "task_id"?} or a text file, one per line."""
    out: list[tuple[str | None, str]] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        if path.suffix == ".jsonl":
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise HarnessRLError(f"{path} line {lineno}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict) or not isinstance(row.get("response"), str):
                raise HarnessRLError(f'{path} line {lineno}: expected {{"response": "...", "task_id": "..."}}')
            out.append((row.get("task_id"), row["response"]))
        else:
            out.append((None, line.replace("\\n", "\n")))
    if not out:
        raise HarnessRLError(f"{path}: no responses in it")
    return out


def _verdict_table(task, result, title: str) -> Table:
    crit = {c.id: c for c in task.rubric}
    table = Table(title=title, title_justify="left", show_lines=False)
    for col, kw in (
        ("criterion", {}),
        ("kind", {}),
        ("weight", {"justify": "right"}),
        ("verdict", {"justify": "right"}),
        ("conf.", {"justify": "right"}),
        ("reason", {"overflow": "fold"}),
    ):
        table.add_column(col, **kw)
    for v in result.verdicts:
        c = crit[v.criterion_id]
        if v.value is None:
            shown = "[yellow]missing[/]"
        else:
            good = v.value >= 0.5 if c.weight > 0 else v.value < 0.5
            shown = f"[{'green' if good else 'red'}]{v.value:.2f}[/]"
        text = c.text if len(c.text) <= 60 else c.text[:57] + "..."
        table.add_row(
            f"{c.id} {text}",
            c.kind + (" pitfall" if c.weight < 0 else ""),
            f"{c.weight:g}",
            shown,
            "" if v.confidence is None else f"{v.confidence:.2f}",
            v.reason or v.source,
        )
    reward = "dropped (too many missing verdicts)" if result.reward is None else f"{result.reward:.3f}"
    table.caption = f"reward = {reward}"
    return table


@app.command("judge")
def judge_cmd(
    task_id: Annotated[str | None, typer.Option("--task", "-t", help="Task id (default: each response's own).")] = None,
    data: Annotated[Path | None, typer.Option(help="Task file (default: the bundled sample).")] = None,
    response: Annotated[str | None, typer.Option("--response", "-r", help="A response to grade.")] = None,
    responses: Annotated[
        Path | None, typer.Option(help='File of responses: JSONL {"response", "task_id"?} or text, one a line.')
    ] = None,
    reference: Annotated[bool, typer.Option(help="Grade the task's reference answer.")] = False,
    poor: Annotated[bool, typer.Option(help="Grade the task's deliberately poor answer (metadata).")] = False,
    backend: Annotated[str | None, typer.Option(help="semantic | local-lm | openai")] = None,
    model: Annotated[str | None, typer.Option(help="Judge model (local-lm path/id, or the server's model).")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL.")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML with a 'judge:' section (JudgeConfig fields).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Grade responses against a task's rubric: a per-criterion table with verdicts and the reward."""
    _quiet_transformers()
    from harnessrl.data import load_bundled, load_tasks
    from harnessrl.judges import RubricRequest, build_judge

    tasks = load_tasks(data) if data else load_bundled("all")
    by_id = {t.id: t for t in tasks}
    items: list[tuple[str | None, str, str]] = []  # (task id, label, response)
    if response is not None:
        items.append((task_id, "response", response))
    if responses is not None:
        items += [
            (tid or task_id, f"{responses.name}:{i}", r) for i, (tid, r) in enumerate(_read_responses(responses), 1)
        ]
    if (reference or poor) and task_id is None:
        raise HarnessRLError("--reference / --poor need --task ID")
    if not items and not (reference or poor):
        raise HarnessRLError("nothing to grade: pass --response TEXT, --responses FILE, --reference or --poor")
    resolved = []
    for tid, label, text in items:
        if tid is None:
            raise HarnessRLError(f"{label}: no task id; pass --task ID or put task_id in the responses file")
        if tid not in by_id:
            raise HarnessRLError(f"unknown task {tid!r}; `harnessrl data validate` lists the file's tasks")
        resolved.append((by_id[tid], label, text))
    if reference or poor:
        if task_id not in by_id:
            raise HarnessRLError(f"unknown task {task_id!r}")
        t = by_id[task_id]
        if reference:
            if not t.reference_answer:
                raise HarnessRLError(f"task {task_id!r} has no reference answer")
            resolved.append((t, "reference answer", t.reference_answer))
        if poor:
            if not t.metadata.get("poor_answer"):
                raise HarnessRLError(f"task {task_id!r} has no metadata.poor_answer")
            resolved.append((t, "poor answer", t.metadata["poor_answer"]))

    judge = build_judge(_judge_config(backend, model, base_url, config))
    with console.status(f"grading {len(resolved)} response(s) with the {judge.name} judge..."):
        results = judge.grade([RubricRequest.for_task(t, text) for t, _, text in resolved])
    if as_json:
        out = [
            {"task_id": t.id, "label": label, "reward": r.reward, "verdicts": [v.model_dump() for v in r.verdicts]}
            for (t, label, _), r in zip(resolved, results, strict=True)
        ]
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    for (t, label, _), r in zip(resolved, results, strict=True):
        console.print(_verdict_table(t, r, f"{t.id} ({t.domain}) — {label} — judge: {judge.name}"))
    m = judge.stats.metrics()
    console.print(f"judge calls: {int(m['judge/calls'])}, missing verdicts: {sum(r.missing for r in results)}")


# ------------------------------------------------------------------------------------------ bench
@bench_app.command("judge")
def bench_judge(
    labels: Annotated[
        Path | None,
        typer.Option(
            help="Your labelled rows (JSONL or parquet) to measure the judge on, instead of the bundled hand "
            "labels. A row: prompt, response, criterion, label (0/1), optionally reference_answer, domain, weight; or "
            "task_id, criterion_id, response, label, naming a criterion of --tasks. Bad rows are listed (exit 1); "
            "the good ones are measured."
        ),
    ] = None,
    tasks: Annotated[
        Path | None,
        typer.Option(
            help="Task file that label rows with task_id / criterion_id refer to (default: the bundled sample)."
        ),
    ] = None,
    bins: Annotated[int, typer.Option(min=1, help="Equal-width verdict bins of the calibration table.")] = 5,
    backend: Annotated[str | None, typer.Option(help="semantic (default) | local-lm | openai | module:Factory")] = None,
    model: Annotated[str | None, typer.Option(help="Judge model for local-lm / openai.")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL.")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML with a 'judge:' section (JudgeConfig fields).")] = None,
    batch_sizes: Annotated[str, typer.Option(help="Comma-separated batch sizes to time.")] = "8,32",
    requests: Annotated[int, typer.Option(help="(response, criterion) pairs to time.")] = 128,
    max_tasks: Annotated[
        int | None, typer.Option(help="Compare reference vs poor on the first N tasks of each domain only.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON (for scripts).")] = False,
) -> None:
    """Judge quality and speed: agreement with labels (AUC, accuracy, per domain, calibration), reference vs
    poor answers, and criteria graded per second.

    Without --labels: the bundled hand labels, then reference vs poor and throughput on the bundled sample.

    With --labels FILE: agreement and calibration on your own rows only (docs/judges.md, "A judge on your labels")."""
    _quiet_transformers()
    from harnessrl.data import load_bundled, load_judge_labels, load_tasks, validate_labels_file
    from harnessrl.judges import build_judge
    from harnessrl.judges.bench import measure_judge

    if tasks is not None and labels is None:
        raise HarnessRLError("--tasks names the tasks of a labels file: pass --labels FILE too")
    task_list = load_tasks(tasks) if tasks else load_bundled("all")
    if labels is not None:
        label_report = validate_labels_file(labels, task_list, str(tasks) if tasks else "the bundled sample")
        rows, row_errors = label_report.labels, label_report.errors
    else:
        rows, row_errors = load_judge_labels(), []
    if not rows:  # nothing to measure: say what is wrong before loading a judge
        _print_row_errors(labels or Path("labels"), row_errors, 0, "Fix the rows above and run again.")
        raise typer.Exit(1)
    status = err_console if as_json else console  # --json keeps stdout for the JSON alone
    with status.status(f"loading the {backend or 'configured'} judge..."):
        judge = build_judge(_judge_config(backend, model, base_url, config))
    source = str(labels) if labels else "the bundled hand labels"
    out = measure_judge(
        judge,
        rows,
        row_errors,
        source,
        bins=bins,
        task_list=None if labels is not None else task_list,
        max_tasks=max_tasks,
        requests=requests,
        batch_sizes=[int(b) for b in batch_sizes.split(",") if b.strip()] if labels is None else [],
        console=None if as_json else console,
        status=status,
    )
    if as_json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    if row_errors:
        _print_row_errors(
            labels or Path("labels"),
            row_errors,
            len(rows),
            "The figures are from those; fix the rows above and run again to measure them all.",
        )
        raise typer.Exit(1)


def _csv(value: str | None, option: str, kind=str) -> list | None:
    if value is None:
        return None
    try:
        items = [kind(v.strip()) for v in value.split(",") if v.strip()]
    except ValueError:
        raise HarnessRLError(f"{option} {value!r}: give a comma-separated list, e.g. {option} 0,1,2") from None
    if not items:
        raise HarnessRLError(f"{option} is empty: give a comma-separated list")
    return items


@bench_app.command("run")
def bench_run(
    config: Annotated[Path, typer.Option("--config", "-c", help="Bench config YAML (see configs/bench-cpu.yaml).")],
    out: Annotated[Path | None, typer.Option(help="Output folder (default: the config's 'out').")] = None,
    methods: Annotated[str | None, typer.Option(help="Only these methods, comma-separated.")] = None,
    seeds: Annotated[str | None, typer.Option(help="Only these seeds, comma-separated, e.g. 0,1,2.")] = None,
    dry_run: Annotated[bool, typer.Option(help="Validate and print the plan; run nothing.")] = False,
    rerun_changed: Annotated[
        bool, typer.Option(help="Run again (from scratch) the runs made with other settings than the bench's.")
    ] = False,
    report: Annotated[bool, typer.Option(help="Write the bench report when the runs are done.")] = True,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            help="Runs at once, each with cores/N torch threads (scores stay deterministic per seed; wall times "
            "of runs that share the cores are not comparable). Default 1: one after another.",
        ),
    ] = 1,
) -> None:
    """Run methods x seeds, one `harnessrl train` process each, one after another (or --jobs N at once).

    Each run goes to <out>/<method>/seed<k>. Resumable: finished runs are skipped, interrupted ones
    resume from their last checkpoint, missing ones start; bench.json records them all."""
    from harnessrl.analysis.report import print_results, write_bench_report
    from harnessrl.bench.config import load_bench_config
    from harnessrl.bench.runner import failed_runs, run_bench

    cfg = load_bench_config(config).select(
        methods=_csv(methods, "--methods"), seeds=_csv(seeds, "--seeds", int), out=str(out) if out else None
    )
    try:
        manifest = run_bench(
            cfg, console=console, rerun_changed=rerun_changed, dry_run=dry_run, source=str(config), jobs=jobs
        )
    except KeyboardInterrupt:
        err_console.print(f"interrupted: run the same command again to resume ({cfg.out}/bench.json has the state)")
        raise typer.Exit(130) from None
    if dry_run:
        return
    failed = failed_runs(manifest)
    if report:
        try:
            print_results(write_bench_report(cfg.out), console)
        except HarnessRLError as e:
            if not failed:
                raise
            err_console.print(f"no report: {e}", highlight=False)  # every run failed before writing anything
    if failed:
        err_console.print(
            f"[bold red]{len(failed)} run(s) failed:[/] {', '.join(failed)} — see their logs "
            f"({cfg.out}/<method>/seed<k>.log) and {cfg.out}/bench.json; run the bench again to retry them"
        )
        raise typer.Exit(1)


@bench_app.command("report")
def bench_report(
    bench_dirs: Annotated[
        list[Path] | None,
        typer.Option(
            "--dir",
            "-d",
            help="A bench output folder (made by `bench run`); give it again for more folders, read as one bench "
            "(ablations run beside the baselines' folder, a seed added later): they must share the bench config "
            "(or configs that train the same: base and overrides, read from the paths their bench.json records), "
            "a method's settings and no method/seed.",
        ),
    ] = None,
    rows: Annotated[
        list[Path] | None,
        typer.Option(
            "--rows",
            help="A committed report's results.json (e.g. benchmarks/results/bench-gold/results.json) whose run rows "
            "are reported as they are beside the folders' runs (seeds whose run folders are gone); give it again "
            "for more. Same rules as folders: one bench config, a method's settings, no method/seed twice.",
        ),
    ] = None,
    rows_methods: Annotated[
        str | None,
        typer.Option(help="Take only these methods' rows from --rows, comma-separated (default: all of them)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Where to write results.md, results.json and plots/ (default: the first bench folder), e.g. a folder "
            "to commit such as benchmarks/results/<bench>; the runs are only read.",
        ),
    ] = None,
) -> None:
    """Write results.md, results.json and plots/*.png for a bench folder (or several), from its runs' files,
    and from committed reports' run rows (--rows)."""
    from harnessrl.analysis.report import print_results, write_bench_report
    from harnessrl.bench.config import same_benchmark

    report = write_bench_report(
        bench_dirs or [],
        out=out,
        rows=rows or [],
        rows_methods=_csv(rows_methods, "--rows-methods"),
        same_benchmark=same_benchmark,
    )
    print_results(report, console)


# ------------------------------------------------------------------------------------------ train
@app.command("train")
def train_cmd(
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Run config YAML (see configs/).")] = None,
    override: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="Override a setting: key.sub=value (repeatable).")
    ] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in run_dir from its last checkpoint.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Delete run_dir's previous run first.")] = False,
) -> None:
    """Train a policy with GRPO and the harness; evaluate on the validation and test splits; write the run directory."""
    _quiet_transformers()
    from harnessrl.trainer.run import train
    from harnessrl.trainer.run_report import print_summary, write_report
    from harnessrl.trainer.train_config import load_train_config

    cfg = load_train_config(config, override)
    summary = train(cfg, resume=resume, overwrite=overwrite, console=console)
    write_report(summary.run_dir)
    print_summary(summary, console)
    unscored = [split for split, e in summary.eval.items() if e.final is None]
    if unscored:  # trained, but nothing says how well: not a success
        err_console.print(
            f"[bold red]error:[/] the final {' and '.join(unscored)} evaluation has no score "
            f"({summary.eval[unscored[0]].final_no_score_reason}); the run's files are written. Fix the eval "
            f"judge, then score the run with `harnessrl eval --run-dir {summary.run_dir}`",
            highlight=False,
        )
        raise typer.Exit(1)


@app.command("eval")
def eval_cmd(
    run_dir: Annotated[Path, typer.Option("--run-dir", "-r", help="A run directory made by `harnessrl train`.")],
    checkpoint: Annotated[
        str | None,
        typer.Option(
            help="best | final | checkpoint-N | base (the policy before training) | a path (default: best; base "
            "where the untrained policy scored best; else final)."
        ),
    ] = None,
    completions: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Sampled answers a task (default: the run's eval.completions). More give a family's score with "
            "less noise; decoding is otherwise the run's.",
        ),
    ] = None,
    split: Annotated[
        list[str] | None, typer.Option(help="Score this split only (validation, test); repeat for both.")
    ] = None,
    family: Annotated[
        list[str] | None, typer.Option(help="Score the tasks of this family (metadata.family) only; repeatable.")
    ] = None,
    domain: Annotated[list[str] | None, typer.Option(help="Score the tasks of this domain only; repeatable.")] = None,
) -> None:
    """Evaluate a checkpoint of a run on its validation and test splits (as the run evaluates: the gold rubrics
    where every task has one, with rubric version 0 beside them; the eval judge). Rows go to eval.jsonl with
    source 'harnessrl eval' and never enter the training curve."""
    _quiet_transformers()
    from harnessrl.trainer.run import evaluate_run

    res = evaluate_run(
        run_dir, checkpoint, completions=completions, splits=split, families=family or (), domains=domain or ()
    )
    results = res["results"]
    num = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    for by in ("per_domain", "per_family"):
        groups = sorted({g for r in results.values() for g in getattr(r, by)})
        if not groups:
            continue
        t = Table(title=f"Evaluation of {res['checkpoint']}, {by.replace('per_', 'per ')}", title_justify="left")
        t.add_column(by.removeprefix("per_"))
        for split, r in results.items():
            t.add_column(f"{split} ({r.tasks} tasks × {r.completions_per_task}), {r.graded_with}", justify="right")
            if r.proxy is not None:
                t.add_column(f"{split} proxy (rubric v0)", justify="right")

        def cells(get):
            out = []
            for r in results.values():
                out.append(get(r.scores))
                if r.proxy is not None:
                    out.append(get(r.proxy))
            return out

        for g in groups:
            t.add_row(g, *cells(lambda s, g=g, by=by: num(getattr(s, by).get(g))))
        t.add_row("[bold]overall[/]", *(f"[bold]{c}[/]" for c in cells(lambda s: num(s.overall))))
        console.print(t)
    for split, r in results.items():
        if r.sampling_se is not None and r.overall is not None:
            console.print(
                f"{split}: {r.graded_with} {r.overall:.3f}, sampling standard error {r.sampling_se:.3f} "
                f"({r.completions_per_task} answers a task; another draw of as many answers moves the score by about "
                "that much)",
                highlight=False,
            )
        if r.overall is None:
            err_console.print(f"[bold red]{split}: no score[/] ({escape(str(r.no_score_reason))})", highlight=False)
    if any(r.overall is None for r in results.values()):
        raise typer.Exit(1)


@app.command("report")
def report_cmd(
    run_dir: Annotated[Path, typer.Option("--run-dir", "-r", help="A run directory made by `harnessrl train`.")],
) -> None:
    """(Re)write a run's plots and HTML report from its files."""
    from harnessrl.trainer.run_report import write_report

    path = write_report(run_dir)
    console.print(f"report: {path}")


# ---------------------------------------------------------------------------------------- evolver
@app.command("evolver")
def evolver_cmd(
    url: Annotated[str | None, typer.Option(help="The trainer's tool server (see run_dir/tool_server.json).")] = None,
    token: Annotated[str | None, typer.Option(help="Its bearer token (or env HARNESSRL_TOOL_TOKEN).")] = None,
    run_dir: Annotated[Path | None, typer.Option(help="Read url and token from this live run's directory.")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="A run config; its evolver section.")] = None,
    override: Annotated[list[str] | None, typer.Option("--set", "-s", help="key.sub=value overrides.")] = None,
    watch: Annotated[float | None, typer.Option(help="Run an evolution point every N seconds until stopped.")] = None,
) -> None:
    """Run the evolver graph as its own process against a live run's MCP tool server."""
    import asyncio
    import time

    from harnessrl.evolution.client import run_evolution_point
    from harnessrl.graph_builder import make_evolver_model
    from harnessrl.trainer.train_config import load_train_config

    if run_dir is not None:
        from harnessrl.records.run_dir import read_json_file

        info_path = run_dir / "tool_server.json"
        info = read_json_file(info_path)
        if info is None:
            raise HarnessRLError(f"{info_path} not found: is a run with the evolver enabled training in {run_dir}?")
        if not isinstance(info, dict) or not info.get("url") or not info.get("token"):
            raise HarnessRLError(f"{info_path} has no url and token: is the run in {run_dir} still starting?")
        url, token = url or info["url"], token or info["token"]
    token = token or os.environ.get("HARNESSRL_TOOL_TOKEN")
    if not url or not token:
        raise HarnessRLError("give --url and --token (or --run-dir of a live run)")
    settings = load_train_config(config, override).evolver
    hold_s = _lease(settings, run_dir)
    model = make_evolver_model(settings.backend, settings.llm, settings.graph.interfaces, settings.graph.remedies)

    def on_event(kind: str, payload: dict) -> None:
        console.print(f"[bold]{kind}[/] {json.dumps(payload, default=str)[:300]}", highlight=False)

    # no since_step: the trainer leaves out every failure an evolution point (this one, an earlier one, or
    # an in-process one) has handled already, and offers a failure again only when it recurs after that
    while True:
        point = run_evolution_point(url, token, model, settings.graph, on_event, hold_s=hold_s, run_dir=run_dir)
        state = asyncio.run(point)
        if isinstance(state, dict) and state.get("held") is False:
            message = f"no evolution point: {state.get('stop_reason')}"
            if watch is None:
                raise HarnessRLError(f"{message}; is the run still training? (see its run directory)")
            err_console.print(message, highlight=False)
        else:
            outcomes = state.get("outcomes", []) if isinstance(state, dict) else []
            console.print(
                f"evolution point done: {len(outcomes)} failure(s) handled, "
                f"{sum(o.status == 'committed' for o in outcomes)} committed"
            )
        if watch is None:
            return
        time.sleep(watch)


def _lease(settings, run_dir: Path | None) -> float:
    """The lease ``harnessrl evolver`` asks for: ``evolver.hold_s`` when given (``--config`` or ``-s``), else the
    live run's own (its config.yaml in ``--run-dir``), else the default. The run grants at most its own
    ``evolver.hold_s`` whatever is asked (a longer lease is cut to it, and the evolver is told)."""
    if "hold_s" in settings.model_fields_set or run_dir is None:
        return settings.hold_s
    from harnessrl.trainer.train_config import load_run_config

    try:
        return load_run_config(run_dir / "config.yaml").evolver.hold_s
    except HarnessRLError as e:  # the trainer caps the lease anyway: ask for the default
        logging.getLogger(__name__).warning("%s; asking for a lease of %g s", e, settings.hold_s)
        return settings.hold_s


# ----------------------------------------------------------------------------------------- config
CONFIGURATION_PAGE = Path("docs") / "configuration.md"

_PAGE_PREAMBLE = """# Configuration reference

<!-- Generated by `harnessrl config docs --out docs/configuration.md` from the settings models. Edit a
description where its field is declared, then run that command: tests/test_config_docs.py fails when this page
differs from what the models generate. -->

Every setting of a run config (`harnessrl train --config my.yaml`) and of a bench config (`harnessrl bench run
--config`), with its type, its default and what it does. A config file sets them by section (`grpo: {max_steps:
100}`); `-s key.sub=value` sets one on the command line (the value read as YAML); a misspelt key is an error that
names it. `harnessrl config show -c my.yaml [-s key=value ...]` prints every value a config resolves to and where
each came from (the default, the file, a `-s`, or derived from another setting). Examples: `configs/`."""


def configuration_page() -> str:
    """docs/configuration.md: every field of the run config's models and the bench config's, from their
    descriptions."""
    from harnessrl.bench.config import BenchConfig
    from harnessrl.config import settings_reference
    from harnessrl.trainer.train_config import TrainConfig

    parts = [
        ("Run config", "What `harnessrl train --config` reads; one YAML file, every section optional.", TrainConfig),
        (
            "Bench config",
            "What `harnessrl bench run --config` reads: a base run config, methods as named overrides of it, seeds.",
            BenchConfig,
        ),
    ]
    return settings_reference(parts, preamble=_PAGE_PREAMBLE)


@config_app.command("docs")
def config_docs(
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help=f"Write the page there (e.g. {CONFIGURATION_PAGE}); default: print it."),
    ] = None,
    check: Annotated[
        bool, typer.Option(help="Write nothing; exit 1 when the page at --out differs from the generated one.")
    ] = False,
) -> None:
    """Generate the configuration reference (docs/configuration.md) from the settings models' descriptions."""
    page = configuration_page()
    if check:
        target = out or CONFIGURATION_PAGE
        current = target.read_text(encoding="utf-8") if target.is_file() else None
        if current != page:
            raise HarnessRLError(
                f"{target} is {'missing' if current is None else 'out of date'}: run "
                f"`harnessrl config docs --out {target}` and commit it"
            )
        console.print(f"[green]✓[/] {target} is up to date", highlight=False)
        return
    if out is None:
        sys.stdout.write(page)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    console.print(f"wrote {out} ({page.count(chr(10))} lines)", highlight=False)


@config_app.command("show")
def config_show(
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Run config YAML (see configs/).")] = None,
    override: Annotated[
        list[str] | None, typer.Option("--set", "-s", help="Override a setting: key.sub=value (repeatable).")
    ] = None,
    changed: Annotated[
        bool, typer.Option(help="Show only the values the file, a -s or another setting set (no defaults).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (setting, value, source) for scripts.")] = False,
) -> None:
    """Print the resolved run configuration, each value with its source: default, the file, -s, or derived."""
    from harnessrl.config import DEFAULT, yaml_text
    from harnessrl.trainer.train_config import explain_train_config

    _, rows = explain_train_config(config, override)
    if changed:
        rows = [r for r in rows if r.source != DEFAULT]
    if as_json:
        out = [{"setting": r.key, "value": r.value, "source": r.source} for r in rows]
        sys.stdout.write(json.dumps(out, indent=2, default=str) + "\n")
        return
    table = Table(title=f"Resolved settings of {config or 'the defaults'}", title_justify="left")
    table.add_column("setting", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    colour = {DEFAULT: "dim", "derived": "yellow"}
    for r in rows:
        style = colour.get(r.source, "cyan" if r.source.startswith("-s ") else "green")
        table.add_row(r.key, escape(yaml_text(r.value)), f"[{style}]{escape(r.source)}[/]")
    table.caption = "derived: computed from another setting; what each does: docs/configuration.md"
    console.print(table)


def main() -> None:
    """Console entry point: HarnessRL errors become one clear message and exit code 1."""
    try:
        app()
    except HarnessRLError as e:
        err_console.print(f"[bold red]error:[/] {e}", highlight=False)
        sys.exit(1)


if __name__ == "__main__":
    main()
