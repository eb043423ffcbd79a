#!/usr/bin/env bash
# The whole of one device call, issue 31 item 5 first, in at most --total seconds (590 of the
# call's 600), each part under a time limit of its own so that one hang costs its part, not the call.
#
# Here first (builds the project into .gpu/, about 1.5 minutes):
#   bash ../shared/gpu/prepare.sh --data none --mvn-arg -o
# Then one device call, carrying .gpu, time limit 600 s:
#   bash bench/gpu/session.sh
# Back here: bench/gpu/README.md ("Run it (one device call)") says how the results go into
# bench/RESULTS.md.
#
# Parts, in order:
#   1. bash .gpu/gpu.sh info (GPU, torch, JNI, what DJL sees)                      limit --info-limit (60 s)
#   2. the GPU-sensitive tests, .gpu/gpu.sh test: amp-djl-engine's (--engine-tests, 24 classes; the CUDA graph probes and the captured step last, so that a crash in one costs only them),
#      then integration-tests' (--it-tests, 7 classes), one JVM each    limit --tests-limit (150 s) together
#   3. bash bench/gpu/run-gpu.sh, with what is left less 15 s for rendering and packing as --budget:
#      a. ResNetV1-50 224x224 at batches 32, 128 and 256 (issue 42's targets): djl-amp bf16 fused
#         (the GPU default), bf16 and fp16 fused with the step captured and replayed (-captured,
#         issue 42), fp16 fused, bf16 fused with the compiled forward off (-eager), DJL fp32;
#         PyTorch bf16, fp16 and fp32 autocast channels-last: 27 processes, each with the first
#         step apart (its time, its polled peak, the device memory after it) from the steady steps.
#         (Issue 31's checkpointed and unchecked rows were measured on the H200 on 2026-11-28; pass
#         them in -- --djl-variants to measure them again.)
#      b. the largest batch under a 16 GiB cap: djl-amp bf16 fused, the same checkpointed, PyTorch
#         bf16 channels-last (fits from a.'s rows, 2 short probes each, 3 at most), in at most what
#         a. left before the transformer's reserve
#      c. the transformer rows (issues 29, 41, 42; eight processes: the compiled bf16 forward,
#         captured and not, and the eager one beside DJL fp32, fp16, and PyTorch's three), 80 s
#         reserved for them
#
# The arithmetic (device time; the machine's start and the transfers come on top of the 590 s):
# - A variant process of the ResNet table: the H100 call of 2026-11-26 ran 26 of them (5 warm-up
#   and 20 timed steps, batches 128 and 256) inside --budget 250, about 10 s each. The steps
#   themselves are the small part (25 steps of DJL fp32 at batch 256, the slowest, 3.7 s): JVM or
#   Python start, libtorch's CUDA and cuDNN start, and the first step (djl-amp's kernel checks;
#   cuDNN's first kernels) are most of it. The H200 call of 2026-11-28 (16 processes, batches 128
#   and 256): 3-5 s a DJL process, 10-12 s a PyTorch one; the whole call 241 s, tests 18 s of it.
# - info 15-30 s (no JNI build: prepare.sh carries one that links against torch 2.11.0+cu130; a
#   build, if the machine's torch changed, adds 26 s: hence 60 s); tests: two JVMs, 60-150 s.
# - run-gpu.sh's budget is then 590 - 15 - info - tests, 365-495 s. a. starts processes until
#   budget - 60 - 80 s: 225-355 s, its 27 processes at the H200's pace (18 DJL at 5 s, 9 PyTorch at
#   11 s) take about 190 s; b. gets what a. left of its time plus 60 s; c. the last 80 s (8
#   processes at 5-11 s). Each process's own limit is 90 s (--process-timeout) or what is left of
#   the budget, the smaller.
# - Not started or stopped: listed under "Not run or failed" in gpu-bench.md; rerun them in a next
#   call with run-gpu.sh's --batches, --djl-variants, --pt-variants or --cap-variants.
#
# Options: --total S (590), --info-limit S (60), --tests-limit S (150), --engine-tests LIST,
#   --it-tests LIST (comma-separated class names; none: skip), -- ARGS (more run-gpu.sh options,
#   after the session's own: the later wins). A CPU dry run: bench/gpu/README.md.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root" || exit 2
total=590
info_limit=60
tests_limit=150
engine_tests=CompiledWrapperTest,CompiledOperationsTest,CompiledUserBlocksTest,CompiledModelZooTest,CompiledTrainerStepsTest,CompiledConcurrencyTest,HostReadTest,GradScalerKernelsTest,FusedOptimizerStepTest,FreedMemoryTest,KernelVerifierTest,ProductCheckTest,TransformerLayerByLayerTest,BertLayerByLayerTest,EngineAutocastTest,CudaAutocastTest,CudaRecurrentAutocastTest,ReadBlockAroundLstmTest,EngineAutocastTrainingTest,TorchScriptStageCheckTest,StageCheckTest,AutocastOverrideTest,OwnStoreLoopTest,CudaGraphAbiTest,CudaGraphReplayTest,CapturedTrainingStepProbeTest,CapturedStepTest,EasyTrainCaptureTest
it_tests=EngineCallsPerForwardTest,NativeMemoryTest,DeviceResidentScalerTest,FusedOptimizerTrainingTest,FirstStepKeepsNothingTest,CheckpointedRandomBlockTest,D2lResidualIn16BitsTest
bench_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --total) total=$2; shift 2 ;;
        --info-limit) info_limit=$2; shift 2 ;;
        --tests-limit) tests_limit=$2; shift 2 ;;
        --engine-tests) engine_tests=$2; shift 2 ;;
        --it-tests) it_tests=$2; shift 2 ;;
        --) shift; bench_args=("$@"); break ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "session.sh: unknown argument $1 (--help lists them)" >&2; exit 2 ;;
    esac
