package io.github.djlamp.amp.verify;

import ai.djl.Device;
import ai.djl.ndarray.types.Shape;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.spi.MemoryLayout;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * What the check of one 16-bit kernel found, and what runs at that operation signature since: one
 * verdict per signature (operation, its settings, input shape, device, precision) for the life of
 * the process.
 */
public final class KernelVerdict {

    /** What the check decided. */
    public enum Outcome {
        /** The 16-bit kernel in the configured memory layout agrees with fp32: it runs. */
        VERIFIED,
        /** The configured layout's kernel is wrong, the other layout's is right: that one runs. */
        OTHER_LAYOUT,
        /** Every 16-bit candidate is wrong: the layer runs in fp32 at this signature. */
        FP32_FALLBACK,
        /**
         * The fp32 reference itself disagrees with a direct double-precision sum: nothing djl-amp
         * can fall back to is right, and the platform needs the cure its message names. The
         * configured 16-bit kernel runs, unverified.
         */
        PLATFORM_UNSOUND,
        /** The check could not run (its message says why): the configured kernel runs. */
        NOT_CHECKED
    }

    private final String operation;
    private final Shape inputShape;
    private final Device device;
    private final Precision precision;
    private final Outcome outcome;
    private final MemoryLayout layout;
    private final List<String> findings;
    private final Set<String> paths = Collections.synchronizedSet(new LinkedHashSet<>());
    private final boolean remembered;

    KernelVerdict(
            String operation,
            Shape inputShape,
            Device device,
            Precision precision,
            Outcome outcome,
            MemoryLayout layout,
            List<String> findings) {
        this(operation, inputShape, device, precision, outcome, layout, findings, false);
    }

    private KernelVerdict(
            String operation,
            Shape inputShape,
            Device device,
            Precision precision,
            Outcome outcome,
            MemoryLayout layout,
            List<String> findings,
            boolean remembered) {
        this.remembered = remembered;
        this.operation = operation;
        this.inputShape = inputShape;
        this.device = device;
        this.precision = precision;
        this.outcome = outcome;
        this.layout = layout;
        this.findings = Collections.unmodifiableList(new ArrayList<>(findings));
    }

    /**
     * Returns the operation and its settings, for example {@code Conv2d (kernel (5, 5), stride (1,
     * 1), padding (2, 2), dilation (1, 1), groups 1, weight (8, 1, 5, 5))}.
     *
     * @return the operation checked
     */
    public String getOperation() {
        return operation;
    }

    /**
     * Returns the input shape checked.
     *
     * @return the shape
     */
    public Shape getInputShape() {
        return inputShape;
    }

    /**
     * Returns the device checked.
     *
     * @return the device
     */
    public Device getDevice() {
        return device;
    }

    /**
     * Returns the 16-bit precision checked.
     *
     * @return bf16 or fp16
     */
    public Precision getPrecision() {
        return precision;
    }

    /**
     * Returns what the check decided.
     *
     * @return the outcome
     */
    public Outcome getOutcome() {
        return outcome;
    }

    /**
     * Returns whether the layer computes in 16 bits at this signature.
     *
     * @return false only after an fp32 fallback
     */
    public boolean runsLowPrecision() {
        return outcome != Outcome.FP32_FALLBACK;
    }

    /**
     * Returns the memory layout the 16-bit kernel runs in.
     *
     * @return the layout, or null after an fp32 fallback
     */
    public MemoryLayout getLayout() {
        return layout;
    }

    /**
     * Returns whether the platform needs attention: a wrong kernel was found (and avoided, where an
     * alternative was right) or the check could not run.
     *
     * @return true for every outcome but {@link Outcome#VERIFIED}
     */
    public boolean isDefectFound() {
        return outcome != Outcome.VERIFIED;
    }

    /**
     * Returns what the check found wrong, one line per candidate that failed (empty when verified).
     *
     * @return the findings
     */
    public List<String> getFindings() {
        return findings;
    }

    /**
     * Returns the paths of the layers of any wrapped model that ran this signature.
     *
     * @return the block paths, in the order they were met
     */
    public List<String> getPaths() {
        synchronized (paths) {
            return new ArrayList<>(paths);
        }
    }

    boolean addPath(String path) {
        return paths.add(path.isEmpty() ? "root" : path);
    }

    /**
     * Describes what now runs, in a few words.
     *
     * @return for example {@code bf16, contiguous} or {@code fp32 (fallback)}
     */
    public String describeChoice() {
        if (!runsLowPrecision()) {
            return "fp32 (fallback)";
        }
        // only images have a memory layout to choose
        String name =
                inputShape.dimension() != 4
                        ? ""
                        : layout == MemoryLayout.CHANNELS_LAST ? ", channels-last" : ", contiguous";
        return precision.shortName()
                + name
                + (outcome == Outcome.VERIFIED ? "" : " (" + outcome + ")");
    }

    /**
     * Returns whether this verdict was reached by an earlier JVM on this machine and libraries and
     * kept on disk ({@link RememberedVerdicts}), so no kernel was run to reach it here.
     *
     * @return true for a kept verdict
     */
    public boolean isRemembered() {
        return remembered;
    }

    /** The fields a kept verdict is written as: {@link #fromFields} reads them back. */
    List<String> toFields() {
        List<String> fields = new ArrayList<>();
        fields.add(operation);
        StringBuilder dims = new StringBuilder();
        for (long dim : inputShape.getShape()) {
            dims.append(dims.length() == 0 ? "" : ",").append(dim);
        }
        fields.add(dims.toString());
        fields.add(device.getDeviceType());
        fields.add(String.valueOf(device.getDeviceId()));
        fields.add(precision.name());
        fields.add(outcome.name());
        fields.add(layout == null ? "-" : layout.name());
        fields.addAll(findings);
        return fields;
    }

    /**
     * Reads a kept verdict back.
     *
     * @throws IllegalArgumentException when the fields are not what {@link #toFields} writes
     */
    static KernelVerdict fromFields(List<String> fields) {
        if (fields.size() < 7) {
            throw new IllegalArgumentException("a kernel verdict has 7 fields or more");
        }
        String dims = fields.get(1);
        long[] shape =
                dims.isEmpty()
                        ? new long[0]
                        : java.util.Arrays.stream(dims.split(",", -1))
                                .mapToLong(Long::parseLong)
                                .toArray();
        Outcome outcome = Outcome.valueOf(fields.get(5));
        MemoryLayout layout =
                fields.get(6).equals("-") ? null : MemoryLayout.valueOf(fields.get(6));
        if ((layout == null) != (outcome == Outcome.FP32_FALLBACK)) {
            throw new IllegalArgumentException(
                    "a kernel verdict's layout does not fit its outcome");
        }
        return new KernelVerdict(
                fields.get(0),
                new Shape(shape),
                Device.of(fields.get(2), Integer.parseInt(fields.get(3))),
                Precision.valueOf(fields.get(4)),
                outcome,
                layout,
                fields.subList(7, fields.size()),
                true);
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder();
        sb.append(operation)
                .append(" on input ")
                .append(inputShape)
                .append(", ")
                .append(device)
                .append(", ")
                .append(precision.shortName())
                .append(": ")
                .append(outcome)
                .append(" -> ")
                .append(describeChoice())
                .append(remembered ? " (kept from an earlier check)" : "");
        for (String finding : findings) {
            sb.append("; ").append(finding);
        }
        return sb.toString();
    }
}
