#!/usr/bin/env python3
"""The largest batch under a device-memory cap, for bench/gpu/run-gpu.sh: fit, predict, confirm.

For each capped variant, the peak device memory of a run (cudaMemGetInfo above the CUDA context,
the first step included: deviceMemory.peakAboveBaselineBytes, which TrainBench throughput and
bench/train/pytorch_resnet.py both write) is fitted as a line in the batch size from two measured
batches (the main table's rows where it has them), the largest batch whose peak stays under the
cap is predicted and rounded down to a multiple of --step, and short probes confirm it: that batch
fits and the next multiple does not. A probe that disagrees moves the candidate (to the secant
through the two measurements nearest the cap, kept inside what the probes already showed; halfway
down to what fits when the smallest batch known not to fit ran out of memory, having no measured
peak), at most --max-probes probes a variant. A process that ran out of device memory does not fit; one that
failed otherwise (a crash, its time limit) stops that variant's search, reported as unconfirmed.

run-gpu.sh drives it one decision at a time, so that every process it starts is one of its own:
  cap_search.py init --dir CAPDIR --cap-gib 16 --variants A,B --fit-batches 128,256 ...
  cap_search.py next --dir CAPDIR --table TABLEDIR --variant A   # "fit B", "probe B" or "done: why"
  cap_search.py outcome --rc RC --log LOG --json JSON            # ok, oom, timeout or failed: why
  cap_search.py show --dir CAPDIR --table TABLEDIR               # a line a variant
render_gpu.py renders the result (summarize()).

Files: CAPDIR/settings.json; per process VARIANT-bBATCH.json (its results) and
VARIANT-bBATCH.outcome (what `outcome` said), in TABLEDIR for the main table's rows and in CAPDIR
for the cap search's own. Standard library only: it runs on the GPU machine and here.
"""

import argparse
import glob
import json
import math
import os
import re
import sys

GIB = 1024.0**3

# the measures a cap can bound: a JSON of TrainBench throughput or pytorch_resnet.py -> bytes
MEASURES = {
    # what the GPU run caps: the same instrument on both sides
    "device": (
        "peak device memory, cudaMemGetInfo (total - free) above the CUDA context after every"
        " synchronized step of the run, the first step included",
        lambda data: (data.get("deviceMemory") or {}).get("peakAboveBaselineBytes"),
    ),
    # a CPU dry run's stand-in: there is no device memory to read; not comparable across frameworks
    "host-rss": (
        "the process's peak resident size (VmHWM; a CPU dry run's stand-in, not comparable across"
        " frameworks)",
        lambda data: data["hostPeakRssKib"] * 1024 if "hostPeakRssKib" in data else None,
    ),
}

# what a process that ran out of memory prints: libtorch's allocators (through DJL's
# EngineException or PyTorch's torch.OutOfMemoryError), cuDNN and cuBLAS; the CPU allocator's for
# a dry run. Not Java's heap (java.lang.OutOfMemoryError): that is a failure of the harness.
OOM = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError: CUDA"
    r"|CUDNN_STATUS_(?:NOT_ENOUGH_MEMORY|ALLOC_FAILED)|CUBLAS_STATUS_ALLOC_FAILED"
    r"|DefaultCPUAllocator: (?:can't allocate memory|not enough memory)"
)


def outcome(rc, log_text, json_path):
    """What run-gpu.sh writes into VARIANT-bBATCH.outcome for a finished process."""
    if rc == 0 and json_path and os.path.exists(json_path) and os.path.getsize(json_path) > 0:
        return "ok"
    for line in log_text.splitlines():
        if OOM.search(line):
            return "oom: " + line.strip()[:200]
    if rc in (124, 137):
        return "timeout: stopped by its time limit (exit %d)" % rc
    if rc == 0:
        return "failed: exit 0 but no results file"
    return "failed: exit %d" % rc


