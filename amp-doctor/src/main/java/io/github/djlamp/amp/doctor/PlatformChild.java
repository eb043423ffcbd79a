package io.github.djlamp.amp.doctor;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDManager;
import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.spi.AmpBackends;
import java.io.PrintStream;
import java.lang.reflect.Constructor;
import java.util.List;

/**
 * The program {@link PlatformCheck} runs in a child JVM: runs a suite's cases one by one and prints
 * one line per event on standard output, flushed at once, so that when a kernel kills the JVM the
 * parent knows which case was running.
 *
 * <pre>
 * djl-amp-platform PLAN &lt;id&gt; &lt;description&gt;      (every case, in order, first)
 * djl-amp-platform START &lt;device type&gt; &lt;engine&gt; &lt;version&gt; &lt;device&gt;
 * djl-amp-platform BEGIN &lt;id&gt;
 * djl-amp-platform CASE &lt;id&gt; OK|WRONG|FAILED &lt;detail&gt;
 * djl-amp-platform END
 * djl-amp-platform ABORT &lt;why the cases could not run&gt;
 * </pre>
 *
 * <p>Arguments: {@code --suite <class>} (default {@link StandardSuite}), {@code --from <index>}
 * (the first case to run, after a crash of an earlier child), {@code --engine <name>}, {@code
 * --device <name>} (a name {@link Device#fromName(String)} reads, such as {@code cpu} or {@code
 * gpu0}; default: the engine's default device).
 */
final class PlatformChild {

    static final String PREFIX = "djl-amp-platform";

    private PlatformChild() {}

    /**
     * Runs the cases and exits: 0 after every case ran, 3 when they could not run.
     *
     * @param args the arguments
     */
    public static void main(String[] args) {
        System.exit(run(args, System.out));
    }

    static int run(String[] args, PrintStream out) {
        String suiteName = StandardSuite.class.getName();
        int from = 0;
        String engineName = null;
        String deviceName = null;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--suite":
                    suiteName = args[i + 1];
                    break;
                case "--from":
                    from = Integer.parseInt(args[i + 1]);
                    break;
                case "--engine":
                    engineName = args[i + 1];
                    break;
                case "--device":
                    deviceName = args[i + 1];
                    break;
                default:
                    line(out, "ABORT", "unknown argument " + args[i]);
                    return 3;
            }
        }
        List<KernelCase> cases;
        try {
            cases = suite(suiteName).cases();
        } catch (ReflectiveOperationException | RuntimeException e) {
            line(out, "ABORT", "no suite " + suiteName + ": " + PlatformCheck.oneLine(e));
            return 3;
        }
        for (KernelCase c : cases) {
            line(out, "PLAN", c.id(), c.description());
        }
        try {
            Engine engine =
                    engineName == null ? Engine.getInstance() : Engine.getEngine(engineName);
            Device device =
                    deviceName == null ? engine.defaultDevice() : Device.fromName(deviceName);
            try (NDManager manager = engine.newBaseManager(device)) {
                AmpBackend backend = AmpBackends.forManager(manager);
                line(
                        out,
                        "START",
                        device.getDeviceType(),
                        engine.getEngineName(),
                        engine.getVersion(),
                        device.toString());
                KernelCase.Context context = new KernelCase.Context(manager, device, backend);
                for (int i = from; i < cases.size(); i++) {
                    KernelCase c = cases.get(i);
                    line(out, "BEGIN", c.id());
                    KernelCase.Result result;
                    long started = System.nanoTime();
                    try {
                        result = c.run(context);
                    } catch (Exception | Error e) {
                        result = KernelCase.Result.failed(PlatformCheck.oneLine(e));
                    }
                    long millis = (System.nanoTime() - started) / 1_000_000;
                    line(
                            out,
                            "CASE",
                            c.id(),
                            result.status.name(),
                            result.detail + " [" + millis + " ms]");
                }
            }
        } catch (RuntimeException | Error e) {
            line(out, "ABORT", PlatformCheck.oneLine(e));
            return 3;
        }
        line(out, "END");
        return 0;
    }

    private static PlatformSuite suite(String name) throws ReflectiveOperationException {
        Class<?> type = Class.forName(name);
        if (!PlatformSuite.class.isAssignableFrom(type)) {
            throw new IllegalArgumentException(name + " is not a platform suite");
        }
        Constructor<?> constructor = type.getDeclaredConstructor();
        constructor.setAccessible(true);
        return (PlatformSuite) constructor.newInstance();
    }

    private static void line(PrintStream out, String... fields) {
        StringBuilder sb = new StringBuilder(PREFIX);
        for (String field : fields) {
            sb.append(' ').append(field.replaceAll("\\s+", " ").strip());
        }
        out.println(sb);
        out.flush();
    }
}
