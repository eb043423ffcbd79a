#!/usr/bin/env bash
# Reruns every training benchmark of djl-amp and rewrites the tables of bench/RESULTS.md
# (about 15 minutes on 2 cores): throughput of ResNetV1-18 and ResNetV1-50 in DJL fp32, djl-amp bf16
# and PyTorch eager fp32 / bf16 autocast, the bookkeeping overhead, and step memory.
#
#   bench/train/run.sh           the full run; rewrites bench/RESULTS.md
#   bench/train/run.sh --quick   a few steps of everything, to check the harness (about 4 minutes);
#                                writes bench/train/target/RESULTS-train-quick.md instead
#   bench/train/run.sh --checkpointing   activation checkpointing only (about 20 minutes on 2 cores):
#                                djl-amp bf16 with and without Checkpointing.stages()/auto() on
#                                ResNetV1-50 and a transformer; prints the tables and writes them to
#                                bench/train/target/RESULTS-checkpointing.md (RESULTS.md is not touched)
#   bench/train/run.sh --transformer     issue 29's transformer-256 (batch 16, Adam): glibc in-use
#                                bytes over the first and a steady step, one process a variant, for
#                                DJL fp32, djl-amp bf16, lean fp32 and PyTorch fp32 / bf16 autocast,
#                                and step times (STEPS, default 2); writes
#                                bench/train/target/RESULTS-transformer.md (RESULTS.md is not touched)
#   bench/train/run.sh --d2l      issue 29's d2l-style network (d2l-cnn: VGG blocks with BatchNorm,
#                                every ReLU written .add(Activation::relu)), batch 64: step times of
#                                DJL fp32, djl-amp bf16 (per-parameter and fused update) and djl-amp
#                                bf16 with every LambdaBlock forced to fp32 (the islands those ReLUs
#                                were before djl-amp read them); STEPS (default 20), THREADS (default
#                                nproc); writes bench/train/target/results-d2l/ (RESULTS.md is not touched)
#   bench/train/run.sh --memory   one memory instrument on both sides (issue 31): glibc's in-use bytes
#                                at forward start, backward start, the peak and after the step, the
#                                first and a steady step apart, plus each process's peak (VmHWM), one
#                                fresh process a variant and batch, for DJL fp32, djl-amp bf16 with
#                                and without its kernel checks, djl-amp's lean fp32 and PyTorch fp32 /
#                                bf16 autocast (NCHW and channels-last); NETWORK (default resnet18)
#                                at BATCHES (default 8,32,64), REPEAT processes each (default 1);
#                                writes bench/train/target/RESULTS-memory.md (RESULTS.md is not touched)
#   bench/train/run.sh --host     issue 41's host profile: where a training step's host time goes at
#                                overhead-bound shapes (ResNetV1-18 1x32x32, d2l-java's ResNet-18 1x64x64, the 6-block
#                                transformer 64x64, batch 1, one intra-op thread unless THREADS says
#                                otherwise, STEPS per window, default 30): Java (djl-amp's, DJL's) and
#                                native calls from the JDK's sampler, then libtorch's operations per
#                                phase and each phase's host time, for DJL fp32, djl-amp fp32 and
#                                bf16 (fused), and the same from PyTorch's profiler for PyTorch eager
#                                fp32 and bf16 autocast; writes bench/train/target/results-host/
#                                and bench/train/target/RESULTS-host.md (RESULTS.md is not touched)
#
# Environment: THREADS (intra-op threads of both frameworks, default nproc), PYTHON (default
# /usr/bin/python3, Debian's interpreter, where `apt-get install python3-torch` puts PyTorch).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
command_line="bench/train/run.sh${*:+ $*}"
quick=false
checkpointing=false
transformer=false
memory=false
d2l=false
host=false
for arg in "$@"; do
    case "$arg" in
        --quick) quick=true ;;
        --checkpointing) checkpointing=true ;;
        --transformer) transformer=true ;;
        --memory) memory=true ;;
        --d2l) d2l=true ;;
        --host) host=true ;;
        *) echo "unknown argument: $arg (use --quick, --checkpointing, --transformer, --d2l, --memory, --host or nothing)" >&2; exit 2 ;;
    esac
done

python="${PYTHON:-/usr/bin/python3}"
threads="${THREADS:-$(nproc)}"

# builds bench/train and empties the part's result folder $1 (out); notes the start
prepare_part() {
    mvn -B -ntp -q -pl bench/train -am package -DskipTests
    classpath="bench/train/target/classes:$(cat bench/train/target/bench-train-classpath.txt)"
    out="$1"
    rm -rf "$out"
    mkdir -p "$out"
    started="$(date -u '+%Y-%m-%d %H:%M UTC')"
    revision="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
}

