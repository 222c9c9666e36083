"""The run report as a person sees it: ``report.html`` of a tiny training run opened in headless Chromium.

A copy of the page gets a small probe script (before anything else runs) that records script errors,
failed resources and console errors, whether every ``<img>`` loaded, and what sticks out of a laptop-wide
window; Chromium's ``--dump-dom`` hands the record back. A second Chromium run keeps a full-page
screenshot (under the test's tmp dir, and the last one in ``runs/report-screenshot.png`` for a person).

Chromium's own headless mode, no Playwright: Debian's ``chromium`` package is all it needs, and
``make test`` installs it where apt is there. Without any Chromium binary the test skips and says why.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import task_row

from harnessrl.records.events import Event
from harnessrl.trainer.run import train
from harnessrl.trainer.run_report import harness_section, update_stories, write_report
from harnessrl.trainer.train_config import TrainConfig

LAPTOP = (1366, 900)  # the most common laptop screen
SCREENSHOT_COPY = Path(__file__).resolve().parents[1] / "runs" / "report-screenshot.png"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

# Runs before the page's own content: listens for errors, then, once everything (images too) has loaded,
# measures the page and writes the result into a hidden element for --dump-dom to carry out.
PROBE = """<script>
(() => {
  const errors = [];
  addEventListener('error', e => {
    const t = e.target;
    errors.push(t && t !== window && (t.src || t.href) ? 'failed to load ' + (t.src || t.href)
                                                        : 'script error: ' + e.message);
  }, true);
  addEventListener('unhandledrejection', e => errors.push('unhandled rejection: ' + e.reason));
  const consoleError = console.error;
  console.error = (...args) => { errors.push('console.error: ' + args.join(' ')); consoleError(...args); };
  addEventListener('load', () => {
    const doc = document.documentElement, width = doc.clientWidth;
    const images = [...document.images].map(i => ({
      src: i.getAttribute('src'), loaded: i.complete && i.naturalWidth > 0, shown_width: i.width}));
    const cells = [...document.querySelectorAll('td, li, p')].map(c => c.innerText.length);
    const stray_pre = [...document.querySelectorAll('pre')].filter(p => !p.closest('details')).length;
    const folded = document.querySelectorAll('details').length;
    const shut_height = doc.scrollHeight;
    document.querySelectorAll('details').forEach(d => d.open = true);  // unfolded, it must fit too
    const name = el => el.tagName.toLowerCase() + ': ' + el.innerText.slice(0, 60);
    const sticking_out = [...document.body.querySelectorAll('*')]
      .filter(el => el.getBoundingClientRect().right > width + 1).map(name);
    const scrolling = [...document.querySelectorAll('pre, td, th, table')]
      .filter(el => el.scrollWidth > el.clientWidth + 1).map(name);
    const probe = document.createElement('pre');
    probe.id = 'probe';
    probe.hidden = true;
    probe.textContent = JSON.stringify({errors, images, width, page_width: doc.scrollWidth,
      height: shut_height, sticking_out, scrolling, longest_visible_text: Math.max(0, ...cells),
      stray_pre, folded});
    document.body.appendChild(probe);
  });
})();
</script>"""


def _chromium() -> str | None:
    for name in (os.environ.get("HARNESSRL_CHROMIUM"), *CHROMIUM_NAMES):
        if name and (found := shutil.which(name)):
            return found
    return None


def _run_chromium(binary: str, profile: Path, *args: str) -> str:
    command = [
        binary,
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return done.stdout


DATA = [
    task_row("fruit", "food", "Name a fruit.", "An apple is a fruit.", "Names a fruit such as an apple"),
    task_row("bread", "food", "How is bread made?", "Bread is baked from flour and water.", "Mentions flour"),
    task_row("sky", "nature", "Why is the sky blue?", "Sunlight scatters off air.", "Mentions scattered sunlight"),
    task_row("rain", "nature", "Where does rain come from?", "Rain falls from clouds.", "Mentions clouds"),
]
HELDOUT = [
    task_row("h-soup", "food", "Name a soup.", "Tomato soup.", "Names a soup"),
    task_row("h-snow", "nature", "What is snow?", "Frozen water falling from clouds.", "Says snow is frozen water"),
    task_row("h-stew", "food", "What goes in a stew?", "Meat and vegetables.", "Names a vegetable"),
    task_row("h-fog", "nature", "What is fog?", "A cloud near the ground.", "Says fog is a low cloud"),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory, tiny_model_dir, one_torch_thread) -> Path:
    """``report.html`` of a four-step run on a tiny policy whose evolver handles failures, with evaluations
    (every section of the report has something in it)."""
    root = tmp_path_factory.mktemp("report-run")
    for name, rows in (("train", DATA), ("heldout", HELDOUT)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = TrainConfig.model_validate(
        {
            "run_dir": str(root / "run"),
            "model": str(tiny_model_dir),
            "device": "cpu",
            "data": {
                "train": str(root / "train.jsonl"),
                "validation": str(root / "heldout.jsonl"),
                "test": str(root / "heldout.jsonl"),
            },
            "grpo": {
                "num_generations": 2,
                "tasks_per_step": 2,
                "max_completion_length": 8,
                "learning_rate": 1e-2,
                "max_steps": 4,
                "save_steps": 4,
            },
            "eval": {"every_steps": 2, "max_new_tokens": 8, "batch_size": 4},
            "harness": {"detectors": {"eps": 0.6, "low": 0.9, "high": 0.95}},
            "evolver": {
                "every_steps": 2,
                "trials": {"rollouts_per_arm": 2, "max_new_tokens": 8},
                "graph": {"max_failures": 1, "max_revisions": 1},
            },
        }
    )
    train(config)
    return write_report(root / "run")


@pytest.mark.slow
def test_report_reads_well_in_a_laptop_browser(report, tmp_path):
    binary = _chromium()
    if binary is None:
        pytest.skip(
            "NO CHROMIUM: the report was not checked in a browser. Install one (`apt-get install -y chromium`, "
            "which `make test` does where apt exists) or point HARNESSRL_CHROMIUM at a Chromium/Chrome binary."
        )
    page = report.read_text(encoding="utf-8")
    probe_page = report.with_name("report.probe.html")  # beside the report, so plots/... resolve alike
    probe_page.write_text(re.sub(r"<head>", "<head>" + PROBE, page, count=1), encoding="utf-8")
    dom = _run_chromium(
        binary,
        tmp_path / "profile-probe",
        f"--window-size={LAPTOP[0]},{LAPTOP[1]}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        probe_page.as_uri(),
    )
    found = re.search(r'<pre id="probe" hidden="">(.*?)</pre>', dom, re.S)
    assert found, f"the probe never reported (the page did not finish loading?):\n{dom[-2000:]}"
    seen = json.loads(html.unescape(found[1]))

    shot = tmp_path / "report-screenshot.png"
    height = min(max(seen["height"], LAPTOP[1]), 16000)
    _run_chromium(
        binary,
        tmp_path / "profile-shot",
        f"--window-size={LAPTOP[0]},{height}",
        f"--screenshot={shot}",
        report.as_uri(),
    )
    assert shot.stat().st_size > 10_000
    SCREENSHOT_COPY.parent.mkdir(exist_ok=True)
    shutil.copyfile(shot, SCREENSHOT_COPY)
    print(f"screenshot ({LAPTOP[0]}x{height}): {shot} (copied to {SCREENSHOT_COPY})")
    print("probe:", json.dumps({k: v for k, v in seen.items() if k != "images"}), seen["images"])

    assert seen["errors"] == []
    assert seen["images"] and all(i["loaded"] for i in seen["images"]), seen["images"]
    assert all(i["shown_width"] <= seen["width"] for i in seen["images"]), seen["images"]
    # tables fit a laptop screen, with every folded text unfolded too; nothing hides behind a scroll bar
    assert seen["page_width"] <= seen["width"], seen["sticking_out"]
    assert seen["sticking_out"] == []
    assert seen["scrolling"] == []
    # long texts fold: no JSON block lies open, and no cell or line shows a wall of text
    assert seen["folded"] > 0 and seen["stray_pre"] == 0
    assert seen["longest_visible_text"] <= 600


def test_long_texts_fold_and_verdicts_read_once():
    """Without a browser: a proposal's update and a long harness summary fold; a trial's reason does not
    repeat the verdict the story already prints."""
    long_text = "A good answer must meet each of these: " + "names the drug and its class; " * 20
    events = [
        {"kind": "attribution", "failure_id": "f1", "interface": "rollout_guidance", "summary": "s", "rationale": "r"},
        {
            "kind": "proposal",
            "failure_id": "f1",
            "candidate_id": "c1",
            "interface": "rollout_guidance",
            "update": {"rationale": "why", "target": "med-004", "text": long_text},
        },
        {
            "kind": "trial",
            "failure_id": "f1",
            "candidate_id": "c1",
            "result": {"accepted": False, "reason": "rejected: the improvement is not reliably above 0"},
        },
    ]
    events = [Event.model_validate({"time": 0.0, "step": 1, **e}) for e in events]
    story = update_stories(events, [])
    assert "<details><summary>the update, as proposed</summary><pre>" in story and long_text in story
    assert "<b>rejected</b>: the improvement is not reliably above 0" in story
    section = harness_section(
        {"versions": {"rollout_guidance": 1}, "summary": {"rollout_guidance": {"task_rules": [long_text]}}}, events
    )
    assert "<td><details><summary>task_rules:" in section and long_text in section
    short = harness_section({"versions": {"decoding": 0}, "summary": {"decoding": {"task_rules": {}}}}, [])
    assert "<td>task_rules: {}</td>" in short
