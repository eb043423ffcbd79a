package io.github.djlamp.amp.doctor;

import ai.djl.Device;
import io.github.djlamp.amp.policy.Precision;
import io.github.djlamp.amp.verify.KernelVerdict;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * What one training run of the {@link AmpDoctor} measured: one precision, the same model, data,
 * order and seed as the other runs.
 *
 * <p>Per-step lists all have one entry per training step, in order, step 0 first.
 */
public final class RunResult {

    private final Device device;
    private final String policyName;
    private final String checkpointing;
    private final Precision precision;
    private final boolean mixedPrecision;
    private final String lossScaling;
    private final List<KernelVerdict> kernelVerdicts;
    private final int epochs;
    private final int warmupSteps;
    private final long imagesTrained;
    private final double imagesPerSecond;
    private final double trainSeconds;
    private final double evalSeconds;
    private final long peakMemoryBytes;
    private final long stepMemoryBytes;
    private final String memoryMethod;
    private final double testAccuracy;
    private final List<Float> losses;
    private final List<Float> lossScales;
    private final List<Integer> skippedSteps;
    private final List<Double> stepMillis;

    private RunResult(Builder b) {
        this.device = b.device;
        this.policyName = b.policyName;
        this.checkpointing = b.checkpointing;
        this.precision = b.precision;
        this.mixedPrecision = b.mixedPrecision;
        this.lossScaling = b.lossScaling;
        this.kernelVerdicts = Collections.unmodifiableList(new ArrayList<>(b.kernelVerdicts));
        this.epochs = b.epochs;
        this.warmupSteps = b.warmupSteps;
        this.imagesTrained = b.imagesTrained;
        this.imagesPerSecond = b.imagesPerSecond;
        this.trainSeconds = b.trainSeconds;
        this.evalSeconds = b.evalSeconds;
        this.peakMemoryBytes = b.peakMemoryBytes;
        this.stepMemoryBytes = b.stepMemoryBytes;
        this.memoryMethod = b.memoryMethod;
        this.testAccuracy = b.testAccuracy;
        this.losses = Collections.unmodifiableList(new ArrayList<>(b.losses));
        this.lossScales = Collections.unmodifiableList(new ArrayList<>(b.lossScales));
        this.skippedSteps = Collections.unmodifiableList(new ArrayList<>(b.skippedSteps));
        this.stepMillis = Collections.unmodifiableList(new ArrayList<>(b.stepMillis));
    }

    static Builder builder() {
        return new Builder();
    }

    /**
     * Returns the device the run trained on (the first, when there were several).
     *
     * @return the device
     */
    public Device getDevice() {
        return device;
    }

    /**
     * Returns the precision policy the run was asked for, e.g. {@code float32} or {@code auto}.
     *
     * @return the policy name as given
     */
    public String getPolicyName() {
        return policyName;
    }

    /**
     * Returns the precision the run computed in ({@code auto} resolved for the device).
     *
     * @return the compute precision
     */
    public Precision getPrecision() {
        return precision;
    }

    /**
     * Returns whether the run went through djl-amp; the fp32 baseline runs through plain DJL.
     *
     * @return true for a mixed precision run
     */
    public boolean isMixedPrecision() {
        return mixedPrecision;
    }

    /**
     * Returns a short label for tables and charts: the precision, and the policy when it was {@code
     * auto}, e.g. {@code fp32} or {@code bf16 (auto)}.
     *
     * @return the label
     */
    public String getLabel() {
        String name = precision.shortName();
        String label = "auto".equals(policyName) ? name + " (auto)" : name;
        return checkpointing == null ? label : label + " ckpt " + checkpointing;
    }

    /**
     * Returns the activation checkpointing of the run ({@code AmpOptions} checkpointing).
     *
     * @return its text form, e.g. {@code stages}, or null when nothing was checkpointed
     */
    public String getCheckpointing() {
        return checkpointing;
    }

