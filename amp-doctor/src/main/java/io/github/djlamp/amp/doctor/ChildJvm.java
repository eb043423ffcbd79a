package io.github.djlamp.amp.doctor;

import java.io.File;
import java.io.IOException;
import java.net.URISyntaxException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Starts {@link PlatformChild} in a child JVM (the same java binary, this JVM's class path and the
 * system properties DJL reads) and collects what it printed and how it ended.
 */
final class ChildJvm {

    /** How a child ended. */
    static final class Outcome {
        final long pid;
        final int exitCode;
        final boolean timedOut;
        final List<String[]> lines;
        final String lastError;
        final Path errorFile;

        Outcome(
                long pid,
                int exitCode,
                boolean timedOut,
                List<String[]> lines,
                String lastError,
                Path errorFile) {
            this.pid = pid;
            this.exitCode = exitCode;
            this.timedOut = timedOut;
            this.lines = lines;
            this.lastError = lastError;
            this.errorFile = errorFile;
        }

        /** Whether the child ran every case it was given and exited normally. */
        boolean completed() {
            return !timedOut
                    && exitCode == 0
                    && !lines.isEmpty()
                    && "END".equals(lines.get(lines.size() - 1)[0]);
        }
    }

    private static final String[] SIGNALS = {
        null, "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE",
        "SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM"
    };

    private final String classPath;
    private final Duration timeout;
    private final Path workDir;

    ChildJvm(String classPath, Duration timeout, Path workDir) {
        this.classPath = classPath;
        this.timeout = timeout;
        this.workDir = workDir;
    }

