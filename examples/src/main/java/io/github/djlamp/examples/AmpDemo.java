package io.github.djlamp.examples;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import ai.djl.training.DefaultTrainingConfig;
import ai.djl.training.TrainingConfig;
import ai.djl.training.loss.Loss;
import ai.djl.training.optimizer.Optimizer;
import ai.djl.training.tracker.Tracker;
import ai.djl.util.cuda.CudaUtils;
import io.github.djlamp.amp.doctor.AmpDoctor;
import io.github.djlamp.amp.doctor.DoctorReport;
import io.github.djlamp.amp.doctor.PlatformCheck;
import io.github.djlamp.amp.doctor.PlatformReport;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.spi.DeviceCapabilities;
import io.github.djlamp.examples.data.FashionMnistData;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.lang.management.MemoryUsage;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * The main demo: trains DJL's model-zoo ResNet in fp32 and with AMP on the same data, prints the
 * two side by side, and writes charts (PNG) and the numbers (CSV, JSON) to an output folder.
 *
 * <pre>
 * mvn -B -q -pl examples -am compile exec:java
 * mvn -B -q -pl examples -am compile exec:java -Dexec.args="--help"
 * </pre>
 *
 * <p>The comparison itself is the library call {@link AmpDoctor}; this class only reads the command
 * line, loads the data and writes the files. It first runs the {@link PlatformCheck} (in a child
 * JVM, a few seconds) and, where this machine's kernels compute wrong or kill the JVM, prints the
 * defects, the cure and the command that checks again before it trains.
 */
@Command(
        name = "amp-demo",
        sortOptions = false,
        usageHelpAutoWidth = true,
        description = {
            "Trains DJL's model-zoo ResNet in fp32 and with automatic mixed precision (AMP) on the"
                    + " same data, in the same order, from the same weights; prints images per"
                    + " second, peak step memory, test accuracy, loss scale, skipped steps and"
                    + " the speedup side by side; writes PNG charts, CSV and JSON to the output"
                    + " folder.",
            ""
        },
        footer = {
            "",
            "Through Maven, pass the options as -Dexec.args=\"...\" (see examples/README.md).",
            "Progress bars: set DJL_DISABLE_PROGRESS_BAR=true to turn them off."
        })
public final class AmpDemo implements Callable<Integer> {

    /** The number of epochs of the default run: sized for a few minutes on a 2-core CPU. */
    public static final int DEFAULT_EPOCHS = 5;

    private static final CliChoice<DemoPrecision> PRECISIONS =
            new CliChoice<>(DemoPrecision.values(), DemoPrecision::cliName);
    private static final CliChoice<DemoModel> MODELS =
            new CliChoice<>(DemoModel.values(), DemoModel::cliName);
    private static final CliChoice<DemoDataset> DATASETS =
            new CliChoice<>(DemoDataset.values(), DemoDataset::cliName);

    @Spec private CommandSpec spec;

    @Option(
            names = "--precision",
            paramLabel = "MODE",
            description = {
                "fp32, fp16, bf16, auto or compare (default: ${DEFAULT-VALUE}).",
                "compare trains fp32 through plain DJL, then auto; auto picks bf16 on CPUs with"
                        + " AVX512-BF16 or AMX and on Ampere and later GPUs, fp16 on Volta and"
                        + " Turing GPUs. fp16 is very slow on CPUs."
            })
    private DemoPrecision precision = DemoPrecision.COMPARE;

    @Option(
            names = "--model",
            paramLabel = "NAME",
            description = {
                "resnet20, resnet18 or resnet50, DJL's model-zoo ResNetV1 (default: resnet20 on a"
                        + " CPU, resnet50 on a GPU).",
                "On a GPU, ResNet-20 on 28x28 images is too small for mixed precision to show;"
                        + " ResNet-50 on 224x224 images is where it matters."
            })
    private DemoModel model;

    @Option(
            names = "--epochs",
            paramLabel = "N",
            description = "Epochs of each run (default: ${DEFAULT-VALUE}).")
    private int epochs = DEFAULT_EPOCHS;

    @Option(
            names = "--batch-size",
            paramLabel = "N",
            description =
                    "Images per training step (default: 64 on a CPU and for resnet20; on a GPU,"
                            + " chosen from the free device memory, a multiple of 8 up to 256).")
    private Integer batchSize;

