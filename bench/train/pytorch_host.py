"""Where a PyTorch eager training step's host time goes: the peer of `TrainBench host`.

For each variant of bench/train/pytorch_resnet.py's Rig (the same networks, built layer for layer
like DJL's), after warm-up: the step's wall time unprofiled, then, over as many steps under
PyTorch's own profiler, the operations Python called into libtorch in each phase (those no other
operation encloses), their count and their time, and each phase's host time: its wall time less
its operations' time (Python, the binding layer, autograd's bookkeeping outside operations).
"""

import argparse
import json
import os
import time

import torch
import torch.nn.functional as F

from pytorch_resnet import CLASSES, Rig

PHASES = ("forward", "backward", "update")


def profiled_step(rig):
    """One training step with each phase in a record_function range, as Rig.step runs it."""
    x = torch.rand(rig.shape, device=rig.device)
    if rig.channels_last:
        x = x.to(memory_format=torch.channels_last)
    y = torch.randint(0, CLASSES, (rig.batch,), device=rig.device)
    with torch.autograd.profiler.record_function("phase:forward"):
        with torch.autocast(
            rig.device.type, dtype=rig.dtype or torch.bfloat16, enabled=rig.dtype is not None
        ):
            out = rig.model(x)
            loss = F.cross_entropy(out, y)
    with torch.autograd.profiler.record_function("phase:backward"):
        if rig.scaler is not None:
            rig.scaler.scale(loss).backward()
        else:
            loss.backward()
    with torch.autograd.profiler.record_function("phase:update"):
        if rig.scaler is not None:
            rig.scaler.step(rig.optimizer)
            rig.scaler.update()
        else:
            rig.optimizer.step()
        rig.optimizer.zero_grad(set_to_none=True)


def attribute(events, steps):
    """Per phase: top-level operations per step, their milliseconds, and the host's."""
    result = {}
    for phase in PHASES:
        marks = [e for e in events if e.name == "phase:" + phase]
        ops = 0
        op_us = 0.0
        wall_us = 0.0
        for mark in marks:
            wall_us += mark.time_range.elapsed_us()
            for child in mark.cpu_children:
                ops += 1
                op_us += child.time_range.elapsed_us()
        result[phase] = {
            "opsPerStep": round(ops / steps, 1),
            "opMsPerStep": round(op_us / 1000 / steps, 3),
            "wallMs": round(wall_us / 1000 / steps, 3),
            "hostMs": round((wall_us - op_us) / 1000 / steps, 3),
        }
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--network", default="resnet18")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--variants", default="pt-fp32,pt-bf16-autocast")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(args.threads)
    variants = []
    print("%-22s %8s | %8s %6s %8s | %6s %6s | %8s" % (
        "variant", "step", "fwdWall", "fwdOps", "fwdHost", "bwdOps", "updOps", "stepHost"))
    for key in [k.strip() for k in args.variants.split(",") if k.strip()]:
        rig = Rig(key, args.network, args.batch)
        for _ in range(args.warmup):
            rig.step()
        step_ms = sorted(rig.step() * 1000 for _ in range(args.steps))[args.steps // 2]
        with torch.autograd.profiler.profile() as prof:
            for _ in range(args.steps):
                profiled_step(rig)
        phases = attribute(prof.function_events, args.steps)
        host = sum(p["hostMs"] for p in phases.values())
        variants.append({"key": key, "stepMsMedian": round(step_ms, 3), "profiled": phases})
        print("%-22s %8.2f | %8.2f %6.0f %8.2f | %6.0f %6.0f | %8.2f" % (
            key, step_ms, phases["forward"]["wallMs"], phases["forward"]["opsPerStep"],
            phases["forward"]["hostMs"], phases["backward"]["opsPerStep"],
            phases["update"]["opsPerStep"], host))
    with open(args.out, "w") as f:
        json.dump({
            "framework": "PyTorch",
            "frameworkVersion": "PyTorch " + torch.__version__,
            "network": args.network,
            "batch": args.batch,
            "threads": torch.get_num_threads(),
            "loadAverages": list(os.getloadavg()),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "variants": variants,
        }, f, indent=2)


if __name__ == "__main__":
    main()