    /**
     * Runs the child and waits for it.
     *
     * @param args the child's arguments
     * @param environment variables to set (a null value removes one) on top of this JVM's
     * @return how it ended
     * @throws IOException if the child cannot be started or its output read
     */
    Outcome run(List<String> args, Map<String, String> environment) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(javaBinary());
        command.add("-XX:ErrorFile=" + workDir.resolve("hs_err_%p.log"));
        command.add("-XX:-CreateCoredumpOnCrash");
        command.add("-XX:+UseSerialGC");
        command.addAll(systemProperties());
        command.add("-cp");
        command.add(classPath);
        command.add(PlatformChild.class.getName());
        command.addAll(args);
        Path stdout = Files.createTempFile(workDir, "child", ".out");
        Path stderr = Files.createTempFile(workDir, "child", ".err");
        ProcessBuilder builder =
                new ProcessBuilder(command)
                        .directory(workDir.toFile())
                        .redirectOutput(stdout.toFile())
                        .redirectError(stderr.toFile());
        for (Map.Entry<String, String> e : environment.entrySet()) {
            if (e.getValue() == null) {
                builder.environment().remove(e.getKey());
            } else {
                builder.environment().put(e.getKey(), e.getValue());
            }
        }
        Process process = builder.start();
        boolean timedOut = false;
        try {
            if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                timedOut = true;
                process.destroyForcibly();
                process.waitFor();
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while the platform check's child JVM ran", e);
        }
        List<String[]> lines = new ArrayList<>();
        for (String line : Files.readAllLines(stdout, StandardCharsets.UTF_8)) {
            if (line.startsWith(PlatformChild.PREFIX + " ")) {
                lines.add(parse(line.substring(PlatformChild.PREFIX.length() + 1)));
            }
        }
        String lastError = lastLine(Files.readAllLines(stderr, StandardCharsets.UTF_8));
        Files.deleteIfExists(stdout);
        Files.deleteIfExists(stderr);
        Path errorFile = workDir.resolve("hs_err_" + process.pid() + ".log");
        return new Outcome(
                process.pid(),
                process.exitValue(),
                timedOut,
                lines,
                lastError,
                Files.exists(errorFile) ? errorFile : null);
    }

    /** Splits a protocol line into its kind and fields; the last field keeps its spaces. */
    static String[] parse(String line) {
        String kind = line.split(" ", 2)[0];
        int fields;
        switch (kind) {
            case "PLAN":
            case "BEGIN":
                fields = 3;
                break;
            case "CASE":
                fields = 4;
                break;
            case "START":
                fields = 5;
                break;
            default:
                fields = 2;
        }
        String[] parts = line.split(" ", fields);
        String[] padded = new String[fields];
        for (int i = 0; i < fields; i++) {
            padded[i] = i < parts.length ? parts[i] : "";
        }
        return padded;
    }

    /**
     * Describes how a child died: the signal or exit code, and from the JVM's error file the signal
     * it caught and the problematic frame.
     */
    static String describeDeath(Outcome outcome, Duration timeout) {
        if (outcome.timedOut) {
            return "still running after " + timeout.toSeconds() + " s: the child JVM was killed";
        }
        List<String> report =
                outcome.errorFile == null ? List.of() : errorFileSummary(outcome.errorFile);
        StringBuilder sb = new StringBuilder("the JVM died");
        if (!report.isEmpty() && report.get(0).startsWith("SIG")) {
            sb.append(" on ").append(report.get(0)).append(", exit code ").append(outcome.exitCode);
            report = report.subList(1, report.size());
        } else if (outcome.exitCode > 128 && outcome.exitCode - 128 < SIGNALS.length) {
            sb.append(", killed by ")
                    .append(SIGNALS[outcome.exitCode - 128])
                    .append(" (exit code ")
                    .append(outcome.exitCode)
                    .append(')');
        } else {
            sb.append(" with exit code ").append(outcome.exitCode);
        }
        for (String line : report) {
            sb.append("; ").append(line);
        }
        if (outcome.errorFile != null) {
            sb.append("; JVM error file ").append(outcome.errorFile);
        } else if (outcome.lastError != null) {
            sb.append("; its last words: ").append(outcome.lastError);
        }
        return sb.toString();
    }

    /**
     * Reads from a JVM error file (hs_err) the signal it caught, for example {@code SIGFPE (0x8)},
     * and the problematic frame.
     */
    static List<String> errorFileSummary(Path errorFile) {
        List<String> found = new ArrayList<>();
        List<String> lines;
        try {
            lines = Files.readAllLines(errorFile, StandardCharsets.ISO_8859_1);
        } catch (IOException e) {
            return found;
        }
        for (int i = 0; i < lines.size(); i++) {
            String line = uncomment(lines.get(i));
            if (found.isEmpty() && line.matches("SIG[A-Z]+ \\(0x[0-9a-f]+\\).*")) {
                int at = line.indexOf(" at pc=");
                String signal = at < 0 ? line : line.substring(0, at);
                int sentBy = line.indexOf("(sent by");
                found.add(
                        signal
                                + (sentBy < 0
                                        ? ""
                                        : " "
                                                + line.substring(
                                                        sentBy, line.indexOf(')', sentBy) + 1)));
            }
            if (line.startsWith("Problematic frame:") && i + 1 < lines.size()) {
                found.add("Problematic frame: " + uncomment(lines.get(i + 1)));
                break;
            }
        }
        return found;
    }

    private static String uncomment(String line) {
        String s = line.startsWith("#") ? line.substring(1) : line;
        return s.strip().replaceAll("\\s+", " ");
    }

    private static String lastLine(List<String> lines) {
        for (int i = lines.size() - 1; i >= 0; i--) {
            if (!lines.get(i).isBlank()) {
                return lines.get(i).strip();
            }
        }
        return null;
    }

    /** The java binary this JVM runs. */
    static String javaBinary() {
        return ProcessHandle.current()
                .info()
                .command()
                .filter(c -> Files.isExecutable(Paths.get(c)))
                .orElse(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    }

    /**
     * The class path of the code that runs the check: the URLs of its class loader where that is a
     * URL class loader (as under Maven's exec:java, whose JVM's own class path is Maven's), else
     * {@code java.class.path}; as absolute paths, since the child runs in another directory.
     */
    static String classPath() {
        List<String> entries = new ArrayList<>();
        ClassLoader loader = ChildJvm.class.getClassLoader();
        if (loader instanceof URLClassLoader) {
            for (URL url : ((URLClassLoader) loader).getURLs()) {
                if ("file".equals(url.getProtocol())) {
                    try {
                        entries.add(Paths.get(url.toURI()).toAbsolutePath().toString());
                    } catch (URISyntaxException | IllegalArgumentException e) {
                        entries.add(url.getPath());
                    }
                }
            }
        }
        if (entries.isEmpty()) {
            Stream.of(System.getProperty("java.class.path", "").split(File.pathSeparator))
                    .filter(s -> !s.isEmpty())
                    .map(s -> Paths.get(s).toAbsolutePath().toString())
                    .forEach(entries::add);
        }
        return String.join(File.pathSeparator, entries);
    }

    /**
     * The system properties of this JVM that DJL, its engines, its logging and djl-amp read (where
     * and whether verdicts are kept: the children's kernel checks keep theirs as this JVM would).
     */
    static List<String> systemProperties() {
        List<String> options = new ArrayList<>();
        Properties properties = System.getProperties();
        boolean logLevel = false;
        for (String name : properties.stringPropertyNames()) {
            if (name.startsWith("ai.djl.")
                    || name.startsWith("DJL_")
                    || name.startsWith("ENGINE_")
                    || name.startsWith("PYTORCH_")
                    || name.startsWith("jna.")
                    || name.startsWith("djlamp.")
                    || name.startsWith("org.slf4j.")
                    || name.equals("java.library.path")) {
                options.add("-D" + name + "=" + properties.getProperty(name));
                logLevel |= name.equals("org.slf4j.simpleLogger.defaultLogLevel");
            }
        }
        if (!logLevel) {
            options.add("-Dorg.slf4j.simpleLogger.defaultLogLevel=error");
        }
        return options;
    }
}