    @Option(
            names = "--image-size",
            paramLabel = "N",
            description =
                    "Side of the square images trained on; the dataset's images are resized"
                            + " (bilinear) to it (default: the dataset's own, 28 or 32, on a CPU"
                            + " and for resnet20; 224 on a GPU).")
    private Integer imageSize;

    @Option(
            names = "--dataset",
            paramLabel = "NAME",
            description = {
                "fashion-mnist-subset, fashion-mnist or cifar10 (default: fashion-mnist-subset,"
                        + " or fashion-mnist when --data-dir is given).",
                "fashion-mnist-subset: 6,000 training and 1,000 test images shipped in this"
                        + " module, no network needed. fashion-mnist: the full set from"
                        + " --data-dir, the project's ../shared/data/fashion-mnist, or DJL's"
                        + " repository when online. cifar10: DJL's Cifar10 loader, online only."
            })
    private DemoDataset dataset;

    @Option(
            names = "--data-dir",
            paramLabel = "DIR",
            description =
                    "A folder holding the four Fashion-MNIST files (train-images-idx3-ubyte.gz"
                            + " and the others); implies --dataset fashion-mnist.")
    private Path dataDir;

    @Option(
            names = "--out",
            paramLabel = "DIR",
            description =
                    "Folder for the charts, CSV and JSON, created if missing (default:"
                            + " ${DEFAULT-VALUE}).")
    private Path out = Paths.get("amp-output");

    @Option(
            names = "--seed",
            paramLabel = "N",
            description =
                    "Random seed, set again before each run: same initial weights and batch order"
                            + " (default: ${DEFAULT-VALUE}).")
    private int seed = 42;

    @Option(
            names = "--train-limit",
            paramLabel = "N",
            description = "Use at most N training images (default: all of the dataset).")
    private long trainLimit;

    @Option(
            names = "--test-limit",
            paramLabel = "N",
            description = "Use at most N test images (default: all of the dataset).")
    private long testLimit;

    @Option(
            names = "--warmup",
            paramLabel = "N",
            description =
                    "First steps of each run left out of its images/s (default: ${DEFAULT-VALUE}).")
    private int warmup = AmpDoctor.DEFAULT_WARMUP_STEPS;

    @Option(
            names = {"-h", "--help"},
            usageHelp = true,
            description = "Show this help and exit.")
    private boolean help;

    private final PrintStream stdout;
    private final ChartWriter charts;

    /** Creates the command, printing its results to standard output. */
    public AmpDemo() {
        this(System.out);
    }

    /**
     * Creates the command.
     *
     * @param stdout where the table and the output folder are printed
     */
    public AmpDemo(PrintStream stdout) {
        this(stdout, ReportCharts::write);
    }

    AmpDemo(PrintStream stdout, ChartWriter charts) {
        this.stdout = stdout;
        this.charts = charts;
    }

    /**
     * Runs the demo from the command line; exits with a non-zero status on a bad option (2) or a
     * failure (1).
     *
     * @param args the options; {@code --help} lists them
     */
    public static void main(String[] args) {
        int code = commandLine(new AmpDemo()).execute(args);
        if (code != 0) {
            System.exit(code);
        }
    }

    /**
     * Returns the picocli command line of a demo: the option converters, and error handlers that
     * print one line instead of a stack trace. {@code execute(args)} returns the exit code: 0, 1 on
     * a failure, 2 on a bad option.
     *
     * @param demo the command
     * @return the command line
     */
    public static CommandLine commandLine(AmpDemo demo) {
        CommandLine cmd = new CommandLine(demo);
        cmd.registerConverter(DemoPrecision.class, PRECISIONS);
        cmd.registerConverter(DemoModel.class, MODELS);
        cmd.registerConverter(DemoDataset.class, DATASETS);
        cmd.setParameterExceptionHandler(
                (ex, args) -> {
                    PrintWriter err = ex.getCommandLine().getErr();
                    err.println("amp-demo: " + ex.getMessage() + " (see --help)");
                    err.flush();
                    return ex.getCommandLine().getCommandSpec().exitCodeOnInvalidInput();
                });
        cmd.setExecutionExceptionHandler(
                (ex, commandLine, parseResult) -> {
                    PrintWriter err = commandLine.getErr();
                    err.println("amp-demo: " + oneLine(ex));
                    err.flush();
                    return commandLine.getCommandSpec().exitCodeOnExecutionException();
                });
        return cmd;
    }

