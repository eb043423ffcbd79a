package io.github.djlamp.examples;

import io.github.djlamp.amp.doctor.DoctorReport;
import io.github.djlamp.amp.doctor.RunResult;
import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.knowm.xchart.AnnotationLine;
import org.knowm.xchart.AnnotationTextPanel;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.CategorySeries;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.internal.chartpart.Chart;
import org.knowm.xchart.style.AxesChartStyler;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * Draws a doctor's report as PNG charts with XChart: the training loss of every run on one plot
 * ({@value #LOSS_PNG}), the loss-scale trajectory with skipped steps marked ({@value
 * #LOSS_SCALE_PNG}) and the throughput of each run ({@value #THROUGHPUT_PNG}).
 *
 * <p>Runs headless: {@code java.awt.headless} is set before the first chart is drawn.
 */
public final class ReportCharts {

    /** Training loss per step, every run on one plot. */
    public static final String LOSS_PNG = "loss.png";

    /** Loss scale per step, skipped steps marked. */
    public static final String LOSS_SCALE_PNG = "loss-scale.png";

    /** Images per second of each run. */
    public static final String THROUGHPUT_PNG = "throughput.png";

    private static final int WIDTH = 1000;
    private static final int HEIGHT = 600;

    /** Colours of the runs, in run order (fp32 first): blue, orange, green, purple. */
    private static final Color[] COLORS = {
        new Color(0x1f, 0x77, 0xb4),
        new Color(0xff, 0x7f, 0x0e),
        new Color(0x2c, 0xa0, 0x2c),
        new Color(0x94, 0x67, 0xbd)
    };

    private ReportCharts() {}

    /**
     * Draws the three charts into {@code dir}, creating it if needed.
     *
     * @param report the report
     * @param subtitle what was trained, e.g. {@code ResNet-20 on Fashion-MNIST}, for the titles
     * @param dir the output folder
     * @return the files written
     * @throws IOException if a file cannot be written
     */
    public static List<Path> write(DoctorReport report, String subtitle, Path dir)
            throws IOException {
        System.setProperty("java.awt.headless", "true");
        Files.createDirectories(dir);
        List<Path> written = new ArrayList<>();
        written.add(save(lossChart(report, subtitle), dir.resolve(LOSS_PNG)));
        written.add(save(lossScaleChart(report, subtitle), dir.resolve(LOSS_SCALE_PNG)));
        written.add(save(throughputChart(report, subtitle), dir.resolve(THROUGHPUT_PNG)));
        return written;
    }

    /**
     * Builds the loss chart: each run's per-step loss as a thin line, its moving average as a thick
     * one, epochs separated by vertical lines.
     *
     * @param report the report
     * @param subtitle what was trained
     * @return the chart
     */
    public static XYChart lossChart(DoctorReport report, String subtitle) {
        XYChart chart =
                new XYChartBuilder()
                        .width(WIDTH)
                        .height(HEIGHT)
                        .title("Training loss per step: " + subtitle)
                        .xAxisTitle("training step")
                        .yAxisTitle("training loss (per batch)")
                        .build();
        style(chart.getStyler());
        chart.getStyler().setLegendPosition(Styler.LegendPosition.InsideNE);
        List<RunResult> runs = report.getRuns();
        for (int i = 0; i < runs.size(); i++) {
            RunResult run = runs.get(i);
            if (run.getSteps() == 0) {
                continue;
            }
            Color color = COLORS[i % COLORS.length];
            double[] x = steps(run.getSteps());
            double[] y = toDoubles(run.getLosses());
            int window = Math.max(1, Math.min(25, run.getSteps() / 20));
            XYSeries raw =
                    chart.addSeries(run.getLabel() + (window > 1 ? ", each step" : ""), x, y);
            raw.setMarker(SeriesMarkers.NONE);
            raw.setLineColor(window > 1 ? translucent(color, 90) : color);
            raw.setLineWidth(window > 1 ? 1f : 2f);
            if (window > 1) {
                XYSeries mean =
                        chart.addSeries(
                                run.getLabel() + ", mean of " + window + " steps",
                                x,
                                movingAverage(y, window));
                mean.setMarker(SeriesMarkers.NONE);
                mean.setLineColor(color);
                mean.setLineWidth(3f);
            }
        }
        stepAxis(chart, runs);
        addEpochLines(chart, runs.get(0));
        return chart;
    }

    /**
     * Builds the loss-scale chart: each run's scale after every step (logarithmic when a run scales
     * its loss), with a cross on each skipped step.
     *
     * @param report the report
     * @param subtitle what was trained
     * @return the chart
     */
    public static XYChart lossScaleChart(DoctorReport report, String subtitle) {
        List<RunResult> runs = report.getRuns();
        boolean anyScaled = runs.stream().anyMatch(RunResult::isLossScaled);
        int skipped = runs.stream().mapToInt(RunResult::getSkippedCount).sum();
        String title =
                anyScaled
                        ? "Loss scale per step, "
                                + skipped
                                + " skipped step"
                                + (skipped == 1 ? "" : "s")
                                + " (x): "
                                + subtitle
                        : "Loss scale per step: 1 throughout, no run scales its loss, "
                                + skipped
                                + " skipped steps";
        XYChart chart =
                new XYChartBuilder()
                        .width(WIDTH)
                        .height(HEIGHT)
                        .title(title)
                        .xAxisTitle("training step")
                        .yAxisTitle(
                                anyScaled ? "loss scale (log scale)" : "loss scale (1 = unscaled)")
                        .build();
        style(chart.getStyler());
        chart.getStyler().setLegendPosition(Styler.LegendPosition.OutsideS);
        chart.getStyler().setLegendLayout(Styler.LegendLayout.Horizontal);
        if (anyScaled) {
            chart.getStyler().setYAxisLogarithmic(true);
        } else {
            chart.getStyler().setYAxisMin(0.0);
            chart.getStyler().setYAxisMax(2.0);
        }
        for (int i = 0; i < runs.size(); i++) {
            RunResult run = runs.get(i);
            if (run.getSteps() == 0) {
                continue;
            }
            Color color = COLORS[i % COLORS.length];
            XYSeries line =
                    chart.addSeries(
                            run.getLabel() + ": " + shortScaling(run),
                            steps(run.getSteps()),
                            toDoubles(run.getLossScales()));
            line.setMarker(SeriesMarkers.NONE);
            line.setLineColor(color);
            line.setLineWidth(i == 0 ? 4f : 2f);
            if (run.getSkippedCount() > 0) {
                double[] x = new double[run.getSkippedCount()];
                double[] y = new double[run.getSkippedCount()];
                for (int s = 0; s < x.length; s++) {
                    int step = run.getSkippedSteps().get(s);
                    x[s] = step;
                    y[s] = run.getLossScales().get(step);
                }
                XYSeries marks =
                        chart.addSeries(run.getLabel() + ": " + x.length + " skipped steps", x, y);
                marks.setXYSeriesRenderStyle(XYSeries.XYSeriesRenderStyle.Scatter);
                marks.setMarker(SeriesMarkers.CROSS);
                marks.setMarkerColor(Color.RED);
            }
        }
        stepAxis(chart, runs);
        addEpochLines(chart, runs.get(0));
        if (!anyScaled) {
            chart.addAnnotation(
                    new AnnotationTextPanel(
                            "bf16 keeps fp32's 8-bit exponent, so small gradients do not"
                                    + " underflow: bf16 and fp32 train unscaled and skip no step.\n"
                                    + "fp16 (--precision fp16, for Volta and Turing GPUs) scales"
                                    + " the loss dynamically: its scale and skipped steps"
                                    + " show here.",
                            20,
                            HEIGHT - 170,
                            true));
        }
        return chart;
    }

    /**
     * Builds the throughput chart: one bar per run, images per second after the warm-up, the
     * speedup over the baseline in the legend.
     *
     * @param report the report
     * @param subtitle what was trained
     * @return the chart
     */
    public static CategoryChart throughputChart(DoctorReport report, String subtitle) {
        RunResult baseline = report.getBaseline();
        CategoryChart chart =
                new CategoryChartBuilder()
                        .width(WIDTH)
                        .height(HEIGHT)
                        .title(
                                String.format(
                                        Locale.ROOT,
                                        "Training throughput: %.2fx with AMP",
                                        report.speedup()))
                        .xAxisTitle("")
                        .yAxisTitle("images per second (after warm-up)")
                        .build();
        style(chart.getStyler());
        chart.getStyler().setLegendPosition(Styler.LegendPosition.InsideNW);
        chart.getStyler().setLabelsVisible(true);
        chart.getStyler().setLabelsPosition(0.9);
        chart.getStyler().setYAxisMin(0.0);
        chart.getStyler().setYAxisDecimalPattern("#,##0");
        List<RunResult> runs = report.getRuns();
        double max = runs.stream().mapToDouble(RunResult::getImagesPerSecond).max().orElse(1);
        chart.getStyler().setYAxisMax(max * 1.2);
        for (int i = 0; i < runs.size(); i++) {
            RunResult run = runs.get(i);
            String name =
                    run == baseline
                            ? run.getLabel() + " (baseline)"
                            : String.format(
                                    Locale.ROOT, "%s: %.2fx", run.getLabel(), report.speedup(run));
            CategorySeries bar =
                    chart.addSeries(name, List.of(subtitle), List.of(run.getImagesPerSecond()));
            bar.setFillColor(COLORS[i % COLORS.length]);
        }
        return chart;
    }

    /**
     * Returns the centred moving average of a series, the window shrinking at the ends.
     *
     * @param values the series
     * @param window the window, at least 1
     * @return the averaged series, as long as the input
     */
    static double[] movingAverage(double[] values, int window) {
        double[] out = new double[values.length];
        int half = window / 2;
        for (int i = 0; i < values.length; i++) {
            int from = Math.max(0, i - half);
            int to = Math.min(values.length, i + half + 1);
            double sum = 0;
            int n = 0;
            for (int j = from; j < to; j++) {
                if (!Double.isNaN(values[j])) {
                    sum += values[j];
                    n++;
                }
            }
            out[i] = n == 0 ? Double.NaN : sum / n;
        }
        return out;
    }

    /**
     * Lays out the step axis: from 0 to a round number, with about ten labels. XChart puts a tick
     * on every few integer steps and its labels run into each other, so the others stay blank.
     */
    private static void stepAxis(XYChart chart, List<RunResult> runs) {
        int steps = runs.stream().mapToInt(RunResult::getSteps).max().orElse(1);
        long every = labelStep(Math.max(1, steps - 1));
        chart.getStyler().setXAxisMin(0.0);
        chart.getStyler().setXAxisMax((double) every * Math.ceil((steps - 1.0) / every));
        chart.getStyler()
                .setxAxisTickLabelsFormattingFunction(
                        x -> {
                            long step = Math.round(x);
                            boolean labelled = Math.abs(x - step) < 1e-6 && step % every == 0;
                            return labelled ? Long.toString(step) : "";
                        });
    }

    /** The smallest of 1, 2, 5, 10, 20, 25, 50, 100... that gives at most ten labels up to max. */
    static long labelStep(int max) {
        long[] mantissas = {1, 2, 5, 10, 20, 25, 50};
        for (long power = 1; ; power *= 100) {
            for (long m : mantissas) {
                if (m * power * 10 >= max) {
                    return m * power;
                }
            }
        }
    }

    private static void addEpochLines(XYChart chart, RunResult run) {
        int epochs = run.getEpochs();
        if (epochs <= 1 || run.getSteps() == 0) {
            return;
        }
        int perEpoch = run.getSteps() / epochs;
        for (int e = 1; e < epochs; e++) {
            AnnotationLine line = new AnnotationLine(e * perEpoch - 0.5, true, false);
            chart.addAnnotation(line);
        }
        chart.getStyler().setAnnotationLineColor(Color.GRAY);
        chart.getStyler()
                .setAnnotationLineStroke(
                        new BasicStroke(
                                1f,
                                BasicStroke.CAP_BUTT,
                                BasicStroke.JOIN_MITER,
                                10f,
                                new float[] {6f, 6f},
                                0f));
    }

    private static String shortScaling(RunResult run) {
        if (!run.isLossScaled()) {
            return "no loss scaling";
        }
        return "final scale " + String.format(Locale.ROOT, "%.0f", run.getFinalLossScale());
    }

    private static void style(AxesChartStyler styler) {
        styler.setChartBackgroundColor(Color.WHITE);
        styler.setPlotBackgroundColor(Color.WHITE);
        styler.setLegendBorderColor(Color.LIGHT_GRAY);
        styler.setChartTitleBoxVisible(false);
        styler.setAntiAlias(true);
        styler.setAnnotationTextPanelBackgroundColor(Color.WHITE);
    }

    private static double[] steps(int n) {
        double[] x = new double[n];
        for (int i = 0; i < n; i++) {
            x[i] = i;
        }
        return x;
    }

    private static double[] toDoubles(List<? extends Number> values) {
        double[] out = new double[values.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = values.get(i).doubleValue();
        }
        return out;
    }

    private static Color translucent(Color color, int alpha) {
        return new Color(color.getRed(), color.getGreen(), color.getBlue(), alpha);
    }

    private static Path save(Chart<?, ?> chart, Path file) throws IOException {
        boolean saved = false;
        try (OutputStream out = Files.newOutputStream(file)) {
            BitmapEncoder.saveBitmap(chart, out, BitmapEncoder.BitmapFormat.PNG);
            saved = true;
        } finally {
            if (!saved) {
                Files.deleteIfExists(file); // no half-drawn PNG
            }
        }
        return file;
    }
}
