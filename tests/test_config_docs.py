"""Every setting documented where it is declared (docs/configuration.md is generated from the models), and
``harnessrl config show``: the values a run config resolves to, each with its source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harnessrl.bench.config import BenchConfig
from harnessrl.cli import CONFIGURATION_PAGE, app, configuration_page
from harnessrl.config import DEFAULT, DERIVED, undescribed_settings
from harnessrl.errors import ConfigError
from harnessrl.trainer.train_config import TrainConfig, explain_train_config, load_train_config

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.mark.parametrize("model", [TrainConfig, BenchConfig], ids=lambda m: m.__name__)
def test_every_setting_has_a_description(model):
    """Each field of the settings models, nested ones included, says what it does (TRL documents every field of
    GRPOConfig): a field a user can set but only the code explains is a bug."""
    missing = undescribed_settings(model)
    assert missing == [], f"give these fields a Field(description=...) where they are declared: {missing}"


def test_the_committed_configuration_page_is_the_generated_one():
    committed = (ROOT / CONFIGURATION_PAGE).read_text(encoding="utf-8")
    assert committed == configuration_page(), (
        f"{CONFIGURATION_PAGE} differs from the settings models: run "
        f"`harnessrl config docs --out {CONFIGURATION_PAGE}` and commit it"
    )


def test_the_page_has_a_section_for_every_nested_model_and_a_row_for_every_field():
    page = configuration_page()
    for heading in ("### `grpo.`", "### `evolver.trials.`", "### `evolver.trials.signal.`", "### `harness.detectors.`"):
        assert heading in page
    assert "| `max_looks` | int ≥ 1 |" in page and "| `loss_type` | str | `dapo` |" in page
    # a model met twice (the eval judge is a judge) is documented once, and the second place points at it
    assert page.count("### `judge.`") == 1 and "### `eval.judge.`" not in page
    assert "The settings of [`judge.`](#judge)" in page
    assert "## Bench config" in page and "| `seeds` | list of int | `[0, 1, 2]` |" in page


def test_the_docs_command_writes_the_page_and_checks_it(tmp_path):
    out = tmp_path / "configuration.md"
    assert runner.invoke(app, ["config", "docs", "--out", str(out)]).exit_code == 0
    assert out.read_text(encoding="utf-8") == configuration_page()
    assert runner.invoke(app, ["config", "docs", "--out", str(out), "--check"]).exit_code == 0
    out.write_text("# stale\n", encoding="utf-8")
    stale = runner.invoke(app, ["config", "docs", "--out", str(out), "--check"])
    assert stale.exit_code == 1 and "out of date" in str(stale.exception)
    printed = runner.invoke(app, ["config", "docs"])
    assert printed.exit_code == 0 and printed.stdout == configuration_page()


# ---------------------------------------------------------------------------------------- config show
def _sources(path, overrides=()):
    config, rows = explain_train_config(path, list(overrides))
    assert config == load_train_config(path, list(overrides))  # the same config training reads
    return {r.key: r for r in rows}


def _write(tmp_path: Path, settings: dict) -> Path:
    path = tmp_path / "my.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return path


def test_without_a_file_every_value_is_a_default():
    rows = _sources(None)
    assert {r.source for r in rows.values()} == {DEFAULT}
    assert rows["grpo.max_steps"].value == 40 and rows["evolver.trials.signal.min_effect"].value["signal_share"] == 0.25


def test_each_value_names_the_file_or_the_s_that_set_it(tmp_path):
    path = _write(tmp_path, {"grpo": {"max_steps": 7, "learning_rate": 1e-5}, "judge": {"backend": "semantic"}})
    rows = _sources(path, ["grpo.max_steps=3", "eval.completions=4"])
    assert (rows["grpo.max_steps"].value, rows["grpo.max_steps"].source) == (3, "-s grpo.max_steps=3")
    assert (rows["grpo.learning_rate"].value, rows["grpo.learning_rate"].source) == (1e-5, str(path))
    assert rows["judge.backend"].source == str(path)  # set in the file, to the default value: still the file's
    assert rows["eval.completions"].source == "-s eval.completions=4"
    assert rows["grpo.num_generations"].source == DEFAULT


def test_the_last_s_of_a_key_is_its_source_and_a_section_merges(tmp_path):
    path = _write(tmp_path, {"grpo": {"max_steps": 7}})
    rows = _sources(path, ["grpo.max_steps=3", "grpo={learning_rate: 2e-5}", "grpo.max_steps=5", "lora={r: 8}"])
    assert rows["grpo.max_steps"].source == "-s grpo.max_steps=5" and rows["grpo.max_steps"].value == 5
    assert rows["grpo.learning_rate"].source == "-s grpo={learning_rate: 2e-5}"
    assert rows["lora.r"].source == "-s lora={r: 8}" and rows["lora.alpha"].source == DEFAULT


def test_a_section_replaced_whole_forgets_what_the_file_set_under_it(tmp_path):
    path = _write(tmp_path, {"lora": {"r": 4, "alpha": 8}})
    rows = _sources(path, ["lora=null"])
    assert rows["lora"].value is None and rows["lora"].source == "-s lora=null"
    rows = _sources(_write(tmp_path, {"lora": None}), ["lora={r: 4}"])
    assert rows["lora.r"].source == "-s lora={r: 4}" and rows["lora.alpha"].source == DEFAULT


def test_a_value_another_setting_decides_is_derived():
    rows = _sources(None, ["method=oracle", "grpo.max_completion_length=64"])
    assert (rows["data.train_rubric"].value, rows["data.train_rubric"].source) == ("gold", DERIVED)
    assert (rows["evolver.trials.max_new_tokens"].value, rows["evolver.trials.max_new_tokens"].source) == (64, DERIVED)
    assert rows["method"].source == "-s method=oracle"


def test_config_show_prints_each_value_with_its_source(tmp_path):
    path = _write(tmp_path, {"grpo": {"max_steps": 7}})
    shown = runner.invoke(app, ["config", "show", "-c", str(path), "-s", "eval.seed=3", "--json"])
    assert shown.exit_code == 0, shown.output
    rows = {r["setting"]: r for r in json.loads(shown.stdout)}
    assert rows["grpo.max_steps"] == {"setting": "grpo.max_steps", "value": 7, "source": str(path)}
    assert rows["eval.seed"]["source"] == "-s eval.seed=3" and rows["seed"]["source"] == DEFAULT
    changed = runner.invoke(app, ["config", "show", "-c", str(path), "--changed"], env={"COLUMNS": "200"})
    assert changed.exit_code == 0
    assert "grpo.max_steps" in changed.stdout and str(path) in changed.stdout and "grpo.beta" not in changed.stdout


def test_config_show_refuses_a_bad_setting_naming_where_it_came_from(tmp_path):
    with pytest.raises(ConfigError, match=r"grpo\.max_stepz \(from -s grpo\.max_stepz=3\): unknown setting"):
        explain_train_config(_write(tmp_path, {}), ["grpo.max_stepz=3"])
