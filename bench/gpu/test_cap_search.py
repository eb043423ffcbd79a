#!/usr/bin/env python3
"""Tests of cap_search.py's decisions on made-up measurements (no GPU, no process started).

  python3 -m unittest discover -s bench/gpu -p 'test_*.py'
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cap_search  # noqa: E402

GIB = 1024**3
VARIANT = "djl-amp-bf16-fused"


def write_run(directory, variant, batch, gib=None, outcome="ok", rss_kib=None):
    """A process's files as run-gpu.sh leaves them: its JSON (when it wrote one) and its outcome."""
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, "%s-b%d" % (variant, batch))
    if outcome == "ok":
        data = {"batch": batch, "variants": [{"key": variant, "label": "label of " + variant}]}
        if gib is not None:
            data["deviceMemory"] = {"peakAboveBaselineBytes": int(gib * GIB)}
        if rss_kib is not None:
            data["hostPeakRssKib"] = rss_kib
        with open(stem + ".json", "w") as f:
            json.dump(data, f)
    with open(stem + ".outcome", "w") as f:
        f.write(outcome + "\n")


class CapSearchTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.table = os.path.join(self.root, "table")
        self.cap = os.path.join(self.root, "cap")
        os.makedirs(self.table)
        self.init()

    def tearDown(self):
        shutil.rmtree(self.root)

    def init(self, *extra):
        subprocess.run(
            [sys.executable, cap_search.__file__, "init", "--dir", self.cap, "--cap-gib", "16",
             "--variants", VARIANT + ",pt-bf16-autocast-cl", "--fit-batches", "128,256", *extra],
            check=True)

    def state(self, variant=VARIANT):
        return cap_search.search(cap_search.read_settings(self.cap), variant, self.table, self.cap)

    def test_prediction_confirmed_by_two_probes(self):
        # the H100's figures of 2026-11-26: 11.18 GiB at 128, 21.94 at 256
        write_run(self.table, VARIANT, 128, 11.18)
        write_run(self.table, VARIANT, 256, 21.94)
        s = self.state()
        self.assertEqual(184, s["predicted"])
        self.assertEqual(("probe", 184), s["next"])
        write_run(self.cap, VARIANT, 184, 15.8)
        self.assertEqual(("probe", 192), self.state()["next"])
        write_run(self.cap, VARIANT, 192, 16.4)
        s = self.state()
        self.assertIsNone(s["next"])
        self.assertEqual(184, s["confirmed"])
        self.assertEqual([184, 192], s["probes"])
        self.assertIn("confirmed: 184 fits, 192 does not", s["note"])

    def test_a_probe_that_disagrees_moves_the_candidate(self):
        write_run(self.table, VARIANT, 128, 11.18)
        write_run(self.table, VARIANT, 256, 21.94)
        write_run(self.cap, VARIANT, 184, 16.3)  # predicted 184 does not fit after all
        s = self.state()
        self.assertEqual(("probe", 176), s["next"])  # the secant through 184 and 128, under 184
        write_run(self.cap, VARIANT, 176, 15.7)
        s = self.state()
        self.assertEqual(176, s["confirmed"])
        self.assertEqual(184, s["predicted"])

    def test_a_candidate_far_off_moves_by_the_secant_not_by_one_step(self):
        write_run(self.table, VARIANT, 128, 11.18)
        write_run(self.table, VARIANT, 256, 21.94)
        write_run(self.cap, VARIANT, 184, 12.0)  # far under the cap: the line was pessimistic
        nxt = self.state()["next"]
        self.assertEqual("probe", nxt[0])
        self.assertGreater(nxt[1], 192)
        self.assertLess(nxt[1], 256)

    def test_out_of_memory_does_not_fit(self):
        write_run(self.table, VARIANT, 128, 11.18)
        write_run(self.table, VARIANT, 256, 21.94)
        write_run(self.cap, VARIANT, 184, 15.8)
        write_run(self.cap, VARIANT, 192, outcome="oom: CUDA out of memory. Tried to allocate 2 GiB")
        s = self.state()
        self.assertEqual(184, s["confirmed"])
        self.assertEqual("oom", s["points"][192]["status"])

    def test_out_of_memory_far_below_the_prediction_halves_the_bracket(self):
        write_run(self.table, VARIANT, 128, 11.18)
        write_run(self.table, VARIANT, 256, 21.94)
        self.init("--cap-gib", "36")  # predicted 416
        self.assertEqual(("probe", 416), self.state()["next"])
        write_run(self.cap, VARIANT, 416, outcome="oom: CUDA out of memory")
        # no peak measured at 416: halfway down to 256, not 408
        self.assertEqual(("probe", 336), self.state()["next"])
        write_run(self.cap, VARIANT, 336, 28.7)
        # still no peak above: halved again (the line through the measurements is no guide to
        # what ran out of memory)
        self.assertEqual(("probe", 376), self.state()["next"])
        write_run(self.cap, VARIANT, 376, 31.8)
        s = self.state()
        self.assertIsNone(s["next"])
        self.assertIsNone(s["confirmed"])
        self.assertEqual([336, 376, 416], s["probes"])
        self.assertIn("not confirmed after 3 probes: 376 fits, 416 does not", s["note"])

    def test_a_failed_probe_stops_the_search_unconfirmed(self):
        write_run(self.table, VARIANT, 128, 11.18)
        write_run(self.table, VARIANT, 256, 21.94)
        write_run(self.cap, VARIANT, 184, outcome="timeout: stopped by its time limit (exit 124)")
        s = self.state()
        self.assertIsNone(s["next"])
        self.assertIsNone(s["confirmed"])
        self.assertIn("probe at batch 184 failed", s["note"])

    def test_missing_fit_batches_are_measured_by_the_search(self):
        write_run(self.table, VARIANT, 128, 11.18)
        self.assertEqual(("fit", 256), self.state()["next"])
        write_run(self.cap, VARIANT, 256, 21.94)
        self.assertEqual(("probe", 184), self.state()["next"])
        self.assertEqual([], self.state()["probes"], "a fit batch is not a probe")

    def test_a_fit_batch_that_failed_in_the_table_is_measured_once_more(self):
        write_run(self.table, VARIANT, 128, 11.18)
        write_run(self.table, VARIANT, 256, outcome="failed: exit 1")
        self.assertEqual(("fit", 256), self.state()["next"])
        write_run(self.cap, VARIANT, 256, outcome="failed: exit 1")
        s = self.state()
        self.assertIsNone(s["next"])
        self.assertIn("not predicted: batch 256 of the fit failed", s["note"])

    def test_at_most_max_probes(self):
        self.init("--max-probes", "2")
        write_run(self.table, VARIANT, 128, 11.18)
        write_run(self.table, VARIANT, 256, 21.94)
        write_run(self.cap, VARIANT, 184, 14.0)
        write_run(self.cap, VARIANT, 224, 15.0)  # fits too: still no batch known not to fit
        s = self.state()
        self.assertIsNone(s["next"])
        self.assertIsNone(s["confirmed"])
        self.assertEqual(224, s["lo"])
        self.assertEqual(256, s["hi"])
        self.assertIn("not confirmed after 2 probes: 224 fits, 256 does not", s["note"])

    def test_memory_that_does_not_grow_is_not_extrapolated(self):
        write_run(self.table, VARIANT, 128, 11.0)
        write_run(self.table, VARIANT, 256, 10.9)
        s = self.state()
        self.assertIsNone(s["next"])
        self.assertIsNone(s["predicted"])
        self.assertIn("did not grow", s["note"])

    def test_the_cap_above_both_fit_batches_extrapolates(self):
        # PyTorch bf16 channels-last on the H100: 6.02 GiB at 128, 11.41 at 256
        write_run(self.table, "pt-bf16-autocast-cl", 128, 6.02)
        write_run(self.table, "pt-bf16-autocast-cl", 256, 11.41)
        s = self.state("pt-bf16-autocast-cl")
        # 6.02 + (b - 128) * 5.39 / 128 = 16 at b = 365.0: rounded down to a multiple of 8
        self.assertEqual(360, s["predicted"])
        self.assertEqual(("probe", 360), s["next"])

    def test_host_rss_stands_in_on_a_cpu(self):
        write_run(self.table, VARIANT, 8, rss_kib=600 * 1024)
        write_run(self.table, VARIANT, 16, rss_kib=700 * 1024)
        self.init("--measure", "host-rss", "--cap-gib", "1", "--fit-batches", "8,16")
        s = self.state()
        self.assertEqual(("probe", 40), s["next"])  # 600 MiB + 12.5 MiB an image -> 1024 at 41.9

    def test_outcome_of_a_process(self):
        log = "\n".join([
            "[main] INFO something",
            "ai.djl.engine.EngineException: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0"
            " has a total capacity of 79.19 GiB of which 1.2 GiB is free.",
            "\tat ai.djl.pytorch.jni.PyTorchLibrary.torchConv2d(Native Method)",
        ])
        self.assertTrue(cap_search.outcome(1, log, None).startswith("oom: ai.djl.engine.EngineException"))
        torch_log = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.06 GiB."
        self.assertTrue(cap_search.outcome(1, torch_log, None).startswith("oom: torch.OutOfMemoryError"))
        self.assertTrue(cap_search.outcome(1, "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_ENOUGH_MEMORY", None)
                        .startswith("oom"))
        heap = "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space"
        self.assertEqual("failed: exit 1", cap_search.outcome(1, heap, None))
        self.assertEqual("timeout: stopped by its time limit (exit 124)", cap_search.outcome(124, "", None))
        path = os.path.join(self.root, "r.json")
        self.assertEqual("failed: exit 0 but no results file", cap_search.outcome(0, "", path))
        with open(path, "w") as f:
            f.write("{}")
        self.assertEqual("ok", cap_search.outcome(0, "", path))

    def test_next_prints_what_run_gpu_reads(self):
        write_run(self.table, VARIANT, 128, 11.18)
        write_run(self.table, VARIANT, 256, 21.94)

        def nxt():
            return subprocess.run(
                [sys.executable, cap_search.__file__, "next", "--dir", self.cap, "--table", self.table,
                 "--variant", VARIANT], check=True, capture_output=True, text=True).stdout.strip()

        self.assertEqual("probe 184", nxt())
        write_run(self.cap, VARIANT, 184, 15.8)
        write_run(self.cap, VARIANT, 192, 16.4)
        self.assertEqual("done: confirmed: 184 fits, 192 does not", nxt())


