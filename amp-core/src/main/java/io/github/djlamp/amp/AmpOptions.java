package io.github.djlamp.amp;

import ai.djl.Device;
import io.github.djlamp.amp.policy.Checkpointing;
import io.github.djlamp.amp.scale.LossScaling;
import io.github.djlamp.amp.verify.RememberedVerdicts;
import io.github.djlamp.amp.verify.VerdictMemory;
import java.nio.file.Path;
import java.util.Objects;

/**
 * Training options of mixed precision beyond the policy: the loss scaling, gradient accumulation
 * for {@code EasyTrain}, and whether optimizer steps are fused and skipped on the device.
 *
 * <p>Options are settled when they are built: the settings a system property may decide ({@link
 * FusedOptimizer#PROPERTY}, for {@link FusedOptimizer#AUTO}; {@link VerdictMemory#PROPERTY} and
 * {@link RememberedVerdicts#DIRECTORY_PROPERTY}, where the builder set no verdict memory or folder;
 * {@link #PLATFORM_CURE_PROPERTY}, where it did not set {@link Builder#platformCure(boolean)}) are
 * read then, once, and nothing reads a property while training.
 */
public final class AmpOptions {

    private final LossScaling lossScaling;
    private final int accumulationSteps;
    private final int hostSyncInterval;
    private final boolean hostSyncIntervalSet;
    private final FusedOptimizer fusedOptimizer;
    private final Checkpointing checkpointing;
    private final VerdictMemory verdictMemory;
    private final Path verdictDirectory;
    private final boolean platformCure;

    /**
     * The system property that turns the in-process platform cure off ({@code false}) where the
     * builder did not set it.
     */
    public static final String PLATFORM_CURE_PROPERTY = "djlamp.platformCure";

    /**
     * The default of {@link Builder#hostSyncInterval(int)}: the device-resident loss scaler state
     * is read on the host every 100 steps (every step on the CPU under {@link FusedOptimizer#AUTO},
     * where a read costs nothing).
     */
    public static final int DEFAULT_HOST_SYNC_INTERVAL = 100;

    private AmpOptions(Builder builder) {
        lossScaling = builder.lossScaling;
        accumulationSteps = builder.accumulationSteps;
        hostSyncInterval = builder.hostSyncInterval;
        hostSyncIntervalSet = builder.hostSyncIntervalSet;
        fusedOptimizer = builder.fusedOptimizer.withPropertyApplied();
        checkpointing = builder.checkpointing;
        verdictMemory =
                builder.verdictMemory != null
                        ? builder.verdictMemory
                        : RememberedVerdicts.propertyMemory();
        verdictDirectory =
                builder.verdictDirectory != null
                        ? builder.verdictDirectory
                        : RememberedVerdicts.propertyDirectory();
        platformCure =
                builder.platformCure != null
                        ? builder.platformCure
                        : !"false".equalsIgnoreCase(System.getProperty(PLATFORM_CURE_PROPERTY));
    }

    /**
     * Returns whether djl-amp may cure a platform whose kernels a kept verdict says are wrong in
     * this process ({@code ONEDNN_MAX_CPU_ISA=AVX2} on a CPU, set by {@code Amp.configure} before
     * oneDNN's first kernel).
     *
     * @return true unless the builder or {@value #PLATFORM_CURE_PROPERTY}{@code =false} said no
     */
    public boolean isPlatformCureAllowed() {
        return platformCure;
    }

    /**
     * Returns the defaults: the precision's own loss scaling, no accumulation, fused optimizer
     * steps on one device ({@link FusedOptimizer#AUTO}, or what {@value FusedOptimizer#PROPERTY}
     * says at this call).
     *
     * @return the default options
     * @throws IllegalArgumentException when {@value FusedOptimizer#PROPERTY} is set to something
     *     other than on, off, auto, true or false
     */
    public static AmpOptions defaults() {
        return builder().build();
    }

    /**
     * Returns a builder starting from the defaults.
     *
     * @return a builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Returns the loss scaling, or null for the precision's default (dynamic for fp16, none for
     * bf16 and fp32).
     *
     * @return the loss scaling or null
     */
    public LossScaling getLossScaling() {
        return lossScaling;
    }

    /**
     * Returns the number of batches whose gradients add up before one optimizer step.
     *
     * @return micro-batches per step, 1 for none
     */
    public int getAccumulationSteps() {
        return accumulationSteps;
    }

    /**
     * Returns how many steps pass between two host reads of the loss scaler's device state when
     * that state lives on the device (fused optimizer steps): the builder's setting, or {@link
     * #DEFAULT_HOST_SYNC_INTERVAL}. When it was not set, {@link FusedOptimizer#AUTO} reads every
     * step on the CPU instead.
     *
     * @return steps between host reads, at least 1
     */
    public int getHostSyncInterval() {
        return hostSyncInterval;
    }

