package io.github.djlamp.amp.doctor;

import io.github.djlamp.amp.spi.AmpBackend;
import io.github.djlamp.amp.verify.RememberedVerdicts;
import io.github.djlamp.amp.verify.VerdictMemory;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link PlatformReport} kept on disk with djl-amp's other verdicts ({@link RememberedVerdicts}),
 * under the same key (machine, libraries, ISA cap in force, check version), so that a later JVM
 * reuses it instead of running the platform check's child JVMs again. A report whose check could
 * not run is not kept.
 */
final class KeptPlatformReport {

    /** The kind of record of a platform report. */
    static final String KIND = "platform";

    /**
     * The version of the platform check's cases and verdict: a change to the suite or to what it
     * decides must change it, so that reports of an older check are not reused.
     */
    static final int VERSION = 1;

    private static final Logger logger = LoggerFactory.getLogger(KeptPlatformReport.class);

    private KeptPlatformReport() {}

    /** The report kept for {@code signature}, or null when none is kept or it does not read. */
    static PlatformReport recall(RememberedVerdicts memory, AmpBackend backend, String signature) {
        if (memory.getMemory() != VerdictMemory.REMEMBER) {
            return null;
        }
        String key = RememberedVerdicts.keyFor(backend);
        List<String> fields = memory.recall(key, KIND, signature(signature));
        if (fields == null) {
            return null;
        }
        try {
            return fromFields(fields);
        } catch (RuntimeException e) {
            logger.warn(
                    "djl-amp: ignoring a kept platform report in {} that does not read ({}); the"
                            + " platform is checked again",
                    memory.fileFor(key),
                    e.toString());
            return null;
        }
    }

    /** Keeps {@code report} for {@code signature}, unless its check could not run. */
    static void remember(
            RememberedVerdicts memory,
            AmpBackend backend,
            String signature,
            PlatformReport report) {
        if (report.getVerdict() == PlatformReport.Verdict.NOT_CHECKED) {
            return;
        }
        String key = RememberedVerdicts.keyFor(backend);
        memory.remember(key, KIND, signature(signature), toFields(report));
        // what the engine reads before its first kernel, to cure the platform in-process
        boolean curable =
                report.getVerdict() == PlatformReport.Verdict.DEFECTS_FOUND
                        && report.getCure() == PlatformReport.Cure.VERIFIED;
        memory.remember(
                key,
                RememberedVerdicts.PLATFORM_VERDICT,
                report.getDevice(),
                List.of(
                        curable ? RememberedVerdicts.PLATFORM_UNSOUND_CURABLE : "no-known-cure",
                        report.getCure().name()));
    }

    private static String signature(String signature) {
        return "platform check " + VERSION + "|" + signature;
    }

    static List<String> toFields(PlatformReport report) {
        List<String> fields = new ArrayList<>();
        fields.add(report.getDevice());
        fields.add(String.valueOf(report.isCpu()));
        fields.add(report.getEngine());
        fields.add(report.getProblem() == null ? "" : "problem " + report.getProblem());
        fields.add(report.getCure().name());
        fields.add(report.getCureProblem() == null ? "" : "problem " + report.getCureProblem());
        fields.add(String.valueOf(report.getSeconds()));
        addCases(fields, report.getCases());
        addCases(fields, report.getCureCases());
        return fields;
    }

    static PlatformReport fromFields(List<String> fields) {
        int[] at = {7};
        List<PlatformCase> cases = cases(fields, at);
        List<PlatformCase> cureCases = cases(fields, at);
        if (at[0] != fields.size()) {
            throw new IllegalArgumentException("a platform report has fields left over");
        }
        String cpu = fields.get(1);
        if (!cpu.equals("true") && !cpu.equals("false")) {
            throw new IllegalArgumentException("'cpu' is true or false, got " + cpu);
        }
        return new PlatformReport(
                fields.get(0),
                Boolean.parseBoolean(cpu),
                fields.get(2),
                cases,
                List.of(),
                problem(fields.get(3)),
                PlatformReport.Cure.valueOf(fields.get(4)),
                cureCases,
                problem(fields.get(5)),
                Double.parseDouble(fields.get(6)));
    }

    private static void addCases(List<String> fields, List<PlatformCase> cases) {
        fields.add(String.valueOf(cases.size()));
        for (PlatformCase c : cases) {
            fields.add(c.getId());
            fields.add(c.getDescription());
            fields.add(c.getStatus().name());
            fields.add(c.getDetail());
        }
    }

    private static List<PlatformCase> cases(List<String> fields, int[] at) {
        int count = Integer.parseInt(fields.get(at[0]++));
        if (count < 0 || at[0] + 4L * count > fields.size()) {
            throw new IllegalArgumentException("a platform report lists more cases than it has");
        }
        List<PlatformCase> cases = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            cases.add(
                    new PlatformCase(
                            fields.get(at[0]),
                            fields.get(at[0] + 1),
                            PlatformCase.Status.valueOf(fields.get(at[0] + 2)),
                            fields.get(at[0] + 3)));
            at[0] += 4;
        }
        return cases;
    }

    private static String problem(String field) {
        if (field.isEmpty()) {
            return null;
        }
        if (!field.startsWith("problem ")) {
            throw new IllegalArgumentException("a problem field starts with 'problem '");
        }
        return field.substring("problem ".length());
    }
}