class RenderTest(unittest.TestCase):
    """render_gpu.py over mock runs: the cap table and the first-step columns."""

    def test_cap_table_and_first_step(self):
        import render_gpu

        root = tempfile.mkdtemp()
        try:
            cap = os.path.join(root, "cap")
            subprocess.run(
                [sys.executable, cap_search.__file__, "init", "--dir", cap, "--cap-gib", "16",
                 "--variants", VARIANT + ",pt-bf16-autocast-cl"], check=True)
            for key, framework, batch, peak, steady, first_ms in [
                (VARIANT, "DJL", 128, 11.18, 11.0, 900.0),
                (VARIANT, "DJL", 256, 21.94, 21.5, 1500.0),
                ("pt-bf16-autocast-cl", "PyTorch", 128, 6.02, 5.9, 400.0),
                ("pt-bf16-autocast-cl", "PyTorch", 256, 11.41, 11.3, 600.0),
            ]:
                data = {
                    "framework": framework, "batch": batch, "device": "cuda", "warmup": 5,
                    "variants": [{"key": key, "label": key + " label", "stepMs": [40.0, 41.0],
                                  "firstStepMs": first_ms}],
                    "deviceMemory": {"method": "m", "peakAboveBaselineBytes": int(peak * GIB),
                                     "steadyPeakAboveBaselineBytes": int(steady * GIB)},
                }
                with open(os.path.join(root, "%s-b%d.json" % (key, batch)), "w") as f:
                    json.dump(data, f)
            write_run(cap, VARIANT, 184, 15.8)
            write_run(cap, VARIANT, 192, outcome="oom: CUDA out of memory")
            write_run(cap, "pt-bf16-autocast-cl", 360, 15.6)
            write_run(cap, "pt-bf16-autocast-cl", 368, 16.1)
            text = render_gpu.render(root)
        finally:
            shutil.rmtree(root)
        self.assertIn("Largest batch under a cap of 16 GiB", text)
        self.assertIn("| **184** |", text)
        self.assertIn("192 (oom, does not fit)", text)
        self.assertIn("| **360** |", text)
        self.assertIn("| %s / pt-bf16-autocast-cl | 0.51x |" % VARIANT, text)
        # older JSON without the polled first-step peak: a dash in its column, no crash
        self.assertIn("| 128 | DJL | %s label | 900.0 | 40.5 | — | — | — | 11.00 | — | 11.00 |"
                      % VARIANT, text)
        self.assertIn("| djl-amp bf16 fused: first-step peak / steady peak | not measured |"
                      " ≤ 1.1x (issue 31 item 1) |", text)
        # the cap search's probes are not rows of the main table
        self.assertNotIn("| 184 | DJL", text)

    def test_first_step_peak(self):
        import render_gpu

        root = tempfile.mkdtemp()
        try:
            for key, framework, memory in [
                (VARIANT, "DJL", {"firstStepPeakAboveBaselineBytes": int(6.6 * GIB),
                                  "afterFirstStepAboveBaselineBytes": int(1.3 * GIB),
                                  "steadyPeakAboveBaselineBytes": int(6.0 * GIB)}),
                ("djl-amp-bf16-fused-unchecked", "DJL",
                 {"firstStepPeakAboveBaselineBytes": int(5.5 * GIB),
                  "afterFirstStepAboveBaselineBytes": int(5.5 * GIB),
                  "steadyPeakAboveBaselineBytes": int(6.0 * GIB)}),
                ("pt-bf16-autocast-cl", "PyTorch",
                 {"firstStep": {"maxReservedBytes": int(5.0 * GIB),
                                "maxAllocatedBytes": int(4.0 * GIB)},
                  "steadyMaxReservedBytes": int(5.25 * GIB),
                  "steadyMaxAllocatedBytes": int(4.5 * GIB),
                  "steadyPeakAboveBaselineBytes": int(5.5 * GIB)}),
            ]:
                memory.update({"method": "m", "peakAboveBaselineBytes": int(6.0 * GIB)})
                data = {
                    "framework": framework, "batch": 128, "device": "cuda", "warmup": 5,
                    "variants": [{"key": key, "label": key + " label", "stepMs": [40.0, 41.0],
                                  "firstStepMs": 900.0}],
                    "deviceMemory": memory,
                }
                with open(os.path.join(root, "%s-b128.json" % key), "w") as f:
                    json.dump(data, f)
            text = render_gpu.render(root)
            measured = render_gpu.render(root, measured_only=True)
        finally:
            shutil.rmtree(root)
        self.assertIn("| first step: peak in use (DJL) / max reserved (PyTorch) |"
                      " first step: in use after it (DJL) |", text)
        self.assertIn("| 128 | DJL | %s label | 900.0 | 40.5 | 6.60 | 1.30 | — | 6.00 | — | 6.00 |"
                      % VARIANT, text)
        self.assertIn("| 128 | PyTorch | pt-bf16-autocast-cl label | 900.0 | 40.5 | 5.00 | — | 4.00"
                      " | 5.25 | 4.50 | 5.50 |", text)
        self.assertIn("| djl-amp bf16 fused: first-step peak / steady peak | 1.10x |"
                      " ≤ 1.1x (issue 31 item 1) |", text)
        self.assertIn("| first-step peak: djl-amp bf16 fused with kernel checks / without | 1.20x |  |",
                      text)
        self.assertIn("first-step peak / steady peak | 1.10x", measured)


if __name__ == "__main__":
    unittest.main()
