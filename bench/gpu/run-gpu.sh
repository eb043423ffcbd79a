#!/usr/bin/env bash
# The GPU benchmark: DJL's model-zoo ResNetV1-50 at 3x224x224 trained in DJL fp32, djl-amp bf16 and
# djl-amp fp16 (dynamic loss scaling), each channels-last and NCHW, next to the same network built
# layer for layer in PyTorch (bench/train/pytorch_resnet.py: fp32, bf16 autocast, fp16 autocast with
# a GradScaler, each NCHW and channels-last), in the same call on the same GPU. One process a
# variant and batch size, so that each peak device memory belongs to one configuration. Writes
# $OUT/gpu-bench.md (the table for bench/RESULTS.md) and $OUT/gpu-bench.tar.gz (every JSON, the
# nvidia-smi log).
#
# On the GPU machine, after `bash ../shared/gpu/prepare.sh` here (carry .gpu):
#   bash .gpu/gpu.sh info && bash bench/gpu/run-gpu.sh
# Then here: bench/gpu/render_gpu.py --dir <the unpacked tarball> --results bench/RESULTS.md ...
#
# Options: --network KEY (resnet50-224), --batches LIST (128,256), --warmup N (5), --steps N (20),
#   --djl-variants LIST, --pt-variants LIST, --device cuda|cpu (cpu: a dry run, see below),
#   --process-timeout S (150: one JVM or Python process), --budget S (540: variants not started by
#   then are listed as not run, so the call ends inside the device's 600 s).
# Dry run on a CPU (no GPU, Debian's python3-torch): see bench/gpu/README.md.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
network=resnet50-224
batches=128,256
warmup=5
steps=20
djl_variants=djl-fp32,djl-amp-bf16,djl-amp-bf16-fused,djl-amp-fp16,djl-amp-fp16-fused,djl-amp-bf16-nchw,djl-amp-fp16-nchw
pt_variants=pt-fp32,pt-fp32-cl,pt-bf16-autocast,pt-bf16-autocast-cl,pt-fp16-autocast,pt-fp16-autocast-cl
device=cuda
process_timeout=150
budget=540
command_line="bash bench/gpu/run-gpu.sh${*:+ $*}"
while [ $# -gt 0 ]; do
    case "$1" in
        --network) network=$2; shift 2 ;;
        --batches) batches=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --steps) steps=$2; shift 2 ;;
        --djl-variants) djl_variants=$2; shift 2 ;;
        --pt-variants) pt_variants=$2; shift 2 ;;
        --device) device=$2; shift 2 ;;
        --process-timeout) process_timeout=$2; shift 2 ;;
        --budget) budget=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "run-gpu.sh: unknown argument $1 (--help lists them)" >&2; exit 2 ;;
    esac
done
[ -f .gpu/gpu.sh ] || { echo "run-gpu.sh: no .gpu/gpu.sh: run ../shared/gpu/prepare.sh first and carry .gpu" >&2; exit 2; }

OUT=${OUT:-/tmp/djl-amp-gpu-out}
export OUT
mkdir -p "$OUT"
work=$(mktemp -d)/gpu-bench
mkdir -p "$work"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }

smi_pid=""
if command -v nvidia-smi > /dev/null; then
    # a cross-check of the in-process numbers: the whole GPU's memory every 100 ms
    nvidia-smi --query-gpu=timestamp,memory.used,memory.total,utilization.gpu --format=csv,nounits \
        -lms 100 > "$work/nvidia-smi.csv" 2>&1 &
    smi_pid=$!
fi

echo "$command_line" > "$work/command.txt"
date -u '+%Y-%m-%d %H:%M UTC' > "$work/date.txt"
: > "$work/not-run.txt"

run_one() { # KIND VARIANT BATCH: one process; a failure or a skip is written to not-run.txt
    local kind=$1 variant=$2 batch=$3 file rc
    file="$work/$variant-b$batch.json"
    if [ "$(elapsed)" -ge "$budget" ]; then
        echo "$kind $variant batch $batch: not started, the call's budget of ${budget}s was spent" >> "$work/not-run.txt"
        return 0
    fi
    echo "== [$(elapsed)s] $kind $variant batch $batch"
    if [ "$kind" = djl ]; then
        bash .gpu/gpu.sh --timeout "$process_timeout" java io.github.djlamp.bench.train.TrainBench \
            throughput --network "$network" --batch "$batch" --warmup "$warmup" --steps "$steps" \
            --variants "$variant" --out "$file"
    else
        bash .gpu/gpu.sh --timeout "$process_timeout" py bench/train/pytorch_resnet.py \
            --device "$device" --network "$network" --batch "$batch" --warmup "$warmup" \
            --steps "$steps" --variants "$variant" --out "$file"
    fi
    rc=$?
    if [ "$rc" -ne 0 ] || [ ! -s "$file" ]; then
        echo "$kind $variant batch $batch: failed (exit $rc; the reason is in gpu.log)" >> "$work/not-run.txt"
    fi
}

IFS=, read -r -a batch_list <<< "$batches"
IFS=, read -r -a djl_list <<< "$djl_variants"
IFS=, read -r -a pt_list <<< "$pt_variants"
for batch in "${batch_list[@]}"; do
    for v in "${djl_list[@]}"; do run_one djl "$v" "$batch"; done
    for v in "${pt_list[@]}"; do run_one pt "$v" "$batch"; done
done

[ -z "$smi_pid" ] || kill "$smi_pid" 2> /dev/null
python3 bench/gpu/render_gpu.py --dir "$work" > "$work/gpu-bench.md"
render_rc=$?
cp "$work/gpu-bench.md" "$OUT/gpu-bench.md"
tar -czf "$OUT/gpu-bench.tar.gz" -C "$(dirname "$work")" gpu-bench
echo "== [$(elapsed)s] wrote $OUT/gpu-bench.md and $OUT/gpu-bench.tar.gz"
cat "$work/gpu-bench.md"
[ ! -s "$work/not-run.txt" ] && [ "$render_rc" -eq 0 ]
