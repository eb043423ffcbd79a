#!/usr/bin/env bash
# Reruns every djl-amp benchmark and rewrites the tables of bench/RESULTS.md:
# the JMH micro-benchmarks of the engine layer, then the training benchmarks
# (throughput against DJL fp32 and PyTorch, step memory, bookkeeping overhead).
# About 15 minutes on 2 cores; run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bench/run-micro.sh
bench/train/run.sh