# writes the memory tables of $out, after a line naming the command, its settings ($2) and the
# machine, to $1, and prints them
write_memory_results() {
    {
        echo "Command: \`$command_line\` ($2), started $started, ended $(date -u '+%Y-%m-%d %H:%M UTC')."
        echo "Machine: $(nproc) cores (nproc), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'),"
        echo "$(grep -qw avx512_bf16 /proc/cpuinfo && echo 'with' || echo 'no') avx512_bf16;"
        echo "code at $revision; load average at the start $load_start, at the end $(cut -d' ' -f1-3 /proc/loadavg)."
        echo
        "$python" bench/train/memory_summary.py --dir "$out"
    } > "$1"
    cat "$1"
}
if $memory; then
    threads="${THREADS:-1}"
    network="${NETWORK:-resnet18}"
    batches="${BATCHES:-8,32,64}"
    repeat="${REPEAT:-1}"
    prepare_part bench/train/target/results-memory
    echo "== $network memory (DJL, djl-amp), batches $batches"
    java -Dai.djl.offline=true -Dai.djl.pytorch.num_threads="$threads" \
        -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$classpath" \
        io.github.djlamp.bench.train.TrainBench memory --network "$network" --batches "$batches" \
        --variants djl-fp32,djl-amp-bf16,djl-amp-bf16-unchecked,djl-amp-fp32-dynamic \
        --repeat "$repeat" --cap-mib 0 --out "$out/memory-$network-djl.json"
    if "$python" -c 'import torch' 2>/dev/null; then
        for b in ${batches//,/ }; do
            for v in pt-fp32 pt-bf16-autocast pt-bf16-autocast-cl; do
                echo "== $network memory ($v, batch $b)"
                "$python" bench/train/pytorch_resnet.py --network "$network" --batch "$b" \
                    --threads "$threads" --warmup 1 --steps 1 --variants "$v" --memory \
                    --out "$out/memory-$network-$v-$b.json"
            done
        done
    else
        echo "== no PyTorch for $python: the PyTorch rows are left out (apt-get install python3-torch)"
    fi
    write_memory_results bench/train/target/RESULTS-memory.md \
        "NETWORK=$network, BATCHES=$batches, REPEAT=$repeat, THREADS=$threads"
    exit 0
fi

if $transformer; then
    threads="${THREADS:-1}"
    steps="${STEPS:-2}"
    prepare_part bench/train/target/results-transformer
    tb() {
        java -Dai.djl.offline=true -Dai.djl.pytorch.num_threads="$threads" \
            -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
            -cp "$classpath" io.github.djlamp.bench.train.TrainBench "$@"
    }
    echo "== transformer-256 memory (DJL)"
    tb memory --network transformer-256 --batches 16 \
        --variants djl-fp32,djl-amp-bf16,djl-amp-fp32-dynamic --repeat 1 --cap-mib 0 \
        --out "$out/memory-transformer-256-djl.json"
    for v in pt-fp32 pt-bf16-autocast; do
        echo "== transformer-256 memory ($v)"
        "$python" bench/train/pytorch_resnet.py --network transformer-256 --batch 16 \
            --threads "$threads" --warmup 1 --steps "$steps" --variants "$v" --memory \
            --out "$out/memory-transformer-256-$v.json"
    done
    echo "== transformer-256 step time (DJL)"
    tb throughput --network transformer-256 --batch 16 --warmup 1 --steps "$steps" \
        --variants djl-fp32,djl-amp-bf16 --out "$out/throughput-transformer-256-djl.json"
    write_memory_results bench/train/target/RESULTS-transformer.md "THREADS=$threads, STEPS=$steps"
    exit 0
fi
if $host; then
    threads="${THREADS:-1}"
    steps="${STEPS:-30}"
    prepare_part bench/train/target/results-host
    for network in resnet18 d2l-resnet18 transformer; do
        echo "== $network host profile (DJL, djl-amp), batch 1, $threads threads, load $load_start"
        java -Dai.djl.offline=true -Dai.djl.pytorch.num_threads="$threads" \
            -Dorg.slf4j.simpleLogger.defaultLogLevel=error \
            -cp "$classpath" io.github.djlamp.bench.train.TrainBench host --network "$network" \
            --batch 1 --steps "$steps" \
            --variants djl-fp32,djl-amp-fp32,djl-amp-fp32-eager,djl-amp-bf16-fused,djl-amp-bf16-fused-eager \
            --out "$out/host-$network-djl.json"
        if [ "$network" = d2l-resnet18 ]; then
            echo "== $network: no PyTorch peer (pytorch_host.py builds DJL's model-zoo networks)"
        elif "$python" -c 'import torch' 2>/dev/null; then
            echo "== $network host profile (PyTorch eager)"
            (cd bench/train && "$python" pytorch_host.py --network "$network" --batch 1 \
                --threads "$threads" --steps "$steps" --variants pt-fp32,pt-bf16-autocast \
                --out "$root/$out/host-$network-pt.json")
        else
            echo "== no PyTorch for $python: the PyTorch rows are left out (apt-get install python3-torch)"
        fi
    done
    echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    {
        echo "Written by \`$command_line\` from $started on $revision (THREADS=$threads, STEPS=$steps)."
        echo
        "$python" bench/train/host_summary.py --dir "$out"
    } > bench/train/target/RESULTS-host.md
    cat bench/train/target/RESULTS-host.md
    exit 0
fi
if $d2l; then
    steps="${STEPS:-20}"
    prepare_part bench/train/target/results-d2l
    echo "== d2l-cnn step time, $threads threads, from $started on $revision, load $load_start"
    java -Dai.djl.offline=true -Dai.djl.pytorch.num_threads="$threads" \
        -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
        -cp "$classpath" io.github.djlamp.bench.train.TrainBench throughput --network d2l-cnn \
        --batch 64 --warmup 3 --steps "$steps" \
        --variants djl-fp32,djl-amp-bf16,djl-amp-bf16-fused,djl-amp-bf16-lambdas-fp32 \
        --out "$out/throughput-d2l-cnn.json"
    echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi
if $checkpointing; then
    # One intra-op thread: on a shared 2-core machine two spinning OpenMP threads per JVM turn other
    # processes' load into step times several times longer; one thread degrades gracefully.
    threads="${THREADS:-1}"
    mvn -B -ntp -q -pl bench/train -am package -DskipTests
    classpath="bench/train/target/classes:$(cat bench/train/target/bench-train-classpath.txt)"
    out="bench/train/target/results-checkpointing"
    rm -rf "$out"
    mkdir -p "$out"
    ckpt() {
        java -Dai.djl.offline=true -Dai.djl.pytorch.num_threads="$threads" \
            -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
            -cp "$classpath" io.github.djlamp.bench.train.TrainBench "$@"
    }
    # Memory only: glibc then returns every freed tensor to the system, so the resident size
    # follows the live tensors. Never for step times: every tensor then costs an mmap, fresh pages
    # and a munmap, which made ResNetV1-50's step 1.6x slower and the recomputation dearer still.
    ckpt_memory() {
        MALLOC_MMAP_THRESHOLD_=131072 ckpt memory "$@"
    }
    variants="djl-amp-bf16,djl-amp-bf16-ckpt-stages,djl-amp-bf16-ckpt-auto"
    started="$(date -u '+%Y-%m-%d %H:%M UTC')"
    revision="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    if ! git diff --quiet HEAD -- . ':!bench/RESULTS.md' 2>/dev/null; then
        revision="$revision with uncommitted changes"
    fi
    load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "== ResNetV1-50 step memory and the largest batch under a 512 MiB step-memory cap"
    ckpt_memory --network resnet50 --batches 32,64,128 --variants "$variants" --repeat 2 \
        --cap-mib 512 --cap-on step --granularity 4 \
        --cap-variants djl-amp-bf16,djl-amp-bf16-ckpt-stages --out "$out/memory-resnet50.json"
    echo "== transformer step memory"
    ckpt_memory --network transformer --batches 16,32 --variants "$variants" --repeat 2 \
        --cap-mib 0 --out "$out/memory-transformer.json"
    for r in 1 2 3 4; do
        echo "== ResNetV1-50 step time, JVM $r/4"
        ckpt throughput --network resnet50 --batch 32 --warmup 1 --steps 4 \
            --variants "$variants" --out "$out/throughput-resnet50-r$r.json"
    done
    for r in 1 2; do
        echo "== transformer step time, JVM $r/2"
        ckpt throughput --network transformer --batch 32 --warmup 1 --steps 3 \
            --variants "$variants" --out "$out/throughput-transformer-r$r.json"
    done
    results="bench/train/target/RESULTS-checkpointing.md"
    {
        echo "Command: \`$command_line\` (THREADS=$threads), started $started, ended $(date -u '+%Y-%m-%d %H:%M UTC')."
        echo "Machine: $(nproc) cores (nproc), $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(free -g | awk '/^Mem:/ {print $2}') GiB RAM;"
        echo "code at $revision; load average at the start $load_start, at the end $(cut -d' ' -f1-3 /proc/loadavg)."
        echo
        "$python" bench/train/ckpt_summary.py --dir "$out"
    } > "$results"
    cat "$results"
    exit 0
fi
if ! "$python" -c 'import torch' 2>/dev/null; then
    echo "Installing Debian's python3-torch (PyTorch for $python)..." >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get install -y python3-torch || { $sudo apt-get update && $sudo apt-get install -y python3-torch; }
fi

# the code measured: the commit, and whether anything but the results file differs from it
revision="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if ! git diff --quiet HEAD -- . ':!bench/RESULTS.md' 2>/dev/null; then
    revision="$revision with uncommitted changes"
fi
mvn -B -ntp -q -pl bench/train -am package -DskipTests
classpath="bench/train/target/classes:$(cat bench/train/target/bench-train-classpath.txt)"
out="bench/train/target/results"
rm -rf "$out"
mkdir -p "$out"

bench() {
    java -Dai.djl.offline=true -Dai.djl.pytorch.num_threads="$threads" \
        -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
        -cp "$classpath" io.github.djlamp.bench.train.TrainBench "$@"
}

if $quick; then
    rounds18=1; warmup18=1; steps18=2
    rounds50=1; warmup50=1; steps50=1
    overhead_rounds=1; overhead_steps=3
    memory_batches="16,32"; cap_mib=700
    results="bench/train/target/RESULTS-train-quick.md"
else
    rounds18=3; warmup18=5; steps18=20
    rounds50=3; warmup50=2; steps50=5
    overhead_rounds=2; overhead_steps=80
    memory_batches="64,128,256"; cap_mib=2048
    results="bench/RESULTS.md"
fi

djl_variants="djl-fp32,djl-amp-bf16,djl-amp-bf16-nchw"
memory_variants="djl-fp32,djl-amp-bf16,djl-amp-bf16-nchw"
cap_variants="djl-fp32,djl-amp-bf16"

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
if awk -v l="${load_start%% *}" 'BEGIN { exit !(l > 0.5) }'; then
    echo "warning: the load average is $load_start; other processes will distort the numbers" >&2
fi

# 1, 2. Throughput: each round one DJL JVM and one PyTorch process, each alternating its variants.
for r in $(seq 1 "$rounds18"); do
    echo "== ResNetV1-18, round $r/$rounds18"
    bench throughput --network resnet18 --batch 64 --warmup "$warmup18" --steps "$steps18" \
        --variants "$djl_variants" --out "$out/throughput-resnet18-r$r-djl.json"
    "$python" bench/train/pytorch_resnet.py --network resnet18 --batch 64 --threads "$threads" \
        --warmup "$warmup18" --steps "$steps18" --out "$out/throughput-resnet18-r$r-pytorch.json"
done
for r in $(seq 1 "$rounds50"); do
    echo "== ResNetV1-50, round $r/$rounds50"
    bench throughput --network resnet50 --batch 64 --warmup "$warmup50" --steps "$steps50" \
        --variants "$djl_variants" --out "$out/throughput-resnet50-r$r-djl.json"
    "$python" bench/train/pytorch_resnet.py --network resnet50 --batch 64 --threads "$threads" \
        --warmup "$warmup50" --steps "$steps50" --out "$out/throughput-resnet50-r$r-pytorch.json"
done

# 4. Bookkeeping: djl-amp's machinery with fp32 compute against plain DJL fp32, alternating.
for r in $(seq 1 "$overhead_rounds"); do
    echo "== bookkeeping overhead, JVM $r/$overhead_rounds"
    bench throughput --network resnet18 --batch 64 --warmup "$warmup18" --steps "$overhead_steps" \
        --variants djl-fp32,djl-amp-fp32-dynamic --out "$out/overhead-resnet18-r$r.json"
done

# 3. Memory: one child JVM per configuration; then the largest batch under the cap.
echo "== step memory"
bench memory --network resnet18 --batches "$memory_batches" --variants "$memory_variants" \
    --cap-mib "$cap_mib" --cap-variants "$cap_variants" --out "$out/memory-resnet18.json"

cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -n1)"
flags=""
for f in avx512_bf16 amx_bf16 avx512_fp16; do
    if grep -qw "$f" /proc/cpuinfo; then flags="$flags $f"; fi
done
machine="$(nproc) cores (nproc), ${cpu:-unknown CPU} (${flags# }), $(free -g | awk '/^Mem:/ {print $2}') GiB RAM, $(java -version 2>&1 | head -n1)"
bench report --dir "$out" --results "$results" --command "$command_line" \
    --date "$(date -u '+%Y-%m-%d %H:%M UTC')" --machine "$machine" \
    --note "code at $revision; load average at the start: $load_start, at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Wrote $results from $out"
