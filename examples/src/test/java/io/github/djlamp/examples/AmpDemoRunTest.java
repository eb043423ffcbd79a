package io.github.djlamp.examples;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.github.djlamp.examples.data.FashionMnistData;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The main demo end to end, with a tiny setting: table printed, six files written. */
class AmpDemoRunTest {

    @Test
    void theDefaultComparisonRunsOnATinySlice(@TempDir Path out) throws Exception {
        ByteArrayOutputStream stdout = new ByteArrayOutputStream();
        int code =
                AmpDemo.commandLine(
                                new AmpDemo(new PrintStream(stdout, true, StandardCharsets.UTF_8)))
                        .execute(
                                "--train-limit", "128",
                                "--test-limit", "64",
                                "--epochs", "1",
                                "--batch-size", "32",
                                "--warmup", "1",
                                "--out", out.toString());
        String printed = stdout.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, printed);
        assertTrue(printed.contains("ResNet-20 on fashion-mnist-subset"), printed);
        assertTrue(printed.contains("128 training and 64 test images"), printed);
        assertTrue(printed.contains("fp32, plain DJL"), printed);
        assertTrue(printed.contains("(auto)"), printed);
        assertTrue(printed.contains("images/s"), printed);
        assertTrue(printed.contains("speedup"), printed);
        // the platform check ran before the training: one line in the table when sound, the
        // advice with the cure before the training when not
        assertTrue(
                printed.contains("\nPlatform check: sound. All ")
                        || printed.contains("ONEDNN_MAX_CPU_ISA"),
                printed);
        assertTrue(printed.contains("Output folder: " + out.toAbsolutePath()), printed);

