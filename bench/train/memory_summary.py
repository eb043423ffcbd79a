#!/usr/bin/env python3
"""Memory tables of DJL, djl-amp and the PyTorch peer from the JSON files of one directory.

  python3 bench/train/memory_summary.py --dir DIR

DIR holds TrainBench `memory` results (a "table" of memory-probe rows), pytorch_resnet.py --memory
results (a "processMemory" object, one variant a file) and throughput results of either side.
Prints Markdown: glibc's in-use bytes over the first and a steady step per variant, ratios to DJL
fp32, the first step against the steady step (time, process peak, glibc peak), djl-amp's kernel
checks on against off (`djl-amp-bf16` beside `djl-amp-bf16-unchecked`, where both ran), and the
median step times with djl-amp's 16-bit share of the arithmetic. Used by `run.sh --memory` and
`run.sh --transformer`. Standard library only.
"""

import argparse
import glob
import json
import os
import statistics

MIB = 1024.0 * 1024.0


def rows(directory):
    memory, timing, probes = [], [], []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as f:
            data = json.load(f)
        for row in data.get("table", []):
            if "glibcInUse" in row:
                memory.append(("DJL", row["variant"], row["batch"], row["glibcInUse"], row.get("lowPrecisionShare"), row.get("stepMs")))
            probes.append(row)
        process = data.get("processMemory")
        if process and "glibcInUse" in process:
            memory.append(("PyTorch", process["variant"], data["batch"], process["glibcInUse"], None, process.get("stepMs")))
        for variant in data.get("variants", []):
            timing.append((data["framework"], variant["key"], data["batch"], variant["stepMs"], variant.get("lowPrecisionShare"), os.path.basename(path)))
    return memory, timing, probes


def mib(value):
    return "%.0f" % (value / MIB)


def render(directory):
    memory, timing, probes = rows(directory)
    out = []
    out.append("glibc in use (MiB; `mallinfo2` uordblks + hblkhd), one process a variant:")
    out.append("")
    out.append("| framework | variant | batch | step | forward start | backward start | peak | after step | peak − forward start | one step's ms |")
    out.append("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    memory.sort(key=lambda m: (m[2], m[0], m[1]))
    base = {}
    for framework, key, batch, glibc, share, step_ms in memory:
        for which in ("firstStep", "steadyStep"):
            s = glibc.get(which)
            if not s:
                continue
            above = s["peakBytes"] - s["forwardStartBytes"]
            if key == "djl-fp32":
                base[(batch, which)] = (s["peakBytes"], above, s["backwardStartBytes"])
            out.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                framework, key, batch, "first" if which == "firstStep" else "steady",
                mib(s["forwardStartBytes"]), mib(s["backwardStartBytes"]), mib(s["peakBytes"]),
                mib(s["afterStepBytes"]), mib(above),
                "%.0f" % step_ms if which == "steadyStep" and step_ms else ""))
    out.append("")
    if base:
        out.append("Against DJL fp32 at the same batch (peak / peak − forward start / backward start):")
        out.append("")
        out.append("| framework | variant | batch | step | peak | peak − forward start | backward start |")
        out.append("| --- | --- | ---: | --- | ---: | ---: | ---: |")
        for framework, key, batch, glibc, share, step_ms in memory:
            for which in ("firstStep", "steadyStep"):
                s = glibc.get(which)
                if not s or (batch, which) not in base:
                    continue
                peak, above, backward = base[(batch, which)]
                out.append("| %s | %s | %d | %s | %.2fx | %.2fx | %.2fx |" % (
                    framework, key, batch, "first" if which == "firstStep" else "steady",
                    s["peakBytes"] / peak, (s["peakBytes"] - s["forwardStartBytes"]) / above,
                    s["backwardStartBytes"] / backward))
        out.append("")
    if probes:
        out.extend(first_against_steady(probes))
        out.extend(checks_on_against_off(probes))
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


def first_against_steady(probes):
    """The first step (kernel checks, first kernels) beside the steady step, per DJL probe."""
    out = ["The first step against the steady step, one fresh process a row (process peak: VmHWM over"
           " the first step, and over one later step after a reset; glibc: `mallinfo2` peak):", ""]
    out.append("| variant | batch | first-step ms | steady ms | first / steady time | first / steady thread CPU time | first-step process peak MiB | steady-step process peak MiB | first / steady process peak | first / steady glibc peak |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p in probes:
        glibc = p.get("glibcInUse", {})
        first, steady = glibc.get("firstStep"), glibc.get("steadyStep")
        out.append("| %s | %d | %.0f | %.0f | %.2fx | %s | %.0f | %.0f | %.2fx | %s |" % (
            p["variant"], p["batch"], p["warmupMs"], p["stepMs"], p["warmupMs"] / p["stepMs"],
            "%.2fx" % (p["warmupThreadCpuMs"] / p["stepThreadCpuMs"]) if "stepThreadCpuMs" in p else "—",
            p["warmupPeakKib"] / 1024.0, p["stepPeakKib"] / 1024.0,
            p["warmupPeakKib"] / p["stepPeakKib"],
            "%.2fx" % (first["peakBytes"] / steady["peakBytes"]) if first and steady else "—"))
    out.append("")
    return out


def checks_on_against_off(probes):
    """djl-amp bf16 with its kernel checks (the default) against the same without, per batch."""
    by = {}
    for p in probes:
        by.setdefault((p["batch"], p["variant"]), []).append(p)
    batches = sorted({b for b, v in by if v == "djl-amp-bf16" and (b, "djl-amp-bf16-unchecked") in by})
    if not batches:
        return []
    out = ["Kernel checks on (`djl-amp-bf16`, the default) against off (`djl-amp-bf16-unchecked`,"
           " `KernelVerification.OFF`), medians over the processes of each:", ""]
    out.append("| batch | first-step time | first-step thread CPU time | first-step process peak | steady-step process peak | steady-step glibc peak |")
    out.append("| ---: | ---: | ---: | ---: | ---: | ---: |")

    def median(rows, get):
        return statistics.median(get(r) for r in rows)

    for b in batches:
        on, off = by[(b, "djl-amp-bf16")], by[(b, "djl-amp-bf16-unchecked")]
        cells = []
        for get in (lambda r: r["warmupMs"], lambda r: r["warmupThreadCpuMs"],
                    lambda r: r["warmupPeakKib"], lambda r: r["stepPeakKib"],
                    lambda r: r["glibcInUse"]["steadyStep"]["peakBytes"]):
            try:
                cells.append("%.2fx" % (median(on, get) / median(off, get)))
            except (KeyError, TypeError):
                cells.append("—")
        out.append("| %d | %s |" % (b, " | ".join(cells)))
    out.append("")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    print(render(parser.parse_args().dir))


if __name__ == "__main__":
    main()
