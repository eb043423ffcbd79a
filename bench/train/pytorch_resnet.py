#!/usr/bin/python3
"""PyTorch's side of djl-amp's training benchmark.

DJL's model-zoo ResNetV1 (ai.djl.basicmodelzoo.cv.classification.ResNetV1, DJL 0.35.1), built layer
for layer in PyTorch eager, trained on random data exactly as bench-train's TrainingRig trains the
DJL one: softmax cross-entropy, SGD (learning rate 0.01, momentum 0.9), every variant alternating
step by step with the order rotating each round. Writes the same JSON as `TrainBench throughput`.
`--network transformer-256`: issue 29's transformer, DJL's TransformerEncoderBlock layer for layer
(both residual sums add the block's input, BatchNorm over the feature axis with DJL's epsilon and
momentum, scores scaled by 1/sqrt(head size), dropout 0), trained with Adam at DJL's defaults.
`--memory` also reads glibc's in-use bytes over the first and a steady step (TrainBench's
memory-probe reads the same counter).

Run with Debian's interpreter, which has python3-torch: /usr/bin/python3 bench/train/pytorch_resnet.py
On a GPU (`--device cuda`, bench/gpu/run-gpu.sh): model and data on the GPU, torch.cuda.synchronize()
before every clock read, fp16 autocast with a GradScaler, and the peak device memory of the process
(torch.cuda.max_memory_allocated/reserved, and cudaMemGetInfo as TrainBench reads it for DJL).
"""

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import threading
import time

import torch
import torch.nn.functional as F
from torch import nn

CLASSES = 10
LEARNING_RATE = 0.01
MOMENTUM = 0.9
# DJL's BatchNorm momentum 0.9 keeps 90% of the running statistic; PyTorch's momentum is the
# weight of the new batch.
BN_MOMENTUM = 1 - 0.9

NETWORKS = {
    # key: (layers, channels, height, width)
    "resnet18": (18, 1, 32, 32),
    "resnet50": (50, 3, 32, 32),
    "resnet50-224": (50, 3, 224, 224),
}
# Issue 29's transformer (TrainBench's Network.TRANSFORMER_256): 4 encoder blocks of width 256,
# 4 heads, feed-forward 1024, GELU, on sequences of 128 steps of 256 features; Adam.
TRANSFORMERS = {
    # key: (blocks, sequence, width, heads, hidden)
    "transformer": (6, 64, 256, 4, 1024),
    "transformer-256": (4, 128, 256, 4, 1024),
}
# Network.TRANSFORMER projects 64 input features to the width with a Linear first; SGD as the
# ResNets (transformer-256 alone trains with Adam)
INPUT_FEATURES = {"transformer": 64}
# DJL's Adam defaults (ai.djl.training.optimizer.Adam.Builder)
ADAM_LEARNING_RATE = 0.001
ADAM_BETAS = (0.9, 0.999)
ADAM_EPSILON = 1e-8

VARIANTS = {
    # key: (label, autocast dtype or None, channels-last)
    "pt-fp32": ("PyTorch fp32", None, False),
    "pt-fp32-cl": ("PyTorch fp32, channels-last", None, True),
    "pt-bf16-autocast": ("PyTorch bf16 autocast", torch.bfloat16, False),
    "pt-bf16-autocast-cl": ("PyTorch bf16 autocast, channels-last", torch.bfloat16, True),
    # fp16 autocast with torch's GradScaler (dynamic loss scaling, its defaults); for GPUs
    "pt-fp16-autocast": ("PyTorch fp16 autocast + GradScaler", torch.float16, False),
    "pt-fp16-autocast-cl": ("PyTorch fp16 autocast + GradScaler, channels-last", torch.float16, True),
}
CPU_VARIANTS = "pt-fp32,pt-fp32-cl,pt-bf16-autocast,pt-bf16-autocast-cl"