    /**
     * Whether a trainer on {@code devices} reads a device-resident scaler state every step in place
     * of {@link #getHostSyncInterval()}: where {@link FusedOptimizer#AUTO} says a read costs
     * nothing (off a GPU) and no interval was set.
     */
    boolean readsEveryStepOn(Device[] devices) {
        return !hostSyncIntervalSet && fusedOptimizer.readsEveryStepByDefault(devices);
    }

    /**
     * Returns whether optimizer steps are fused and skipped on the device: the builder's setting,
     * where {@link FusedOptimizer#AUTO} became what {@value FusedOptimizer#PROPERTY} said when
     * these options were built, if it was set.
     *
     * @return the setting, {@link FusedOptimizer#AUTO} by default
     */
    public FusedOptimizer getFusedOptimizer() {
        return fusedOptimizer;
    }

    /**
     * Returns which parts of the model are checkpointed (recomputed in backward instead of kept).
     *
     * @return the setting, {@link Checkpointing#none()} by default
     */
    public Checkpointing getCheckpointing() {
        return checkpointing;
    }

    /**
     * Returns whether the verdicts of djl-amp's kernel checks are kept on disk and reused by later
     * JVMs on this machine and libraries ({@link RememberedVerdicts}), checked again, or neither.
     *
     * @return the setting, {@link VerdictMemory#REMEMBER} unless {@value VerdictMemory#PROPERTY}
     *     said otherwise when these options were built
     */
    public VerdictMemory getVerdictMemory() {
        return verdictMemory;
    }

    /**
     * Returns the folder of the kept verdicts.
     *
     * @return the folder, {@code djl-amp/verdicts} in DJL's cache folder unless {@value
     *     RememberedVerdicts#DIRECTORY_PROPERTY} named another when these options were built
     */
    public Path getVerdictDirectory() {
        return verdictDirectory;
    }

    /** Builds {@link AmpOptions}. */
    public static final class Builder {

        private LossScaling lossScaling;
        private int accumulationSteps = 1;
        private int hostSyncInterval = DEFAULT_HOST_SYNC_INTERVAL;
        private boolean hostSyncIntervalSet;
        private FusedOptimizer fusedOptimizer = FusedOptimizer.AUTO;
        private Checkpointing checkpointing = Checkpointing.none();
        private VerdictMemory verdictMemory;
        private Path verdictDirectory;
        private Boolean platformCure;

        private Builder() {}

        /**
         * Sets whether {@code Amp.configure} may cure, in this process, a platform whose kernels a
         * verdict kept on this machine says are wrong: on a CPU whose oneDNN kernels were found
         * wrong (amp-doctor's platform check, or a kernel check that found fp32 itself wrong), it
         * sets {@code ONEDNN_MAX_CPU_ISA=AVX2} before oneDNN's first kernel, checks that it took
         * and says so; where a kernel already ran it says what to set instead. On a CPU whose cache
         * topology the kernel hides (where oneDNN's convolution backward divided by zero and ended
         * the JVM), it turns the engine's oneDNN off for the process, whatever the verdicts say,
         * and says so. Default true.
         *
         * @param allowed false to leave the environment and the engine's oneDNN alone
         * @return this builder
         */
        public Builder platformCure(boolean allowed) {
            platformCure = allowed;
            return this;
        }

        /**
         * Sets whether the verdicts of djl-amp's kernel checks are kept on disk and reused by later
         * JVMs ({@link VerdictMemory#REMEMBER}, the default), all checked again from scratch and
         * kept anew ({@link VerdictMemory#RECHECK}: after a driver or firmware change the key does
         * not see, say), or neither ({@link VerdictMemory#OFF}). {@code Amp.configure} applies it
         * to the process.
         *
         * @param memory the setting
         * @return this builder
         * @throws NullPointerException when {@code memory} is null
         */
        public Builder verdictMemory(VerdictMemory memory) {
            verdictMemory =
                    Objects.requireNonNull(
                            memory, "verdictMemory: use VerdictMemory.REMEMBER, RECHECK or OFF");
            return this;
        }

        /**
         * Sets the folder of the kept verdicts (default {@code djl-amp/verdicts} in DJL's cache
         * folder, {@code ~/.djl.ai} unless {@code DJL_CACHE_DIR} moves it).
         *
         * @param directory the folder, created when the first verdict is kept
         * @return this builder
         * @throws NullPointerException when {@code directory} is null
         */
        public Builder verdictDirectory(Path directory) {
            verdictDirectory =
                    Objects.requireNonNull(directory, "verdictDirectory: a folder, not null");
            return this;
        }

