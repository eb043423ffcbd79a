package io.github.djlamp.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.policy.PrecisionPolicy;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Runs every notebook-style example through its documented {@code main}, with a tiny setting, so
 * none can rot; and holds {@link PlainTraining} and {@link AmpTraining} to their promise of
 * differing by two lines.
 */
class NotebookExamplesTest {

    private static final Path SOURCES = Paths.get("src/main/java/io/github/djlamp/examples");
    private static final Pattern ACCURACY = Pattern.compile("Test accuracy: (\\d+\\.\\d+)%");

    /** Runs a main method and returns what it printed. */
    private static String printedBy(ThrowingRunnable main) throws Exception {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            main.run();
        } finally {
            System.setOut(original);
        }
        String printed = captured.toString(StandardCharsets.UTF_8);
        original.print(printed);
        return printed;
    }

    private interface ThrowingRunnable {
        void run() throws Exception;
    }

    private static double printedAccuracy(String printed) {
        Matcher m = ACCURACY.matcher(printed);
        assertTrue(m.find(), "prints the test accuracy: " + printed);
        return Double.parseDouble(m.group(1));
    }

    @Test
    void plainTrainingTrainsAndReportsItsAccuracy() throws Exception {
        double accuracy =
                printedAccuracy(printedBy(() -> PlainTraining.main(new String[] {"128"})));
        assertTrue(accuracy >= 0 && accuracy <= 100, "accuracy " + accuracy);
    }

    @Test
    void ampTrainingTrainsAndReportsItsAccuracy() throws Exception {
        double accuracy = printedAccuracy(printedBy(() -> AmpTraining.main(new String[] {"128"})));
        assertTrue(accuracy >= 0 && accuracy <= 100, "accuracy " + accuracy);
    }

    @Test
    void plainAndAmpTrainingDifferInTwoLinesOfCode() throws IOException {
        List<String> plain = code(SOURCES.resolve("PlainTraining.java"), "PlainTraining");
        List<String> amp = code(SOURCES.resolve("AmpTraining.java"), "AmpTraining");
        List<String> onlyPlain = new ArrayList<>();
        List<String> onlyAmp = new ArrayList<>();
        diff(plain, amp, onlyPlain, onlyAmp);
        assertTrue(onlyPlain.size() <= 2, "PlainTraining lines not in AmpTraining: " + onlyPlain);
        assertTrue(onlyAmp.size() <= 2, "AmpTraining lines not in PlainTraining: " + onlyAmp);
        assertEquals(2, onlyAmp.size(), "the two AMP lines: " + onlyAmp);
        assertTrue(onlyAmp.get(0).contains("Amp.wrap(block, \"auto\")"), onlyAmp.get(0));
        assertTrue(
                onlyAmp.get(1).contains("Amp.configure(config, model.getBlock())"), onlyAmp.get(1));
    }

    @Test
    void theCustomLoopRunsTheFourVerbs() throws Exception {
        CustomLoopTraining.Outcome[] outcome = new CustomLoopTraining.Outcome[1];
        String printed = printedBy(() -> outcome[0] = CustomLoopTraining.train(128, "auto"));
        CustomLoopTraining.Outcome auto = outcome[0];
        assertEquals(2, auto.steps, "128 images at batch 64");
        assertTrue(Float.isFinite(auto.lastLoss), "loss " + auto.lastLoss);
        assertTrue(auto.testAccuracy >= 0 && auto.testAccuracy <= 1);
        assertEquals(auto.overflows, auto.skippedSteps, "every overflow skipped its step");
        try (NDManager manager = NDManager.newBaseManager()) {
            DeviceCapabilities caps = AmpBackends.forManager(manager).capabilities(Device.cpu());
            String expected = PrecisionPolicy.auto().resolveAuto(caps.getRecommended()).toString();
            assertEquals(expected, auto.policy, "auto resolves as the hardware says");
        }
        assertTrue(printed.contains("Policy "), printed);
        // main prints the outcome
        String fromMain = printedBy(() -> CustomLoopTraining.main(new String[] {"64"}));
        assertTrue(fromMain.contains("1 steps"), fromMain);
    }

    @Test
    void theCustomLoopScalesTheLossInFp16() throws Exception {
        // fp16 is very slow on CPUs: one step of 16 images
        CustomLoopTraining.Outcome fp16 = CustomLoopTraining.train(16, "fp16");
        assertEquals("mixed_float16", fp16.policy);
        assertEquals(1, fp16.steps);
        assertEquals(fp16.overflows, fp16.skippedSteps);
        float expected = fp16.skippedSteps == 0 ? 65536f : 32768f;
        assertEquals(expected, fp16.finalScale, "GradScaler's start, halved on an overflow");
    }

    @Test
    void precisionChoicePrintsTheRecommendationAndItsReason() throws Exception {
        String printed = printedBy(() -> PrecisionChoice.main(new String[0]));
        try (NDManager manager = NDManager.newBaseManager()) {
            DeviceCapabilities caps = AmpBackends.forManager(manager).capabilities(Device.cpu());
            assertTrue(
                    printed.contains("recommended: " + caps.getRecommended().shortName()), printed);
            assertTrue(printed.contains("reason: " + caps.getReason()), printed);
            assertTrue(
                    printed.contains(
                            "policy " + PrecisionPolicy.auto().resolveAuto(caps.getRecommended())),
                    printed);
        }
    }

    @Test
    void theDoctorExamplePrintsItsTable() throws Exception {
        String printed = printedBy(() -> DoctorExample.main(new String[] {"128"}));
        assertTrue(printed.contains("fp32, plain DJL"), printed);
        assertTrue(printed.contains("(auto)"), printed);
        assertTrue(printed.contains("speedup"), printed);
    }

    @Test
    void theSmokeDemoStillRuns() throws Exception {
        String printed = printedBy(() -> SmokeDemo.main(new String[0]));
        assertTrue(printed.contains("Smoke demo OK"), printed);
    }

    @Test
    void theAlignmentReportExampleFlagsTheStemAndTheClassifier() throws Exception {
        String printed = printedBy(() -> AlignmentReportExample.main(new String[] {"8"}));
        assertTrue(printed.contains("01Conv2d"), printed);
        assertTrue(printed.contains("pad in-channels 1 -> 8"), printed);
        assertTrue(printed.contains("of the 16-bit work runs on aligned shapes"), printed);
    }

    /**
     * The code lines of an example: without the package line, imports, comments and blank lines,
     * with the class name replaced, trimmed.
     */
    private static List<String> code(Path source, String className) throws IOException {
        List<String> lines = new ArrayList<>();
        boolean inComment = false;
        for (String raw : Files.readAllLines(source)) {
            String line = raw.strip();
            if (inComment) {
                inComment = !line.endsWith("*/");
                continue;
            }
            if (line.startsWith("/*")) {
                inComment = !line.endsWith("*/");
                continue;
            }
            if (line.isEmpty()
                    || line.startsWith("//")
                    || line.startsWith("import ")
                    || line.startsWith("package ")) {
                continue;
            }
            lines.add(line.replace(className, "Example"));
        }
        return lines;
    }

    /** A longest-common-subsequence line diff. */
    private static void diff(
            List<String> a, List<String> b, List<String> onlyA, List<String> onlyB) {
        int[][] lcs = new int[a.size() + 1][b.size() + 1];
        for (int i = a.size() - 1; i >= 0; i--) {
            for (int j = b.size() - 1; j >= 0; j--) {
                lcs[i][j] =
                        a.get(i).equals(b.get(j))
                                ? lcs[i + 1][j + 1] + 1
                                : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
            }
        }
        int i = 0;
        int j = 0;
        while (i < a.size() && j < b.size()) {
            if (a.get(i).equals(b.get(j))) {
                i++;
                j++;
            } else if (lcs[i + 1][j] >= lcs[i][j + 1]) {
                onlyA.add(a.get(i++));
            } else {
                onlyB.add(b.get(j++));
            }
        }
        onlyA.addAll(a.subList(i, a.size()));
        onlyB.addAll(b.subList(j, b.size()));
    }
}
