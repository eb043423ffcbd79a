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
# Then the largest batch under a memory cap (issue 31 item 5; cap_search.py): for each of
# --cap-variants, the peak device memory (cudaMemGetInfo above the CUDA context, both sides) fitted
# as a line in the batch from the table's two batches (--cap-fit-batches; measured here where the
# table lacks them), the largest batch under --cap-gib predicted, rounded down to a multiple of
# --cap-step and confirmed by short probes (it fits, the next multiple does not; a disagreeing probe
# moves it, at most --cap-probes probes); a probe that runs out of device memory does not fit.
# Written under cap/, rendered as a table of its own.
#
# Then the transformer rows (issue 29): bench/train's transformer-256 (four DJL TransformerEncoderBlocks,
# width 256, Adam) at batch 16 in DJL fp32 and djl-amp bf16 and fp16 (fused step, the GPU default)
# and PyTorch fp32, bf16 and fp16 autocast, one process each (six), written under transformer-256/
# and rendered as a table of their own with djl-amp's 16-bit share.
#
# The budget: no process starts after --budget seconds, nor with less than --min-process seconds
# of it left, and each one's time limit is --process-timeout or what is left of the budget, the
# smaller (a process stopped so is reported as failed, one not started as not run). The table
# rows start no process in the last --cap-reserve + --transformer-reserve seconds, the cap search
# none in the last --transformer-reserve; a part that ends early leaves its time to the next.
#
# Options: --network KEY (resnet50-224), --batches LIST (128,256), --warmup N (5), --steps N (20),
#   --djl-variants LIST, --pt-variants LIST, --device cuda|cpu (cpu: a dry run, see below),
#   --process-timeout S (150: one JVM or Python process), --budget S (540),
#   --min-process S (20), --cap-gib G (auto: 16 on cuda, none on cpu; none: no search),
#   --cap-variants LIST (djl-amp-bf16-fused,djl-amp-bf16-fused-ckpt-stages,pt-bf16-autocast-cl),
#   --cap-fit-batches B1,B2 (the first two of --batches), --cap-step N (8), --cap-probes N (3),
#   --cap-max-batch N (4096), --cap-warmup N (2), --cap-steps N (3), --cap-reserve S (90),
#   --transformer-batches LIST (16; none: no transformer rows), --transformer-djl-variants LIST,
#   --transformer-pt-variants LIST, --transformer-reserve S (120).
# Each process's output goes to VARIANT-bBATCH.log beside its JSON (and to $OUT/gpu.log through
# gpu.sh); VARIANT-bBATCH.outcome says ok, oom, timeout or failed.
# Dry run on a CPU (no GPU, Debian's python3-torch): see bench/gpu/README.md. There, and only
# there, RUN_GPU_MOCK_OOM_FROM=N stands in for a device running out of memory: a process at batch N
# or more is not started and leaves what an out-of-memory failure leaves (its log line, exit 1).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root" || exit 2
network=resnet50-224
batches=128,256
warmup=5
steps=20
djl_variants=djl-fp32,djl-amp-bf16,djl-amp-bf16-fused,djl-amp-fp16,djl-amp-fp16-fused,djl-amp-bf16-nchw,djl-amp-fp16-nchw
pt_variants=pt-fp32,pt-fp32-cl,pt-bf16-autocast,pt-bf16-autocast-cl,pt-fp16-autocast,pt-fp16-autocast-cl
device=cuda
process_timeout=150
budget=540
min_process=20
cap_gib=auto
cap_variants=djl-amp-bf16-fused,djl-amp-bf16-fused-ckpt-stages,pt-bf16-autocast-cl
cap_fit_batches=""
cap_step=8
cap_probes=3
cap_max_batch=4096
cap_warmup=2
cap_steps=3
cap_reserve=90
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
        --min-process) min_process=$2; shift 2 ;;
        --cap-gib) cap_gib=$2; shift 2 ;;
        --cap-variants) cap_variants=$2; shift 2 ;;
        --cap-fit-batches) cap_fit_batches=$2; shift 2 ;;
        --cap-step) cap_step=$2; shift 2 ;;
        --cap-probes) cap_probes=$2; shift 2 ;;
        --cap-max-batch) cap_max_batch=$2; shift 2 ;;
        --cap-warmup) cap_warmup=$2; shift 2 ;;
        --cap-steps) cap_steps=$2; shift 2 ;;
        --cap-reserve) cap_reserve=$2; shift 2 ;;
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