        for (String name :
                List.of(
                        ReportCharts.LOSS_PNG,
                        ReportCharts.LOSS_SCALE_PNG,
                        ReportCharts.THROUGHPUT_PNG)) {
            byte[] png = Files.readAllBytes(out.resolve(name));
            assertArrayEquals(new byte[] {(byte) 0x89, 'P', 'N', 'G'}, Arrays.copyOf(png, 4), name);
        }
        List<String> steps = Files.readAllLines(out.resolve(ReportFiles.STEPS_CSV));
        assertEquals(1 + 128 / 32, steps.size(), "header + 4 steps");
        JsonObject json =
                JsonParser.parseString(Files.readString(out.resolve(ReportFiles.REPORT_JSON)))
                        .getAsJsonObject();
        assertEquals(2, json.getAsJsonArray("runs").size());
        assertEquals("resnet20", json.getAsJsonObject("settings").get("model").getAsString());
        assertEquals(28, json.getAsJsonObject("settings").get("imageSize").getAsInt());
        assertEquals(2, Files.readAllLines(out.resolve(ReportFiles.RUNS_CSV)).size() - 1);
    }

    @Test
    void aJvmThatCannotDrawStillWritesTheNumbersAndSucceeds(@TempDir Path out) throws Exception {
        ByteArrayOutputStream stdout = new ByteArrayOutputStream();
        ChartWriter noFonts =
                (report, subtitle, dir) -> {
                    // what AWT throws on a headless server without font libraries
                    throw new UnsatisfiedLinkError(
                            "libharfbuzz.so.0: cannot open shared object file");
                };
        int code =
                AmpDemo.commandLine(
                                new AmpDemo(
                                        new PrintStream(stdout, true, StandardCharsets.UTF_8),
                                        noFonts))
                        .execute(
                                "--precision", "fp32",
                                "--train-limit", "64",
                                "--test-limit", "32",
                                "--epochs", "1",
                                "--batch-size", "32",
                                "--warmup", "0",
                                "--out", out.toString());
        String printed = stdout.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, printed);
        assertTrue(printed.contains("Warning: the charts were not drawn"), printed);
        assertTrue(printed.contains("libharfbuzz"), printed);
        for (String name :
                List.of(ReportFiles.STEPS_CSV, ReportFiles.RUNS_CSV, ReportFiles.REPORT_JSON)) {
            assertTrue(Files.size(out.resolve(name)) > 0, name);
        }
        assertEquals(1 + 64 / 32, Files.readAllLines(out.resolve(ReportFiles.STEPS_CSV)).size());
        assertTrue(Files.notExists(out.resolve(ReportCharts.LOSS_PNG)));
        assertTrue(printed.contains("Output folder: " + out.toAbsolutePath()), printed);
    }

    @Test
    void imagesAreResizedToTheImageSizeAndTheModelTakesThem(@TempDir Path out) throws Exception {
        ByteArrayOutputStream stdout = new ByteArrayOutputStream();
        int code =
                AmpDemo.commandLine(
                                new AmpDemo(new PrintStream(stdout, true, StandardCharsets.UTF_8)))
                        .execute(
                                "--model", "resnet18",
                                "--image-size", "40",
                                "--precision", "fp32",
                                "--train-limit", "32",
                                "--test-limit", "16",
                                "--epochs", "1",
                                "--batch-size", "16",
                                "--warmup", "0",
                                "--out", out.toString());
        String printed = stdout.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, printed);
        assertTrue(printed.contains("ResNet-18 on fashion-mnist-subset at 40x40"), printed);
        assertTrue(
                printed.contains("Workload: ResNet-18 on 40x40 images (resized from 28x28)"),
                printed);
        JsonObject settings =
                JsonParser.parseString(Files.readString(out.resolve(ReportFiles.REPORT_JSON)))
                        .getAsJsonObject()
                        .getAsJsonObject("settings");
        assertEquals(40, settings.get("imageSize").getAsInt());
    }

    @Test
    void theFullSetIsReadFromTheDataDir(@TempDir Path tmp) throws Exception {
        // any folder with the four IDX files will do: here, the shipped subset's files
        FashionMnistData.subset(tmp);
        Path folder = tmp.resolve("fashion-mnist-subset");
        ByteArrayOutputStream stdout = new ByteArrayOutputStream();
        int code =
                AmpDemo.commandLine(
                                new AmpDemo(new PrintStream(stdout, true, StandardCharsets.UTF_8)))
                        .execute(
                                "--data-dir", folder.toString(),
                                "--precision", "fp32",
                                "--train-limit", "64",
                                "--test-limit", "32",
                                "--epochs", "1",
                                "--out", tmp.resolve("out").toString());
        String printed = stdout.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, printed);
        assertTrue(printed.contains("on fashion-mnist"), printed);
        assertTrue(printed.contains("folder " + folder), printed);
        assertTrue(printed.contains("64 training and 32 test images"), printed);
        JsonObject json =
                JsonParser.parseString(
                                Files.readString(
                                        tmp.resolve("out").resolve(ReportFiles.REPORT_JSON)))
                        .getAsJsonObject();
        assertEquals(1, json.getAsJsonArray("runs").size(), "--precision fp32 is one run");
    }

    @Test
    void eachModelBuildsForBothImageShapes() throws Exception {
        for (DemoModel model : DemoModel.values()) {
            for (int channels : new int[] {1, 3}) {
                var block = model.build(channels, 10);
                try (var manager = ai.djl.ndarray.NDManager.newBaseManager()) {
                    int size = channels == 1 ? 28 : 32;
                    block.initialize(
                            manager,
                            ai.djl.ndarray.types.DataType.FLOAT32,
                            new ai.djl.ndarray.types.Shape(2, channels, size, size));
                    var out =
                            block.forward(
                                    new ai.djl.training.ParameterStore(manager, false),
                                    new ai.djl.ndarray.NDList(
                                            manager.ones(
                                                    new ai.djl.ndarray.types.Shape(
                                                            2, channels, size, size))),
                                    false);
                    assertEquals(
                            new ai.djl.ndarray.types.Shape(2, 10),
                            out.singletonOrThrow().getShape(),
                            model + " with " + channels + " channels");
                }
            }
        }
    }
}
