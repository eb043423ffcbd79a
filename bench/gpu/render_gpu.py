#!/usr/bin/env python3
"""Turns the JSON files of bench/gpu/run-gpu.sh into the markdown of bench/RESULTS.md's GPU section.

  python3 bench/gpu/render_gpu.py --dir DIR                  # the markdown to stdout
  python3 bench/gpu/render_gpu.py --dir DIR --results bench/RESULTS.md
                                   # replaces what lies between <!-- gpu:begin --> and <!-- gpu:end -->

DIR holds djl-*.json (TrainBench throughput) and pt-*.json (pytorch_resnet.py), one variant each,
and what run-gpu.sh writes beside them (command.txt, date.txt, not-run.txt), and DIR/cap/ the
search for the largest batch under a memory cap (cap_search.py). Standard library only: it runs on
the GPU machine and here.
"""

import argparse
import glob
import json
import os
import statistics
import sys

import cap_search

BEGIN = "<!-- gpu:begin -->"
END = "<!-- gpu:end -->"
GIB = 1024.0**3


def load(directory):
    runs = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as f:
            data = json.load(f)
        for variant in data["variants"]:
            times = variant["stepMs"]
            runs.append(
                {
                    "file": os.path.basename(path),
                    "framework": data["framework"],
                    "version": data.get("frameworkVersion", "?"),
                    "network": data.get("description", data.get("network", "?")),
                    "batch": data["batch"],
                    "device": data.get("device", "?"),
                    "key": variant["key"],
                    "label": variant["label"],
                    "times": times,
                    "median": statistics.median(times),
                    "first": variant.get("firstStepMs"),
                    "warmup": data.get("warmup"),
                    "memory": data.get("deviceMemory"),
                    "shapes": data.get("parameterShapes"),
                    "parameters": data.get("parameters"),
                    "share": variant.get("lowPrecisionShare"),
                    "capture": variant.get("capture"),
                }
            )
    return runs


def quartiles(values):
    ordered = sorted(values)
    if len(ordered) < 2:
        return ordered[0], ordered[0]
    q = statistics.quantiles(ordered, n=4)
    return q[0], q[2]


def gib(value):
    return "%.2f" % (value / GIB) if value is not None else "—"


def mem(run, field):
    memory = run["memory"]
    return memory.get(field) if memory else None


