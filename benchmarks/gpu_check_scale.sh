#!/usr/bin/env bash
# The harness at scale on a GPU machine, one command (issue 31 item 4): FSDP2, vLLM colocate, vLLM server.
#
# Here, once (the config and tokenizer of the embedded policy, and the wheels a bare machine lacks):
#   .venv/bin/python benchmarks/gpu_check.py prepare --assets runs/gpu_check_assets --wheels --exclude pyarrow,pandas
# There (the working tree with runs/gpu_check_assets carried; $OUT: where the figures go):
#   bash benchmarks/gpu_check_scale.sh [fsdp2|colocate|server|all]
#     fsdp2     accelerate launch with FSDP2 on every GPU (2 processes on 2 GPUs, else 1 process, FSDP2 on)
#     colocate  one process, vLLM inside it (needs vllm installed there: its wheel is too big to carry)
#     server    trl vllm-serve on the last GPU, training on the first (one GPU: both on it)
#     all       each of them (default), then the raw engine and the report
# Each part trains a random ~0.68B model (benchmarks/scale_check.py) 4 steps with the rule-based evolver and an
# evaluation before training, then $OUT/scale.json holds the median step time, the trials' and the evaluation's
# seconds per rollout, and the raw engine's (transformers generate, vLLM where installed) on the same batch.
# Not run on a GPU yet: no GPU was lent to the session that wrote it. Tried on a CPU at a micro size, where it
# runs end to end (accelerate prepares DDP there: it turns FSDP on for GPU runs only):
#   SCALE_DEVICE=cpu SCALE_ARGS="--tasks 2 --g 2 --tokens 4 --steps 3" SCALE_MODEL_ARGS="--override hidden_size=64
#   --override intermediate_size=128 --override num_hidden_layers=2 --override num_attention_heads=4
#   --override num_key_value_heads=2" bash benchmarks/gpu_check_scale.sh fsdp2
set -euo pipefail
cd "$(dirname "$0")/.."
stage="${1:-all}"
case "$stage" in fsdp2 | colocate | server | all) ;; *)
    echo "usage: $0 [fsdp2|colocate|server|all]" >&2
    exit 2
    ;;
esac
assets="${GPU_CHECK_ASSETS:-runs/gpu_check_assets}"
out="${OUT:-runs/gpu_check_out}"
work="${SCALE_WORK:-$(mktemp -d)}"
python="${PYTHON:-python}"
device="${SCALE_DEVICE:-cuda}"
mkdir -p "$out"
if compgen -G "$assets/wheels/*.whl" > /dev/null; then
    "$python" -m pip install --quiet --no-index --no-deps "$assets"/wheels/*.whl
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
gpus="$(nvidia-smi -L 2> /dev/null | wc -l || true)"
gpus="${gpus:-0}"
nproc=$((gpus >= 2 ? 2 : 1))
# shellcheck disable=SC2086  # SCALE_ARGS / SCALE_MODEL_ARGS: further arguments, split on spaces
sc() { "$python" benchmarks/scale_check.py --device "$device" ${SCALE_ARGS:-} "$@"; }
model="$work/model"
# shellcheck disable=SC2086
[ -f "$model/config.json" ] || sc model --assets "$assets" --out "$model" ${SCALE_MODEL_ARGS:-}
failed=()
runs=()
part() {  # part NAME COMMAND...: train one part; a failure is named, the others still run
    local name="$1"
    shift
    sc config "$name" --model "$model" --run-dir "$work/run-$name" --out "$work/$name.yaml"
    runs+=(--run "$name=$work/run-$name")
    echo "=== $name: $*" >&2
    "$@" --config "$work/$name.yaml" --overwrite > "$out/$name.log" 2>&1 || failed+=("$name (see $out/$name.log)")
}
if [[ $stage == fsdp2 || $stage == all ]]; then
    part fsdp2 accelerate launch --num_processes "$nproc" --use_fsdp --fsdp_version 2 \
        --fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP --fsdp_transformer_layer_cls_to_wrap LlamaDecoderLayer \
        --fsdp_state_dict_type FULL_STATE_DICT --mixed_precision bf16 -m harnessrl.cli train
fi
if [[ $stage == colocate || $stage == all ]]; then
    if "$python" -c "import vllm" 2> /dev/null; then
        part colocate "$python" -m harnessrl.cli train
    else
        failed+=("colocate (vllm is not installed here)")
    fi
fi
if [[ $stage == server || $stage == all ]]; then
    if command -v trl > /dev/null && "$python" -c "import vllm" 2> /dev/null; then
        server_gpu=$((gpus >= 2 ? gpus - 1 : 0))
        CUDA_VISIBLE_DEVICES="$server_gpu" trl vllm-serve --model "$model" --port 8000 \
            --gpu-memory-utilization 0.3 > "$out/vllm_serve.log" 2>&1 &
        server_pid=$!
        CUDA_VISIBLE_DEVICES=0 part server "$python" -m harnessrl.cli train  # waits for /health before step 1
        kill "$server_pid" 2> /dev/null || true
        wait "$server_pid" 2> /dev/null || true
    else
        failed+=("server (trl vllm-serve needs vllm installed here)")
    fi
fi
sc raw --model "$model" --json "$work/raw.json" || failed+=("raw engine")
sc report --raw "$work/raw.json" "${runs[@]}" --json "$out/scale.json" || failed+=("report")
if ((${#failed[@]})); then
    printf 'failed or skipped: %s\n' "${failed[@]}" >&2
    exit 1
fi