def batch_norm(channels, eps):
    return nn.BatchNorm2d(channels, eps=eps, momentum=BN_MOMENTUM)


class ResidualUnit(nn.Module):
    """ResNetV1.residualUnit: a body and a shortcut, added, then relu."""

    def __init__(self, in_channels, filters, stride, dim_match, bottleneck):
        super().__init__()
        if bottleneck:
            inner = filters // 4
            self.body = nn.Sequential(
                nn.Conv2d(in_channels, inner, 1, stride, 0, bias=True),
                batch_norm(inner, 1e-5),
                nn.ReLU(),
                nn.Conv2d(inner, inner, 3, 1, 1, bias=False),
                batch_norm(inner, 2e-5),
                nn.ReLU(),
                nn.Conv2d(inner, filters, 1, 1, 0, bias=True),
                batch_norm(filters, 1e-5),
            )
        else:
            self.body = nn.Sequential(
                nn.Conv2d(in_channels, filters, 3, stride, 1, bias=False),
                batch_norm(filters, 1e-5),
                nn.ReLU(),
                nn.Conv2d(filters, filters, 3, 1, 1, bias=False),
                batch_norm(filters, 1e-5),
            )
        if dim_match:
            self.shortcut = nn.Identity()
        else:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, filters, 1, stride, 0, bias=False),
                batch_norm(filters, 1e-5),
            )

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


def resnet_v1(layers, channels, height):
    """ResNetV1.builder().setNumLayers(layers).setImageShape(channels, height, height).build()."""
    if height <= 28:
        raise ValueError("only the 32x32 (and larger) configuration of ResNetV1 is built here")
    filters = [64, 256, 512, 1024, 2048] if layers >= 50 else [64, 64, 128, 256, 512]
    units = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3], 101: [3, 4, 23, 3]}[layers]
    blocks = []
    if height <= 32:
        blocks.append(nn.Conv2d(channels, filters[0], 3, 1, 1, bias=False))
    else:
        blocks += [
            nn.Conv2d(channels, filters[0], 7, 2, 3, bias=False),
            batch_norm(filters[0], 2e-5),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        ]
    in_channels = filters[0]
    stride = 1
    for stage, count in enumerate(units):
        out = filters[stage + 1]
        blocks.append(ResidualUnit(in_channels, out, stride, False, True))
        for _ in range(count - 1):
            blocks.append(ResidualUnit(out, out, 1, True, True))
        in_channels = out
        stride = 2
    blocks += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(in_channels, CLASSES)]
    return nn.Sequential(*blocks)


