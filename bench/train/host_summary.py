"""Markdown tables of `bench/train/run.sh --host`: where a step's host time goes, per network.

Reads host-<network>-djl.json (TrainBench host) and host-<network>-pt.json (pytorch_host.py) from
--dir; one table per network, a row per variant.
"""

import argparse
import glob
import json
import os


def djl_rows(data):
    rows = []
    for v in data["variants"]:
        s, p = v["sampled"], v["profiled"]
        rows.append([
            v["key"],
            "%.1f" % s["stepMs"],
            "%.2f" % s["djlAmpJavaMs"],
            "%.2f" % s["djlJavaMs"],
            "%.2f" % s["djlNativeMs"],
            "%.2f" % s["djlAmpNativeMs"],
            "%.0f" % p["forward"]["opsPerStep"],
            "%.2f" % p["forwardMs"],
            "%.2f" % p["forwardHostMs"],
            "%.0f" % p["lossAndBackward"]["opsPerStep"],
            "%.0f" % p["update"]["opsPerStep"],
            "%.2f" % p["updateHostMs"] if "updateHostMs" in p else "",
            "%.0f" % p["step"]["opsPerStep"],
            "%.2f" % p["stepHostMs"],
        ])
    return rows


def pt_rows(data):
    rows = []
    for v in data["variants"]:
        p = v["profiled"]
        host = sum(phase["hostMs"] for phase in p.values())
        ops = sum(phase["opsPerStep"] for phase in p.values())
        rows.append([
            v["key"] + " (" + data["frameworkVersion"] + ")",
            "%.1f" % v["stepMsMedian"],
            "", "", "", "",
            "%.0f" % p["forward"]["opsPerStep"],
            "%.2f" % p["forward"]["wallMs"],
            "%.2f" % p["forward"]["hostMs"],
            "%.0f" % p["backward"]["opsPerStep"],
            "%.0f" % p["update"]["opsPerStep"],
            "%.2f" % p["update"]["hostMs"],
            "%.0f" % ops,
            "%.2f" % host,
        ])
    return rows


HEADER = [
    "variant", "step ms", "djl-amp Java", "DJL Java", "native (DJL's ops)",
    "native (djl-amp's)", "forward ops", "forward ms", "forward host ms",
    "loss+backward ops", "update ops", "update host ms", "step ops", "step host ms",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    for djl_file in sorted(glob.glob(os.path.join(args.dir, "host-*-djl.json"))):
        with open(djl_file) as f:
            djl = json.load(f)
        rows = djl_rows(djl)
        pt_file = djl_file.replace("-djl.json", "-pt.json")
        if os.path.exists(pt_file):
            with open(pt_file) as f:
                rows += pt_rows(json.load(f))
        print("#### %s, batch %d, %d intra-op thread(s) (%s); load %s -> %s\n" % (
            djl["description"], djl["batch"], djl["threads"], djl["frameworkVersion"],
            djl["loadBefore"], djl.get("loadAfter", "?")))
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "---|" * len(HEADER))
        for row in rows:
            print("| " + " | ".join(row) + " |")
        print()


if __name__ == "__main__":
    main()