    /**
     * Returns a label usable as a file or column name, e.g. {@code fp32} or {@code auto_bf16}.
     *
     * @return letters, digits and underscores only
     */
    public String getKey() {
        String name = precision.shortName();
        String key = "auto".equals(policyName) ? "auto_" + name : name;
        return checkpointing == null
                ? key
                : key + "_ckpt_" + checkpointing.replaceAll("[^A-Za-z0-9]", "_");
    }

    /**
     * Returns the loss scaling in force, e.g. {@code none} or the dynamic scaler's settings.
     *
     * @return a description
     */
    public String getLossScaling() {
        return lossScaling;
    }

    /**
     * Returns the kernel checks' verdicts for this run's model (empty for the plain fp32 run).
     *
     * @return the verdicts, in the order checked
     */
    public List<KernelVerdict> getKernelVerdicts() {
        return kernelVerdicts;
    }

    /**
     * Returns what the kernel checks found, in a few words.
     *
     * @return for example {@code 22 checked, all right}, {@code 5 checked, 1 fell back to fp32}, or
     *     {@code -} for a run without 16-bit kernels
     */
    public String describeKernelChecks() {
        if (kernelVerdicts.isEmpty()) {
            return "-";
        }
        long fallback = kernelVerdicts.stream().filter(v -> !v.runsLowPrecision()).count();
        long other =
                kernelVerdicts.stream()
                        .filter(v -> v.runsLowPrecision() && v.isDefectFound())
                        .count();
        if (fallback + other == 0) {
            return kernelVerdicts.size() + " checked, all right";
        }
        return kernelVerdicts.size()
                + " checked, "
                + (fallback > 0 ? fallback + " fell back to fp32" : "")
                + (fallback > 0 && other > 0 ? ", " : "")
                + (other > 0 ? other + " other layout or unsound" : "");
    }

    /**
     * Returns whether the loss was scaled in this run.
     *
     * @return false for {@code none}
     */
    public boolean isLossScaled() {
        return !"none".equals(lossScaling);
    }

    /**
     * Returns the number of epochs trained.
     *
     * @return epochs
     */
    public int getEpochs() {
        return epochs;
    }

    /**
     * Returns the number of training steps (optimizer steps, skipped ones included).
     *
     * @return steps
     */
    public int getSteps() {
        return losses.size();
    }

    /**
     * Returns the number of first steps left out of the throughput.
     *
     * @return warm-up steps; 0 when the run was too short to leave any out
     */
    public int getWarmupSteps() {
        return warmupSteps;
    }

    /**
     * Returns the number of images trained on, warm-up included.
     *
     * @return images
     */
    public long getImagesTrained() {
        return imagesTrained;
    }

    /**
     * Returns the training throughput after the warm-up: images over the wall time of whole steps
     * (fetching the batch, forward, backward, optimizer).
     *
     * @return images per second
     */
    public double getImagesPerSecond() {
        return imagesPerSecond;
    }

    /**
     * Returns the wall time of the training loop, warm-up included, evaluation excluded.
     *
     * @return seconds
     */
    public double getTrainSeconds() {
        return trainSeconds;
    }

    /**
     * Returns the wall time of the evaluation on the test set.
     *
     * @return seconds
     */
    public double getEvalSeconds() {
        return evalSeconds;
    }

    /**
     * Returns the most memory in use during any training step of the run: on a CPU the whole
     * process (JVM, engine, data, model and the step itself), on a GPU the device. What is measured
     * is in {@link #getMemoryMethod()}.
     *
     * @return bytes, or -1 when not measured
     */
    public long getPeakMemoryBytes() {
        return peakMemoryBytes;
    }

    /**
     * Returns the peak memory of a training step: what a step adds at its peak (activations,
     * gradients, casts, temporaries) to the memory in use before it. Measured on {@value
     * AmpDoctor#MEMORY_STEPS} extra steps after the evaluation, each started after freed native
     * memory was handed back (glibc's {@code malloc_trim} on a CPU, libtorch's CUDA {@code
     * emptyCache} on a GPU), so that memory cached by earlier steps or runs does not hide it; the
     * largest of them.
     *
     * @return bytes, or -1 when not measured (on a GPU: when the engine's caching allocator could
     *     not be emptied before the step)
     */
    public long getStepMemoryBytes() {
        return stepMemoryBytes;
    }

