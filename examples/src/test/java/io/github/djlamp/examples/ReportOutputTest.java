package io.github.djlamp.examples;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.ndarray.NDManager;
import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.github.djlamp.amp.doctor.DoctorReport;
import io.github.djlamp.amp.doctor.RunResult;
import io.github.djlamp.amp.scale.LossScaling;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Charts, CSV and JSON written from a real report with fp32, bf16 and fp16 with skipped steps. */
class ReportOutputTest {

    private static final byte[] PNG_MAGIC = {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

    @TempDir static Path dir;
    private static DoctorReport report;
    private static List<Path> charts;
    private static List<Path> files;

    @BeforeAll
    static void writeEverything() throws Exception {
        try (NDManager manager = NDManager.newBaseManager()) {
            report =
                    TinyDoctor.builder(manager, 2, "float32", "mixed_bfloat16", "mixed_float16")
                            .optLossScaling(
                                    LossScaling.dynamicBuilder()
                                            .initScale(1 << 24)
                                            .growthInterval(3)
                                            .build())
                            .build()
                            .run();
        }
        charts = ReportCharts.write(report, "a tiny MLP", dir);
        files = ReportFiles.write(report, Map.of("model", "mlp", "epochs", 2), dir);
    }

    @Test
    void chartsArePngsOfTheAdvertisedSize() throws IOException {
        assertEquals(
                List.of(
                        ReportCharts.LOSS_PNG,
                        ReportCharts.LOSS_SCALE_PNG,
                        ReportCharts.THROUGHPUT_PNG),
                charts.stream().map(p -> p.getFileName().toString()).toList());
        for (Path chart : charts) {
            byte[] bytes = Files.readAllBytes(chart);
            assertArrayEquals(PNG_MAGIC, Arrays.copyOf(bytes, 8), chart + " is a PNG");
            BufferedImage image = ImageIO.read(chart.toFile());
            assertNotNull(image, chart + " decodes");
            assertEquals(1000, image.getWidth());
            assertEquals(600, image.getHeight());
        }
    }

    @Test
    void theLossScaleChartMarksEverySkippedStep() {
        RunResult fp16 = report.getRuns().get(2);
        assertTrue(fp16.getSkippedCount() > 0, "the fp16 run skipped steps");
        var chart = ReportCharts.lossScaleChart(report, "x");
        var marks = chart.getSeriesMap().get("fp16: " + fp16.getSkippedCount() + " skipped steps");
        assertNotNull(marks, "a series of skipped-step marks: " + chart.getSeriesMap().keySet());
        double[] x = marks.getXData();
        assertEquals(fp16.getSkippedCount(), x.length);
        for (int i = 0; i < x.length; i++) {
            assertEquals(fp16.getSkippedSteps().get(i), (int) x[i]);
        }
        assertTrue(chart.getStyler().isYAxisLogarithmic(), "scales span decades: log axis");
    }

    @Test
    void theStepAxisHasAboutTenLabels() {
        assertEquals(1, ReportCharts.labelStep(4));
        assertEquals(5, ReportCharts.labelStep(23));
        assertEquals(10, ReportCharts.labelStep(89));
        assertEquals(50, ReportCharts.labelStep(469));
        assertEquals(500, ReportCharts.labelStep(4699));
    }

    @Test
    void stepsCsvHasAHeaderAndOneRowPerStep() throws IOException {
        List<String> lines = Files.readAllLines(dir.resolve(ReportFiles.STEPS_CSV));
        int steps = report.getRuns().get(0).getSteps();
        assertEquals(steps + 1, lines.size(), "header + one row per step");
        String[] header = lines.get(0).split(",", -1);
        assertEquals("step", header[0]);
        assertEquals(2 + 4 * report.getRuns().size(), header.length);
        List<String> columns = Arrays.asList(header);
        assertTrue(columns.contains("fp32_loss"), lines.get(0));
        assertTrue(columns.contains("fp16_loss_scale"), lines.get(0));
        int skippedColumn = columns.indexOf("fp16_skipped");
        int skippedRows = 0;
        for (int i = 1; i < lines.size(); i++) {
            String[] cells = lines.get(i).split(",", -1);
            assertEquals(header.length, cells.length, "row " + i);
            assertEquals(i - 1, Integer.parseInt(cells[0]));
            skippedRows += Integer.parseInt(cells[skippedColumn]);
            float loss = Float.parseFloat(cells[columns.indexOf("fp32_loss")]);
            assertEquals(report.getRuns().get(0).getLosses().get(i - 1), loss, 1e-6);
        }
        assertEquals(report.getRuns().get(2).getSkippedCount(), skippedRows);
    }

    @Test
    void runsCsvHasOneRowPerRun() throws IOException {
        List<String> lines = Files.readAllLines(dir.resolve(ReportFiles.RUNS_CSV));
        assertEquals(1 + report.getRuns().size(), lines.size());
        assertTrue(lines.get(0).startsWith("run,policy,precision"), lines.get(0));
        assertTrue(lines.get(1).startsWith("fp32,float32,fp32,false,"), lines.get(1));
        assertTrue(lines.get(3).startsWith("fp16,mixed_float16,fp16,true,"), lines.get(3));
    }

    @Test
    void jsonParsesAndHoldsEveryStep() throws IOException {
        assertTrue(files.contains(dir.resolve(ReportFiles.REPORT_JSON)));
        JsonObject root =
                JsonParser.parseString(Files.readString(dir.resolve(ReportFiles.REPORT_JSON)))
                        .getAsJsonObject();
        assertEquals("mlp", root.getAsJsonObject("settings").get("model").getAsString());
        assertEquals("fp32", root.get("baseline").getAsString());
        JsonArray runs = root.getAsJsonArray("runs");
        assertEquals(3, runs.size());
        for (int i = 0; i < runs.size(); i++) {
            JsonObject run = runs.get(i).getAsJsonObject();
            RunResult expected = report.getRuns().get(i);
            assertEquals(expected.getKey(), run.get("key").getAsString());
            assertEquals(expected.getSteps(), run.getAsJsonArray("losses").size());
            assertEquals(expected.getSteps(), run.getAsJsonArray("lossScales").size());
            assertEquals(expected.getSkippedCount(), run.getAsJsonArray("skippedSteps").size());
            assertEquals(
                    expected.getImagesPerSecond(), run.get("imagesPerSecond").getAsDouble(), 1e-9);
        }
    }
}
