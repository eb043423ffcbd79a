#!/usr/bin/env bash
# All-reduce of ResNet-50's gradients across MPI ranks on this machine (loopback), bucketed against
# one all-reduce per parameter, and a training step for scale. Results: bench/RESULTS.md.
#   bench/allreduce.sh [RANKS [REPETITIONS [STEP_BATCH]]]     (2, 10, 4)
# Extra mpirun options in MPIRUN_ARGS, e.g. MPIRUN_ARGS="--mca btl self,tcp" (TCP loopback).
set -euo pipefail
cd "$(dirname "$0")/.."
RANKS=${1:-2}
bash amp-distributed/src/test/scripts/ensure-openmpi.sh
mvn -B -q -ntp -pl amp-distributed -am test-compile -Dspotless.check.skip=true
mvn -B -q -ntp -pl amp-distributed dependency:build-classpath -Dmdep.outputFile=/tmp/allreduce-cp.txt >/dev/null
CP=amp-distributed/target/test-classes:amp-distributed/target/classes:amp-core/target/classes:amp-djl-engine/target/classes
CP=$CP:$(tr ':' '\n' </tmp/allreduce-cp.txt | grep -v '/io/github/djlamp/' | paste -sd:)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
mpirun -np "$RANKS" --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none \
    -x OMP_NUM_THREADS=1 ${MPIRUN_ARGS:-} \
    java -Xmx3g -Dai.djl.offline=true -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$CP" \
    io.github.djlamp.amp.distributed.AllReduceBench "${2:-10}" "${3:-4}"