        /**
         * Sets which parts of the model are checkpointed: their activations are not kept through
         * the forward pass but recomputed after backward, trading about one more forward pass of
         * them for their memory ({@link Checkpointing}). Applied to the wrapped block by {@code
         * Amp.configure}, which refuses a setting that does not fit the model.
         *
         * @param setting e.g. {@link Checkpointing#stages()}; {@link Checkpointing#none()} for
         *     nothing
         * @return this builder
         * @throws NullPointerException when {@code setting} is null
         */
        public Builder checkpointing(Checkpointing setting) {
            checkpointing =
                    Objects.requireNonNull(
                            setting,
                            "checkpointing: use Checkpointing.none(), stages(), every(n), auto()"
                                    + " or blocks(...)");
            return this;
        }

        /**
         * Sets the checkpointing from its text form, as a configuration file holds it: {@code
         * none}, {@code stages}, {@code every:N}, {@code auto}, or {@code class:NAME} and {@code
         * path:PATH} selectors separated by commas ({@link Checkpointing#parse}).
         *
         * @param setting the text form
         * @return this builder
         * @throws IllegalArgumentException when {@code setting} is none of those forms
         */
        public Builder checkpointing(String setting) {
            return checkpointing(Checkpointing.parse(setting));
        }

        /**
         * Sets the loss scaling.
         *
         * @param scaling the loss scaling, or null for the precision's default
         * @return this builder
         */
        public Builder lossScaling(LossScaling scaling) {
            lossScaling = scaling;
            return this;
        }

        /**
         * Accumulates the gradients of {@code batches} consecutive batches into one optimizer step
         * with {@code EasyTrain}: the loss scale stays fixed across them, and an overflow in any of
         * them skips the step as a whole. The loss is not divided: divide it yourself if the step
         * should see the mean.
         *
         * @param batches at least 1; 1 steps after every batch
         * @return this builder
         * @throws IllegalArgumentException when {@code batches} is below 1
         */
        public Builder accumulationSteps(int batches) {
            if (batches < 1) {
                throw new IllegalArgumentException(
                        "accumulationSteps must be >= 1 batch, got "
                                + batches
                                + "; 1 steps the optimizer after every batch");
            }
            accumulationSteps = batches;
            return this;
        }

        /**
         * Sets how often the host reads the loss scaler's state when it lives on the device (fused
         * optimizer steps, where the step is skipped on the device and no per-step host read is
         * needed): every {@code steps} steps and at each epoch's end the host mirror (scale,
         * skipped steps, the state saved with the model, the Metrics) is refreshed, and divergence
         * (a collapsed scale, a fixed scale overflowing step after step) is detected, so up to
         * {@code steps - 1} steps late. Reading any of them in between (for example {@code
         * getScale()}) reads the device at once. A collapse found after its steps' gradients were
         * cleared names the parameters seen non-finite at the last read that found an overflow (one
         * more read on such a read step, nothing on the others). With DJL's per-parameter optimizer
         * updates the verdict is read every step whatever this says; when this is not set, {@link
         * FusedOptimizer#AUTO} reads every step on the CPU, where a read costs nothing.
         *
         * @param steps at least 1; 1 reads every step
         * @return this builder
         * @throws IllegalArgumentException when {@code steps} is below 1
         */
        public Builder hostSyncInterval(int steps) {
            if (steps < 1) {
                throw new IllegalArgumentException(
                        "hostSyncInterval must be >= 1 step, got "
                                + steps
                                + "; 1 reads the loss scaler state on the host every step");
            }
            hostSyncInterval = steps;
            hostSyncIntervalSet = true;
            return this;
        }

        /**
         * Sets whether optimizer steps run as one fused launch that skips overflowed steps on the
         * device, with no host read per step ({@link FusedOptimizer}).
         *
         * @param setting AUTO (fused on one device), ON or OFF
         * @return this builder
         * @throws NullPointerException when {@code setting} is null
         */
        public Builder fusedOptimizer(FusedOptimizer setting) {
            fusedOptimizer =
                    Objects.requireNonNull(
                            setting, "fusedOptimizer: use FusedOptimizer.AUTO, ON or OFF");
            return this;
        }

        /**
         * Builds the options, reading {@value FusedOptimizer#PROPERTY} when the fused optimizer
         * setting is {@link FusedOptimizer#AUTO} (logged when it decides).
         *
         * @return the options
         * @throws IllegalArgumentException when that property is set to something other than on,
         *     off, auto, true or false
         */
        public AmpOptions build() {
            return new AmpOptions(this);
        }
    }
}
