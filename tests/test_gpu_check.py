"""benchmarks/gpu_check.py: its pieces, and a whole run at a tiny size on the CPU (a micro model of the
embedded architecture, built from the prepared config and tokenizer files)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from helpers import load_script

from harnessrl.records.run_dir import RunDir

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    module = load_script(SCRIPT)
    yield module
    sys.modules.pop("gpu_check", None)


@pytest.fixture(scope="module")
def assets(gpu_check, tmp_path_factory, real_tokenizer):
    dest = tmp_path_factory.mktemp("gpu_check_assets")
    files = gpu_check.prepare_assets(dest)
    return dest, files


def test_sizes_parse(gpu_check):
    shapes = gpu_check.parse_shapes("demo, gpu,4x4x32")
    assert [(s.tasks, s.g, s.tokens) for s in shapes] == [(2, 4, 48), (16, 8, 256), (4, 4, 32)]
    assert shapes[1].rows == 128
    for bad in ("huge", "4x1x32", "4x4", ""):
        with pytest.raises(ValueError):
            gpu_check.parse_shapes(bad)


def test_counted_steps_leave_out_the_first(gpu_check):
    assert gpu_check.counted_steps(1) == [1]
    assert gpu_check.counted_steps(3) == [2, 3]


def test_assets_are_small_and_hold_no_weights(assets):
    dest, files = assets
    names = {f.name for f in files}
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= names
    assert not any(n.endswith((".safetensors", ".bin", ".gguf")) for n in names)
    assert sum(f.stat().st_size for f in files) < 8 * 2**20
    config = json.loads((dest / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config


def test_every_listed_wheel_is_importable_here(gpu_check):
    """The dev venv has everything: a name in WHEELS that is not found is a wrong module name."""
    assert gpu_check.missing_wheels() == []


def test_hiding_finder_is_blind_to_hidden_names(gpu_check):
    class Finder:
        def find_spec(self, fullname, path=None, target=None):
            return f"spec of {fullname}"

        def invalidate_caches(self):
            return "invalidated"

    finder = gpu_check._HidingFinder(Finder(), {"pyarrow"})
    assert finder.find_spec("pyarrow") is None and finder.find_spec("pyarrow.lib") is None
    assert finder.find_spec("pandas") == "spec of pandas"
    assert finder.invalidate_caches() == "invalidated"


# about 30 s on an idle two-core machine; beside two training runs it once took past the 300 s every test gets:
# 900 s is sized for a loaded two-core CI (its figures are checked, never its speed)
@pytest.mark.timeout(900)
def test_a_tiny_run_measures_the_split_and_the_goals(gpu_check, assets, tmp_path, capsys, monkeypatch):
    """The real trainer (local-lm judge, memory off, rule-based evolver) on a micro model, 2 steps."""
    dest, _ = assets
    broken = {"dtype": "no_such_dtype", "autocast": "never", "cache": None, "compile": False}
    monkeypatch.setitem(gpu_check.PATHS, "broken path", broken)  # fails; the other paths still run
    micro = {
        "num_hidden_layers": 1,
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 8,
    }
    out = tmp_path / "figures.json"
    argv = ["run", "--assets", str(dest), "--device", "cpu", "--sizes", "2x2x4", "--steps", "2"]
    argv += ["--work-dir", str(tmp_path / "work"), "--json", str(out), "--generation-paths"]
    argv += ["--set", "generation.autocast=never", "--set", "grpo.beta=0.0"]
    for k, v in micro.items():
        argv += ["--model-override", f"{k}={v}"]
    figures = gpu_check.main(argv)

    printed = capsys.readouterr().out
    assert "ran on cpu" in printed and "random LlamaForCausalLM" in printed
    assert json.loads(out.read_text())["shapes"].keys() == {"2x2x4"}
    shape = figures["shapes"]["2x2x4"]
    assert shape["steps_trained"] == 2 and shape["counted_steps"] == [2]
    assert shape["policy_device"] == "cpu" and shape["judge_device"] == "cpu"
    (row,) = shape["steps"]
    assert set(row["parts"]) == {"generation", "judging", "update", "harness", "other", "rest"}
    assert row["wall"] > 0 and row["parts"]["generation"] > 0 and row["parts"]["judging"] > 0
    assert row["parts"]["update"] > 0
    assert row["decoded"] == 4 * 4  # 2 tasks x 2 completions, 4 decode steps each
    assert row["judge_pairs"] > 0
    raw = row["raw"]
    assert raw["generate_seconds"] > 0 and raw["generate_decoded"] == 16
    assert raw["judge_forward_seconds"] > 0 and raw["update_seconds"] > 0
    assert [g["verdict"] in ("PASS", "FAIL") for g in shape["goals"]] == [True, True, True]
    assert all(g["goal"] in printed for g in shape["goals"])
    # the generation paths: the same batch, as many new tokens, every path that runs on a CPU
    paths = {p["path"]: p for p in shape["generation_paths"]}
    assert set(paths) == {n for n, p in gpu_check.PATHS.items() if not p["compile"]}
    assert "AttributeError" in paths.pop("broken path")["error"] and "broken path" in printed
    for p in paths.values():
        assert p["seconds"] > 0 and p["tokens_per_second"] == pytest.approx(2 * 2 * 4 / p["seconds"])
        assert p["launches_per_decode_step"] > 0
    # autocast per forward casts every weight at every decode step; one region around the call, once
    ops = {name: p["launches_per_decode_step"] for name, p in paths.items()}
    assert ops["bf16 autocast per forward"] > ops["bf16 autocast per generate"] > ops["fp32"]
    assert "generation paths on the batch" in printed and "fp32 static cache" in printed
    written = yaml.safe_load(RunDir(tmp_path / "work" / "run-2x2x4", create=False).config.read_text())
    assert written["generation"]["autocast"] == "never"  # --set reached the run
    assert shape["generation"]["autocast"] == "never" and "generation: backend transformers, autocast never" in printed


def test_set_puts_dotted_keys_into_the_training_config(gpu_check):
    config = {"generation": {"backend": "transformers"}, "seed": 0}
    gpu_check.apply_settings(config, [("generation.autocast", "never"), ("harness.memory.enabled", True)])
    assert config["generation"] == {"backend": "transformers", "autocast": "never"}
    assert config["harness"] == {"memory": {"enabled": True}}
    with pytest.raises(SystemExit, match="seed is not a section"):
        gpu_check.apply_settings(config, [("seed.x", 1)])
    assert gpu_check._override("generation.cache=static") == ("generation.cache", "static")
    assert gpu_check._override("generation.autocast=never") == ("generation.autocast", "never")
    assert gpu_check._override("bf16=true") == ("bf16", True)


@pytest.mark.slow
def test_the_prepared_device_script_runs_every_stage(assets, tmp_path):
    """benchmarks/gpu_check_device.sh, the one command a GPU machine runs, tried on the CPU at a micro size:
    the default training, the same shape with autocast per forward, and the generation paths, into $OUT."""
    import os
    import subprocess

    dest, _ = assets
    micro = "--model-override num_hidden_layers=1 --model-override hidden_size=16 --model-override "
    micro += "intermediate_size=32 --model-override num_attention_heads=2 --model-override num_key_value_heads=1 "
    micro += "--model-override head_dim=8 --set bf16=true"  # bf16 as on a GPU: the paths use the real wrapper
    env = {
        **os.environ,
        "OUT": str(tmp_path / "out"),
        "GPU_CHECK_ASSETS": str(dest),
        "GPU_CHECK_DEVICE": "cpu",
        "GPU_CHECK_TRAIN_SIZES": "2x2x4",
        "GPU_CHECK_PATHS_SIZES": "2x2x4",
        "GPU_CHECK_ARGS": micro,
        "PYTHON": sys.executable,
        "OMP_NUM_THREADS": "1",
    }
    script = SCRIPT.with_name("gpu_check_device.sh")
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    default = json.loads((out / "train_default.json").read_text())["shapes"]["2x2x4"]
    per_forward = json.loads((out / "train_autocast_forward.json").read_text())["shapes"]["2x2x4"]
    paths = json.loads((out / "paths.json").read_text())["shapes"]["2x2x4"]
    assert default["generation"]["autocast"] == "generate" and per_forward["generation"]["autocast"] == "forward"
    assert {p["path"] for p in paths["generation_paths"]} >= {"fp32", "bf16 autocast per generate", "bf16 weights"}
    ops = {p["path"]: p["launches_per_decode_step"] for p in paths["generation_paths"]}
    assert ops["bf16 autocast per forward"] > ops["bf16 autocast per generate"] > ops["fp32"]
    assert paths["bf16"] is True
    assert done.stdout.count("goals of issue 13 item 5") == 3
    bad = subprocess.run(["bash", str(script), "nonsense"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "usage" in bad.stderr