done
[ -f .gpu/gpu.sh ] || { echo "session.sh: no .gpu/gpu.sh: run ../shared/gpu/prepare.sh first and carry .gpu" >&2; exit 2; }
OUT=${OUT:-/tmp/djl-amp-gpu-out}
export OUT
mkdir -p "$OUT"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
say() { # a line to stdout and to the summary.txt that comes back, once gpu.sh began it (gpu.sh
    # starts its clock when it finds no summary.txt in $OUT)
    local l
    l=$(printf '[%4ss] session: %s' "$(elapsed)" "$*")
    echo "$l"
    [ ! -f "$OUT/summary.txt" ] || echo "$l" >> "$OUT/summary.txt"
}
rc_all=0
part() { # NAME LIMIT COMMAND...: the command under `timeout` (its process group: JVMs included)
    local name=$1 limit=$2 rc t
    shift 2
    if [ "$limit" -lt 10 ]; then
        say "$name: not started, ${limit}s left of its limit"
        rc_all=1
        return 1
    fi
    say "$name: start, limit ${limit}s"
    t=$(date +%s)
    timeout -k 10 "$limit" "$@"
    rc=$?
    [ "$rc" != 124 ] || say "$name: stopped by its limit of ${limit}s"
    say "$name: exit $rc after $(( $(date +%s) - t ))s"
    [ "$rc" = 0 ] || rc_all=1
    return "$rc"
}
# the engine's tests leave the integration tests at least a third of the tests' limit
tests_part() { # MODULE LIST LIMIT
    local module=$1 list=$2 limit=$3 args=() c
    [ "$list" != none ] && [ -n "$list" ] || return 0
    IFS=, read -r -a classes <<< "$list"
    for c in "${classes[@]}"; do args+=(-c "$c"); done
    part "tests $module" "$limit" bash .gpu/gpu.sh --timeout "$limit" test -m "$module" "${args[@]}"
}

say "total ${total}s: info ${info_limit}s, tests ${tests_limit}s, then run-gpu.sh"
part info "$info_limit" bash .gpu/gpu.sh info
tests_end=$(( $(elapsed) + tests_limit ))
if [ "$it_tests" = none ]; then engine_limit=$tests_limit; else engine_limit=$(( tests_limit * 2 / 3 )); fi
tests_part amp-djl-engine "$engine_tests" "$engine_limit"
tests_part integration-tests "$it_tests" $(( tests_end - $(elapsed) ))
# run-gpu.sh's budget: what is left, less the time its rendering and packing take after it
budget=$(( total - $(elapsed) - 15 ))
part bench $(( budget + 15 )) bash bench/gpu/run-gpu.sh --budget "$budget" --process-timeout 90 \
    --batches 32,128,256 --cap-fit-batches 128,256 \
    --djl-variants djl-amp-bf16-fused,djl-amp-bf16-fused-captured,djl-amp-fp16-fused-captured,djl-amp-fp16-fused,djl-amp-bf16-fused-eager,djl-fp32 \
    --pt-variants pt-bf16-autocast-cl,pt-fp16-autocast-cl,pt-fp32-cl \
    --cap-gib 16 --cap-variants djl-amp-bf16-fused,djl-amp-bf16-fused-ckpt-stages,pt-bf16-autocast-cl \
    --cap-reserve 60 --transformer-reserve 80 \
    --transformer-djl-variants djl-fp32,djl-amp-bf16-fused,djl-amp-bf16-fused-captured,djl-amp-bf16-fused-eager,djl-amp-fp16-fused \
    "${bench_args[@]}"
say "done after $(elapsed)s (exit $rc_all); \$OUT: $(find "$OUT" -maxdepth 1 -type f -printf '%f ')"
echo "----- $OUT/summary.txt"
cat "$OUT/summary.txt"
exit "$rc_all"