    /**
     * Trains, prints the table and writes the files.
     *
     * @return 0
     * @throws Exception if the data cannot be read or the training fails
     */
    @Override
    public Integer call() throws Exception {
        validate();
        // first, in a child JVM: a platform whose kernels kill the JVM or compute wrong is named,
        // with its cure, before the training meets it (a few seconds; nothing printed when sound)
        PlatformReport platform = PlatformCheck.cached();
        if (!platform.isSound()) {
            stdout.println(platform);
            stdout.println();
        }
        System.setProperty("java.awt.headless", "true");
        DemoDataset source =
                dataset != null
                        ? dataset
                        : dataDir != null
                                ? DemoDataset.FASHION_MNIST
                                : DemoDataset.FASHION_MNIST_SUBSET;
        Path workDir = FashionMnistData.defaultWorkDir();
        try (NDManager manager = NDManager.newBaseManager()) {
            Device device = Engine.getInstance().getDevices(1)[0];
            DemoWorkload workload =
                    DemoWorkload.choose(
                            device.isGpu(),
                            freeDeviceMemory(device),
                            source.imageSize(),
                            model,
                            imageSize,
                            batchSize);
            int batch = workload.batchSize();
            DemoData data =
                    source.load(
                            manager,
                            batch,
                            workload.imageSize(),
                            trainLimit,
                            testLimit,
                            dataDir,
                            workDir);
            DeviceCapabilities caps = AmpBackends.forManager(manager).capabilities(device);
            DemoModel network = workload.model();
            String what =
                    title(network)
                            + " on "
                            + source.cliName()
                            + (workload.resized()
                                    ? " at " + workload.imageSize() + "x" + workload.imageSize()
                                    : "");
            stdout.println("djl-amp demo: " + what);
            stdout.println("Data: " + data.description());
            stdout.println(
                    "Workload: "
                            + workload.describe(source.imageSize())
                            + "; "
                            + workload.reason());
            stdout.println(
                    "Runs: "
                            + String.join(", then ", precision.policies())
                            + "; "
                            + epochs
                            + " epoch"
                            + (epochs == 1 ? "" : "s")
                            + " each, batch "
                            + batch
                            + ", seed "
                            + seed);
            stdout.println(
                    "Device "
                            + device
                            + ": djl-amp recommends "
                            + caps.getRecommended().shortName()
                            + " ("
                            + caps.getReason()
                            + ")");
            if (precision == DemoPrecision.FP16 && !caps.isFp16Fast()) {
                stdout.println(
                        "Warning: fp16 is not fast on "
                                + device
                                + ": this run will be much slower than fp32.");
            }
            stdout.println();

            DoctorReport report =
                    AmpDoctor.builder()
                            .setModelFactory(
                                    () ->
                                            network.build(
                                                    data.channels(),
                                                    data.classes(),
                                                    workload.imageSize()))
                            .setTrainingConfig(AmpDemo::trainingConfig)
                            .setDataset(data.train(), data.test())
                            .optEpochs(epochs)
                            .optPrecisions(precision.policies().toArray(new String[0]))
                            .optSeed(seed)
                            .optWarmupSteps(warmup)
                            .optModelName(network.cliName())
                            .optPlatformReport(platform)
                            .build()
                            .run();

            stdout.println();
            stdout.print(report.toTable());
            stdout.println();

            Map<String, Object> settings = new LinkedHashMap<>();
            settings.put("model", network.cliName());
            settings.put("imageSize", workload.imageSize());
            settings.put("workloadReason", workload.reason());
            settings.put("dataset", source.cliName());
            settings.put("data", data.description());
            settings.put("precision", precision.cliName());
            settings.put("epochs", epochs);
            settings.put("batchSize", batch);
            settings.put("seed", seed);
            settings.put("warmupSteps", warmup);
            settings.put("trainImages", data.train().size());
            settings.put("testImages", data.test().size());
            settings.put("optimizer", "Adam, learning rate " + LEARNING_RATE);
            settings.put("engine", Engine.getInstance().getEngineName());
            settings.put("engineVersion", Engine.getInstance().getVersion());
            // the numbers first: drawing needs fonts, which a headless server may lack
            List<Path> files = new ArrayList<>(ReportFiles.write(report, settings, out));
            files.addAll(drawCharts(report, what));
            stdout.println(
                    "Output folder: "
                            + out.toAbsolutePath().normalize()
                            + " ("
                            + files.stream()
                                    .map(f -> f.getFileName().toString())
                                    .collect(Collectors.joining(", "))
                            + ")");
        }
        return 0;
    }

