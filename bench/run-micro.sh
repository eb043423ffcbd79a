#!/usr/bin/env bash
# Runs djl-amp's JMH micro-benchmarks of the engine layer (about 2.5 minutes on 2 cores) and rewrites
# the micro section of bench/RESULTS.md. Extra arguments go to JMH, e.g. `-wi 0 -i 1` for a quick look.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
command_line="bench/run-micro.sh${*:+ $*}"

mvn -B -ntp -q -pl bench/micro -am package -DskipTests
classpath="bench/micro/target/classes:$(cat bench/micro/target/bench-classpath.txt)"
json="bench/micro/target/jmh-micro.json"

load_before="$(cut -d' ' -f1 /proc/loadavg)"
if awk -v l="$load_before" 'BEGIN { exit !(l > 0.5) }'; then
    echo "warning: load average is $load_before; other processes will make the numbers noisy" >&2
fi
# The forked benchmark JVMs get -Dai.djl.offline=true from their @Fork annotations.
java -cp "$classpath" org.openjdk.jmh.Main \
    -rf json -rff "$json" "$@" 'io\.github\.djlamp\.bench\.(Cast|Unscale)Benchmark\.'
load_after="$(cut -d' ' -f1 /proc/loadavg)"

cpu="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
machine="$(nproc) cores (nproc), $cpu, $(java -version 2>&1 | head -n1)"
java -cp "$classpath" io.github.djlamp.bench.MicroResults "$json" bench/RESULTS.md \
    "$command_line" "$(date -u)" "$machine" "before $load_before, after $load_after"
echo "Wrote the micro section of bench/RESULTS.md from $json"