def read_settings(directory):
    with open(os.path.join(directory, "settings.json")) as f:
        return json.load(f)


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def points(settings, variant, table_directory, cap_directory):
    """batch -> {status: ok|oom|failed, bytes, why, source: table|cap, label}; the cap search's
    own measurement of a batch overrides the main table's."""
    measure = MEASURES[settings["measure"]][1]
    found = {}
    for source, directory in (("table", table_directory), ("cap", cap_directory)):
        if not directory or not os.path.isdir(directory):
            continue
        pattern = os.path.join(glob.escape(directory), glob.escape(variant) + "-b*")
        batches = set()
        for path in glob.glob(pattern):
            m = re.fullmatch(re.escape(variant) + r"-b(\d+)\.(json|outcome)", os.path.basename(path))
            if m:
                batches.add(int(m.group(1)))
        for batch in batches:
            stem = os.path.join(directory, "%s-b%d" % (variant, batch))
            said = _read(stem + ".outcome")
            point = {"source": source, "label": None}
            data = None
            if os.path.exists(stem + ".json") and (said is None or said.startswith("ok")):
                try:
                    with open(stem + ".json") as f:
                        data = json.load(f)
                except (OSError, ValueError):
                    data = None
            if data is not None:
                value = measure(data)
                labels = [v.get("label") for v in data.get("variants", []) if v.get("key") == variant]
                point["label"] = labels[0] if labels else None
                if value is None:
                    point.update(status="failed", bytes=None, why="no %s in its results" % settings["measure"])
                else:
                    point.update(status="ok", bytes=int(value), why="")
            elif said is not None and said.startswith("oom"):
                point.update(status="oom", bytes=None, why=said)
            elif said is not None:
                point.update(status="failed", bytes=None, why=said)
            else:
                continue
            found[batch] = point
    return found


def fits(point, cap):
    """True, False, or None when the point says nothing (it failed)."""
    if point["status"] == "ok":
        return point["bytes"] <= cap
    if point["status"] == "oom":
        return False
    return None


def line_through(a, b):
    """(slope in bytes an image, intercept) of the line through two (batch, bytes) points."""
    (b1, m1), (b2, m2) = sorted([a, b])
    slope = (m2 - m1) / float(b2 - b1)
    return slope, m1 - slope * b1


def largest_under(slope, intercept, cap, step):
    return int(math.floor((cap - intercept) / slope / step)) * step


def search(settings, variant, table_directory, cap_directory):
    """The state of one variant's search: what is known, and what to do next."""
    cap = settings["capGib"] * GIB
    step = settings["step"]
    fit_batches = settings["fitBatches"]
    pts = points(settings, variant, table_directory, cap_directory)
    state = {
        "variant": variant,
        "label": next((p["label"] for p in pts.values() if p["label"]), variant),
        "framework": "PyTorch" if variant.startswith("pt-") else "DJL",
        "capBytes": cap,
        "points": pts,
        "fit": None,
        "predicted": None,
        "lo": None,
        "hi": None,
        "confirmed": None,
        "next": None,
        "note": "",
    }
    probes = sorted(b for b, p in pts.items() if b not in fit_batches and p["source"] == "cap")
    state["probes"] = probes

    def done(note):
        state["note"] = note
        return state

    for batch in fit_batches:
        # measured here when the main table lacks it, or once more when it failed there
        if batch not in pts or (pts[batch]["status"] == "failed" and pts[batch]["source"] == "table"):
            state["next"] = ("fit", batch)
            return done("measuring batch %d for the fit" % batch)
    for batch in fit_batches:
        if pts[batch]["status"] == "oom":
            return done(
                "not predicted: batch %d of the fit ran out of device memory (give smaller"
                " --cap-fit-batches)" % batch
            )
        if pts[batch]["status"] != "ok":
            return done("not predicted: batch %d of the fit failed (%s)" % (batch, pts[batch]["why"]))
    fit_points = [(b, pts[b]["bytes"]) for b in fit_batches[:2]]
    slope, intercept = line_through(*fit_points)
    state["fit"] = {"points": fit_points, "slope": slope, "intercept": intercept}
    if slope <= 0:
        return done("not predicted: the peak did not grow with the batch (%s)" % fit_points)
    predicted = largest_under(slope, intercept, cap, step)
    state["predicted"] = predicted
    if predicted < step:
        return done("not predicted: even batch %d would exceed the cap" % step)

    known = {b: fits(p, cap) for b, p in pts.items()}
    fitting = [b for b, f in known.items() if f is True]
    lo = max(fitting) if fitting else 0
    above = [b for b, f in known.items() if f is False and b > lo]
    hi = min(above) if above else None
    state["lo"], state["hi"] = lo, hi
    inconsistent = [b for b, f in known.items() if f is False and b < lo]
    if inconsistent:
        state["note"] = "batch %s did not fit below batch %d that did; " % (
            ",".join(map(str, sorted(inconsistent))), lo)
    if hi is not None and hi - lo <= step and lo > 0:
        state["confirmed"] = lo
        return done(state["note"] + "confirmed: %d fits, %d does not" % (lo, hi))
    failed = [b for b in probes if known[b] is None]
    if failed:
        return done(state["note"] + "not confirmed: the probe at batch %d failed (%s)" % (
            failed[0], pts[failed[0]]["why"]))
    if len(probes) >= settings["maxProbes"]:
        return done(state["note"] + "not confirmed after %d probes: %s" % (len(probes), bracket(lo, hi)))
    candidate = predicted
    if probes and hi is not None and pts[hi]["status"] == "oom":
        # the smallest batch known not to fit has no measured peak: nothing says how far below it
        # the cap is crossed, so halve the bracket
        candidate = (lo + hi) // 2 // step * step
    elif probes:
        candidate = secant_candidate(pts, cap, step, predicted)
    candidate = max(candidate, lo + step)
    if hi is not None:
        candidate = min(candidate, hi - step)
    if candidate > settings["maxBatch"]:
        return done(state["note"] + "not confirmed: the next probe (%d) is beyond --cap-max-batch %d; %s" % (
            candidate, settings["maxBatch"], bracket(lo, hi)))
    if candidate in pts:  # cannot happen with lo < candidate < hi; a guard against a loop
        return done(state["note"] + "not confirmed: %s" % bracket(lo, hi))
    state["next"] = ("probe", candidate)
    return done(state["note"] + "probing batch %d" % candidate)


