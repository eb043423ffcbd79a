package io.github.djlamp.amp.doctor;

import ai.djl.Device;
import ai.djl.engine.Engine;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import io.github.djlamp.amp.verify.KernelVerifier;
import io.github.djlamp.amp.verify.RememberedVerdicts;
import io.github.djlamp.amp.verify.VerdictMemory;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Finds, before a training job meets them, the kernels of this machine's engine that compute wrong
 * or kill the JVM: runs convolutions and a GEMM forward and backward in fp32, bf16 and fp16 in a
 * child JVM, where a native crash ends the child, not the caller.
 *
 * <pre>{@code
 * PlatformReport report = PlatformCheck.run();
 * System.out.println(report);       // one line when the platform is sound
 * if (!report.isSound()) { ... }    // report.advice(): the cure and the command that checks again
 * }</pre>
 *
 * <p>From the command line (exit status 0 when sound, 1 when a defect was found, 2 when the check
 * could not run; {@code -Dexec.args=--verbose} lists every case):
 *
 * <pre>
 * mvn -B -q -pl amp-doctor -am compile exec:java@platform-check
 * </pre>
 *
 * <p>The cases: the layers {@link io.github.djlamp.amp.verify.CanonicalKernels} checks (1 and 3
 * input channel convolutions, 5x5, 3x3 and 1x1 kernels, a GEMM) in fp32 through plain DJL, every
 * value of the output and of the input, weight and bias gradients compared with double-precision
 * sums; the same layers in bf16 through djl-amp's cast, in each memory layout, checked by {@link
 * KernelVerifier} against fp32; the 1x1 convolutions of a ResNet-50 bottleneck (where oneDNN was
 * seen to die with SIGFPE on some machines) in fp32 and bf16; and tiny layers in fp16, which CPUs
 * run slowly. The child prints a line as each case begins and ends; when it dies, the case that was
 * running is reported as crashed, with the exit code or signal and the problematic frame of the
 * JVM's error file, and a new child goes on with the next case.
 *
 * <p>Where a defect is found on a CPU, the check runs again with {@link #CURE} in the child's
 * environment and reports whether that cured it: on the machines where oneDNN (libtorch's CPU
 * kernels) was found wrong, it made every case right. The same class of defect upstream: PyTorch
 * issue 163347, OpenVINO issue 38256.
 */
public final class PlatformCheck {

    /** The environment variable of the cure. */
    public static final String CURE_VARIABLE = "ONEDNN_MAX_CPU_ISA";

    /** The cure's value: oneDNN's AVX2 kernels instead of its AVX-512 ones. */
    public static final String CURE_VALUE = "AVX2";

    /** The cure, as set in an environment: {@code ONEDNN_MAX_CPU_ISA=AVX2}. */
    public static final String CURE = KernelVerifier.CPU_CURE;

    /** The command, from the project's root, that runs the check and prints its report. */
    public static final String RECHECK_COMMAND =
            "mvn -B -q -pl amp-doctor -am compile exec:java@platform-check";

    /** How long one child JVM may run by default before it is killed. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofMinutes(5);

    private static final Logger logger = LoggerFactory.getLogger(PlatformCheck.class);

    private static PlatformReport cached;

    private final Duration timeout;
    private final boolean cure;
    private final String engine;
    private final String device;
    private final String suite;
    private final String classPath;
    private final Map<String, String> environment;

    private PlatformCheck(Builder builder) {
        this.timeout = builder.timeout;
        this.cure = builder.cure;
        this.engine = builder.engine;
        this.device = builder.device;
        this.suite = builder.suite;
        this.classPath = builder.classPath != null ? builder.classPath : ChildJvm.classPath();
        this.environment = new HashMap<>(builder.environment);
    }

    /**
     * Runs the check with the defaults: DJL's default engine and device, the cure re-run on a
     * defect, {@link #DEFAULT_TIMEOUT} per child JVM.
     *
     * @return the report
     */
    public static PlatformReport run() {
        return builder().build().check();
    }

    /**
     * Returns this machine's report: the one an earlier JVM kept on disk for the same machine,
     * libraries and ISA cap ({@link RememberedVerdicts}, with djl-amp's kernel verdicts), else the
     * check run now (its child JVMs) and kept. A JVM's environment, class path and machine do not
     * change, so neither does the report; {@code -Ddjlamp.verdicts=recheck} runs it again.
     *
     * @return the report
     */
    public static synchronized PlatformReport cached() {
        if (cached == null) {
            cached = keptOrRun();
        }
        return cached;
    }

    /** What {@link #cached()} keeps its report under, beside the key. */
    static final String CACHED_SIGNATURE =
            StandardSuite.class.getName() + "|default engine and device|cure re-run on a defect";

    private static PlatformReport keptOrRun() {
        AmpBackend backend;
        try {
            backend = AmpBackends.forEngine(Engine.getDefaultEngineName());
            backend.kernelEnvironment(); // the key needs it: an engine that cannot load runs alone
        } catch (RuntimeException e) {
            return run();
        }
        RememberedVerdicts memory = RememberedVerdicts.current();
        PlatformReport kept = KeptPlatformReport.recall(memory, backend, CACHED_SIGNATURE);
        if (kept != null) {
            logger.info(
                    "djl-amp: the platform check's report ({}) is the one kept for this machine"
                            + " and these libraries; no child JVM ran (-D{}=recheck runs it again)",
                    kept.getVerdict(),
                    VerdictMemory.PROPERTY);
            return kept;
        }
        PlatformReport report = run();
        KeptPlatformReport.remember(memory, backend, CACHED_SIGNATURE, report);
        return report;
    }

    /** Forgets this JVM's report, so that {@link #cached()} looks again: for tests. */
    static synchronized void forgetCached() {
        cached = null;
    }

    /**
     * Creates a builder.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Runs the check from the command line: prints the report and exits with 0 when the platform is
     * sound, 1 when a defect was found, 2 when the check could not run or an option is wrong.
     *
     * @param args {@code --verbose} to list every case, {@code --no-cure} to skip the re-run with
     *     the cure, {@code --help}
     */
    public static void main(String[] args) {
        int code = main(args, System.out);
        if (code != 0) {
            System.exit(code);
        }
    }

    static int main(String[] args, PrintStream out) {
        boolean verbose = false;
        Builder builder = builder();
        for (String arg : args) {
            switch (arg) {
                case "-v":
                case "--verbose":
                    verbose = true;
                    break;
                case "--no-cure":
                    builder.optCure(false);
                    break;
                case "-h":
                case "--help":
                    out.println(usage());
                    return 0;
                default:
                    out.println("platform-check: unknown option " + arg + "\n" + usage());
                    return 2;
            }
        }
        PlatformReport report = builder.build().check();
        out.println(verbose ? report.toDetailedString() : report.toString());
        out.flush();
        return report.exitCode();
    }

    private static String usage() {
        return "Usage: PlatformCheck [--verbose] [--no-cure]\n"
                + "Runs convolutions and a GEMM forward and backward in fp32, bf16 and fp16 in a"
                + " child JVM and reports\nthe kernels that compute wrong or kill the JVM, and"
                + " whether "
                + CURE
                + " cures them.\nExit status: 0 sound, 1 defects found, 2 not checked.\n"
                + "  --verbose  list every case\n"
                + "  --no-cure  do not re-run with "
                + CURE
                + " after a defect";
    }

    /**
     * Runs the cases in child JVMs and, after a defect on a CPU, again with {@link #CURE}.
     *
     * @return the report
     */
    public PlatformReport check() {
        long start = System.nanoTime();
        Path workDir;
        try {
            workDir = Files.createTempDirectory("djl-amp-platform-check");
        } catch (IOException e) {
            return new PlatformReport(
                    "?",
                    false,
                    "?",
                    List.of(),
                    List.of(),
                    "cannot create a temporary folder for the child JVM: " + oneLine(e),
                    PlatformReport.Cure.NOT_TRIED,
                    List.of(),
                    null,
                    seconds(start));
        }
        ChildJvm jvm = new ChildJvm(classPath, timeout, workDir);
        Pass first = pass(jvm, environment);
        PlatformReport.Cure outcome;
        Pass cured = null;
        if (first.cases.stream().noneMatch(PlatformCase::isDefect)) {
            outcome = PlatformReport.Cure.NOT_NEEDED;
        } else if (!cure) {
            outcome = PlatformReport.Cure.NOT_TRIED;
        } else if (!first.cpu) {
            outcome = PlatformReport.Cure.NOT_APPLICABLE;
        } else if (cureAlreadySet()) {
            outcome = PlatformReport.Cure.ALREADY_SET;
        } else {
            Map<String, String> withCure = new HashMap<>(environment);
            withCure.put(CURE_VARIABLE, CURE_VALUE);
            cured = pass(jvm, withCure);
            boolean right =
                    cured.problem == null
                            && !cured.cases.isEmpty()
                            && cured.cases.stream()
                                    .allMatch(c -> c.getStatus() == PlatformCase.Status.OK);
            outcome = right ? PlatformReport.Cure.VERIFIED : PlatformReport.Cure.DID_NOT_CURE;
        }
        cleanUp(workDir);
        return new PlatformReport(
                first.device,
                first.cpu,
                first.engine,
                first.cases,
                first.pids,
                first.problem,
                outcome,
                cured == null ? List.of() : cured.cases,
                cured == null ? null : cured.problem,
                seconds(start));
    }

    private boolean cureAlreadySet() {
        String value =
                environment.containsKey(CURE_VARIABLE)
                        ? environment.get(CURE_VARIABLE)
                        : System.getenv(CURE_VARIABLE);
        return CURE_VALUE.equalsIgnoreCase(value);
    }

    /** Every case once: a child, and after each crash a new child from the next case. */
    private Pass pass(ChildJvm jvm, Map<String, String> env) {
        Pass pass = new Pass();
        Map<String, String> plan = new LinkedHashMap<>();
        Map<String, PlatformCase> results = new HashMap<>();
        int from = 0;
        while (true) {
            List<String> args = new ArrayList<>(List.of("--suite", suite, "--from", "" + from));
            if (engine != null) {
                args.addAll(List.of("--engine", engine));
            }
            if (device != null) {
                args.addAll(List.of("--device", device));
            }
            ChildJvm.Outcome outcome;
            try {
                outcome = jvm.run(args, env);
            } catch (IOException e) {
                pass.problem = "cannot run a child JVM: " + oneLine(e);
                break;
            }
            pass.pids.add(outcome.pid);
            String running = null;
            String abort = null;
            for (String[] line : outcome.lines) {
                switch (line[0]) {
                    case "PLAN":
                        plan.putIfAbsent(line[1], line[2]);
                        break;
                    case "START":
                        pass.cpu = "cpu".equals(line[1]);
                        pass.engine = line[2] + " " + line[3];
                        pass.device = line[4];
                        break;
                    case "BEGIN":
                        running = line[1];
                        break;
                    case "CASE":
                        results.put(
                                line[1],
                                new PlatformCase(
                                        line[1],
                                        plan.getOrDefault(line[1], line[1]),
                                        status(line[2]),
                                        line[3]));
                        running = null;
                        break;
                    case "ABORT":
                        abort = line[1];
                        break;
                    default:
                        break;
                }
            }
            if (outcome.completed()) {
                break;
            }
            List<String> order = new ArrayList<>(plan.keySet());
            if (running != null && order.contains(running)) {
                results.put(
                        running,
                        new PlatformCase(
                                running,
                                plan.get(running),
                                outcome.timedOut
                                        ? PlatformCase.Status.TIMED_OUT
                                        : PlatformCase.Status.CRASHED,
                                ChildJvm.describeDeath(outcome, timeout)));
                from = order.indexOf(running) + 1;
                if (from < order.size()) {
                    continue;
                }
                break;
            }
            if (abort != null) {
                pass.problem = "the child JVM could not run the cases: " + abort;
            } else {
                pass.problem =
                        "the child JVM ended outside any case ("
                                + ChildJvm.describeDeath(outcome, timeout)
                                + ")";
            }
            break;
        }
        for (Map.Entry<String, String> e : plan.entrySet()) {
            PlatformCase c = results.get(e.getKey());
            pass.cases.add(
                    c != null
                            ? c
                            : new PlatformCase(
                                    e.getKey(), e.getValue(), PlatformCase.Status.NOT_RUN, ""));
        }
        if (plan.isEmpty() && pass.problem == null) {
            pass.problem = "the child JVM listed no case";
        }
        return pass;
    }

    private static PlatformCase.Status status(String name) {
        try {
            return PlatformCase.Status.valueOf(name);
        } catch (IllegalArgumentException e) {
            return PlatformCase.Status.FAILED;
        }
    }

    /** Deletes what the children left, but the JVM error files, which the report names. */
    private static void cleanUp(Path workDir) {
        boolean kept = false;
        try (DirectoryStream<Path> files = Files.newDirectoryStream(workDir)) {
            for (Path file : files) {
                if (file.getFileName().toString().startsWith("hs_err_")) {
                    kept = true;
                } else {
                    Files.deleteIfExists(file);
                }
            }
            if (!kept) {
                Files.deleteIfExists(workDir);
            }
        } catch (IOException e) {
            // a temporary folder left behind is no reason to lose the report
        }
    }

    private static double seconds(long start) {
        return (System.nanoTime() - start) / 1e9;
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
                sb.append(sb.length() == 0 ? "" : ": ").append(message);
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return sb.toString().replaceAll("\\s+", " ");
    }

    /** One pass over the cases. */
    private static final class Pass {
        final List<PlatformCase> cases = new ArrayList<>();
        final List<Long> pids = new ArrayList<>();
        String device = "?";
        String engine = "?";
        boolean cpu;
        String problem;
    }

    /** Configures a {@link PlatformCheck}. */
    public static final class Builder {

        private Duration timeout = DEFAULT_TIMEOUT;
        private boolean cure = true;
        private String engine;
        private String device;
        private String suite = StandardSuite.class.getName();
        private String classPath;
        private final Map<String, String> environment = new HashMap<>();

        Builder() {}

        /**
         * Sets how long one child JVM may run before it is killed and its running case reported as
         * timed out (default {@link PlatformCheck#DEFAULT_TIMEOUT}).
         *
         * @param timeout a positive duration
         * @return this builder
         */
        public Builder optTimeout(Duration timeout) {
            if (timeout.isNegative() || timeout.isZero()) {
                throw new IllegalArgumentException("optTimeout(" + timeout + "): must be positive");
            }
            this.timeout = timeout;
            return this;
        }

        /**
         * Sets whether a defect found on a CPU is followed by a re-run with {@link
         * PlatformCheck#CURE} in the child's environment (default true).
         *
         * @param cure false to skip the re-run
         * @return this builder
         */
        public Builder optCure(boolean cure) {
            this.cure = cure;
            return this;
        }

        /**
         * Sets the DJL engine the child runs the cases on (default: DJL's default engine), on its
         * default device.
         *
         * @param engine the engine name, e.g. {@code PyTorch}
         * @return this builder
         */
        public Builder optEngine(String engine) {
            this.engine = engine;
            return this;
        }

        /**
         * Runs the cases on {@code device} instead of the engine's default device: the tests of the
         * CPU cure run on the CPU on a GPU machine too.
         */
        Builder device(Device device) {
            this.device =
                    device.getDeviceId() < 0
                            ? device.getDeviceType()
                            : device.getDeviceType() + device.getDeviceId();
            return this;
        }

        /** Runs another suite's cases: the tests' deliberately crashing and wrong ones. */
        Builder suite(Class<? extends PlatformSuite> suite) {
            this.suite = suite.getName();
            return this;
        }

        /** Sets (or, with null, removes) an environment variable of the children. */
        Builder environment(String name, String value) {
            environment.put(Objects.requireNonNull(name), value);
            return this;
        }

        /** Sets the children's class path (default: this JVM's, see ChildJvm.classPath()). */
        Builder classPath(String classPath) {
            this.classPath = classPath;
            return this;
        }

        /**
         * Builds the check.
         *
         * @return the check, ready to {@link PlatformCheck#check()}
         */
        public PlatformCheck build() {
            return new PlatformCheck(this);
        }
    }
}