    /**
     * Draws the charts; a JVM that cannot (no fonts or no font libraries on a headless server) gets
     * a warning, not a failure: the numbers are already written.
     */
    private List<Path> drawCharts(DoctorReport report, String what) {
        try {
            return charts.write(report, what, out);
        } catch (VirtualMachineError e) {
            throw e;
        } catch (Exception | Error e) {
            stdout.println(
                    "Warning: the charts were not drawn ("
                            + oneLine(e)
                            + "); drawing text needs fonts, which this JVM lacks or cannot load."
                            + " The numbers are in "
                            + ReportFiles.STEPS_CSV
                            + ", "
                            + ReportFiles.RUNS_CSV
                            + " and "
                            + ReportFiles.REPORT_JSON
                            + ".");
            return List.of();
        }
    }

    /** The smallest {@code --image-size}. */
    static final int MIN_IMAGE_SIZE = 8;

    /** The largest {@code --image-size}. */
    static final int MAX_IMAGE_SIZE = 1024;

    /** The Adam learning rate of the demo's runs. */
    static final float LEARNING_RATE = 0.001f;

    /**
     * Returns the plain DJL training configuration every run starts from: softmax cross-entropy,
     * Adam, one device. The doctor adds AMP to it for the mixed precision runs.
     *
     * @return a new configuration
     */
    public static TrainingConfig trainingConfig() {
        return new DefaultTrainingConfig(Loss.softmaxCrossEntropyLoss())
                .optOptimizer(
                        Optimizer.adam()
                                .optLearningRateTracker(Tracker.fixed(LEARNING_RATE))
                                .build())
                .optDevices(Engine.getInstance().getDevices(1));
    }

    private void validate() {
        positive(epochs, "--epochs");
        if (batchSize != null) {
            positive(batchSize, "--batch-size");
        }
        if (imageSize != null && (imageSize < MIN_IMAGE_SIZE || imageSize > MAX_IMAGE_SIZE)) {
            throw new CommandLine.ParameterException(
                    spec.commandLine(),
                    "--image-size must be between "
                            + MIN_IMAGE_SIZE
                            + " and "
                            + MAX_IMAGE_SIZE
                            + ", was "
                            + imageSize);
        }
        if (trainLimit < 0 || testLimit < 0 || warmup < 0) {
            throw new CommandLine.ParameterException(
                    spec.commandLine(),
                    "--train-limit, --test-limit and --warmup must be 0 or more");
        }
        if (dataDir != null && dataset != null && dataset != DemoDataset.FASHION_MNIST) {
            throw new CommandLine.ParameterException(
                    spec.commandLine(),
                    "--data-dir goes with --dataset fashion-mnist, not " + dataset.cliName());
        }
    }

    private void positive(int value, String option) {
        if (value < 1) {
            throw new CommandLine.ParameterException(
                    spec.commandLine(), option + " must be 1 or more, was " + value);
        }
    }

    /** Free memory of a GPU, or -1 on a CPU or when CUDA cannot say. */
    private static long freeDeviceMemory(Device device) {
        if (!device.isGpu()) {
            return -1;
        }
        try {
            MemoryUsage usage = CudaUtils.getGpuMemory(device);
            return usage.getMax() - usage.getUsed();
        } catch (RuntimeException e) {
            return -1;
        }
    }

    private static String title(DemoModel model) {
        return "ResNet-" + model.layers();
    }

    /** Joins the messages of an exception and its causes into one line. */
    static String oneLine(Throwable e) {
        StringBuilder sb = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            String message = t.getMessage();
            if (message == null || message.isBlank()) {
                message = t.getClass().getSimpleName();
            }
            if (sb.indexOf(message) < 0) {
                if (sb.length() > 0) {
                    sb.append(": ");
                }
                sb.append(message);
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return sb.toString().replace('\n', ' ');
    }
}
