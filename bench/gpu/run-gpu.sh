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
# Then the transformer rows (issue 29): bench/train's transformer-256 (four DJL TransformerEncoderBlocks,
# width 256, Adam) at batch 16 in DJL fp32 and djl-amp bf16 and fp16 (fused step, the GPU default)
# and PyTorch fp32, bf16 and fp16 autocast, one process each (six), written under transformer-256/
# and rendered as a table of their own with djl-amp's 16-bit share. The ResNet rows leave the last
# --transformer-reserve seconds of the budget to them.
#
# Options: --network KEY (resnet50-224), --batches LIST (128,256), --warmup N (5), --steps N (20),
#   --djl-variants LIST, --pt-variants LIST, --device cuda|cpu (cpu: a dry run, see below),
#   --process-timeout S (150: one JVM or Python process), --budget S (540: variants not started by
#   then are listed as not run, so the call ends inside the device's 600 s),
#   --transformer-batches LIST (16; none: no transformer rows), --transformer-djl-variants LIST,
#   --transformer-pt-variants LIST, --transformer-reserve S (120).
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
transformer_network=transformer-256
transformer_batches=16
transformer_djl_variants=djl-fp32,djl-amp-bf16-fused,djl-amp-fp16-fused
transformer_pt_variants=pt-fp32,pt-bf16-autocast,pt-fp16-autocast
transformer_reserve=120
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
        --transformer-batches) transformer_batches=$2; shift 2 ;;
        --transformer-djl-variants) transformer_djl_variants=$2; shift 2 ;;
        --transformer-pt-variants) transformer_pt_variants=$2; shift 2 ;;
        --transformer-reserve) transformer_reserve=$2; shift 2 ;;
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

run_one() { # KIND VARIANT BATCH [NETWORK DIR LIMIT]: one process; a failure or a skip is written to not-run.txt
    local kind=$1 variant=$2 batch=$3 net=${4:-$network} dir=${5:-$work} limit=${6:-$budget} file rc
    file="$dir/$variant-b$batch.json"
    if [ "$(elapsed)" -ge "$limit" ]; then
        echo "$kind $net $variant batch $batch: not started, its share of the call's budget (${limit}s of ${budget}s) was spent" >> "$work/not-run.txt"
        return 0
    fi
    echo "== [$(elapsed)s] $kind $net $variant batch $batch"
    if [ "$kind" = djl ]; then
        bash .gpu/gpu.sh --timeout "$process_timeout" java io.github.djlamp.bench.train.TrainBench \
            throughput --network "$net" --batch "$batch" --warmup "$warmup" --steps "$steps" \
            --variants "$variant" --out "$file"
    else
        bash .gpu/gpu.sh --timeout "$process_timeout" py bench/train/pytorch_resnet.py \
            --device "$device" --network "$net" --batch "$batch" --warmup "$warmup" \
            --steps "$steps" --variants "$variant" --out "$file"
    fi
    rc=$?
    if [ "$rc" -ne 0 ] || [ ! -s "$file" ]; then
        echo "$kind $net $variant batch $batch: failed (exit $rc; the reason is in gpu.log)" >> "$work/not-run.txt"
    fi
}

resnet_budget=$budget
if [ "$transformer_batches" != none ]; then
    resnet_budget=$(( budget - transformer_reserve ))
fi
IFS=, read -r -a batch_list <<< "$batches"
IFS=, read -r -a djl_list <<< "$djl_variants"
IFS=, read -r -a pt_list <<< "$pt_variants"
for batch in "${batch_list[@]}"; do
    for v in "${djl_list[@]}"; do run_one djl "$v" "$batch" "$network" "$work" "$resnet_budget"; done
    for v in "${pt_list[@]}"; do run_one pt "$v" "$batch" "$network" "$work" "$resnet_budget"; done
done
transformer_dir="$work/$transformer_network"
if [ "$transformer_batches" != none ]; then
    mkdir -p "$transformer_dir"
    IFS=, read -r -a batch_list <<< "$transformer_batches"
    IFS=, read -r -a djl_list <<< "$transformer_djl_variants"
    IFS=, read -r -a pt_list <<< "$transformer_pt_variants"
    for batch in "${batch_list[@]}"; do
        for v in "${djl_list[@]}"; do run_one djl "$v" "$batch" "$transformer_network" "$transformer_dir"; done
        for v in "${pt_list[@]}"; do run_one pt "$v" "$batch" "$transformer_network" "$transformer_dir"; done
    done
fi

[ -z "$smi_pid" ] || kill "$smi_pid" 2> /dev/null
python3 bench/gpu/render_gpu.py --dir "$work" > "$work/gpu-bench.md"
render_rc=$?
if [ -d "$transformer_dir" ]; then
    # the same table for the transformer; the ResNet comparisons' rows read "not measured"
    cp "$work/command.txt" "$work/date.txt" "$transformer_dir/"
    { echo; echo "### $transformer_network"; echo; python3 bench/gpu/render_gpu.py --measured-only --dir "$transformer_dir"; } >> "$work/gpu-bench.md" || render_rc=1
fi
cp "$work/gpu-bench.md" "$OUT/gpu-bench.md"
tar -czf "$OUT/gpu-bench.tar.gz" -C "$(dirname "$work")" gpu-bench
echo "== [$(elapsed)s] wrote $OUT/gpu-bench.md and $OUT/gpu-bench.tar.gz"
cat "$work/gpu-bench.md"
[ ! -s "$work/not-run.txt" ] && [ "$render_rc" -eq 0 ]
