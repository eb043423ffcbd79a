#!/usr/bin/env python3
"""Tables of the transformer comparison (issue 29) from the JSON files of one directory.

  python3 bench/train/transformer_summary.py --dir DIR

DIR holds TrainBench `memory` results (a "table" of memory-probe rows), pytorch_resnet.py --memory
results (a "processMemory" object, one variant a file) and throughput results of either side.
Prints Markdown: glibc's in-use bytes over the first and a steady step per variant, ratios to DJL
fp32, and the median step times with djl-amp's 16-bit share of the arithmetic. Standard library only.
"""

import argparse
import glob
import json
import os
import statistics

MIB = 1024.0 * 1024.0


def rows(directory):
    memory, timing = [], []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as f:
            data = json.load(f)
        for row in data.get("table", []):
            if "glibcInUse" in row:
                memory.append(("DJL", row["variant"], row["batch"], row["glibcInUse"], row.get("lowPrecisionShare"), row.get("stepMs")))
        process = data.get("processMemory")
        if process and "glibcInUse" in process:
            memory.append(("PyTorch", process["variant"], data["batch"], process["glibcInUse"], None, process.get("stepMs")))
        for variant in data.get("variants", []):
            timing.append((data["framework"], variant["key"], data["batch"], variant["stepMs"], variant.get("lowPrecisionShare"), os.path.basename(path)))
    return memory, timing


def mib(value):
    return "%.0f" % (value / MIB)


def render(directory):
    memory, timing = rows(directory)
    out = []
    out.append("glibc in use (MiB; `mallinfo2` uordblks + hblkhd), one process a variant:")
    out.append("")
    out.append("| framework | variant | batch | step | forward start | backward start | peak | after step | peak − forward start | one step's ms |")
    out.append("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    base = {}
    for framework, key, batch, glibc, share, step_ms in memory:
        for which in ("firstStep", "steadyStep"):
            s = glibc.get(which)
            if not s:
                continue
            above = s["peakBytes"] - s["forwardStartBytes"]
            if key == "djl-fp32":
                base[which] = (s["peakBytes"], above, s["backwardStartBytes"])
            out.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                framework, key, batch, "first" if which == "firstStep" else "steady",
                mib(s["forwardStartBytes"]), mib(s["backwardStartBytes"]), mib(s["peakBytes"]),
                mib(s["afterStepBytes"]), mib(above),
                "%.0f" % step_ms if which == "steadyStep" and step_ms else ""))
    out.append("")
    if base:
        out.append("Against DJL fp32 (peak / peak − forward start / backward start):")
        out.append("")
        out.append("| framework | variant | step | peak | peak − forward start | backward start |")
        out.append("| --- | --- | --- | ---: | ---: | ---: |")
        for framework, key, batch, glibc, share, step_ms in memory:
            for which in ("firstStep", "steadyStep"):
                s = glibc.get(which)
                if not s or which not in base:
                    continue
                peak, above, backward = base[which]
                out.append("| %s | %s | %s | %.2fx | %.2fx | %.2fx |" % (
                    framework, key, "first" if which == "firstStep" else "steady",
                    s["peakBytes"] / peak, (s["peakBytes"] - s["forwardStartBytes"]) / above,
                    s["backwardStartBytes"] / backward))
        out.append("")
    if timing:
        out.append("Step times (ms, every timed step; median):")
        out.append("")
        out.append("| framework | variant | batch | steps | median | djl-amp's 16-bit share of the arithmetic | file |")
        out.append("| --- | --- | ---: | --- | ---: | ---: | --- |")
        for framework, key, batch, times, share, name in timing:
            out.append("| %s | %s | %d | %s | %.0f | %s | %s |" % (
                framework, key, batch, ", ".join("%.0f" % t for t in times), statistics.median(times),
                "%.1f%%" % (100 * share) if share is not None else "—", name))
        out.append("")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    print(render(parser.parse_args().dir))


if __name__ == "__main__":
    main()
