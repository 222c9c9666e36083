"""The package's layers hold: the import contracts of pyproject.toml ``[tool.importlinter]`` are checked here,
so ``make test`` and CI fail when an import breaks one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    # the checkout under test, whatever copy of harnessrl the environment has installed
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def test_import_contracts_hold():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run(
        [str(lint_imports), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, f"an import contract is broken:\n{out.stdout}\n{out.stderr}"
    assert "0 broken" in out.stdout, out.stdout


HEAVY = ("torch", "transformers", "trl", "chromadb")

_EVOLVER = """
import atexit, sys
atexit.register(lambda: print("heavy:", [m for m in {heavy!r} if m in sys.modules]))
from harnessrl.cli import main
sys.argv = ["harnessrl", "evolver", "--url", {url!r}, "--token", {token!r}]
main()
"""


def test_the_evolver_command_runs_without_the_training_stack(tmp_path):
    """`harnessrl evolver` against a live tool server: a whole evolution point, not one heavy import, and
    every decision it makes in the run's events.jsonl (written trainer-side, through record_event)."""
    from harnessrl.data import load_bundled
    from harnessrl.evolution.mcp_server import ToolServer
    from harnessrl.evolution.service import EvolutionService
    from harnessrl.interfaces import Harness
    from harnessrl.records.failures import Failure
    from harnessrl.records.run_dir import RunDir
    from harnessrl.records.steps import Recorder

    tasks = load_bundled("train")[:3]
    harness = Harness(tasks)
    failure = Failure(
        kind="non_discriminative_high",
        step=1,
        task_id=tasks[0].id,
        domain=tasks[0].domain,
        summary="every rollout scored 1.0",
        interface_hint="rubric_criteria",
    )
    run = RunDir(tmp_path)
    # no trials object: the candidate cannot be measured, so the evolver gives the failure up
    service = EvolutionService(harness, Recorder(None), None, None, run, failures=lambda: [failure], step=lambda: 1)
    server = ToolServer(service)
    url, token = server.start()
    try:
        code = _EVOLVER.format(heavy=HEAVY, url=url, token=token)
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240
        )
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr
    assert "evolution point done: 1 failure(s) handled" in out.stdout, out.stdout
    assert "heavy: []" in out.stdout, f"the evolver command imported the training stack: {out.stdout}"
    kinds = [e["kind"] for e in run.read("events.jsonl")]
    assert kinds[0] == "attribution" and kinds[-2:] == ["give_up", "failure_handled"], kinds
    assert "proposal" in kinds and harness.versions == dict.fromkeys(harness.versions, 0)


def test_code_cites_only_documents_in_the_repository():
    """Docstrings and comments cite the project's own design document (docs/design.md), never a file a reader
    of the repository does not have."""
    assert (ROOT / "docs" / "design.md").is_file()
    outside = []
    for folder in ("harnessrl", "tests", "benchmarks", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == Path(__file__).resolve():
                continue
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                cites_design = "DESIGN" in line and "docs/design.md" not in line
                if cites_design or "../shared" in line or "/shared/DESIGN" in line:
                    outside.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert outside == [], "cite docs/design.md instead:\n" + "\n".join(outside)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/design.md" in readme