def secant_candidate(pts, cap, step, fallback):
    """The batch the line through the two measured points nearest the cap puts at the cap."""
    measured = sorted(
        ((abs(p["bytes"] - cap), b, p["bytes"]) for b, p in pts.items() if p["status"] == "ok"),
    )
    if len(measured) < 2:
        return fallback
    (_, b1, m1), (_, b2, m2) = measured[:2]
    if m1 == m2:
        return fallback
    slope, intercept = line_through((b1, m1), (b2, m2))
    if slope <= 0:
        return fallback
    return largest_under(slope, intercept, cap, step)


def bracket(lo, hi):
    return "%d fits%s" % (lo, ", %d does not" % hi if hi is not None else "; no batch found that does not fit")


def summarize(directory, table_directory):
    """Every capped variant's search state, in the order of settings.json's variants."""
    settings = read_settings(directory)
    return settings, [search(settings, v, table_directory, directory) for v in settings["variants"]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init", help="write CAPDIR/settings.json")
    init.add_argument("--dir", required=True)
    init.add_argument("--cap-gib", type=float, required=True)
    init.add_argument("--variants", required=True)
    init.add_argument("--fit-batches", default="128,256")
    init.add_argument("--step", type=int, default=8)
    init.add_argument("--max-probes", type=int, default=3)
    init.add_argument("--max-batch", type=int, default=4096)
    init.add_argument("--measure", choices=sorted(MEASURES), default="device")
    init.add_argument("--probe-warmup", type=int, default=2)
    init.add_argument("--probe-steps", type=int, default=3)
    nxt = sub.add_parser("next", help="print the next process for a variant, or done")
    nxt.add_argument("--dir", required=True)
    nxt.add_argument("--table", required=True)
    nxt.add_argument("--variant", required=True)
    out = sub.add_parser("outcome", help="classify a finished process")
    out.add_argument("--rc", type=int, required=True)
    out.add_argument("--log", required=True)
    out.add_argument("--json", required=True)
    show = sub.add_parser("show", help="a line a variant")
    show.add_argument("--dir", required=True)
    show.add_argument("--table", required=True)
    args = parser.parse_args()

    if args.command == "init":
        fit = [int(b) for b in args.fit_batches.split(",") if b.strip()]
        if len(fit) != 2 or fit[0] == fit[1]:
            parser.error("--fit-batches takes two different batch sizes, got %r" % args.fit_batches)
        if args.cap_gib <= 0 or args.step <= 0:
            parser.error("--cap-gib and --step must be positive")
        os.makedirs(args.dir, exist_ok=True)
        settings = {
            "capGib": args.cap_gib,
            "variants": [v.strip() for v in args.variants.split(",") if v.strip()],
            "fitBatches": sorted(fit),
            "step": args.step,
            "maxProbes": args.max_probes,
            "maxBatch": args.max_batch,
            "measure": args.measure,
            "measureMethod": MEASURES[args.measure][0],
            "probeWarmup": args.probe_warmup,
            "probeSteps": args.probe_steps,
        }
        with open(os.path.join(args.dir, "settings.json"), "w") as f:
            json.dump(settings, f, indent=2)
            f.write("\n")
    elif args.command == "next":
        state = search(read_settings(args.dir), args.variant, args.table, args.dir)
        if state["next"]:
            print("%s %d" % state["next"])
        else:
            print("done: " + state["note"])
    elif args.command == "outcome":
        text = _read(args.log) or ""
        print(outcome(args.rc, text, args.json))
    else:
        settings, states = summarize(args.dir, args.table)
        for s in states:
            print("%s: predicted %s, confirmed %s (%s)" % (
                s["variant"], s["predicted"], s["confirmed"], s["note"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