class ScaledDotProductAttention(nn.Module):
    """DJL's ScaledDotProductAttentionBlock, self-attention without a mask: key, query, value and
    result projections (Linear with bias, in that parameter order), scores scaled by 1/sqrt(head
    size), softmax over the last axis, dropout 0."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.key = nn.Linear(width, width)
        self.query = nn.Linear(width, width)
        self.value = nn.Linear(width, width)
        self.result = nn.Linear(width, width)

    def forward(self, x):
        b, s, e = x.shape
        n = self.heads
        h = e // n

        def heads(projection):  # (B, S, E) -> (B, N, S, H)
            return projection.reshape(b, s, n, h).transpose(1, 2)

        keys = heads(self.key(x))
        queries = heads(self.query(x))
        values = heads(self.value(x))
        scores = torch.matmul(queries, keys.transpose(2, 3)) * (1.0 / h ** 0.5)
        probabilities = torch.softmax(scores, dim=3)
        result = torch.matmul(probabilities, values).transpose(1, 2).reshape(b, s, e)
        return self.result(result)


class FeatureBatchNorm(nn.Module):
    """DJL's BatchNorm.builder().optAxis(2) on (B, S, E): statistics per feature over batch and
    sequence, DJL's epsilon 1e-5 and momentum 0.9 (PyTorch's 0.1), scale and shift."""

    def __init__(self, width):
        super().__init__()
        self.norm = nn.BatchNorm1d(width, eps=1e-5, momentum=BN_MOMENTUM)

    def forward(self, x):
        b, s, e = x.shape
        return self.norm(x.reshape(b * s, e)).reshape(b, s, e)


class TransformerEncoder(nn.Module):
    """DJL's TransformerEncoderBlock(width, heads, hidden, 0f, Activation::gelu): both residual
    sums add the block's input (not the normalized attention output), each followed by a
    BatchNorm over the feature axis; the feed-forward block is Linear, GELU (exact), Linear."""

    def __init__(self, width, heads, hidden):
        super().__init__()
        self.attention = ScaledDotProductAttention(width, heads)
        self.attention_norm = FeatureBatchNorm(width)
        self.feed_forward = nn.Sequential(
            nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width)
        )
        self.output_norm = FeatureBatchNorm(width)

    def forward(self, x):
        normalized = self.attention_norm(self.attention(x) + x)
        return self.output_norm(self.feed_forward(normalized) + x)


def transformer(blocks, sequence, width, heads, hidden, features=None):
    """Network.TRANSFORMER(_256).build(): an input projection where there are other features than
    the width, the encoder blocks, a flatten and a Linear classifier."""
    layers = [] if features is None else [nn.Linear(features, width)]
    layers += [TransformerEncoder(width, heads, hidden) for _ in range(blocks)]
    layers += [nn.Flatten(), nn.Linear(sequence * width, CLASSES)]
    return nn.Sequential(*layers)


def describe(network):
    if network in TRANSFORMERS:
        blocks, sequence, width, heads, hidden = TRANSFORMERS[network]
        features = INPUT_FEATURES.get(network)
        return "Transformer encoder, %d blocks of width %d (%d heads, hidden %d), sequences %dx%d, %s" % (
            blocks, width, heads, hidden, sequence, features or width,
            "SGD" if features else "Adam")
    layers, channels, height, width = NETWORKS[network]
    return "ResNetV1-%d, %dx%dx%d" % (layers, channels, height, width)


class Rig:
    """One network trained one way."""

    def __init__(self, key, network, batch, device="cpu"):
        self.key = key
        self.label, self.dtype, self.channels_last = VARIANTS[key]
        self.batch = batch
        self.device = torch.device(device)
        if network in TRANSFORMERS:
            if self.channels_last:
                raise ValueError("channels-last variants are for the ResNets, not " + network)
            blocks, sequence, width, heads, hidden = TRANSFORMERS[network]
            features = INPUT_FEATURES.get(network)
            self.shape = (batch, sequence, features or width)
            self.model = transformer(blocks, sequence, width, heads, hidden, features).to(
                self.device
            )
        else:
            layers, channels, height, width = NETWORKS[network]
            self.shape = (batch, channels, height, width)
            self.model = resnet_v1(layers, channels, height).to(self.device)
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.model.train()
        if network == "transformer-256":
            self.optimizer = torch.optim.Adam(
                self.model.parameters(), lr=ADAM_LEARNING_RATE, betas=ADAM_BETAS, eps=ADAM_EPSILON
            )
        else:
            self.optimizer = torch.optim.SGD(
                self.model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM
            )
        self.scaler = None
        if self.dtype == torch.float16:
            self.scaler = grad_scaler(self.device.type)

    def synchronize(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def parameter_count(self):
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def parameter_shapes(self):
        """The trainable parameters' shapes in order, as TrainingRig.parameterShapes writes them."""
        return ";".join(
            "x".join(str(d) for d in p.shape) for p in self.model.parameters() if p.requires_grad
        )

    def step(self, phases=None, memory=None):
        """One training step on fresh random data; returns its wall time (data making untimed).

        With a dict for phases, adds the seconds of forward (with the loss), backward and the
        optimizer step (with zero_grad) to its lists. With a StepMemory, reads glibc's in-use
        bytes at forward start, backward start and after the step, and samples the peak.
        """
        x = torch.rand(self.shape, device=self.device)
        if self.channels_last:
            x = x.to(memory_format=torch.channels_last)
        y = torch.randint(0, CLASSES, (self.batch,), device=self.device)
        self.synchronize()
        start = time.perf_counter()
        if memory is not None:
            memory.begin()
        with torch.autocast(
            self.device.type, dtype=self.dtype or torch.bfloat16, enabled=self.dtype is not None
        ):
            out = self.model(x)
            loss = F.cross_entropy(out, y)
        if phases is not None:
            self.synchronize()
        forward_end = time.perf_counter()
        if memory is not None:
            memory.backward_start()
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()
        if phases is not None:
            self.synchronize()
        backward_end = time.perf_counter()
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        del out, loss
        if memory is not None:
            memory.end()
        self.synchronize()
        end = time.perf_counter()
        if phases is not None:
            phases.setdefault("forward", []).append(forward_end - start)
            phases.setdefault("backward", []).append(backward_end - forward_end)
            phases.setdefault("step", []).append(end - backward_end)
        return end - start


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd",
        "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _load_mallinfo2():
    try:
        libc = ctypes.CDLL("libc.so.6")
        function = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    function.restype = _Mallinfo2
    function.argtypes = []
    return function