def read_text(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read().strip()


def ratio(numerator, denominator):
    if numerator is None or denominator in (None, 0):
        return None
    return numerator / denominator


def fmt_ratio(value):
    return "%.2fx" % value if value is not None else "not measured"


def first_and_steady_memory(runs):
    """Device memory of the first step apart from the steady steps (issue 31), where measured."""
    measured = [r for r in runs if r["first"] is not None or r["memory"] and (
        "steadyPeakAboveBaselineBytes" in r["memory"] or "steadyMaxReservedBytes" in r["memory"]
        or "firstStepPeakAboveBaselineBytes" in r["memory"])]
    if not measured:
        return []
    lines = [
        "The first step apart from the steady steps: its time (a fresh process's first step, each"
        " variant its own process: the engine's first-use costs on both sides, djl-amp's kernel"
        " checks where they are on) and device memory (GiB; DJL: cudaMemGetInfo above the CUDA"
        " context polled every millisecond while the first step ran, its peak, and read right"
        " after it, when djl-amp has emptied libtorch's cache, and the most after any timed step;"
        " PyTorch: the caching allocator's max reserved / allocated over the first step, and over"
        " the timed steps after `reset_peak_memory_stats`; the last column is cudaMemGetInfo's"
        " most after any timed step on both sides):",
        "",
        "| batch | framework | variant | first step ms | steady step ms (median) |"
        " first step: peak in use (DJL) / max reserved (PyTorch) |"
        " first step: in use after it (DJL) |"
        " first step: max allocated (PyTorch) | steady: in use (DJL) / max reserved (PyTorch) |"
        " steady: max allocated (PyTorch) | steady: cudaMemGetInfo (both) |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in sorted(measured, key=lambda r: (r["batch"], r["framework"], r["key"])):
        m = r["memory"] or {}
        first = m.get("firstStep") or {}
        if r["framework"] == "DJL":
            cells = (m.get("firstStepPeakAboveBaselineBytes"),
                     m.get("afterFirstStepAboveBaselineBytes"), None,
                     m.get("steadyPeakAboveBaselineBytes"), None)
        else:
            cells = (first.get("maxReservedBytes"), None, first.get("maxAllocatedBytes"),
                     m.get("steadyMaxReservedBytes"), m.get("steadyMaxAllocatedBytes"))
        cells += (m.get("steadyPeakAboveBaselineBytes"),)
        lines.append("| %d | %s | %s | %s | %.1f | %s |" % (
            r["batch"], r["framework"], r["label"],
            "%.1f" % r["first"] if r["first"] is not None else "—", r["median"],
            " | ".join(gib(c) for c in cells)))
    lines.append("")
    return lines


def cap_table(directory):
    """The largest batch under a memory cap (cap_search.py), where run-gpu.sh searched it."""
    cap_dir = os.path.join(directory, "cap")
    if not os.path.exists(os.path.join(cap_dir, "settings.json")):
        return []
    settings, states = cap_search.summarize(cap_dir, directory)
    fit = settings["fitBatches"]
    lines = [
        "Largest batch under a cap of %s GiB (%s). Fitted as a line in the batch from batches %d"
        " and %d (the main table's runs, or the search's own where the table lacks them),"
        " rounded down to a multiple of %d, then confirmed by probes of %d warm-up and %d timed"
        " steps, one process each: the batch fits and the next multiple does not (a probe that"
        " runs out of device memory does not fit). The cap bounds the peak of a run without a"
        " limit; under a hard limit the caching allocators would free their caches and retry"
        " before failing."
        % ("%g" % settings["capGib"], settings["measureMethod"], fit[0], fit[1], settings["step"],
           settings["probeWarmup"], settings["probeSteps"]),
        "",
        "| framework | variant | GiB at batch %d / %d | MiB an image | predicted | probes: batch (GiB) |"
        " largest batch under the cap | how it ended |" % (fit[0], fit[1]),
        "| --- | --- | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    found = {}
    for s in states:
        pts = s["points"]

        def cell(batch, pts=pts):
            p = pts.get(batch)
            if p is None:
                return "—"
            if p["status"] == "ok":
                return gib(p["bytes"])
            return p["status"]

        probes = []
        for batch in s["probes"]:
            p = pts[batch]
            verdict = cap_search.fits(p, s["capBytes"])
            probes.append("%d (%s, %s)" % (
                batch, gib(p["bytes"]) if p["bytes"] is not None else p["status"],
                {True: "fits", False: "does not fit", None: "failed"}[verdict]))
        if s["confirmed"] is not None:
            largest = "**%d**" % s["confirmed"]
            found[s["variant"]] = s["confirmed"]
        elif s["lo"]:
            largest = "≥ %d (not confirmed)" % s["lo"]
        else:
            largest = "—"
        lines.append("| %s | %s | %s / %s | %s | %s | %s | %s | %s |" % (
            s["framework"], s["label"], cell(fit[0]), cell(fit[1]),
            "%.1f" % (s["fit"]["slope"] / 1048576.0) if s["fit"] else "—",
            s["predicted"] if s["predicted"] is not None else "—",
            "; ".join(probes) or "—", largest,
            "not finished (the call's budget): next was %s %d" % s["next"] if s["next"] else s["note"]))
    lines.append("")
    peer = "pt-bf16-autocast-cl"
    pairs = [(v, peer) for v in settings["variants"] if v != peer and peer in settings["variants"]]
    if pairs:
        lines.append("| comparison (largest batch under the cap, confirmed) | ratio |")
        lines.append("| --- | ---: |")
        for v, p in pairs:
            lines.append("| %s / %s | %s |" % (
                v, p, fmt_ratio(ratio(found.get(v), found.get(p)))))
        lines.append("")
    return lines


def render(directory, measured_only=False):
    runs = load(directory)
    lines = []
    command = read_text(directory, "command.txt") or "bash bench/gpu/run-gpu.sh"
    date = read_text(directory, "date.txt") or "?"
    devices = sorted({r["device"] for r in runs})
    lines.append("Generated by `bench/gpu/render_gpu.py` from a run of `%s` on %s." % (command, date))
    lines.append("")
    versions = sorted({"%s: %s" % (r["framework"], r["version"]) for r in runs})
    for v in versions:
        lines.append("- " + v)
    lines.append("- Device: %s" % (", ".join(devices) or "none"))
    if runs:
        r0 = runs[0]
        lines.append(
            "- Network: %s; %s warm-up steps, then %d timed steps a variant, one process a variant"
            " and batch; the clock is read after the device is synchronized"
            % (r0["network"], r0["warmup"], len(r0["times"]))
        )
    shapes = {(r["framework"], r["shapes"]) for r in runs if r["shapes"]}
    by_framework = {}
    for framework, s in shapes:
        by_framework.setdefault(framework, set()).add(s)
    if len(by_framework) == 2:
        same = len({s for group in by_framework.values() for s in group}) == 1
        lines.append(
            "- DJL and PyTorch networks: %s"
            % (
                "the same trainable tensors, shape for shape in the same order (%s parameters)"
                % runs[0]["parameters"]
                if same
                else "**their trainable tensors differ** (compare parameterShapes in the JSONs)"
            )
        )
    memory_methods = sorted({r["memory"]["method"] for r in runs if r["memory"]})
    if memory_methods:
        lines.append("- Peak device memory: " + "; ".join(memory_methods))
    else:
        lines.append("- Peak device memory: not measured (no GPU in this run)")
    lines.append("")
    lines.append(
        "| batch | framework | variant | img/s (median step) | step ms (IQR) |"
        " peak device memory GiB (cudaMemGetInfo) | PyTorch max reserved GiB |"
        " PyTorch max allocated GiB | djl-amp's 16-bit share of the arithmetic |"
    )
    lines.append("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in sorted(runs, key=lambda r: (r["batch"], r["framework"], r["key"])):
        q1, q3 = quartiles(r["times"])
        lines.append(
            "| %d | %s | %s | %.1f | %.1f (%.1f-%.1f) | %s | %s | %s | %s |"
            % (
                r["batch"],
                r["framework"],
                r["label"],
                r["batch"] * 1000.0 / r["median"],
                r["median"],
                q1,
                q3,
                gib(mem(r, "peakAboveBaselineBytes")),
                gib(mem(r, "maxReservedBytes")),
                gib(mem(r, "maxAllocatedBytes")),
                "%.1f%%" % (100 * r["share"]) if r["share"] is not None else "—",
            )
        )
    lines.append("")
    captures = [r for r in runs if r["capture"]]
    if captures:
        lines.append("What each captured variant's step did (issue 42):")
        lines.append("")
        for r in sorted(captures, key=lambda r: (r["batch"], r["key"])):
            lines.append("- batch %d, %s: %s" % (r["batch"], r["key"], r["capture"]))
        lines.append("")
    lines.extend(first_and_steady_memory(runs))
    for batch in sorted({r["batch"] for r in runs}):
        find = {r["key"]: r for r in runs if r["batch"] == batch}

        def throughput(key):
            run = find.get(key)
            return run["batch"] * 1000.0 / run["median"] if run else None

        def used(key, field="peakAboveBaselineBytes"):
            return mem(find[key], field) if key in find else None

        def first_ms(key):
            return find[key]["first"] if key in find else None

        lines.append("Batch %d:" % batch)
        lines.append("")
        lines.append("| comparison | ratio | target (ResNetV1-50's, issue 31) |")
        lines.append("| --- | ---: | --- |")
        # the fused variants are what Amp.configure gives on one GPU (FusedOptimizer.AUTO)
        captured_target = {32: "≥ 1.5x (issue 42)", 128: "≥ 1.2x (issue 42)", 256: "≥ 1.05x (issue 42)"}
        rows = [
            (
                "throughput: djl-amp bf16 fused, step captured / PyTorch bf16 autocast channels-last",
                ratio(throughput("djl-amp-bf16-fused-captured"), throughput("pt-bf16-autocast-cl")),
                captured_target.get(batch, ""),
            ),
            (
                "throughput: djl-amp fp16 fused, step captured / PyTorch fp16 autocast channels-last",
                ratio(throughput("djl-amp-fp16-fused-captured"), throughput("pt-fp16-autocast-cl")),
                captured_target.get(batch, ""),
            ),
            (
                "throughput: djl-amp bf16 fused, step captured / not captured",
                ratio(throughput("djl-amp-bf16-fused-captured"), throughput("djl-amp-bf16-fused")),
                "",
            ),
            (
                "peak memory: djl-amp bf16 fused, step captured / not captured (cudaMemGetInfo)",
                ratio(used("djl-amp-bf16-fused-captured"), used("djl-amp-bf16-fused")),
                "",
            ),
            (
                "throughput: djl-amp bf16 fused (GPU default) / DJL fp32",
                ratio(throughput("djl-amp-bf16-fused"), throughput("djl-fp32")),
                "≥ 2.0x at batch 256",
            ),
            (
                "throughput: djl-amp bf16 fused (GPU default) / PyTorch bf16 autocast channels-last",
                ratio(throughput("djl-amp-bf16-fused"), throughput("pt-bf16-autocast-cl")),
                "≥ 1.05x",
            ),
            (
                "throughput: djl-amp fp16 fused (GPU default) / PyTorch fp16 autocast channels-last",
                ratio(throughput("djl-amp-fp16-fused"), throughput("pt-fp16-autocast-cl")),
                "≥ 1.0x",
            ),
            (
                "throughput: djl-amp fp16 fused / djl-amp bf16 fused",
                ratio(throughput("djl-amp-fp16-fused"), throughput("djl-amp-bf16-fused")),
                "≥ 0.95x",
            ),
            (
                "throughput: djl-amp bf16 fused step / per-parameter update",
                ratio(throughput("djl-amp-bf16-fused"), throughput("djl-amp-bf16")),
                "",
            ),
            (
                "throughput: djl-amp fp16 fused step, scaler state on the device / per-parameter update",
                ratio(throughput("djl-amp-fp16-fused"), throughput("djl-amp-fp16")),
                "",
            ),
            (
                "throughput: djl-amp bf16 fused (GPU default) / PyTorch bf16 autocast",
                ratio(throughput("djl-amp-bf16-fused"), throughput("pt-bf16-autocast")),
                "",
            ),
            (
                "throughput: djl-amp fp16 fused (GPU default) / PyTorch fp16 autocast",
                ratio(throughput("djl-amp-fp16-fused"), throughput("pt-fp16-autocast")),
                "",
            ),
            ("throughput: PyTorch bf16 autocast / PyTorch fp32", ratio(throughput("pt-bf16-autocast"), throughput("pt-fp32")), ""),
            ("throughput: PyTorch fp16 autocast / PyTorch fp32", ratio(throughput("pt-fp16-autocast"), throughput("pt-fp32")), ""),
            ("throughput: djl-amp bf16 per-parameter update / DJL fp32", ratio(throughput("djl-amp-bf16"), throughput("djl-fp32")), ""),
            ("throughput: djl-amp fp16 per-parameter update / DJL fp32", ratio(throughput("djl-amp-fp16"), throughput("djl-fp32")), ""),
            (
                "peak memory: djl-amp bf16 fused / PyTorch bf16 autocast channels-last (both cudaMemGetInfo)",
                ratio(used("djl-amp-bf16-fused"), used("pt-bf16-autocast-cl")),
                "≤ 1.2x",
            ),
            (
                "peak memory: djl-amp bf16 fused (cudaMemGetInfo) / PyTorch bf16 channels-last max reserved",
                ratio(used("djl-amp-bf16-fused"), mem(find["pt-bf16-autocast-cl"], "maxReservedBytes"))
                if "pt-bf16-autocast-cl" in find
                else None,
                "≤ 1.2x",
            ),
            ("peak memory: djl-amp bf16 fused / DJL fp32", ratio(used("djl-amp-bf16-fused"), used("djl-fp32")), "≤ 0.35x"),
            ("peak memory: djl-amp bf16 per-parameter update / DJL fp32", ratio(used("djl-amp-bf16"), used("djl-fp32")), ""),
            ("peak memory: DJL fp32 / PyTorch fp32", ratio(used("djl-fp32"), used("pt-fp32")), ""),
            (
                "peak memory: djl-amp bf16 fused / PyTorch bf16 autocast (both cudaMemGetInfo)",
                ratio(used("djl-amp-bf16-fused"), used("pt-bf16-autocast")),
                "",
            ),
            (
                "peak memory: djl-amp fp16 fused / PyTorch fp16 autocast (both cudaMemGetInfo)",
                ratio(used("djl-amp-fp16-fused"), used("pt-fp16-autocast")),
                "",
            ),
            ("peak memory: djl-amp fp16 fused / DJL fp32", ratio(used("djl-amp-fp16-fused"), used("djl-fp32")), ""),
        ]
        # issue 31: the steady step apart from the first, and what the kernel checks cost
        steady = "steadyPeakAboveBaselineBytes"
        for precision in ("bf16", "fp16"):
            djl, pt = "djl-amp-%s-fused" % precision, "pt-%s-autocast-cl" % precision
            rows += [
                (
                    "steady peak: djl-amp %s fused / PyTorch %s autocast channels-last (both cudaMemGetInfo)"
                    % (precision, precision),
                    ratio(used(djl, steady), used(pt, steady)),
                    "≤ 1.2x",
                ),
                (
                    "steady peak: djl-amp %s fused (cudaMemGetInfo) / PyTorch %s channels-last steady max reserved"
                    % (precision, precision),
                    ratio(used(djl, steady), used(pt, "steadyMaxReservedBytes")),
                    "≤ 1.2x",
                ),
                (
                    "steady peak: djl-amp %s fused (cudaMemGetInfo) / PyTorch %s channels-last steady max allocated"
                    % (precision, precision),
                    ratio(used(djl, steady), used(pt, "steadyMaxAllocatedBytes")),
                    "≤ 1.2x",
                ),
            ]
        checked, unchecked = "djl-amp-bf16-fused", "djl-amp-bf16-fused-unchecked"
        ckpt = "djl-amp-bf16-fused-ckpt-stages"
        # polled during the first step: its height, before djl-amp empties libtorch's cache
        first_peak = "firstStepPeakAboveBaselineBytes"
        rows += [
            (
                "first step time: djl-amp bf16 fused with kernel checks / without (fresh processes)",
                ratio(first_ms(checked), first_ms(unchecked)),
                "≤ 1.5x (issue 31 item 1, at batch 32)",
            ),
            (
                "device memory after the first step: djl-amp bf16 fused with kernel checks / without",
                ratio(used(checked, "afterFirstStepAboveBaselineBytes"),
                      used(unchecked, "afterFirstStepAboveBaselineBytes")),
                "≤ 1.0x",
            ),
            (
                "steady peak: djl-amp bf16 fused with kernel checks / without",
                ratio(used(checked, steady), used(unchecked, steady)),
                "≤ 1.05x",
            ),
            (
                "djl-amp bf16 fused: device memory after the first step / steady peak",
                ratio(used(checked, "afterFirstStepAboveBaselineBytes"), used(checked, steady)),
                "≤ 1.1x",
            ),
            (
                "djl-amp bf16 fused: first-step peak / steady peak",
                ratio(used(checked, first_peak), used(checked, steady)),
                "≤ 1.1x (issue 31 item 1)",
            ),
            (
                "first-step peak: djl-amp bf16 fused with kernel checks / without",
                ratio(used(checked, first_peak), used(unchecked, first_peak)),
                "",
            ),
            (
                "peak memory: djl-amp bf16 fused with Checkpointing.stages() / without",
                ratio(used(ckpt), used(checked)),
                "",
            ),
            (
                "peak memory: djl-amp bf16 fused with Checkpointing.stages() / PyTorch bf16 autocast channels-last",
                ratio(used(ckpt), used("pt-bf16-autocast-cl")),
                "",
            ),
            (
                "throughput: djl-amp bf16 fused with Checkpointing.stages() / without",
                ratio(throughput(ckpt), throughput(checked)),
                "",
            ),
        ]
        for name, value, target in rows:
            if measured_only and value is None:
                continue
            lines.append("| %s | %s | %s |" % (name, fmt_ratio(value), target))
        lines.append("")
    lines.extend(cap_table(directory))
    not_run = read_text(directory, "not-run.txt")
    if not_run:
        lines.append("Not run or failed:")
        lines.append("")
        for line in not_run.splitlines():
            lines.append("- " + line)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def replace_section(results, body):
    with open(results) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        raise SystemExit("%s has no %s ... %s section" % (results, BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(results, "w") as f:
        f.write(head + BEGIN + "\n" + body + END + tail)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="the folder of run-gpu.sh's JSON files")
    parser.add_argument("--results", help="a markdown file whose GPU section is replaced")
    parser.add_argument(
        "--measured-only", action="store_true", help="leave out the comparisons not measured"
    )
    args = parser.parse_args()
    body = render(args.dir, args.measured_only)
    if args.results:
        replace_section(args.results, body)
    else:
        sys.stdout.write(body)


if __name__ == "__main__":
    main()