run_one() { # KIND VARIANT BATCH [NETWORK DIR LIMIT WARMUP STEPS SEARCH]: one process, its outcome
    # written beside its JSON; a failure or a skip is also written to not-run.txt, running out of
    # device memory too unless SEARCH is 1 (the cap search's processes: there it is a finding).
    # LIMIT: no start after it.
    local kind=$1 variant=$2 batch=$3 net=${4:-$network} dir=${5:-$work} limit=${6:-$budget}
    local w=${7:-$warmup} n=${8:-$steps} search=${9:-0} file log left timeout_s rc t said
    file="$dir/$variant-b$batch.json"
    log="$dir/$variant-b$batch.log"
    left=$(( budget - $(elapsed) ))
    if [ "$(elapsed)" -ge "$limit" ] || [ "$left" -lt "$min_process" ]; then
        echo "$kind $net $variant batch $batch: not started, its share of the call's budget (${limit}s of ${budget}s) was spent" >> "$work/not-run.txt"
        return 1
    fi
    timeout_s=$(( left < process_timeout ? left : process_timeout ))
    t=$(date +%s)
    if [ -n "${RUN_GPU_MOCK_OOM_FROM:-}" ] && [ "$batch" -ge "$RUN_GPU_MOCK_OOM_FROM" ]; then
        # a CPU dry run's stand-in for a device running out of memory (see the header)
        echo "mock (RUN_GPU_MOCK_OOM_FROM=$RUN_GPU_MOCK_OOM_FROM): torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB." > "$log"
        rc=1
    elif [ "$kind" = djl ]; then
        bash .gpu/gpu.sh --timeout "$timeout_s" java io.github.djlamp.bench.train.TrainBench \
            throughput --network "$net" --batch "$batch" --warmup "$w" --steps "$n" \
            --variants "$variant" --out "$file" > "$log" 2>&1
        rc=$?
    else
        bash .gpu/gpu.sh --timeout "$timeout_s" py bench/train/pytorch_resnet.py \
            --device "$device" --network "$net" --batch "$batch" --warmup "$w" \
            --steps "$n" --variants "$variant" --out "$file" > "$log" 2>&1
        rc=$?
    fi
    said=$(python3 bench/gpu/cap_search.py outcome --rc "$rc" --log "$log" --json "$file")
    echo "$said" > "$dir/$variant-b$batch.outcome"
    echo "== [$(elapsed)s] $kind $net $variant batch $batch ($w+$n steps, limit ${timeout_s}s): ${said} after $(( $(date +%s) - t ))s"
    if [ "${said%%:*}" = oom ] && [ "$search" = 1 ]; then
        return 0
    elif [ "${said%%:*}" != ok ]; then
        # the first error of the process and its last lines, so that the call's output says why
        grep -m1 -E 'Exception|Error|error:' "$log" | cut -c1-300
        grep -v '^\s*$' "$log" | tail -3 | cut -c1-300
        echo "$kind $net $variant batch $batch: ${said} (the reason is in gpu.log and $variant-b$batch.log)" >> "$work/not-run.txt"
        return 1
    fi
}

if [ "$cap_gib" = auto ]; then
    if [ "$device" = cpu ]; then cap_gib=none; else cap_gib=16; fi
fi
resnet_budget=$budget
if [ "$cap_gib" != none ] && [ -n "$cap_variants" ]; then
    resnet_budget=$(( budget - cap_reserve ))
fi
cap_budget=$budget
if [ "$transformer_batches" != none ]; then
    resnet_budget=$(( resnet_budget - transformer_reserve ))
    cap_budget=$(( budget - transformer_reserve ))
fi
IFS=, read -r -a batch_list <<< "$batches"
IFS=, read -r -a djl_list <<< "$djl_variants"
IFS=, read -r -a pt_list <<< "$pt_variants"
for batch in "${batch_list[@]}"; do
    for v in "${djl_list[@]}"; do run_one djl "$v" "$batch" "$network" "$work" "$resnet_budget"; done
    for v in "${pt_list[@]}"; do run_one pt "$v" "$batch" "$network" "$work" "$resnet_budget"; done
done

# the largest batch under the cap: one variant after the other, each to its end or the budget's
if [ "$cap_gib" != none ] && [ -n "$cap_variants" ]; then
    cap_dir="$work/cap"
    measure=device
    [ "$device" != cpu ] || measure=host-rss   # no device memory on a CPU: the dry run's stand-in
    [ -n "$cap_fit_batches" ] || cap_fit_batches=$(echo "$batches" | cut -d, -f1,2)
    python3 bench/gpu/cap_search.py init --dir "$cap_dir" --cap-gib "$cap_gib" \
        --variants "$cap_variants" --fit-batches "$cap_fit_batches" --step "$cap_step" \
        --max-probes "$cap_probes" --max-batch "$cap_max_batch" --measure "$measure" \
        --probe-warmup "$cap_warmup" --probe-steps "$cap_steps" ||
        echo "cap search: cap_search.py init failed (--cap-gib $cap_gib, --cap-fit-batches $cap_fit_batches)" >> "$work/not-run.txt"
    IFS=, read -r -a cap_list <<< "$cap_variants"
    for v in "${cap_list[@]}"; do
        kind=djl
        [[ $v != pt-* ]] || kind=pt
        rounds=0
        # two fit batches (each perhaps measured twice) and the probes: more is a bug of the search
        while [ -f "$cap_dir/settings.json" ] && [ "$rounds" -lt $(( cap_probes + 4 )) ]; do
            rounds=$(( rounds + 1 ))
            decision=$(python3 bench/gpu/cap_search.py next --dir "$cap_dir" --table "$work" --variant "$v") ||
                { echo "cap search $v: cap_search.py next failed" >> "$work/not-run.txt"; break; }
            case $decision in
                fit\ *) # a batch of the fit, as the table measures it
                    run_one "$kind" "$v" "${decision#fit }" "$network" "$cap_dir" "$cap_budget" \
                        "$warmup" "$steps" 1 || true ;;
                probe\ *)
                    run_one "$kind" "$v" "${decision#probe }" "$network" "$cap_dir" "$cap_budget" \
                        "$cap_warmup" "$cap_steps" 1 || true ;;
                *) echo "== [$(elapsed)s] cap search $v: ${decision#done: }"; break ;;
            esac
            # a process that was not started ends the variant's search (the budget is spent)
            if [ "$(elapsed)" -ge "$cap_budget" ] || [ $(( budget - $(elapsed) )) -lt "$min_process" ]; then break; fi
        done
    done
fi

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