_MALLINFO2 = _load_mallinfo2()
GLIBC_METHOD = (
    "glibc mallinfo2(): uordblks + hblkhd, the bytes malloc has handed out and not taken back"
    " (arenas and mmapped chunks), as TrainBench's GlibcHeap reads it"
)


def glibc_in_use():
    """The bytes malloc has handed out and not taken back (TrainBench's GlibcHeap.inUseBytes)."""
    info = _MALLINFO2()
    return info.uordblks + info.hblkhd


class StepMemory:
    """glibc's in-use bytes over one step, as TrainBench's StepMemory: forward start, backward
    start (the loss computed), after the step, and the peak of those and of a sampler thread's
    reads every 200 microseconds (torch's kernels release the GIL while they run)."""

    def __init__(self):
        self.forward_start = self.backward = self.after = self.peak = -1
        self._running = False
        self._thread = None

    def _record(self, value):
        if value > self.peak:
            self.peak = value

    def _sample(self):
        while self._running:
            self._record(glibc_in_use())
            time.sleep(0.0002)

    def begin(self):
        self.forward_start = glibc_in_use()
        self.peak = self.forward_start
        self._running = True
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def backward_start(self):
        self.backward = glibc_in_use()
        self._record(self.backward)

    def end(self):
        self._running = False
        self._thread.join()
        self.after = glibc_in_use()
        self._record(self.after)

    def to_json(self):
        return {
            "forwardStartBytes": self.forward_start,
            "backwardStartBytes": self.backward,
            "peakBytes": self.peak,
            "afterStepBytes": self.after,
        }


def grad_scaler(device_type):
    """torch's GradScaler with its defaults (2^16, x2 after 2000 clean steps, x0.5 on Inf/NaN)."""
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device_type)
    return torch.cuda.amp.GradScaler()


def device_used_bytes(device):
    """Memory in use on the GPU, cudaMemGetInfo's total - free: what TrainBench reads for DJL."""
    free, total = torch.cuda.mem_get_info(device)
    return total - free


def rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise ValueError("no " + field + " in /proc/self/status")


def reset_peak_rss():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def load_averages():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


class OtherLoad:
    """Cores that processes other than this one kept busy (as bench-train's Load.otherCores)."""

    def __init__(self):
        self.start = time.monotonic()
        self.busy, self.own = self._ticks()

    @staticmethod
    def _ticks():
        with open("/proc/stat") as f:
            cpu = f.readline().split()
        busy = sum(int(cpu[i]) for i in (1, 2, 3, 6, 7, 8))
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return busy, int(fields[11]) + int(fields[12])

    def other_cores(self):
        busy, own = self._ticks()
        seconds = time.monotonic() - self.start
        return max(0.0, ((busy - self.busy) - (own - self.own)) / 100.0 / seconds)


