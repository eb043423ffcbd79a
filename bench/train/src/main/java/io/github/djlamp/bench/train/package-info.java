/**
 * Training benchmarks of djl-amp: step throughput of DJL's model-zoo ResNetV1 in fp32 and in bf16
 * through djl-amp (the PyTorch counterpart lives in {@code bench/train/pytorch_resnet.py}), the
 * peak memory of a training step, the largest batch under a memory cap, the cost of djl-amp's
 * bookkeeping with fp32 compute, and the first-step cost of its kernel verification ({@code
 * verification}, not run by {@code run.sh}). {@code bench/train/run.sh} runs them all and writes
 * {@code bench/RESULTS.md} through {@link io.github.djlamp.bench.train.TrainBench}.
 */
package io.github.djlamp.bench.train;
