package io.github.djlamp.amp.verify;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.TreeSet;

/**
 * What of the machine a kernel's verdict depends on, as one line per fact: the CPU (vendor, family,
 * model, stepping, microcode, flags), whether the kernel can see its cache topology (oneDNN's
 * blocking divides by cache sizes), the NVIDIA driver and GPU models, the OS and architecture. A
 * verdict kept on disk is reused only where every line is the same.
 */
final class MachineDescription {

    private static final Path CPU_INFO = Paths.get("/proc/cpuinfo");
    private static final Path NVIDIA = Paths.get("/proc/driver/nvidia");
    private static final List<String> CPU_FIELDS =
            Arrays.asList(
                    "vendor_id", "cpu family", "model", "model name", "stepping", "microcode");

    private static volatile String described;

    private MachineDescription() {}

    /** The description of this machine, read once per process. */
    static String current() {
        String result = described;
        if (result == null) {
            result = describe();
            described = result;
        }
        return result;
    }

    private static String describe() {
        List<String> lines = new ArrayList<>();
        lines.add("os " + System.getProperty("os.name") + " " + System.getProperty("os.arch"));
        lines.addAll(cpu());
        lines.add(
                "cpu cache topology "
                        + (CacheTopology.isVisible(CacheTopology.CPU0_CACHE)
                                ? "visible"
                                : "hidden"));
        lines.addAll(nvidia());
        return String.join("\n", lines);
    }

    private static List<String> cpu() {
        List<String> lines = new ArrayList<>();
        List<String> info;
        try {
            info = Files.readAllLines(CPU_INFO);
        } catch (IOException | RuntimeException e) {
            lines.add("cpu unknown");
            return lines;
        }
        for (String line : info) {
            if (line.isBlank()) {
                break; // the first processor speaks for all
            }
            int colon = line.indexOf(':');
            if (colon < 0) {
                continue;
            }
            String name = line.substring(0, colon).trim();
            String value = line.substring(colon + 1).trim();
            if (CPU_FIELDS.contains(name)) {
                lines.add("cpu " + name + " " + value);
            } else if (name.equals("flags")) {
                lines.add(
                        "cpu flags "
                                + String.join(
                                        " ",
                                        new TreeSet<>(
                                                Arrays.asList(
                                                        value.toLowerCase(Locale.ROOT)
                                                                .split("\\s+")))));
            }
        }
        return lines;
    }

    private static List<String> nvidia() {
        List<String> lines = new ArrayList<>();
        try {
            Path version = NVIDIA.resolve("version");
            if (Files.isReadable(version)) {
                lines.add("nvidia driver " + Files.readAllLines(version).get(0).trim());
            }
            Path gpus = NVIDIA.resolve("gpus");
            if (Files.isDirectory(gpus)) {
                TreeSet<String> models = new TreeSet<>();
                try (DirectoryStream<Path> each = Files.newDirectoryStream(gpus)) {
                    for (Path gpu : each) {
                        for (String line : Files.readAllLines(gpu.resolve("information"))) {
                            if (line.startsWith("Model:")) {
                                models.add(gpu.getFileName() + " " + line.substring(6).trim());
                            }
                        }
                    }
                }
                for (String model : models) {
                    lines.add("nvidia gpu " + model);
                }
            }
        } catch (IOException | RuntimeException e) {
            lines.add("nvidia unreadable");
        }
        return lines;
    }
}