def debian_version():
    try:
        return subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "python3-torch"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def framework_version(device):
    if device.startswith("cuda"):
        return "PyTorch %s, CUDA %s, cuDNN %s, %s" % (
            torch.__version__,
            torch.version.cuda,
            torch.backends.cudnn.version(),
            torch.cuda.get_device_name(torch.device(device)),
        )
    return "PyTorch %s (Debian python3-torch %s)" % (torch.__version__, debian_version())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--network", default="resnet18", choices=sorted(list(NETWORKS) + list(TRANSFORMERS))
    )
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument(
        "--variants",
        default=None,
        help="comma-separated (default: all on cuda; the fp32 and bf16 ones on cpu): "
        + ",".join(VARIANTS),
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="on cpu: also the peak resident size of one step after warm-up (VmHWM reset first)"
        " and glibc's in-use bytes over the first and that step; meaningful with one variant a"
        " process",
    )
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per variant")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per variant")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--phases", action="store_true", help="also record per-phase times")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    torch.manual_seed(1)
    torch.set_num_threads(args.threads)
    cuda = args.device.startswith("cuda")
    if args.variants is None:
        args.variants = ",".join(VARIANTS) if cuda else CPU_VARIANTS
    load_before = load_averages()
    other_load = OtherLoad()
    baseline = None
    if cuda:
        torch.zeros(1, device=args.device)  # the CUDA context, before any model
        torch.cuda.synchronize(args.device)
        baseline = device_used_bytes(args.device)
        peak_used = baseline
    rigs = [
        Rig(k.strip(), args.network, args.batch, args.device)
        for k in args.variants.split(",")
        if k.strip()
    ]
    ready_kib = None if cuda else rss_kib("VmRSS")
    glibc = args.memory and not cuda and _MALLINFO2 is not None
    ready_in_use = glibc_in_use() if glibc else None
    first = StepMemory() if glibc and args.warmup > 0 else None
    first_step_device = None
    # each variant's first step, timed apart (a fresh process's first step: cuDNN's and the
    # allocator's first-use costs), as TrainBench throughput writes firstStepMs
    first_ms = [None for _ in rigs]
    for warmup_index in range(args.warmup):
        for rig_index, rig in enumerate(rigs):
            seconds = rig.step(memory=first if warmup_index == 0 and rig_index == 0 else None)
            if warmup_index == 0:
                first_ms[rig_index] = round(seconds * 1000, 3)
            if cuda:
                peak_used = max(peak_used, device_used_bytes(args.device))
                if first_step_device is None:
                    first_step_device = {
                        "maxAllocatedBytes": torch.cuda.max_memory_allocated(args.device),
                        "maxReservedBytes": torch.cuda.max_memory_reserved(args.device),
                        "usedAboveBaselineBytes": device_used_bytes(args.device) - baseline,
                    }
    whole_run_max = None
    if cuda:
        # the steady steps apart from the first: the allocator's peaks start again here
        whole_run_max = (torch.cuda.max_memory_allocated(args.device),
                         torch.cuda.max_memory_reserved(args.device))
        torch.cuda.reset_peak_memory_stats(args.device)
    cpu_memory = None
    host_peak_kib = None if cuda else rss_kib("VmHWM")
    steady_peak_used = baseline
    if args.memory and not cuda:
        before = rss_kib("VmRSS")
        steady = StepMemory() if glibc else None
        reset_peak_rss()
        step_seconds = rigs[0].step(memory=steady)
        cpu_memory = {
            "method": "VmHWM of one step after warm-up, reset through /proc/self/clear_refs",
            "variant": rigs[0].key,
            "readyRssKib": ready_kib,
            "beforeStepRssKib": before,
            "stepPeakKib": rss_kib("VmHWM"),
            "stepMs": round(step_seconds * 1000, 3),
        }
        if glibc:
            cpu_memory["glibcInUse"] = {
                "method": GLIBC_METHOD,
                "readyBytes": ready_in_use,
                "steadyStep": steady.to_json(),
            }
            if first is not None:
                cpu_memory["glibcInUse"]["firstStep"] = first.to_json()
    ms = [[0.0] * args.steps for _ in rigs]
    phases = [{} if args.phases else None for _ in rigs]
    for round_index in range(args.steps):
        for k in range(len(rigs)):
            index = (round_index + k) % len(rigs)
            ms[index][round_index] = rigs[index].step(phases[index]) * 1000
            if cuda:
                used = device_used_bytes(args.device)
                peak_used = max(peak_used, used)
                steady_peak_used = max(steady_peak_used, used)

    result = {
        "framework": "PyTorch",
        "frameworkVersion": framework_version(args.device),
        "network": args.network,
        "description": describe(args.network),
        "batch": args.batch,
        "device": args.device,
        "threads": torch.get_num_threads(),
        "parameters": rigs[0].parameter_count(),
        "parameterShapes": rigs[0].parameter_shapes(),
        "warmup": args.warmup,
        "loadBefore": load_before,
        "loadAfter": load_averages(),
        "otherCores": round(other_load.other_cores(), 2),
        "variants": [
            dict(
                {"key": rig.key, "label": rig.label, "stepMs": [round(t, 3) for t in times]},
                **({} if first is None else {"firstStepMs": first}),
            )
            for rig, times, first in zip(rigs, ms, first_ms)
        ],
    }
    if cuda:
        # one number for the whole process: run one variant a process to attribute it
        result["deviceMemory"] = {
            "method": "torch.cuda.max_memory_allocated/reserved; cudaMemGetInfo (total - free)"
            " after every synchronized step minus the memory in use before the model was built,"
            " as TrainBench reads it for DJL",
            "device": args.device,
            "maxAllocatedBytes": max(whole_run_max[0], torch.cuda.max_memory_allocated(args.device)),
            "maxReservedBytes": max(whole_run_max[1], torch.cuda.max_memory_reserved(args.device)),
            "firstStep": first_step_device,
            "steadyMaxAllocatedBytes": torch.cuda.max_memory_allocated(args.device),
            "steadyMaxReservedBytes": torch.cuda.max_memory_reserved(args.device),
            "baselineBytes": baseline,
            "peakUsedBytes": peak_used,
            "peakAboveBaselineBytes": peak_used - baseline,
            # as TrainBench's steadyPeakAboveBaselineBytes: the most after any timed step
            "steadyPeakAboveBaselineBytes": steady_peak_used - baseline,
            "cudnnBenchmark": torch.backends.cudnn.benchmark,
            "matmulTf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnnTf32": torch.backends.cudnn.allow_tf32,
        }
    if cpu_memory is not None:
        result["processMemory"] = cpu_memory
    if not cuda:
        # no device memory to read: the process's peak resident size stands in (what a CPU dry
        # run of bench/gpu's cap search reads; not comparable across frameworks)
        result["hostPeakRssKib"] = max(host_peak_kib, rss_kib("VmHWM"))
    if args.phases:
        for variant, phase in zip(result["variants"], phases):
            variant["phasesMs"] = {
                name: round(statistics.median(values) * 1000, 2) for name, values in phase.items()
            }
            print(variant["key"], "phases:", variant["phasesMs"])
    directory = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(directory, exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    for rig, times in zip(rigs, ms):
        median = sorted(times)[len(times) // 2]
        print("%-22s median %8.1f ms  %7.1f img/s" % (rig.key, median, args.batch * 1000 / median))


if __name__ == "__main__":
    main()
