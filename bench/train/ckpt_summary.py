#!/usr/bin/env python3
"""Markdown tables of the activation-checkpointing runs (bench/train/run.sh --checkpointing).

Reads memory-<network>.json (TrainBench memory) and throughput-<network>-r<N>.json (TrainBench
throughput, one file a JVM) from --dir; prints the tables on stdout. Standard library only.
"""
import argparse
import glob
import json
import os
import re
import statistics

BASE = "djl-amp-bf16"


def mib(kib):
    return kib / 1024.0


def memory_tables(path):
    run = json.load(open(path))
    rows = {}
    for r in run["table"]:
        if "error" in r:
            rows.setdefault((r["batch"], r["variant"]), []).append(None)
            continue
        rows.setdefault((r["batch"], r["variant"]), []).append(r)
    out = ["#### Step memory: %s" % run["description"], ""]
    out.append("Each configuration a fresh JVM (%s, MALLOC_MMAP_THRESHOLD_=131072: the resident"
               " size follows the live tensors, and the step ms column is no step time), measured"
               " %d times, alternating; step memory ="
               " peak resident size of the second step (VmHWM reset before it) minus the resident"
               " size with the model ready. First-step peak: the whole process over the first step"
               " (kernel verification runs there). Medians, range in brackets."
               % (run["childJvmOptions"], run["repeat"]))
    out.append("")
    out.append("| batch | variant | step memory MiB (range) | vs djl-amp bf16 | saved MiB (logged:"
               " up to) | first-step peak MiB (process) | step ms (one step, noisy) |")
    out.append("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    base = {}
    for (batch, variant), rs in sorted(rows.items()):
        good = [r for r in rs if r]
        if not good:
            out.append("| %d | %s | failed | | | | |" % (batch, variant))
            continue
        step = [mib(r["stepPeakKib"] - r["readyRssKib"]) for r in good]
        first = [mib(r["warmupPeakKib"]) for r in good]
        ms = [r["stepMs"] for r in good]
        med = statistics.median(step)
        if variant == BASE:
            base[batch] = med
        ratio = "%.2fx" % (med / base[batch]) if batch in base else ""
        saved = ""
        if batch in base and variant != BASE:
            saved = "%.0f" % (base[batch] - med)
            upper = [mib(r["checkpointUpperSavingKib"]) for r in good
                     if "checkpointUpperSavingKib" in r]
            if upper:
                saved += " (%.0f)" % statistics.median(upper)
        out.append("| %d | %s | %.0f (%.0f-%.0f) | %s | %s | %.0f | %.0f |"
                   % (batch, variant, med, min(step), max(step), ratio, saved,
                      statistics.median(first), statistics.median(ms)))
    if run.get("caps"):
        out.append("")
        out.append("Largest batch whose %s stays <= %d MiB (doubling, then bisection to %d images;"
                   " each probe a fresh JVM):"
                   % ("step memory (peak - ready)" if run.get("capOn") == "step"
                      else "whole-process peak", run["capMib"], run["granularity"]))
        out.append("")
        out.append("| variant | largest batch | first batch over the cap |")
        out.append("| --- | ---: | ---: |")
        for c in run["caps"]:
            out.append("| %s | %d | %s |" % (c["variant"], c["largestBatch"],
                                             c["firstFailing"] if c["firstFailing"] > 0 else "none"))
    out.append("")
    out.append("Load average before -> after: %s -> %s" % (run["loadBefore"], run["loadAfter"]))
    out.append("")
    return out


def throughput_tables(files):
    runs = [json.load(open(f)) for f in files]
    first = runs[0]
    out = ["#### Step time: %s, batch %d, %d intra-op thread(s)"
           % (first["description"], first["batch"], first["threads"]), ""]
    out.append("%d JVMs with glibc's default allocator; in each, the variants alternate step by"
               " step after %d warm-up step(s)."
               " Median over every timed step; per-JVM medians in brackets; ratio = median of the"
               " per-JVM ratios (range)." % (len(runs), first["warmup"]))
    out.append("")
    out.append("| variant | step ms (per-JVM medians) | vs djl-amp bf16 (range) |")
    out.append("| --- | ---: | ---: |")
    keys = [v["key"] for v in first["variants"]]
    for key in keys:
        all_ms, per = [], []
        ratios = []
        for run in runs:
            vs = {v["key"]: v for v in run["variants"]}
            ms = vs[key]["stepMs"]
            all_ms += ms
            per.append(statistics.median(ms))
            if BASE in vs:
                ratios.append(statistics.median(ms) / statistics.median(vs[BASE]["stepMs"]))
        ratio = ("%.2fx (%.2f-%.2f)" % (statistics.median(ratios), min(ratios), max(ratios))
                 if ratios else "")
        out.append("| %s | %.0f (%s) | %s |" % (key, statistics.median(all_ms),
                                               ", ".join("%.0f" % p for p in per), ratio))
    out.append("")
    out.append("Load average before -> after, per JVM: " + "; ".join(
        "%s -> %s" % (r["loadBefore"], r["loadAfter"]) for r in runs))
    out.append("")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    lines = []
    for path in sorted(glob.glob(os.path.join(args.dir, "memory-*.json"))):
        lines += memory_tables(path)
    groups = {}
    for path in sorted(glob.glob(os.path.join(args.dir, "throughput-*-r*.json"))):
        groups.setdefault(re.sub(r"-r\d+\.json$", "", path), []).append(path)
    for _, files in sorted(groups.items()):
        lines += throughput_tables(files)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
