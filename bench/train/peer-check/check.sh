#!/usr/bin/env bash
# Checks that pytorch_resnet.py's transformer block computes what DJL's TransformerEncoderBlock
# computes: same parameters, same input, one training-mode forward on each side, output and
# BatchNorm running statistics compared (tolerance 1e-5). Needs `mvn -pl bench/train -am package`
# first and Debian's python3-torch.   bash bench/train/peer-check/check.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$root"
cp="bench/train/target/classes:$(cat bench/train/target/bench-train-classpath.txt)"
dump="$(mktemp -d)/transformer-block.json"
java -Dai.djl.offline=true -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$cp" \
    bench/train/peer-check/TransformerBlockDump.java "$dump"
"${PYTHON:-/usr/bin/python3}" bench/train/peer-check/check.py "$dump"
