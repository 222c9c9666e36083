"""notebooks/quickstart.ipynb: committed as its build script writes it (no outputs), and executed for real
so it cannot rot: the embedded policy and judge, offline, 3 steps with an evolution point at step 2, in a
Jupyter kernel that runs this interpreter."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOK = NOTEBOOKS / "quickstart.ipynb"
KERNEL = "harnessrl-test-python"


def _built_notebook() -> nbformat.NotebookNode:
    spec = importlib.util.spec_from_file_location("build_quickstart", NOTEBOOKS / "build_quickstart.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build()


def test_the_committed_notebook_is_the_one_its_script_builds_without_outputs():
    committed = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(committed)
    built = _built_notebook()
    assert [(c.cell_type, c.source) for c in committed.cells] == [(c.cell_type, c.source) for c in built.cells], (
        "notebooks/quickstart.ipynb differs from its build script: run `python notebooks/build_quickstart.py`"
    )
    code = [c for c in committed.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


@pytest.fixture
def venv_kernel(tmp_path, monkeypatch) -> str:
    """A kernelspec that runs this interpreter (the venv's, with HarnessRL installed), found before any
    ``python3`` kernel a user or the system has installed elsewhere."""
    spec_dir = tmp_path / "jupyter" / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python (HarnessRL tests)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return KERNEL


@pytest.fixture
def embedded_policy():
    from harnessrl.errors import ResourceMissingError
    from harnessrl.models import resolve_model

    try:
        return resolve_model("embedded")
    except ResourceMissingError as e:
        pytest.skip(str(e))


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_quickstart_notebook_trains_and_shows_decisions_plots_and_a_failure_story(
    tmp_path, monkeypatch, venv_kernel, embedded_policy
):
    from nbclient import NotebookClient

    run_dir = tmp_path / "run"
    # the smallest run with an evolution point: failures at steps 1-2, a point at step 2 (none at the last step)
    for key, value in {"STEPS": "3", "EVOLVE_EVERY": "2", "HELDOUT_PER_DOMAIN": "0", "RUN_DIR": str(run_dir)}.items():
        monkeypatch.setenv(f"HARNESSRL_NB_{key}", value)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the kernel inherits it: spin-waiting threads crawl on shared cores
    nb = nbformat.read(NOTEBOOK, as_version=4)
    t0 = time.perf_counter()
    # raises CellExecutionError (with the cell and its traceback) if any cell fails
    client = NotebookClient(nb, timeout=1500, kernel_name=venv_kernel, resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    print(f"notebook executed in {time.perf_counter() - t0:.0f} s")

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o.data["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    decisions = [h for h in html if "<table" in h and ">attribution<" in h]
    assert decisions, "no table of harness decisions in the outputs"
    for kind in ("proposal", "trial", "verdict", "evolution_point"):
        assert f">{kind}<" in decisions[0], kind
    assert any("image/png" in o.get("data", {}) for o in outputs), "no plot in the outputs"
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "Failure " in text and "trial on the frozen policy" in text and "verdict: " in text, text[-3000:]
    assert any("Harness updates" in h or "<h3>" in h for h in html), "no story from the report"
    assert (run_dir / "report.html").is_file() and list((run_dir / "plots").glob("*.png"))
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    print([(e["kind"], e["step"], e.get("interface") or e.get("failure") or "") for e in events])


def test_an_evolution_point_runs_inside_a_running_event_loop():
    """A Jupyter cell runs in an event loop, where asyncio.run cannot: the evolution point's runner moves the
    graph to a worker thread there (else every evolution point of a notebook run would fail)."""
    import asyncio

    from harnessrl.evolution.point import _run

    async def point():
        await asyncio.sleep(0)
        return "handled"

    async def cell():
        return _run(point())

    assert asyncio.run(cell()) == "handled"
    assert _run(point()) == "handled"  # and outside a loop, as in `harnessrl train`