    /**
     * Returns how memory was measured.
     *
     * @return one short sentence
     */
    public String getMemoryMethod() {
        return memoryMethod;
    }

    /**
     * Returns the accuracy on the test set after the last epoch.
     *
     * @return a fraction in [0, 1], or NaN when no test set was given
     */
    public double getTestAccuracy() {
        return testAccuracy;
    }

    /**
     * Returns the training loss of each step, unscaled (the user's loss on the step's batch).
     *
     * @return one value per step
     */
    public List<Float> getLosses() {
        return losses;
    }

    /**
     * Returns the loss scale after each step (1 throughout when the loss is not scaled).
     *
     * @return one value per step
     */
    public List<Float> getLossScales() {
        return lossScales;
    }

    /**
     * Returns the indices of the steps whose update was skipped for non-finite gradients.
     *
     * @return step indices, ascending
     */
    public List<Integer> getSkippedSteps() {
        return skippedSteps;
    }

    /**
     * Returns the number of skipped steps.
     *
     * @return skipped steps
     */
    public int getSkippedCount() {
        return skippedSteps.size();
    }

    /**
     * Returns the wall time of each step.
     *
     * @return milliseconds, one value per step
     */
    public List<Double> getStepMillis() {
        return stepMillis;
    }

    /**
     * Returns the median wall time of the steps after the warm-up: unlike the mean behind {@link
     * #getImagesPerSecond()}, it barely moves when other processes hold the machine for a moment.
     *
     * @return milliseconds, or NaN when there were no steps
     */
    public double getMedianStepMillis() {
        List<Double> measured =
                stepMillis.size() > warmupSteps
                        ? stepMillis.subList(warmupSteps, stepMillis.size())
                        : stepMillis;
        if (measured.isEmpty()) {
            return Double.NaN;
        }
        double[] sorted = measured.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        int mid = sorted.length / 2;
        return sorted.length % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
    }

    /**
     * Returns the smallest loss scale of the run.
     *
     * @return the minimum scale, 1 when the loss is not scaled or there were no steps
     */
    public float getMinLossScale() {
        return (float) lossScales.stream().mapToDouble(Float::doubleValue).min().orElse(1);
    }

    /**
     * Returns the largest loss scale of the run.
     *
     * @return the maximum scale, 1 when the loss is not scaled or there were no steps
     */
    public float getMaxLossScale() {
        return (float) lossScales.stream().mapToDouble(Float::doubleValue).max().orElse(1);
    }

    /**
     * Returns the loss scale after the last step.
     *
     * @return the final scale, 1 when the loss is not scaled or there were no steps
     */
    public float getFinalLossScale() {
        return lossScales.isEmpty() ? 1f : lossScales.get(lossScales.size() - 1);
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return String.format(
                "%s: %.1f img/s, test accuracy %.4f, %d steps, %d skipped",
                getLabel(), imagesPerSecond, testAccuracy, getSteps(), getSkippedCount());
    }

    /** Collects a run's measurements. */
    static final class Builder {
        Device device;
        String policyName;
        String checkpointing;
        Precision precision;
        boolean mixedPrecision;
        String lossScaling = "none";
        int epochs;
        int warmupSteps;
        long imagesTrained;
        double imagesPerSecond;
        double trainSeconds;
        double evalSeconds;
        long peakMemoryBytes = -1;
        long stepMemoryBytes = -1;
        String memoryMethod = "not measured";
        double testAccuracy = Double.NaN;
        final List<Float> losses = new ArrayList<>();
        final List<Float> lossScales = new ArrayList<>();
        final List<Integer> skippedSteps = new ArrayList<>();
        final List<Double> stepMillis = new ArrayList<>();
        final List<KernelVerdict> kernelVerdicts = new ArrayList<>();

        RunResult build() {
            return new RunResult(this);
        }
    }
}
