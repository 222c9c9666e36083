#!/usr/bin/env bash
# The GPU check as one prepared command for a bare GPU machine (issue 13, items 2, 4, 5).
#
# Here, where the project's cache is (once):
#   .venv/bin/python benchmarks/gpu_check.py prepare --assets runs/gpu_check_assets --wheels --exclude pyarrow,pandas
# There (the repository's working tree, with runs/gpu_check_assets carried along; $OUT: where figures go):
#   bash benchmarks/gpu_check_device.sh [train|paths|all]
#     train  the demo and gpu shapes, 3 steps each, through the trainer as configured by default
#            (generation.autocast: generate), then the gpu shape again with TRL's way (autocast: forward)
#     paths  the gpu shape's batch down every generation path (fp32, bf16 autocast per forward and per
#            generate call, bf16 weights, static cache, static + compiled decode), after 2 training steps
#     all    both (default)
# Each writes its figures as JSON under $OUT (default: runs/gpu_check_out) and prints them.
# To try it on a CPU first: GPU_CHECK_DEVICE=cpu GPU_CHECK_TRAIN_SIZES=2x2x4 GPU_CHECK_PATHS_SIZES=2x2x4
# GPU_CHECK_ARGS="--model-override num_hidden_layers=1" bash benchmarks/gpu_check_device.sh
set -euo pipefail
cd "$(dirname "$0")/.."
stage="${1:-all}"
assets="${GPU_CHECK_ASSETS:-runs/gpu_check_assets}"
out="${OUT:-runs/gpu_check_out}"
case "$stage" in train | paths | all) ;; *)
    echo "usage: $0 [train|paths|all]" >&2
    exit 2
    ;;
esac
mkdir -p "$out"
python="${PYTHON:-python}"
if compgen -G "$assets/wheels/*.whl" > /dev/null; then
    "$python" -m pip install --quiet --no-index --no-deps "$assets"/wheels/*.whl
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv || true
train_sizes="${GPU_CHECK_TRAIN_SIZES:-demo,gpu}"
paths_sizes="${GPU_CHECK_PATHS_SIZES:-gpu}"
goal_size="${train_sizes##*,}"  # the last of the train sizes: the gpu shape
failed=()
# one part failing (memory, a missing wheel) must not cost the others' figures: each runs, failures are named
# shellcheck disable=SC2086  # GPU_CHECK_ARGS: further arguments, split on spaces
check() {
    "$python" benchmarks/gpu_check.py run --assets "$assets" --device "${GPU_CHECK_DEVICE:-cuda}" "$@" \
        ${GPU_CHECK_ARGS:-} || failed+=("gpu_check.py run $*")
}
case "$stage" in
    train | all)
        check --sizes "$train_sizes" --steps 3 --json "$out/train_default.json"
        check --sizes "$goal_size" --steps 3 --set generation.autocast=forward --json "$out/train_autocast_forward.json"
        ;;&
    paths | all)
        check --sizes "$paths_sizes" --steps 2 --generation-paths --json "$out/paths.json"
        ;;
esac
if ((${#failed[@]})); then
    printf 'failed: %s\n' "${failed[@]}" >&2
    exit 1
fi
